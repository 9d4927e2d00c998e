//! A tiny scripted broker for the client tests: a TCP listener on 127.0.0.1:0 that speaks the
//! protocol crate's codec. Each test writes what the broker does on its one connection.
#![allow(dead_code)]
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::future::Future;
use std::time::Duration;

use bytes::BytesMut;
use ferry_client::Limits;
use ferry_protocol::responses::Connected;
use ferry_protocol::Request;
use ferry_protocol::{split_frame, ErrorCode, Response, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Fails a test that would otherwise hang.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The broker side of one connection.
pub struct Peer {
    stream: TcpStream,
    buf: BytesMut,
    /// How many reads returned data (to see the client's write batching).
    pub reads: usize,
    /// How many frames were read.
    pub frames: usize,
}

impl Peer {
    /// The next request and its id; `None` when the client closed the connection.
    pub async fn read(&mut self) -> Option<(u32, Request)> {
        loop {
            if let Some(f) = split_frame(&mut self.buf, 1 << 26).expect("client frame") {
                self.frames += 1;
                let req = Request::decode(&f).expect("client request");
                return Some((f.request_id, req));
            }
            self.buf.reserve(64 * 1024);
            match self.stream.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => self.reads += 1,
            }
        }
    }

    /// The next request, which must exist.
    pub async fn expect(&mut self) -> (u32, Request) {
        tokio::time::timeout(DEADLINE, self.read())
            .await
            .expect("client sent nothing")
            .expect("client closed the connection")
    }

    /// Expects a ping and answers it: the client's way of saying "everything before this
    /// was read", which lets a script know the client has seen its earlier frames.
    pub async fn answer_ping(&mut self) {
        let (id, req) = self.expect().await;
        assert_eq!(req, Request::Ping);
        self.write(id, Response::Pong).await;
    }

    /// Expects exactly `want` and answers `Ok`.
    pub async fn expect_ok(&mut self, want: Request) {
        let (id, req) = self.expect().await;
        assert_eq!(req, want);
        self.write(id, Response::Ok).await;
    }

    /// Expects a subscribe request and answers it with `subscription`, followed in the same
    /// write by `pushes`; returns the request.
    pub async fn subscribed(
        &mut self,
        subscription: u64,
        pushes: impl IntoIterator<Item = (u32, Response)>,
    ) -> Request {
        let (id, req) = self.expect().await;
        let mut frames = vec![(id, Response::Subscribed { subscription })];
        frames.extend(pushes);
        self.write_all(&frames).await;
        req
    }

    /// Expects a subscribe request and answers it as a broker whose subscription task outran
    /// the reply: the pushes `early`, then `subscription`, then the pushes `late`, in one
    /// write; returns the request.
    pub async fn subscribed_overtaken(
        &mut self,
        subscription: u64,
        early: impl IntoIterator<Item = (u32, Response)>,
        late: impl IntoIterator<Item = (u32, Response)>,
    ) -> Request {
        let (id, req) = self.expect().await;
        let mut frames: Vec<_> = early.into_iter().collect();
        frames.push((id, Response::Subscribed { subscription }));
        frames.extend(late);
        self.write_all(&frames).await;
        req
    }

    /// Writes frames in one go.
    pub async fn write_all(&mut self, frames: &[(u32, Response)]) {
        let mut out = BytesMut::new();
        for (id, r) in frames {
            r.encode(*id, &mut out);
        }
        let _ = self.stream.write_all(&out).await;
    }

    /// Writes one frame.
    pub async fn write(&mut self, id: u32, resp: Response) {
        self.write_all(&[(id, resp)]).await;
    }

    /// Writes raw bytes.
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes).await;
    }

    /// Answers the connect with `limits`; returns the client name.
    pub async fn handshake(&mut self, limits: Limits) -> String {
        let (id, req) = self.expect().await;
        let Request::Connect(c) = req else {
            panic!("first request was {req:?}")
        };
        assert_eq!(c.version, PROTOCOL_VERSION);
        self.write(
            id,
            Response::Connected(Connected {
                version: PROTOCOL_VERSION,
                client: c.client.clone(),
                limits,
                // No keep-alive: the fake expects only the requests its tests make.
                keepalive_ms: 0,
                auth: String::new(),
            }),
        )
        .await;
        c.client
    }

    /// Reads until the client closes; returns what it sent meanwhile.
    pub async fn drain(&mut self) -> Vec<Request> {
        let mut v = Vec::new();
        while let Ok(Some((_, r))) = tokio::time::timeout(DEADLINE, self.read()).await {
            v.push(r);
        }
        v
    }
}

