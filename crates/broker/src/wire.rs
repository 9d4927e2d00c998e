//! The two halves of a client connection, plain TCP or TLS, as the reader loop and the writer
//! ([`crate::outbound`]) see them.
//!
//! A plain socket is split into tokio's owned halves, and the writer uses vectored writes
//! straight on the socket. A TLS stream is split with [`tokio::io::split`]; the writer keeps a
//! duplicate of the socket's descriptor beside it to ask the kernel whether the client is
//! still there (the encrypted stream hides the socket).

use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};

use ferry_tls::server::TlsStream;
use tokio::io::{AsyncRead, AsyncWriteExt, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

/// What the reader loop reads frames from.
pub type WireRead = Box<dyn AsyncRead + Send + Unpin>;

/// What the writer writes replies and pushes to.
pub enum WireWrite {
    /// A plain TCP socket.
    Tcp(OwnedWriteHalf),
    /// A TLS stream, and a duplicate of its socket for probing.
    Tls {
        /// The encrypting half.
        io: WriteHalf<TlsStream<TcpStream>>,
        /// The same socket (a duplicated descriptor), for `SO_ERROR` and hang-up checks.
        socket: std::net::TcpStream,
    },
}

impl WireWrite {
    /// The socket under the stream.
    pub fn fd(&self) -> BorrowedFd<'_> {
        match self {
            WireWrite::Tcp(w) => {
                let s: &TcpStream = w.as_ref();
                s.as_fd()
            }
            WireWrite::Tls { socket, .. } => socket.as_fd(),
        }
    }

    /// The socket's pending error (`SO_ERROR`), if any.
    pub fn take_error(&self) -> std::io::Result<Option<std::io::Error>> {
        match self {
            WireWrite::Tcp(w) => {
                let s: &TcpStream = w.as_ref();
                s.take_error()
            }
            WireWrite::Tls { socket, .. } => socket.take_error(),
        }
    }

    /// Ends the stream: TLS's close_notify, then the socket's end of stream.
    pub async fn shutdown(&mut self) {
        let _ = match self {
            WireWrite::Tcp(w) => w.shutdown().await,
            WireWrite::Tls { io, .. } => io.shutdown().await,
        };
    }
}

/// An accepted connection, ready for the Ferry handshake.
pub struct Wire {
    /// The reading half.
    pub rd: WireRead,
    /// The writing half.
    pub wr: WireWrite,
    /// The client's address, when known.
    pub peer: Option<SocketAddr>,
    /// The user a verified TLS client certificate names (its subject's CN).
    pub tls_user: Option<String>,
}

impl Wire {
    /// A plain TCP connection.
    pub fn plain(stream: TcpStream) -> Wire {
        let peer = stream.peer_addr().ok();
        let _ = stream.set_nodelay(true);
        let (rd, wr) = stream.into_split();
        Wire {
            rd: Box::new(rd),
            wr: WireWrite::Tcp(wr),
            peer,
            tls_user: None,
        }
    }

    /// A TLS connection; `socket` duplicates the descriptor of the TCP socket under it.
    pub fn tls(accepted: ferry_tls::Accepted<TcpStream>, socket: std::net::TcpStream) -> Wire {
        let peer = accepted.stream.get_ref().0.peer_addr().ok();
        let _ = accepted.stream.get_ref().0.set_nodelay(true);
        let (rd, io) = tokio::io::split(accepted.stream);
        Wire {
            rd: Box::new(rd),
            wr: WireWrite::Tls { io, socket },
            peer,
            tls_user: accepted.user,
        }
    }
}

/// A duplicate of `stream`'s descriptor, taken before TLS wraps it.
pub fn duplicate(stream: TcpStream) -> std::io::Result<(TcpStream, std::net::TcpStream)> {
    let std = stream.into_std()?;
    let dup = std.try_clone()?;
    Ok((TcpStream::from_std(std)?, dup))
}
