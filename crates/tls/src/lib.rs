//! TLS for Ferry's listeners and clients, with rustls.
//!
//! **Servers.** [`Acceptor`] is the one piece every listener wraps its accepted sockets with
//! (the native protocol, the HTTP API, protocol gateways): it is loaded from PEM files
//! ([`ServerFiles`]), cheap to clone, and [`Acceptor::reload`] swaps in certificates read
//! again from the same files. A reload affects only handshakes that start after it:
//! connections already established keep the keys they negotiated. A listener plugs in with
//!
//! ```ignore
//! let (tcp, peer) = listener.accept().await?;
//! match acceptor.accept(tcp, handshake_timeout).await {
//!     Ok(accepted) => serve(accepted.stream, accepted.user), // user: the certificate's CN
//!     Err(e) => debug!(%peer, error = %e, "TLS handshake failed"), // the socket is closed
//! }
//! ```
//!
//! With a client CA ([`ServerFiles::client_ca`]) every client must present a certificate
//! signed by it (mutual TLS); [`Accepted::user`] is then the certificate subject's common name
//! ([`subject_user`]), which the listener may take as the client's identity.
//!
//! **Clients.** [`ClientTls`] says which CA to trust (the system's roots by default), which
//! certificate to present, and under which name to verify the server (the host connected to
//! by default); [`ClientTls::connector`] loads them, and [`Connector::connect`] runs the
//! handshake over a connected socket.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite};

pub use tokio_rustls::{client, server};

/// Why TLS could not be set up.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A PEM file holds nothing usable of what it should.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong (`no certificate`, `no private key`, a parse error).
        what: String,
    },
    /// rustls refused the certificates or keys (a key that does not match the certificate,
    /// an unsupported algorithm, ...).
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// The PEM files of a TLS listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    /// The server's certificate chain, leaf first.
    pub cert: PathBuf,
    /// The server's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// CA certificates that sign client certificates: when set, every client must present a
    /// certificate signed by one of them (mutual TLS).
    pub client_ca: Option<PathBuf>,
}

/// The TLS side of a listener: a server configuration that can be replaced while serving.
/// Clones share it.
#[derive(Clone)]
pub struct Acceptor {
    files: ServerFiles,
    current: Arc<RwLock<tokio_rustls::TlsAcceptor>>,
}

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acceptor")
            .field("files", &self.files)
            .finish()
    }
}

/// A completed server handshake.
pub struct Accepted<IO> {
    /// The encrypted stream.
    pub stream: server::TlsStream<IO>,
    /// The common name of the verified client certificate's subject, when the client
    /// presented one (mutual TLS) and it has one.
    pub user: Option<String>,
}

/// Why a server handshake did not complete. The socket is closed either way.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The client did not complete the handshake in time.
    #[error("no TLS handshake within {0:?}")]
    Timeout(Duration),
    /// The handshake failed: not TLS, a certificate refused, the client went away.
    #[error("TLS handshake failed: {0}")]
    Failed(io::Error),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

fn pem_error(path: &Path, what: impl std::fmt::Display) -> TlsError {
    TlsError::Pem {
        path: path.to_owned(),
        what: what.to_string(),
    }
}

/// Every certificate of a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(pem_error(path, "no CERTIFICATE block"));
    }
    Ok(certs)
}

/// The first private key of a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => pem_error(path, "no PRIVATE KEY block"),
        e => pem_error(path, e),
    })
}

/// A root store with every certificate of a PEM file.
fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| pem_error(path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

fn config_error(e: impl std::fmt::Display) -> TlsError {
    TlsError::Config(e.to_string())
}

fn server_config(files: &ServerFiles) -> Result<ServerConfig, TlsError> {
    let certs = load_certs(&files.cert)?;
    let key = load_key(&files.key)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(config_error)?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(load_roots(ca)?), provider())
                    .build()
                    .map_err(config_error)?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    builder.with_single_cert(certs, key).map_err(config_error)
}

