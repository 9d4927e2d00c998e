//! Watching the broker while an attack runs: a probe client timing round trips (its latency is
//! what every other client would see), and a sampler of the broker's resident memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_client::{AckMode, Client, Order, OutgoingMessage, Receive, ReceiveMode, Source};
use tokio::task::JoinHandle;

/// How often the probe makes a round, and the sampler samples.
const PERIOD: Duration = Duration::from_millis(5);

/// The probe's timings.
#[derive(Debug, Default)]
pub struct Timings {
    /// One per request answered, in ms.
    pub latencies_ms: Vec<f64>,
    /// Requests that failed.
    pub failures: usize,
}

impl Timings {
    /// The `q` quantile (0 to 1) of the latencies, in ms (0 without any).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let mut v = self.latencies_ms.clone();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return 0.0;
        }
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        v.get(i).copied().unwrap_or(0.0)
    }
}

/// A client sending a message to `queue` and taking it back, over and over, timing each
/// request, until stopped.
pub struct Probe {
    stop: Arc<AtomicBool>,
    task: JoinHandle<Timings>,
}

impl Probe {
    /// Starts probing with `client` on `queue` (which must exist).
    pub fn start(client: Client, queue: &str) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let queue = queue.to_owned();
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut t = Timings::default();
            while !flag.load(Ordering::Relaxed) {
                let started = Instant::now();
                let sent = client.send(message(&queue)).await;
                t.record(started, sent.is_ok());
                let started = Instant::now();
                let got = client.receive(take(&queue)).await;
                t.record(started, matches!(got, Ok(Some(_))));
                tokio::time::sleep(PERIOD).await;
            }
            t
        });
        Probe { stop, task }
    }

    /// Stops probing; the timings so far.
    pub async fn stop(self) -> Timings {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

impl Timings {
    fn record(&mut self, started: Instant, ok: bool) {
        if ok {
            self.latencies_ms
                .push(started.elapsed().as_secs_f64() * 1000.0);
        } else {
            self.failures += 1;
        }
    }
}

fn message(queue: &str) -> OutgoingMessage {
    OutgoingMessage {
        queues: vec![queue.to_owned()],
        topic: None,
        persistent: true,
        receiver: None,
        priority: 5,
        context: 0,
        properties: Default::default(),
        body: Bytes::from_static(b"probe"),
        ttl_ms: 0,
        delay_ms: 0,
    }
}

fn take(queue: &str) -> Receive {
    Receive {
        source: Source::Queue(queue.to_owned()),
        order: Order::Time,
        mode: ReceiveMode::Take,
        ack: AckMode::Auto,
        wait_ms: 1000,
        selector: String::new(),
    }
}

/// Samples a process's resident memory until stopped; keeps the largest.
pub struct RssSampler {
    stop: Arc<AtomicBool>,
    task: JoinHandle<u64>,
}

impl RssSampler {
    /// Starts sampling process `pid`.
    pub fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut max = 0;
            while !flag.load(Ordering::Relaxed) {
                max = max.max(crate::rss_bytes(pid).unwrap_or(0));
                tokio::time::sleep(PERIOD).await;
            }
            max.max(crate::rss_bytes(pid).unwrap_or(0))
        });
        RssSampler { stop, task }
    }

    /// Stops sampling; the largest resident size seen, in bytes.
    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or(0)
    }
}
