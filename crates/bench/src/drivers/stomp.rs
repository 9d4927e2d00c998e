//! The `stomp` driver: any STOMP 1.2 broker at a URL (`stomp://[USER:PASS@]HOST:PORT[/VHOST]`)
//! through a small client on Ferry's STOMP codec, so that Ferry's STOMP gateway and
//! RabbitMQ's STOMP plugin run the same workload with the same client.
//!
//! - Sends are `SEND` frames to `/queue/NAME` with `persistent:true` and a `receipt`; a send
//!   returns when its `RECEIPT` arrives, and concurrent sends pipeline on the connection.
//! - Consumers `SUBSCRIBE` with `ack:client` (cumulative) and a prefetch (`prefetch-count` for
//!   RabbitMQ, `activemq.prefetchSize` for Ferry and ActiveMQ); handled deliveries are
//!   acknowledged with one `ACK` of the latest for every [`ACK_BATCH`] of them, or as soon as
//!   the consumer has nothing at hand (like the `amqp` driver's `multiple` acks).
//! - Queues are created by the broker on the first SEND or SUBSCRIBE (both brokers do;
//!   RabbitMQ's `/queue/` destinations are durable queues).
//!
//! Durability: a receipt for a persistent SEND means stored: Ferry's gateway answers it after
//! the store's commit (fsync, group commit), RabbitMQ's plugin after the publisher confirm
//! (fsync, batched by the broker).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use ferry_client::protocol::Name;
use ferry_stomp::codec::{self, Command, Frame, Item, Limits, Scanner, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::{
    AckOutcome, AckToken, Capabilities, Connection, Consumer, Driver, DriverError, DriverLimits,
    OutMessage, ReceiveOne, Received,
};

/// The default URL: Ferry's STOMP listener.
pub const DEFAULT_URL: &str = "stomp://127.0.0.1:61613";
/// Deliveries per ack, at most.
pub const ACK_BATCH: usize = 64;
/// Frames as large as a 16 MiB body are read.
const READ_LIMITS: Limits = Limits::with_body(16 << 20);

/// A STOMP broker at one URL.
#[derive(Debug, Clone)]
pub struct StompDriver {
    url: String,
}

impl StompDriver {
    /// A driver for the broker at `url`.
    pub fn new(url: String) -> Self {
        StompDriver { url }
    }
}

/// The parts of a `stomp://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    addr: String,
    login: Option<(String, String)>,
    vhost: String,
}

fn parse_url(url: &str) -> Result<Url, String> {
    let rest = url
        .strip_prefix("stomp://")
        .ok_or_else(|| format!("'{url}' is not a stomp:// URL"))?;
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((a, r)) => (Some(a), r),
        None => (None, rest),
    };
    let (addr, vhost) = match rest.split_once('/') {
        Some((a, v)) if !v.is_empty() => (a, v.to_owned()),
        Some((a, _)) => (a, "/".to_owned()),
        None => (rest, "/".to_owned()),
    };
    let login = auth.map(|a| match a.split_once(':') {
        Some((u, p)) => (u.to_owned(), p.to_owned()),
        None => (a.to_owned(), String::new()),
    });
    Ok(Url {
        addr: addr.to_owned(),
        login,
        vhost,
    })
}

fn err(what: &str, e: impl std::fmt::Display) -> DriverError {
    DriverError::failed("stomp", what, e)
}

fn unsupported(what: &str) -> DriverError {
    DriverError::unsupported("stomp", what, "this driver")
}

