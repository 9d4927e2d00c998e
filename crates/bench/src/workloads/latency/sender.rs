//! An open-loop sender: a pacer thread releases request numbers on a fixed-rate
//! [`Schedule`], and a dispatcher issues each as its own task without waiting for earlier ones.
//! Each send is stamped with, and measured from, its intended time, so a stall of the target
//! (or of the sender) shows up in every request that was due meanwhile: the coordinated-omission
//! correction. The time from actually issuing it is recorded too, for comparison.
//!
//! The pacer is an OS thread sleeping with `std::thread::sleep` because tokio's timer has a
//! granularity of about a millisecond, which would add up to a millisecond of the generator's
//! own lateness to every corrected sample.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use hdrhistogram::Histogram;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::drivers::{Connection, OutMessage};
use crate::payload;
use crate::stats::histogram::clamp_micros;
use crate::stats::new_histogram;
use crate::stats::omission::Schedule;
use crate::workloads::run::{Shared, WindowLatency};

/// What one sender does.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    /// Its number, to spread sends over the queues.
    pub index: u32,
    /// Its schedule.
    pub schedule: Schedule,
    /// Wall-clock µs at `schedule.start`, to stamp bodies with intended times.
    pub wall_start_micros: u64,
    /// Requests due from here on are not sent.
    pub end: Instant,
    /// Body size.
    pub size: usize,
    /// Queues, in rotation.
    pub queues: Arc<Vec<String>>,
    /// Most sends outstanding.
    pub max_outstanding: u32,
}

/// Send-to-ack latencies of one sender, µs.
#[derive(Debug)]
pub struct SenderLatencies {
    /// From the intended send time.
    pub corrected: Histogram<u64>,
    /// From the moment the send was issued.
    pub uncorrected: Histogram<u64>,
}

/// Sends on schedule until `cfg.end`, waits for the outstanding sends, closes the connection.
pub async fn run(
    conn: Arc<dyn Connection>,
    cfg: SenderConfig,
    shared: Arc<Shared>,
) -> SenderLatencies {
    let (tx, mut rx) = mpsc::unbounded_channel::<u64>();
    let schedule = cfg.schedule;
    let end = cfg.end;
    let pacer = std::thread::spawn(move || {
        let mut i = 0u64;
        loop {
            let due = schedule.intended(i);
            if due >= end {
                break;
            }
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if tx.send(i).is_err() {
                break;
            }
            i += 1;
        }
    });
    let hists = Arc::new(Mutex::new(SenderLatencies {
        corrected: new_histogram(),
        uncorrected: new_histogram(),
    }));
    let permits = Arc::new(Semaphore::new(cfg.max_outstanding as usize));
    let mut sends = JoinSet::new();
    while let Some(i) = rx.recv().await {
        if shared.stopping() {
            break;
        }
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (conn, cfg, shared, hists) = (conn.clone(), cfg.clone(), shared.clone(), hists.clone());
        sends.spawn(async move {
            send_one(conn.as_ref(), &cfg, &shared, &hists, i).await;
            drop(permit);
        });
        while sends.try_join_next().is_some() {}
    }
    drop(rx);
    while sends.join_next().await.is_some() {}
    // The pacer has ended or ends at its next send, now that the receiver is gone.
    let _ = tokio::task::spawn_blocking(move || pacer.join()).await;
    conn.close().await;
    let mut hists = hists.lock().unwrap_or_else(PoisonError::into_inner);
    SenderLatencies {
        corrected: std::mem::replace(&mut hists.corrected, new_histogram()),
        uncorrected: std::mem::replace(&mut hists.uncorrected, new_histogram()),
    }
}

async fn send_one(
    conn: &dyn Connection,
    cfg: &SenderConfig,
    shared: &Shared,
    hists: &Mutex<SenderLatencies>,
    i: u64,
) {
    let intended = cfg.schedule.intended(i);
    let offset = u64::try_from((intended - cfg.schedule.start).as_micros()).unwrap_or(u64::MAX);
    let stamp = cfg.wall_start_micros.saturating_add(offset);
    let turn = cfg.index as usize + i as usize;
    let queue = crate::round_robin::pick(&cfg.queues, turn)
        .cloned()
        .unwrap_or_default();
    let msg = OutMessage::to_queue(queue, payload::encode(cfg.size, stamp, shared.run_id));
    let issued = Instant::now();
    let outcome = conn.send(msg).await;
    let done = Instant::now();
    match outcome {
        Ok(()) => {
            let corrected = clamp_micros(Schedule::latency(intended, done));
            shared.sent_total.fetch_add(1, Ordering::Relaxed);
            shared.windows.sent(done, 1);
            if shared.window_latency == WindowLatency::SendToAck {
                shared.windows.latency(done, corrected, 1);
            }
            // Counted by intended time (the stamp), so that sends due in the measurement but
            // held up past its end still count, with their full latency; consumers count the
            // same stamps.
            if shared.counts(stamp) {
                shared.sent_measured.fetch_add(1, Ordering::Relaxed);
                let mut h = hists.lock().unwrap_or_else(PoisonError::into_inner);
                h.corrected.saturating_record(corrected);
                h.uncorrected.saturating_record(clamp_micros(done - issued));
            }
        }
        Err(e) => {
            shared.send_errors.fetch_add(1, Ordering::Relaxed);
            shared.note_error(e.message);
        }
    }
}
