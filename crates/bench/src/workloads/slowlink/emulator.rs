//! The link in user space, for kernels without netem: a TUN device in each namespace (made
//! here, then moved into its namespace), and this process carrying the IP packets between them.
//! Each direction is shaped as netem would: a packet leaves once the ones before it have gone
//! out at the link's rate, arrives half a round trip (plus jitter) later, in order, and is lost
//! with the loss probability; at most [`QUEUE_LIMIT`] packets wait (netem's default limit),
//! more are dropped. Timers have about a millisecond's granularity: fine for slow links, coarse
//! for a LAN.
//!
//! The devices are not persistent: they go away with this process, whatever ends it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tun_rs::{AsyncDevice, DeviceBuilder, Layer};

use super::spec::LinkSpec;

/// Packets waiting in one direction, at most.
pub const QUEUE_LIMIT: usize = 1000;
/// Largest packet the devices carry.
const MTU: u16 = 1500;

/// A TUN device named `name`, down and without an address (it is configured inside its
/// namespace).
pub fn device(name: &str) -> Result<AsyncDevice> {
    DeviceBuilder::new()
        .name(name)
        .layer(Layer::L3)
        .mtu(MTU)
        .enable(false)
        .build_async()
        .map_err(|e| anyhow!("cannot make the TUN device {name}: {e}"))
}

/// When a packet of `bytes` leaves and arrives, given when the link is next free: the
/// departure waits for the link, takes `bytes` at the rate, then the one-way delay (and
/// `jitter`, in `[-1, 1]` times the spec's) passes; arrivals keep their order.
pub fn schedule(
    spec: &LinkSpec,
    now: Instant,
    free_at: &mut Instant,
    last_arrival: &mut Instant,
    bytes: usize,
    jitter: f64,
) -> Instant {
    let start = now.max(*free_at);
    let serialise = if spec.rate_kbit > 0.0 {
        Duration::from_secs_f64(bytes as f64 * 8.0 / (spec.rate_kbit * 1000.0))
    } else {
        Duration::ZERO
    };
    *free_at = start + serialise;
    let one_way = (spec.rtt_ms / 2.0 + jitter * spec.jitter_ms).max(0.0);
    let arrival = (*free_at + Duration::from_secs_f64(one_way / 1000.0)).max(*last_arrival);
    *last_arrival = arrival;
    arrival
}

/// The carrier between the two devices; stops when dropped.
pub struct Emulator {
    tasks: Vec<JoinHandle<()>>,
}

impl Emulator {
    /// Carries packets both ways between `client` and `server` as `spec` says.
    pub fn start(spec: LinkSpec, client: AsyncDevice, server: AsyncDevice) -> Emulator {
        let (client, server) = (Arc::new(client), Arc::new(server));
        let mut tasks = Vec::new();
        for (from, to) in [(client.clone(), server.clone()), (server, client)] {
            let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE_LIMIT);
            tasks.push(tokio::spawn(async move {
                let mut buf = vec![0u8; usize::from(MTU) + 64];
                let now = Instant::now();
                let (mut free_at, mut last) = (now, now);
                loop {
                    let Ok(n) = from.recv(&mut buf).await else {
                        return;
                    };
                    if spec.loss_pct > 0.0 && rand::random::<f64>() * 100.0 < spec.loss_pct {
                        continue;
                    }
                    let jitter = 2.0 * rand::random::<f64>() - 1.0;
                    let at = schedule(&spec, Instant::now(), &mut free_at, &mut last, n, jitter);
                    let packet = buf.get(..n).unwrap_or_default().to_vec();
                    // A full queue drops the packet, as netem's limit does.
                    let _ = tx.try_send((at, packet));
                }
            }));
            tasks.push(tokio::spawn(async move {
                while let Some((at, packet)) = rx.recv().await {
                    tokio::time::sleep_until(at.into()).await;
                    if to.send(&packet).await.is_err() {
                        return;
                    }
                }
            }));
        }
        Emulator { tasks }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_wait_for_the_link_then_cross_in_half_a_round_trip() {
        let gprs = LinkSpec::preset("gprs").unwrap();
        let t0 = Instant::now();
        let (mut free, mut last) = (t0, t0);
        // 500 bytes at 40 kbit/s take 100 ms; then 150 ms one way.
        let a = schedule(&gprs, t0, &mut free, &mut last, 500, 0.0);
        assert_eq!(a - t0, Duration::from_millis(250));
        // The next one, sent at once, waits for the first to go out.
        let b = schedule(&gprs, t0, &mut free, &mut last, 500, 0.0);
        assert_eq!(b - t0, Duration::from_millis(350));
        // Jitter never reorders.
        let mut jittery = gprs;
        jittery.jitter_ms = 500.0;
        let c = schedule(&jittery, t0, &mut free, &mut last, 1, -1.0);
        assert!(c >= b);
    }
}