#[async_trait]
impl Driver for StompDriver {
    fn name(&self) -> &'static str {
        "stomp"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NONE
    }

    fn durability(&self) -> String {
        "STOMP SEND with persistent:true and a receipt: the receipt comes once the broker has \
         stored the message (Ferry: after the store's fsync, group commit; RabbitMQ: after its \
         publisher confirm, fsyncs batched)"
            .to_string()
    }

    async fn connect(&self, client_name: &str) -> Result<Box<dyn Connection>, DriverError> {
        let url = parse_url(&self.url).map_err(|e| err("URL", e))?;
        let stream = TcpStream::connect(&url.addr)
            .await
            .map_err(|e| DriverError {
                message: format!("cannot connect to the STOMP broker at {}: {e}", url.addr),
                fatal: true,
            })?;
        stream.set_nodelay(true).map_err(|e| err("nodelay", e))?;
        let (rd, wr) = stream.into_split();
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            next: AtomicU64::new(1),
        });
        let (connected_tx, connected_rx) = oneshot::channel();
        shared.lock().connected = Some(connected_tx);
        let reader = tokio::spawn(read_loop(shared.clone(), rd));
        let writer = tokio::spawn(write_loop(wr, rx));
        let mut connect = Frame::new(Command::Connect)
            .header_with("accept-version", "1.2")
            .header_with("host", url.vhost.as_str())
            .header_with("heart-beat", "0,0")
            .header_with("client-id", client_name);
        if let Some((login, passcode)) = &url.login {
            connect = connect
                .header_with("login", login.as_str())
                .header_with("passcode", passcode.as_str());
        }
        let conn = StompConnection {
            shared,
            tx,
            reader,
            writer,
        };
        conn.write(&connect)?;
        match tokio::time::timeout(Duration::from_secs(10), connected_rx).await {
            Ok(Ok(Ok(()))) => Ok(Box::new(conn)),
            Ok(Ok(Err(e))) => Err(DriverError {
                message: format!("stomp: CONNECT refused: {e}"),
                fatal: true,
            }),
            _ => Err(DriverError {
                message: "stomp: no CONNECTED within 10 s".into(),
                fatal: true,
            }),
        }
    }
}

/// A delivery as the reader hands it to a consumer.
struct Delivery {
    ack: String,
    body: Bytes,
}

#[derive(Default)]
struct State {
    connected: Option<oneshot::Sender<Result<(), String>>>,
    receipts: HashMap<u64, oneshot::Sender<Result<(), String>>>,
    subs: HashMap<String, mpsc::UnboundedSender<Delivery>>,
    closed: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    next: AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fails everything waiting, for good.
    fn close(&self, why: String) {
        let mut st = self.lock();
        if let Some(c) = st.connected.take() {
            let _ = c.send(Err(why.clone()));
        }
        for (_, r) in st.receipts.drain() {
            let _ = r.send(Err(why.clone()));
        }
        st.subs.clear();
        st.closed.get_or_insert(why);
    }
}

async fn read_loop(shared: Arc<Shared>, mut rd: tokio::net::tcp::OwnedReadHalf) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut scanner = Scanner::default();
    let why = 'conn: loop {
        loop {
            match codec::decode_with(&mut scanner, &mut buf, Version::V1_2, &READ_LIMITS) {
                Ok(None) => break,
                Ok(Some(Item::Heartbeat)) => {}
                Ok(Some(Item::Frame(f))) => {
                    if let Err(why) = handle(&shared, f) {
                        break 'conn why;
                    }
                }
                Err(e) => break 'conn format!("unreadable frame: {e}"),
            }
        }
        if buf.capacity() - buf.len() < 16 * 1024 {
            buf.reserve(64 * 1024);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break "the broker closed the connection".to_string(),
            Ok(_) => {}
            Err(e) => break format!("read failed: {e}"),
        }
    };
    shared.close(why);
}

fn handle(shared: &Shared, f: Frame) -> Result<(), String> {
    match f.command {
        Command::Message => {
            let sub = f.header("subscription").unwrap_or_default();
            let ack = f
                .header("ack")
                .or_else(|| f.header("message-id"))
                .unwrap_or_default()
                .to_owned();
            if let Some(tx) = shared.lock().subs.get(sub) {
                let _ = tx.send(Delivery { ack, body: f.body });
            }
        }
        Command::Receipt => {
            let id = f
                .header("receipt-id")
                .and_then(|r| r.parse::<u64>().ok())
                .unwrap_or(0);
            if let Some(tx) = shared.lock().receipts.remove(&id) {
                let _ = tx.send(Ok(()));
            }
        }
        Command::Connected => {
            if let Some(tx) = shared.lock().connected.take() {
                let _ = tx.send(Ok(()));
            }
        }
        Command::Error => {
            let message = f.header("message").unwrap_or("ERROR frame").to_owned();
            return Err(format!(
                "ERROR: {message}: {}",
                String::from_utf8_lossy(&f.body).trim()
            ));
        }
        _ => {}
    }
    Ok(())
}