/// Starts a fake broker that runs `script` on its first connection; returns its address and
/// the script's task (whose result the test can await).
pub async fn serve<F, Fut, T>(script: F) -> (String, JoinHandle<T>)
where
    F: FnOnce(Peer) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let task = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        script(Peer {
            stream,
            buf: BytesMut::new(),
            reads: 0,
            frames: 0,
        })
        .await
    });
    (addr, task)
}

/// An error reply.
pub fn error(code: ErrorCode, message: &str) -> Response {
    Response::error(code, message)
}

/// A delivery whose body is `n` in decimal.
pub fn delivery(delivery_id: u64, n: u64) -> ferry_client::Delivery {
    ferry_client::Delivery {
        delivery_id,
        message: ferry_client::Message {
            id: n,
            queue: "q".into(),
            sender: "s".into(),
            receiver: None,
            priority: 5,
            context: 0,
            properties: vec![].into(),
            body: n.to_string().into(),
            created_at: 0,
            delivery_count: 0,
            expires_at: 0,
        },
    }
}

/// A push subscription request on `queue`, in priority order, without selector.
pub fn subscribe(
    queue: &str,
    ack: ferry_client::AckMode,
    prefetch: u32,
) -> ferry_client::Subscribe {
    ferry_client::Subscribe {
        queue: queue.into(),
        order: ferry_client::Order::Priority,
        ack,
        prefetch,
        selector: String::new(),
    }
}

/// A pushed `Deliver` frame (request id 0) carrying [`delivery`]`(delivery_id, n)`.
pub fn deliver(subscription: u64, delivery_id: u64, n: u64) -> (u32, Response) {
    (
        0,
        Response::Deliver {
            subscription,
            delivery: delivery(delivery_id, n),
        },
    )
}

/// A pushed `SubscriptionClosed` frame: the broker ended `subscription` with `code`.
pub fn closed(subscription: u64, code: ErrorCode, message: &str) -> (u32, Response) {
    (
        0,
        Response::SubscriptionClosed {
            subscription,
            error: ferry_client::ErrorReply::new(code, message),
        },
    )
}

/// A `Credit` request granting `credit` to `subscription`.
pub fn credit(subscription: u64, credit: u32) -> Request {
    Request::Credit {
        subscription,
        credit,
    }
}

/// A `Nack` request handing `ids` back to their queues.
pub fn requeue(ids: &[u64]) -> Request {
    Request::Nack {
        ids: ids.to_vec(),
        requeue: true,
    }
}

/// Connects to the fake broker at `addr` as `name` and subscribes to `queue`.
pub async fn subscribed_client(
    addr: &str,
    name: &str,
    queue: &str,
    ack: ferry_client::AckMode,
    prefetch: u32,
) -> (ferry_client::Client, ferry_client::Subscription) {
    let client = within(ferry_client::Client::connect(addr, name))
        .await
        .unwrap();
    let sub = within(client.subscribe(subscribe(queue, ack, prefetch)))
        .await
        .unwrap();
    (client, sub)
}

/// Drops the subscription and the client, and returns what the fake broker read after its
/// script (the requests the drops sent).
pub async fn after_drop<T>(
    sub: ferry_client::Subscription,
    client: ferry_client::Client,
    server: JoinHandle<T>,
) -> T {
    drop(sub);
    drop(client);
    within(server).await.unwrap()
}

/// Awaits `f`, failing the test instead of hanging.
pub async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(DEADLINE, f).await.expect("timed out")
}
