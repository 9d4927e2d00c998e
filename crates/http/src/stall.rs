//! A connection's writes under a deadline: when the client takes none of an answer's bytes for
//! [`HttpLimits::write_timeout`] (it stopped reading, or reads too slowly to take one socket
//! buffer's worth in that time), the write fails with `TimedOut` and the connection is closed,
//! freeing the answer it held. Without it, a client that asks for a large answer and never
//! reads keeps that answer in the broker's memory for as long as it keeps the connection.
//!
//! A connection upgraded to another protocol (STOMP over WebSocket) is that protocol's to
//! bound: the listener disarms the limit when it answers 101 (`armed`, see [`StallLimit::new`]), and
//! the STOMP gateway applies its own `write_timeout_ms`.
//!
//! [`HttpLimits::write_timeout`]: crate::HttpLimits::write_timeout

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// A byte stream whose writes may wait at most `limit` for the peer.
pub struct StallLimit<T> {
    io: T,
    limit: Duration,
    /// Running while a write waits; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Cleared once the connection belongs to another protocol.
    armed: Arc<AtomicBool>,
}

impl<T> StallLimit<T> {
    /// `io` with writes that wait at most `limit` while `armed` is set (cleared when the
    /// connection is upgraded).
    pub fn new(io: T, limit: Duration, armed: Arc<AtomicBool>) -> StallLimit<T> {
        StallLimit {
            io,
            limit,
            stalled: None,
            armed,
        }
    }

    /// What a write that returned `result` gives: progress resets the deadline; waiting past it
    /// is an error.
    fn deadline<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if result.is_ready() || !self.armed.load(Ordering::Acquire) {
            self.stalled = None;
            return result;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took no bytes of the answer for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallLimit<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallLimit<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write(cx, buf);
        self.deadline(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.deadline(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_flush(cx);
        self.deadline(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.io).poll_shutdown(cx);
        self.deadline(cx, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_the_peer_never_takes_fails_after_the_limit() {
        // A pipe of 64 bytes whose other end never reads.
        let (near, _far) = tokio::io::duplex(64);
        let mut io = StallLimit::new(
            near,
            Duration::from_millis(100),
            Arc::new(AtomicBool::new(true)),
        );
        let err = io.write_all(&[0u8; 1024]).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_disarmed_limit_lets_a_write_wait() {
        let (near, _far) = tokio::io::duplex(64);
        let mut io = StallLimit::new(
            near,
            Duration::from_millis(50),
            Arc::new(AtomicBool::new(false)),
        );
        let waited =
            tokio::time::timeout(Duration::from_millis(300), io.write_all(&[0u8; 1024])).await;
        assert!(waited.is_err(), "the write still waits: {waited:?}");
    }

    #[tokio::test]
    async fn a_peer_that_keeps_reading_is_never_cut_off() {
        let (near, mut far) = tokio::io::duplex(64);
        let reader = tokio::spawn(async move {
            let mut sink = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut far, &mut sink)
                .await
                .unwrap();
            sink.len()
        });
        let mut io = StallLimit::new(
            near,
            Duration::from_millis(200),
            Arc::new(AtomicBool::new(true)),
        );
        io.write_all(&[7u8; 64 * 1024]).await.unwrap();
        io.shutdown().await.unwrap();
        drop(io);
        assert_eq!(reader.await.unwrap(), 64 * 1024);
    }
}
