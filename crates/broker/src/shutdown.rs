//! Waiting for SIGTERM or SIGINT; reloading TLS certificates on SIGHUP.

/// Resolves on the first SIGTERM or SIGINT (Ctrl-C).
pub async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Reloads the TLS certificate, key and client CA on every SIGHUP: new connections get
/// them, open ones keep theirs. A reload that fails (a missing or broken file) is logged and
/// leaves the certificates in force.
pub async fn reload_tls_on_hangup(tls: ferry_tls::Acceptor) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot watch SIGHUP: TLS certificates reload only on restart");
        return;
    };
    while hup.recv().await.is_some() {
        match tls.reload() {
            Ok(()) => {
                tracing::info!(cert = %tls.files().cert.display(), "TLS certificates reloaded")
            }
            Err(e) => {
                tracing::error!(error = %e, "TLS reload failed: the previous certificates stay in force")
            }
        }
    }
}
