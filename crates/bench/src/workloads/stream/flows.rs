//! The writer and the reader of each transport. Every writer makes records as fast as it can
//! (or at `--rate`), counting what the transport took; every reader counts each distinct
//! record of this run once, with its age, through [`Tally`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use ferry_client::protocol::packed::{PackedBuilder, LEN_PREFIX};
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::record::{self, SeqSet, RECORD_LEN, SESSION_LEN};
use crate::drivers::{Connection, Consumer, Driver, OutMessage, TopicSubscription};
use crate::stats::new_histogram;
use crate::workloads::run::{Shared, MEASURE};

/// What the writer and reader of one run share besides [`Shared`].
pub struct Flow {
    /// Counters, phase, windows.
    pub shared: Arc<Shared>,
    /// The next sequence number.
    pub next_seq: AtomicU64,
    /// This run's session id in every record.
    pub session: [u8; SESSION_LEN],
    /// Makes this run's records.
    pub encoder: record::Encoder,
    /// Records per second offered (0: as fast as possible).
    pub rate: u64,
    /// Records per send.
    pub batch: usize,
    /// Records per message body (broker transports).
    pub per_message: usize,
    /// Datagrams sent (udp transport).
    pub datagrams_sent: AtomicU64,
}

impl Flow {
    /// Claims the sequence numbers of the next `n` records, after waiting for their turn when
    /// paced; `None` once the run stops.
    async fn claim(&self, n: usize) -> Option<u64> {
        if self.shared.stopping() {
            return None;
        }
        let first = self.next_seq.fetch_add(n as u64, Ordering::Relaxed);
        if self.rate > 0 {
            let due =
                self.shared.started + Duration::from_secs_f64(first as f64 / self.rate as f64);
            tokio::time::sleep_until(due.into()).await;
            if self.shared.stopping() {
                return None;
            }
        }
        Some(first)
    }

    /// `n` records from `first` on, encoded back to back.
    fn records(&self, first: u64, n: usize, out: &mut Vec<u8>) {
        let now = record::now_ns();
        for seq in first..first + n as u64 {
            self.encoder.encode(seq, now, out);
        }
    }

    /// Counts `n` records the transport took.
    fn sent(&self, n: u64) {
        let s = &self.shared;
        s.sent_total.fetch_add(n, Ordering::Relaxed);
        if s.phase() == MEASURE {
            s.sent_measured.fetch_add(n, Ordering::Relaxed);
        }
        s.windows.sent(Instant::now(), n);
    }
}

/// A reader's count of distinct records and their ages. Records are counted in batches (what
/// one read brought): the clock is read and the shared counters are updated once per batch,
/// so that counting costs the reader little per record, on every transport alike.
pub struct Tally {
    flow: Arc<Flow>,
    seen: SeqSet,
    /// Ages of the records at the reader, µs.
    pub latency: Histogram<u64>,
    batch: Batch,
}

/// The records of one batch, not yet added to the shared counters.
#[derive(Default)]
struct Batch {
    now_ns: u64,
    new: u64,
    age_sum_us: u64,
    age_max_us: u64,
}

impl Tally {
    /// A tally for `flow`.
    pub fn new(flow: Arc<Flow>) -> Tally {
        Tally {
            flow,
            seen: SeqSet::default(),
            latency: new_histogram(),
            batch: Batch::default(),
        }
    }

    /// Starts a batch: the records counted until [`Tally::end_batch`] arrived now.
    pub fn begin_batch(&mut self) {
        self.batch = Batch {
            now_ns: record::now_ns(),
            ..Batch::default()
        };
    }

