//! A raw protocol connection for tests that need to send exactly the bytes they choose:
//! malformed frames, requests before connect, unknown kinds, old protocol versions.

use std::time::Duration;

use bytes::BytesMut;
use ferry_protocol::requests::Connect;
use ferry_protocol::{split_frame, Request, Response, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A TCP connection speaking frames by hand.
pub struct RawConn {
    stream: TcpStream,
    buf: BytesMut,
}

impl RawConn {
    /// Connects without a handshake.
    pub async fn open(addr: &str) -> std::io::Result<RawConn> {
        Ok(RawConn {
            stream: TcpStream::connect(addr).await?,
            buf: BytesMut::new(),
        })
    }

    /// Connects without a handshake, with a receive buffer of `bytes` (the kernel's window for
    /// what the broker sends and this side has not read).
    pub async fn open_with_receive_buffer(addr: &str, bytes: u32) -> std::io::Result<RawConn> {
        let addr: std::net::SocketAddr = addr
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_recv_buffer_size(bytes)?;
        Ok(RawConn {
            stream: socket.connect(addr).await?,
            buf: BytesMut::new(),
        })
    }

    /// Completes the handshake with `connect` on a connection opened without one; returns the
    /// reply.
    pub async fn handshake(&mut self, connect: Connect) -> std::io::Result<Response> {
        self.send(1, &Request::Connect(connect)).await?;
        Ok(self.recv().await?.1)
    }

    /// The socket itself (what was buffered but not yet cut into frames is dropped).
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Ends the connection with a reset (RST), as a crashed client's kernel does.
    pub fn reset(self) {
        let _ = self.stream.set_zero_linger();
        drop(self);
    }

    /// This end's address (the broker sees the connection coming from it).
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.stream.local_addr()
    }

    /// Closes the sending side (FIN), keeping the receiving side open.
    pub async fn shutdown_write(&mut self) -> std::io::Result<()> {
        self.stream.shutdown().await
    }

    /// The next frame if one arrives within `wait`; `Ok(None)` when none does.
    pub async fn recv_within(
        &mut self,
        wait: Duration,
    ) -> std::io::Result<Option<(u32, Response)>> {
        match tokio::time::timeout(wait, self.recv()).await {
            Ok(r) => r.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Connects and completes the handshake as `client`; returns the connect reply too.
    pub async fn connect(addr: &str, client: &str) -> std::io::Result<(RawConn, Response)> {
        RawConn::connect_version(addr, client, PROTOCOL_VERSION).await
    }

    /// Connects speaking protocol `version` and completes the handshake as `client`; returns
    /// the connect reply too.
    pub async fn connect_version(
        addr: &str,
        client: &str,
        version: u16,
    ) -> std::io::Result<(RawConn, Response)> {
        let mut c = RawConn::open(addr).await?;
        c.send(
            1,
            &Request::Connect(Connect {
                version,
                client: client.into(),
                mechanism: String::new(),
                credentials: String::new(),
                keepalive_ms: 0,
                flags: 0,
            }),
        )
        .await?;
        let (_, reply) = c.recv().await?;
        Ok((c, reply))
    }

    /// Sends one request.
    pub async fn send(&mut self, request_id: u32, request: &Request) -> std::io::Result<()> {
        let mut b = BytesMut::new();
        request.encode(request_id, &mut b);
        self.stream.write_all(&b).await
    }

    /// Sends raw bytes.
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Receives the next frame (reply or push), waiting up to 10 s. `UnexpectedEof` when the
    /// broker closed the connection.
    pub async fn recv(&mut self) -> std::io::Result<(u32, Response)> {
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match split_frame(&mut self.buf, u32::MAX) {
                    Ok(Some(f)) => {
                        let resp = Response::decode(&f)
                            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
                        return Ok((f.request_id, resp));
                    }
                    Ok(None) => {}
                    Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
                }
                if self.stream.read_buf(&mut self.buf).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
        })
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))?
    }

    /// Whether the broker closed the connection (reads EOF or reset within 10 s, discarding
    /// any frames before).
    pub async fn closed_by_peer(&mut self) -> bool {
        let res = tokio::time::timeout(Duration::from_secs(10), async {
            let mut scratch = [0u8; 4096];
            loop {
                match self.stream.read(&mut scratch).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => {}
                }
            }
        })
        .await;
        res.unwrap_or(false)
    }
}