impl Acceptor {
    /// Loads the certificate, key and client CA from `files`.
    pub fn load(files: ServerFiles) -> Result<Acceptor, TlsError> {
        let config = server_config(&files)?;
        Ok(Acceptor {
            files,
            current: Arc::new(RwLock::new(Arc::new(config).into())),
        })
    }

    /// The files it loads from.
    pub fn files(&self) -> &ServerFiles {
        &self.files
    }

    /// Reads the files again and serves new handshakes with what they hold. On error the
    /// previous configuration stays in force.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.files)?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(config).into();
        Ok(())
    }

    /// Runs the server handshake on `io`, within `timeout`. The handshake reads at most one
    /// TLS record at a time (rustls bounds records and handshake messages), so a client that
    /// sends anything else is refused on its first bytes.
    pub async fn accept<IO>(
        &self,
        io: IO,
        timeout: Duration,
    ) -> Result<Accepted<IO>, HandshakeError>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let acceptor = self
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let stream = match tokio::time::timeout(timeout, acceptor.accept(io)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(HandshakeError::Failed(e)),
            Err(_) => return Err(HandshakeError::Timeout(timeout)),
        };
        let user = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(subject_user);
        Ok(Accepted { stream, user })
    }
}

/// The common name (CN) of a certificate's subject: the user a client certificate names.
/// `None` when the certificate does not parse or its subject has no common name.
pub fn subject_user(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let cn = parsed.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_owned)
}

/// How a client sets up TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// PEM file of the CA certificates to trust; `None`: the system's trusted roots.
    pub ca: Option<PathBuf>,
    /// PEM files of a client certificate chain and its key, for servers that ask for one.
    pub identity: Option<(PathBuf, PathBuf)>,
    /// The name the server's certificate must carry; `None`: the host connected to.
    pub server_name: Option<String>,
}

/// A client's TLS configuration, ready to connect with.
#[derive(Clone)]
pub struct Connector {
    inner: tokio_rustls::TlsConnector,
    server_name: Option<String>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl ClientTls {
    /// The user the client certificate names (its subject's CN), if there is one and it
    /// reads.
    pub fn certificate_user(&self) -> Option<String> {
        let (cert, _) = self.identity.as_ref()?;
        subject_user(load_certs(cert).ok()?.first()?)
    }

    /// Loads the files into a [`Connector`].
    pub fn connector(&self) -> Result<Connector, TlsError> {
        Ok(Connector {
            inner: Arc::new(self.client_config()?).into(),
            server_name: self.server_name.clone(),
        })
    }

    /// Loads the files into a rustls client configuration, for clients that bring their own
    /// connection handling (the CLI's HTTPS requests). The server's name is checked by
    /// whoever connects with it.
    pub fn client_config(&self) -> Result<ClientConfig, TlsError> {
        let roots = match &self.ca {
            Some(ca) => load_roots(ca)?,
            None => {
                let mut roots = RootCertStore::empty();
                let native = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(native.certs);
                roots
            }
        };
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(config_error)?;
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_webpki_verifier(verifier);
        let config = match &self.identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(load_certs(cert)?, load_key(key)?)
                .map_err(config_error)?,
            None => builder.with_no_client_auth(),
        };
        Ok(config)
    }
}

impl Connector {
    /// Runs the client handshake on `io`, connected to `addr` (`host:port`): the server's
    /// certificate must be valid for the configured name, or else for `addr`'s host.
    pub async fn connect<IO>(&self, io: IO, addr: &str) -> io::Result<client::TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let name = match &self.server_name {
            Some(n) => n.clone(),
            None => host_of(addr).to_owned(),
        };
        let name = ServerName::try_from(name.clone()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{name}' is not a valid server name for TLS"),
            )
        })?;
        self.inner.connect(name, io).await
    }
}

/// The host part of `host:port`, `[v6]:port` or a bare host.
pub fn host_of(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => addr,
    }
}

#[cfg(feature = "test-pki")]
pub mod test_pki;

#[cfg(test)]
mod tests;
