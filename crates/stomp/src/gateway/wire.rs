//! The two transports STOMP frames travel on: a TCP byte stream, and WebSocket messages
//! (RFC 6455, see [`crate::websocket`]). The connection reads bytes from a [`ByteSource`] and
//! writes encoded frames to a [`FrameSink`]; neither knows which transport it has.

use std::future::Future;
use std::io;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Where a connection's bytes come from.
pub trait ByteSource: Send + 'static {
    /// Appends what arrived to `buf`; 0 at the end of the stream.
    fn read(&mut self, buf: &mut BytesMut) -> impl Future<Output = io::Result<usize>> + Send;
}

/// Where a connection's frames go.
pub trait FrameSink: Send + 'static {
    /// Writes encoded frames (or heart-beats), in order.
    fn write(&mut self, frames: &[Bytes]) -> impl Future<Output = io::Result<()>> + Send;
    /// Ends the stream (best effort).
    fn close(&mut self) -> impl Future<Output = ()> + Send;
}

/// A byte stream's half (a TCP stream's, or a TLS stream's once the listener has one) as a
/// [`ByteSource`] or a [`FrameSink`].
pub struct Stream<T> {
    io: T,
    /// Small frames of one write, gathered (kept to be reused).
    small: BytesMut,
    /// The last read filled all the room it had.
    filled: bool,
}

impl<T> Stream<T> {
    /// `io` as a source or sink.
    pub fn new(io: T) -> Stream<T> {
        Stream {
            io,
            small: BytesMut::new(),
            filled: false,
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> ByteSource for Stream<R> {
    async fn read(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        // 16 KiB at a time, 64 KiB while the client keeps filling what it gets (a pipelining
        // producer: fewer reads per frame), so idle connections hold little.
        let want = if self.filled { 64 * 1024 } else { 16 * 1024 };
        if buf.capacity() - buf.len() < want / 4 {
            buf.reserve(want);
        }
        let room = buf.capacity() - buf.len();
        let n = self.io.read_buf(buf).await?;
        self.filled = n == room;
        Ok(n)
    }
}

impl<W: AsyncWrite + Unpin + Send + 'static> FrameSink for Stream<W> {
    async fn write(&mut self, frames: &[Bytes]) -> io::Result<()> {
        let Stream { io, small, .. } = self;
        match frames {
            [] => Ok(()),
            [one] => io.write_all(one).await,
            many => {
                // One system call for what is small; big batches are written where they are.
                for f in many {
                    if f.len() < 16 * 1024 {
                        small.extend_from_slice(f);
                        continue;
                    }
                    if !small.is_empty() {
                        io.write_all(small).await?;
                        small.clear();
                    }
                    io.write_all(f).await?;
                }
                if !small.is_empty() {
                    io.write_all(small).await?;
                    small.clear();
                }
                Ok(())
            }
        }
    }

    async fn close(&mut self) {
        let _ = self.io.shutdown().await;
    }
}