    /// Counts one record of the batch (anything else is counted as foreign).
    pub fn record(&mut self, bytes: &[u8]) {
        let Some((seq, tin)) = record::decode(bytes, &self.flow.session) else {
            self.flow.shared.foreign.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if !self.seen.insert(seq) {
            return;
        }
        let age_us = self.batch.now_ns.saturating_sub(tin) / 1000;
        let _ = self.latency.record(age_us.max(1));
        let b = &mut self.batch;
        b.new += 1;
        b.age_sum_us += age_us;
        b.age_max_us = b.age_max_us.max(age_us);
    }

    /// Adds the batch to the shared counters and windows.
    pub fn end_batch(&mut self) {
        let b = std::mem::take(&mut self.batch);
        if b.new == 0 {
            return;
        }
        let s = &self.flow.shared;
        let now = Instant::now();
        if s.phase() == MEASURE {
            s.received_measured.fetch_add(b.new, Ordering::Relaxed);
        }
        s.windows.received_n(now, b.new);
        s.windows.latencies(now, b.age_sum_us, b.new, b.age_max_us);
        s.add_received(b.new);
    }

    /// Records received more than once.
    pub fn duplicates(&self) -> u64 {
        self.seen.duplicates
    }
}

/// What a reader task hands back.
pub struct ReaderEnd {
    /// Ages of the records, µs.
    pub latency: Histogram<u64>,
    /// Records received more than once.
    pub duplicates: u64,
}

impl From<Tally> for ReaderEnd {
    fn from(t: Tally) -> ReaderEnd {
        ReaderEnd {
            duplicates: t.duplicates(),
            latency: t.latency,
        }
    }
}

/// A running writer and reader.
pub struct Running {
    /// The writer tasks.
    pub writers: Vec<JoinHandle<()>>,
    /// The reader, until `stop` turns true (then it drains what is at hand and ends).
    pub reader: JoinHandle<ReaderEnd>,
    /// Tells the reader to end.
    pub stop: watch::Sender<bool>,
    /// Connections to close at the end.
    pub connections: Vec<Arc<dyn Connection>>,
}

/// Where a broker transport sends.
#[derive(Debug, Clone)]
pub enum Dest {
    /// Publishes to a topic; the reader has a non-durable subscription.
    Topic(String),
    /// Sends to a queue; the reader consumes it.
    Queue(String),
}

/// A broker transport: `in_flight` writer tasks on one connection publishing batches, one
/// reader on a connection of its own.
pub async fn broker(
    driver: Arc<dyn Driver>,
    dest: Dest,
    persistent: bool,
    in_flight: u32,
    prefetch: u32,
    flow: Arc<Flow>,
    name: &str,
) -> Result<Running> {
    let connect = |who: String| {
        let driver = driver.clone();
        async move {
            driver
                .connect(&who)
                .await
                .map(Arc::<dyn Connection>::from)
                .map_err(|e| anyhow!(e.message))
        }
    };
    let reader_conn = connect(format!("{name}-reader")).await?;
    let prefetch = prefetch.min(reader_conn.limits().max_prefetch).max(1);
    let consumer = match &dest {
        Dest::Topic(t) => {
            reader_conn
                .ensure_topic(t)
                .await
                .map_err(|e| anyhow!(e.message))?;
            reader_conn
                .subscribe_topic(
                    t,
                    &TopicSubscription {
                        durable: None,
                        selector: String::new(),
                        client_ack: persistent,
                        prefetch,
                        bindings: Vec::new(),
                    },
                )
                .await
        }
        Dest::Queue(q) => {
            reader_conn
                .ensure_queues(std::slice::from_ref(q))
                .await
                .map_err(|e| anyhow!(e.message))?;
            reader_conn.consume(q, prefetch).await
        }
    }
    .map_err(|e| anyhow!(e.message))?;
    let (stop, stop_rx) = watch::channel(false);
    let reader = tokio::spawn(read_consumer(consumer, Tally::new(flow.clone()), stop_rx));
    let writer_conn = connect(format!("{name}-writer")).await?;
    // A publish carries at most the broker's batch of messages, each of `per_message` records.
    let per_message = flow.per_message.max(1);
    let batch = flow
        .batch
        .min(writer_conn.limits().max_batch as usize * per_message)
        .max(1);
    let mut writers = Vec::new();
    for _ in 0..in_flight {
        let (conn, flow, dest) = (writer_conn.clone(), flow.clone(), dest.clone());
        writers.push(tokio::spawn(async move {
            // Messages per batch, and records in the last (what is left).
            let messages = batch.div_ceil(per_message);
            let last = (batch - (messages - 1) * per_message) as u64;
            let records = |i: usize| {
                if i + 1 < messages {
                    per_message as u64
                } else {
                    last
                }
            };
            while let Some(first) = flow.claim(batch).await {
                // The records are written straight into the packed bodies the publish
                // carries: no handle per message.
                let mut packed =
                    PackedBuilder::reserving(batch * RECORD_LEN + messages * LEN_PREFIX);
                let now = record::now_ns();
                let end = first + batch as u64;
                for start in (first..end).step_by(per_message) {
                    packed.push_with(|out| {
                        for seq in start..(start + per_message as u64).min(end) {
                            flow.encoder.encode(seq, now, out);
                        }
                    });
                }
                let bodies = packed.finish();
                let results = match &dest {
                    // Bodies as they are: no message built per body.
                    Dest::Topic(t) => conn.publish_bodies(t, persistent, bodies).await,
                    Dest::Queue(q) => {
                        let msgs = bodies
                            .handles()
                            .map(|body| OutMessage {
                                persistent,
                                queues: vec![q.clone()],
                                ..OutMessage::for_topic(body)
                            })
                            .collect();
                        conn.send_batch(msgs).await
                    }
                };
                match results {
                    Ok(rs) => {
                        let ok = rs
                            .iter()
                            .enumerate()
                            .filter(|(_, r)| r.is_ok())
                            .map(|(i, _)| records(i))
                            .sum();
                        flow.sent(ok);
                        if let Some(Err(e)) = rs.into_iter().find(Result::is_err) {
                            flow.shared.send_errors.fetch_add(1, Ordering::Relaxed);
                            flow.shared.note_error(e.message);
                        }
                    }
                    Err(e) => {
                        flow.shared
                            .send_errors
                            .fetch_add(batch as u64, Ordering::Relaxed);
                        flow.shared.note_error(e.message.clone());
                        if e.fatal {
                            return;
                        }
                    }
                }
            }
        }));
    }
    Ok(Running {
        writers,
        reader,
        stop,
        connections: vec![writer_conn, reader_conn],
    })
}

/// Counts the consumer's deliveries until `stop`, acknowledging those that need it.
async fn read_consumer(
    mut consumer: Box<dyn Consumer>,
    mut tally: Tally,
    mut stop: watch::Receiver<bool>,
) -> ReaderEnd {
    loop {
        // The bodies are counted as the consumer hands them over, inside the call: the
        // batch (and its clock) starts with the first of them, once the wait is over.
        let mut begun = false;
        let mut count = |body: &[u8]| {
            if !begun {
                tally.begin_batch();
                begun = true;
            }
            for r in body.chunks(RECORD_LEN) {
                tally.record(r);
            }
        };
        let got = tokio::select! {
            got = consumer.next_bodies(&mut count) => got,
            _ = stop.wait_for(|s| *s) => break,
        };
        if begun {
            tally.end_batch();
        }
        if let Some(e) = got.error {
            tally.flow.shared.note_error(e.message);
        }
        if !got.open {
            break;
        }
    }
    let outcome = consumer.finish().await;
    if outcome.failed > 0 {
        let s = &tally.flow.shared;
        s.ack_errors.fetch_add(outcome.failed, Ordering::Relaxed);
        if let Some(e) = outcome.first_error {
            s.note_error(e);
        }
    }
    tally.into()
}

/// The floor: one TCP connection from the writer to the reader, records written back to back
/// through a 64 KiB buffer (as an object stream writes them).
pub async fn tcp(flow: Arc<Flow>) -> Result<Running> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (stop, mut stop_rx) = watch::channel(false);
    let tally = Tally::new(flow.clone());
    let reader = tokio::spawn(async move {
        let mut tally = tally;
        let Ok((mut sock, _)) = listener.accept().await else {
            return tally.into();
        };
        let mut buf = vec![0u8; 256 * 1024];
        let mut filled = 0;
        loop {
            let free = buf.get_mut(filled..).unwrap_or_default();
            let n = tokio::select! {
                r = sock.read(free) => r.unwrap_or(0),
                _ = stop_rx.wait_for(|s| *s) => 0,
            };
            if n == 0 {
                break;
            }
            filled += n;
            let whole = filled - filled % RECORD_LEN;
            tally.begin_batch();
            for r in buf.chunks_exact(RECORD_LEN).take(whole / RECORD_LEN) {
                tally.record(r);
            }
            tally.end_batch();
            buf.copy_within(whole..filled, 0);
            filled -= whole;
        }
        tally.into()
    });
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let writer = tokio::spawn(async move {
        let mut out = BufWriter::with_capacity(64 * 1024, stream);
        let mut buf = Vec::with_capacity(flow.batch * RECORD_LEN);
        while let Some(first) = flow.claim(flow.batch).await {
            buf.clear();
            flow.records(first, flow.batch, &mut buf);
            if let Err(e) = out.write_all(&buf).await {
                flow.shared.note_error(format!("tcp: write: {e}"));
                return;
            }
            flow.sent(flow.batch as u64);
        }
        let _ = out.flush().await;
        let _ = out.shutdown().await;
    });
    Ok(Running {
        writers: vec![writer],
        reader,
        stop,
        connections: Vec::new(),
    })
}

