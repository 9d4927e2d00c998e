//! A raw STOMP 1.2 client over TCP for tests against the real binary: frames written as
//! text, frames read with the gateway's own codec.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use ferry_stomp::codec::{self, Command, Frame, Item, Limits, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long any answer may take.
pub const WAIT: Duration = Duration::from_secs(20);

/// A raw STOMP connection.
pub struct Raw {
    s: TcpStream,
    buf: BytesMut,
    /// Frames read while waiting for a receipt, handed out first.
    stash: VecDeque<Frame>,
}

impl Raw {
    /// Connects with STOMP 1.2 and `headers` (lines ending in `\n`); the answer to CONNECT.
    pub async fn connect(addr: SocketAddr, headers: &str) -> (Raw, Frame) {
        let mut r = Raw {
            s: TcpStream::connect(addr).await.expect("connect"),
            buf: BytesMut::new(),
            stash: VecDeque::new(),
        };
        r.write(&format!(
            "CONNECT\naccept-version:1.2\nhost:/\n{headers}\n\0"
        ))
        .await;
        let f = r.frame().await.expect("an answer to CONNECT");
        (r, f)
    }

    /// Connected (CONNECTED asserted); the CONNECTED frame's `session`.
    pub async fn connected(addr: SocketAddr, headers: &str) -> (Raw, String) {
        let (r, f) = Raw::connect(addr, headers).await;
        assert_eq!(f.command, Command::Connected, "{f:?}");
        let session = f.header("session").unwrap_or_default().to_owned();
        (r, session)
    }

    /// Writes frames given as text.
    pub async fn write(&mut self, text: &str) {
        self.s.write_all(text.as_bytes()).await.expect("write");
    }

    /// The next frame, or `None` once the server closed the connection.
    pub async fn frame(&mut self) -> Option<Frame> {
        if let Some(f) = self.stash.pop_front() {
            return Some(f);
        }
        let limits = Limits::with_body(1 << 20);
        loop {
            match codec::decode(&mut self.buf, Version::V1_2, &limits).expect("frames parse") {
                Some(Item::Frame(f)) => return Some(f),
                Some(Item::Heartbeat) => continue,
                None => {}
            }
            let n = tokio::time::timeout(WAIT, self.s.read_buf(&mut self.buf))
                .await
                .expect("an answer in time")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
        }
    }

    /// Sends `frame` (command and headers, then `\n\n` and the body) asking for receipt
    /// `r`; the RECEIPT, or the ERROR that closed the connection. Frames read before it are
    /// kept for [`Raw::frame`].
    pub async fn ask(&mut self, frame: &str, r: &str) -> Frame {
        let (head, body) = frame.split_once("\n\n").unwrap_or((frame, ""));
        self.write(&format!("{head}\nreceipt:{r}\n\n{body}\0"))
            .await;
        let mut skipped = VecDeque::new();
        loop {
            let f = self.frame().await.expect("RECEIPT or ERROR");
            if matches!(f.command, Command::Receipt | Command::Error) {
                skipped.append(&mut self.stash);
                self.stash = skipped;
                return f;
            }
            skipped.push_back(f);
        }
    }

    /// As [`Raw::ask`], asserting a RECEIPT.
    pub async fn ok(&mut self, frame: &str, r: &str) {
        let f = self.ask(frame, r).await;
        assert_eq!(f.command, Command::Receipt, "{frame}: {f:?}");
    }

    /// The next MESSAGE.
    pub async fn message(&mut self) -> Frame {
        let f = self.frame().await.expect("a MESSAGE");
        assert_eq!(f.command, Command::Message, "{f:?}");
        f
    }

    /// The ERROR frame the server ends with; the connection must then be closed.
    pub async fn error_then_closed(&mut self) -> Frame {
        let f = loop {
            let f = self.frame().await.expect("an ERROR frame before the close");
            if f.command == Command::Error {
                break f;
            }
        };
        assert!(self.frame().await.is_none(), "closed after the ERROR");
        f
    }
}

impl Raw {
    /// Every frame until the server closes the connection.
    pub async fn rest(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(f) = self.frame().await {
            frames.push(f);
        }
        frames
    }
}

/// An ERROR frame's `message` header.
pub fn message(f: &Frame) -> &str {
    f.header("message").unwrap_or_default()
}
