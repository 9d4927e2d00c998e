//! The listener: one dedicated connection per node that `LISTEN`s on [`notify::CHANNEL`] and
//! passes what other nodes announce to the store's change subscribers.
//!
//! When the connection breaks (database restarted, network cut) the task reconnects with
//! exponential backoff; once listening again it reports an empty change list ("anything may
//! have changed"), since notices sent meanwhile are lost.

use std::time::Duration;

use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_postgres::{AsyncMessage, NoTls};

use super::notify;

/// First wait after a failed connection; doubled up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between two connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Starts the listener task of node `node`; abort the handle to stop it.
pub fn start(
    pg: tokio_postgres::Config,
    node: String,
    changes: broadcast::Sender<Vec<String>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = MIN_BACKOFF;
        loop {
            match listen_once(&pg, &node, &changes, &mut backoff).await {
                Ok(()) => {
                    tracing::warn!(?backoff, "change listener: connection closed; reconnecting")
                }
                Err(e) => {
                    tracing::warn!(error = %e, ?backoff, "change listener: connection lost; reconnecting");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    })
}

/// Connects, listens, and forwards notices until the connection ends. Resets `backoff` once
/// listening.
async fn listen_once(
    pg: &tokio_postgres::Config,
    node: &str,
    changes: &broadcast::Sender<Vec<String>>,
    backoff: &mut Duration,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut conn) = pg.connect(NoTls).await?;
    let (notices, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    // The connection must be polled for LISTEN to complete, so drive it in its own task.
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if notices.send(n.payload().to_owned()).is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            }
        }
    });
    if let Err(e) = client
        .batch_execute(&format!("LISTEN {}", notify::CHANNEL))
        .await
    {
        driver.abort();
        return Err(e);
    }
    tracing::debug!(node, "change listener: listening");
    *backoff = MIN_BACKOFF;
    // Notices may have been missed while not listening.
    let _ = changes.send(Vec::new());
    while let Some(payload) = rx.recv().await {
        let (from, queues) = notify::parse(&payload);
        if from == node {
            continue; // this node woke its own waiters already
        }
        let _ = changes.send(queues);
    }
    drop(client);
    match driver.await {
        Ok(Err(e)) => Err(e),
        _ => Ok(()),
    }
}