async fn write_loop(
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
) {
    let mut batch = BytesMut::new();
    while let Some(first) = rx.recv().await {
        batch.extend_from_slice(&first);
        while batch.len() < 1 << 20 {
            match rx.try_recv() {
                Ok(more) => batch.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if wr.write_all(&batch).await.is_err() {
            return;
        }
        batch.clear();
    }
    let _ = wr.shutdown().await;
}

struct StompConnection {
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Bytes>,
    reader: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl StompConnection {
    fn write(&self, f: &Frame) -> Result<(), DriverError> {
        let mut out = Vec::with_capacity(f.encoded_len(Version::V1_2));
        f.encode(Version::V1_2, &mut out)
            .map_err(|e| err("encode", e))?;
        self.tx.send(Bytes::from(out)).map_err(|_| DriverError {
            message: "stomp: the connection is closed".into(),
            fatal: true,
        })
    }

    /// Writes `f` with a fresh receipt; the receiver completes when the receipt arrives.
    fn with_receipt(&self, f: Frame) -> Result<oneshot::Receiver<Result<(), String>>, DriverError> {
        let id = self.shared.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if let Some(why) = &st.closed {
                return Err(DriverError {
                    message: format!("stomp: {why}"),
                    fatal: true,
                });
            }
            st.receipts.insert(id, tx);
        }
        self.write(&f.header_with("receipt", id.to_string()))?;
        Ok(rx)
    }
}

async fn receipt(rx: oneshot::Receiver<Result<(), String>>, what: &str) -> Result<(), DriverError> {
    match rx.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(DriverError {
            message: format!("stomp: {what}: {e}"),
            fatal: true,
        }),
        Err(_) => Err(DriverError {
            message: format!("stomp: {what}: the connection is closed"),
            fatal: true,
        }),
    }
}

fn send_frame(m: &OutMessage) -> Result<Frame, DriverError> {
    let queue = m
        .only_queue()
        .map_err(|_| unsupported("an addressed message or a send to several queues"))?;
    let mut f = Frame::new(Command::Send)
        .header_with("destination", format!("/queue/{queue}"))
        .header_with("persistent", if m.persistent { "true" } else { "false" })
        .body_with(m.body.clone());
    if let Some(p) = m.priority {
        f = f.header_with("priority", p.saturating_sub(1).to_string());
    }
    Ok(f)
}

#[async_trait]
impl Connection for StompConnection {
    fn limits(&self) -> DriverLimits {
        DriverLimits {
            max_batch: 10_000,
            max_prefetch: u16::MAX as u32,
        }
    }

    async fn ensure_queues(&self, _queues: &[String]) -> Result<(), DriverError> {
        // Both brokers create a /queue/ destination on its first SEND or SUBSCRIBE.
        Ok(())
    }

    async fn send(&self, msg: OutMessage) -> Result<(), DriverError> {
        let rx = self.with_receipt(send_frame(&msg)?)?;
        receipt(rx, "SEND").await
    }

    async fn send_batch(
        &self,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let mut pending = Vec::with_capacity(msgs.len());
        for m in &msgs {
            pending.push(self.with_receipt(send_frame(m)?));
        }
        let mut results = Vec::with_capacity(pending.len());
        for p in pending {
            results.push(match p {
                Ok(rx) => receipt(rx, "SEND").await,
                Err(e) => Err(e),
            });
        }
        Ok(results)
    }

    async fn receive_one(&self, _req: ReceiveOne) -> Result<Option<Received>, DriverError> {
        Err(unsupported(
            "a single receive (STOMP has subscriptions only)",
        ))
    }

    async fn waiting_queues(&self) -> Result<Vec<String>, DriverError> {
        Err(unsupported("the 'queues holding messages for me' query"))
    }

    async fn consume(&self, queue: &str, prefetch: u32) -> Result<Box<dyn Consumer>, DriverError> {
        let id = format!("s{}", self.shared.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.lock().subs.insert(id.clone(), tx);
        let prefetch = prefetch.clamp(1, u16::MAX as u32).to_string();
        let f = Frame::new(Command::Subscribe)
            .header_with("id", id.as_str())
            .header_with("destination", format!("/queue/{queue}"))
            .header_with("ack", "client")
            .header_with("prefetch-count", prefetch.as_str())
            .header_with("activemq.prefetchSize", prefetch.as_str());
        receipt(self.with_receipt(f)?, "SUBSCRIBE").await?;
        Ok(Box::new(StompConsumer {
            conn: StompConnection {
                shared: self.shared.clone(),
                tx: self.tx.clone(),
                reader: tokio::spawn(async {}),
                writer: tokio::spawn(async {}),
            },
            id,
            queue: queue.into(),
            rx,
            tokens: HashMap::new(),
            next_token: 1,
            latest: None,
            unsent: 0,
            outcome: AckOutcome::default(),
        }))
    }

    async fn close(&self) {
        if let Ok(rx) = self.with_receipt(Frame::new(Command::Disconnect)) {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
        self.reader.abort();
        self.writer.abort();
    }
}

struct StompConsumer {
    conn: StompConnection,
    id: String,
    queue: Name,
    rx: mpsc::UnboundedReceiver<Delivery>,
    /// Ack ids by the tokens handed out.
    tokens: HashMap<AckToken, String>,
    next_token: AckToken,
    /// The latest handled delivery not acknowledged yet.
    latest: Option<String>,
    unsent: usize,
    outcome: AckOutcome,
}

impl StompConsumer {
    fn received(&mut self, d: Delivery) -> Received {
        let token = self.next_token;
        self.next_token += 1;
        self.tokens.insert(token, d.ack);
        Received {
            body: d.body,
            queue: self.queue.clone(),
            sender: None,
            ack: Some(token),
        }
    }

    /// Sends the cumulative ACK of the latest handled delivery, if any.
    fn flush(&mut self) {
        if let Some(ack) = self.latest.take() {
            self.unsent = 0;
            if let Err(e) = self
                .conn
                .write(&Frame::new(Command::Ack).header_with("id", ack))
            {
                self.outcome.failed += 1;
                self.outcome.first_error.get_or_insert(e.message);
            }
        }
    }
}

#[async_trait]
impl Consumer for StompConsumer {
    async fn next(&mut self) -> Option<Result<Received, DriverError>> {
        let d = match self.rx.try_recv() {
            Ok(d) => d,
            Err(_) => {
                self.flush();
                self.rx.recv().await?
            }
        };
        Some(Ok(self.received(d)))
    }

    async fn next_batch(
        &mut self,
        out: &mut Vec<Result<Received, DriverError>>,
        max: usize,
    ) -> bool {
        let first = match self.rx.try_recv() {
            Ok(d) => d,
            Err(_) => {
                self.flush();
                match self.rx.recv().await {
                    Some(d) => d,
                    None => return false,
                }
            }
        };
        let r = self.received(first);
        out.push(Ok(r));
        while out.len() < max.max(1) {
            match self.rx.try_recv() {
                Ok(d) => {
                    let r = self.received(d);
                    out.push(Ok(r));
                }
                Err(_) => break,
            }
        }
        true
    }

    fn ack(&mut self, token: AckToken) {
        if let Some(ack) = self.tokens.remove(&token) {
            self.latest = Some(ack);
            self.unsent += 1;
            if self.unsent >= ACK_BATCH {
                self.flush();
            }
        }
    }

    async fn finish(mut self: Box<Self>) -> AckOutcome {
        if let Some(ack) = self.latest.take() {
            match self
                .conn
                .with_receipt(Frame::new(Command::Ack).header_with("id", ack))
            {
                Ok(rx) => {
                    if let Err(e) = receipt(rx, "ACK").await {
                        self.outcome.failed += 1;
                        self.outcome.first_error.get_or_insert(e.message);
                    }
                }
                Err(e) => {
                    self.outcome.failed += 1;
                    self.outcome.first_error.get_or_insert(e.message);
                }
            }
        }
        let unsubscribe = Frame::new(Command::Unsubscribe).header_with("id", self.id.as_str());
        if let Ok(rx) = self.conn.with_receipt(unsubscribe) {
            let _ = tokio::time::timeout(Duration::from_secs(5), rx).await;
        }
        self.conn.shared.lock().subs.remove(&self.id);
        self.outcome.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_address_login_and_vhost() {
        assert_eq!(
            parse_url("stomp://127.0.0.1:61613").unwrap(),
            Url {
                addr: "127.0.0.1:61613".into(),
                login: None,
                vhost: "/".into()
            }
        );
        assert_eq!(
            parse_url("stomp://guest:guest@localhost:61614/v").unwrap(),
            Url {
                addr: "localhost:61614".into(),
                login: Some(("guest".into(), "guest".into())),
                vhost: "v".into()
            }
        );
        assert!(parse_url("amqp://x").is_err());
    }
}
