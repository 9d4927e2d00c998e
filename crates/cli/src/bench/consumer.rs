//! A consumer: one connection with a client-ack subscription per assigned queue. Deliveries are
//! acked in batches by a separate acker task (every [`ACK_BATCH`] deliveries or
//! [`ACK_INTERVAL`], whichever comes first), with several ack requests in flight, so that the
//! subscription loop never waits for an ack round trip.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ferry_client::{Client, Subscription};
use ferry_protocol::requests::Subscribe;
use ferry_protocol::{AckMode, DeliveryId, Order};
use hdrhistogram::Histogram;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

use super::payload;
use super::stats::{new_histogram, record, Shared, MEASURE};
use crate::connection::{describe, explain};

/// Deliveries per ack request, at most.
pub const ACK_BATCH: usize = 64;
/// Longest a delivery waits for its ack to be sent.
pub const ACK_INTERVAL: Duration = Duration::from_millis(1);
/// Ack requests in flight per consumer.
const ACKS_IN_FLIGHT: usize = 16;

/// Subscribes to `queues` and starts consuming in the background until `stop` turns true.
/// Returns once every subscription is live; the handle yields the end-to-end latencies.
pub async fn start(
    client: Client,
    queues: Vec<String>,
    prefetch: u32,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Result<JoinHandle<Histogram<u64>>> {
    let mut subs = Vec::with_capacity(queues.len());
    for queue in queues {
        let sub = client
            .subscribe(Subscribe {
                queue,
                order: Order::Priority,
                ack: AckMode::Client,
                prefetch,
            })
            .await
            .map_err(explain)?;
        subs.push(sub);
    }
    Ok(tokio::spawn(consume(client, subs, shared, stop)))
}

async fn consume(
    client: Client,
    subs: Vec<Subscription>,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Histogram<u64> {
    let (ack_tx, ack_rx) = mpsc::unbounded_channel();
    let acker = tokio::spawn(acker(client.clone(), ack_rx, shared.clone()));
    let mut loops = JoinSet::new();
    for sub in subs {
        loops.spawn(take_deliveries(
            sub,
            shared.clone(),
            ack_tx.clone(),
            stop.clone(),
        ));
    }
    // The acker ends when the last sender is gone, i.e. when every loop has ended.
    drop(ack_tx);
    let mut hist = new_histogram();
    while let Some(joined) = loops.join_next().await {
        match joined {
            Ok(h) => {
                let _ = hist.add(h);
            }
            Err(e) => shared.note_error(format!("consumer task failed: {e}")),
        }
    }
    let _ = acker.await;
    // Deliveries pushed but not handled return to their queues with the session.
    let _ = client.disconnect().await;
    hist
}

async fn take_deliveries(
    mut sub: Subscription,
    shared: Arc<Shared>,
    ack_tx: mpsc::UnboundedSender<DeliveryId>,
    mut stop: watch::Receiver<bool>,
) -> Histogram<u64> {
    let mut hist = new_histogram();
    loop {
        let item = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            item = sub.next() => item,
        };
        let delivery = match item {
            None => break,
            Some(Ok(d)) => d,
            Some(Err(e)) => {
                shared.note_error(describe(&e));
                break;
            }
        };
        let now = payload::now_micros();
        match payload::decode(&delivery.message.body, shared.run_id) {
            Some(stamp) => {
                shared.received_total.fetch_add(1, Ordering::Relaxed);
                shared
                    .last_received_at
                    .fetch_max(shared.elapsed_micros(), Ordering::Relaxed);
                if shared.phase() == MEASURE {
                    shared.received_measured.fetch_add(1, Ordering::Relaxed);
                    record(&mut hist, Duration::from_micros(now.saturating_sub(stamp)));
                }
            }
            // Left over from an earlier run: consume it so it does not linger, but do not count it.
            None => {
                shared.foreign.fetch_add(1, Ordering::Relaxed);
            }
        }
        if delivery.delivery_id != 0 && ack_tx.send(delivery.delivery_id).is_err() {
            break;
        }
    }
    hist
}

async fn acker(client: Client, mut rx: mpsc::UnboundedReceiver<DeliveryId>, shared: Arc<Shared>) {
    let permits = Arc::new(Semaphore::new(ACKS_IN_FLIGHT));
    let mut acks = JoinSet::new();
    let mut batch = Vec::with_capacity(ACK_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        let deadline = tokio::time::Instant::now() + ACK_INTERVAL;
        while batch.len() < ACK_BATCH {
            // Take what is already queued without touching the timer.
            match rx.try_recv() {
                Ok(id) => {
                    batch.push(id);
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(id)) => batch.push(id),
                Ok(None) | Err(_) => break,
            }
        }
        let ids = std::mem::replace(&mut batch, Vec::with_capacity(ACK_BATCH));
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (client, shared) = (client.clone(), shared.clone());
        acks.spawn(async move {
            if let Err(e) = client.ack(&ids).await {
                shared
                    .ack_errors
                    .fetch_add(ids.len() as u64, Ordering::Relaxed);
                shared.note_error(describe(&e));
            }
            drop(permit);
        });
        while acks.try_join_next().is_some() {}
    }
    while acks.join_next().await.is_some() {}
}