/// The datagram ingest: records packed into datagrams of at most `datagram_bytes`, sent to
/// `ingest`; the reader subscribes to the ingest's topic through `driver` (Ferry).
pub async fn udp(
    driver: Arc<dyn Driver>,
    ingest: std::net::SocketAddr,
    topic: &str,
    datagram_bytes: usize,
    prefetch: u32,
    flow: Arc<Flow>,
    name: &str,
) -> Result<Running> {
    let reader_conn: Arc<dyn Connection> = driver
        .connect(&format!("{name}-reader"))
        .await
        .map_err(|e| anyhow!(e.message))?
        .into();
    let prefetch = prefetch.min(reader_conn.limits().max_prefetch).max(1);
    let consumer = reader_conn
        .subscribe_topic(
            topic,
            &TopicSubscription {
                durable: None,
                selector: String::new(),
                client_ack: false,
                prefetch,
                bindings: Vec::new(),
            },
        )
        .await
        .map_err(|e| anyhow!(e.message))?;
    let (stop, stop_rx) = watch::channel(false);
    let reader = tokio::spawn(read_consumer(consumer, Tally::new(flow.clone()), stop_rx));
    let sock = UdpSocket::bind("127.0.0.1:0").await?;
    let per_datagram = ((datagram_bytes - ferry_udp::datagram::HEADER_LEN)
        / (RECORD_LEN + ferry_udp::datagram::RECORD_PREFIX))
        .max(1);
    let writer = tokio::spawn(async move {
        let Ok(mut packer) = ferry_udp::Packer::new(None, datagram_bytes) else {
            flow.shared.note_error("udp: datagram too small".into());
            return;
        };
        let mut buf = Vec::with_capacity(flow.batch * RECORD_LEN);
        let batch = flow.batch.max(per_datagram);
        while let Some(first) = flow.claim(batch).await {
            buf.clear();
            flow.records(first, batch, &mut buf);
            for chunk in buf.chunks(per_datagram * RECORD_LEN) {
                packer.clear();
                for r in chunk.chunks_exact(RECORD_LEN) {
                    packer.push(r);
                }
                match sock.send_to(packer.datagram(), ingest).await {
                    Ok(_) => {
                        flow.datagrams_sent.fetch_add(1, Ordering::Relaxed);
                        flow.sent(packer.len() as u64);
                    }
                    Err(e) => {
                        flow.shared.send_errors.fetch_add(1, Ordering::Relaxed);
                        flow.shared.note_error(format!("udp: send: {e}"));
                    }
                }
            }
        }
    });
    Ok(Running {
        writers: vec![writer],
        reader,
        stop,
        connections: vec![reader_conn],
    })
}
