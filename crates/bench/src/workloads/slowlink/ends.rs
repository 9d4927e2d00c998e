//! The two ends of the link, each run by the workload as `ferry-bench` in its namespace
//! (`ip netns exec`): the **server** end (a Ferry broker and the responder, which takes each
//! request, checks that its sequence number is the next one and answers with it), and the
//! **client** end (sends the requests in one of the [`Mode`]s and waits for every answer).
//! Requests and answers are non-persistent: the link, not the disk, is what is measured.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use bytes::{BufMut, Bytes, BytesMut};
use clap::{Args, ValueEnum};
use ferry_client::protocol::requests::Receive;
use ferry_client::protocol::{AckMode, ErrorCode, Order, OutgoingMessage, ReceiveMode, Source};
use ferry_client::{Client, Subscribe};
use futures::StreamExt;
use serde::Serialize;

/// The requests' queue.
pub const REQUESTS: &str = "bench-slowlink.requests";
/// The answers' queue.
pub const ANSWERS: &str = "bench-slowlink.answers";
/// The string each request carries.
const TEXT: &str = "slowlink request";

/// How the client invokes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A new connection per call, closed after its answer (as HTTP 1.0).
    PerCall,
    /// One connection, one call at a time.
    Sync,
    /// One connection, many calls in flight.
    Pipelined,
    /// One connection, calls sent in batches, many batches in flight.
    Bundled,
}

/// A request: a string, a date (ms since the epoch), a float and the sequence number.
pub fn request(seq: u64) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + TEXT.len() + 24);
    b.put_u16(TEXT.len() as u16);
    b.put_slice(TEXT.as_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    b.put_u64(now);
    b.put_f64(seq as f64 * 0.5);
    b.put_u64(seq);
    b.freeze()
}

/// Payload bytes of one request.
pub const REQUEST_BYTES: usize = 2 + TEXT.len() + 24;
/// Payload bytes of one answer (the sequence number).
pub const ANSWER_BYTES: usize = 8;

fn seq_of(body: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(
        body.get(body.len().checked_sub(8)?..)?.try_into().ok()?,
    ))
}

/// Flags of the server end.
#[derive(Debug, Clone, Args)]
pub struct ServeEnd {
    /// Address for the broker.
    #[arg(long)]
    pub listen: String,
    /// The broker's data directory. The workload makes it and removes it after killing this
    /// end, which gets no chance to clean up.
    #[arg(long)]
    pub data_dir: std::path::PathBuf,
}

/// Runs a broker on `listen` and the responder until killed; prints `ready` once both run.
pub async fn serve(end: &ServeEnd) -> Result<()> {
    let dir = end.data_dir.clone();
    let config = ferry_broker::BrokerConfig {
        listen: end.listen.clone(),
        data_dir: dir.clone(),
        fsync: ferry_store::embedded::FsyncPolicy::Never,
        // Inside the workload's own network namespace, reached only by its client end.
        allow_anonymous: true,
        stomp_listen: ferry_broker::config::STOMP_OFF.into(),
        ..ferry_broker::BrokerConfig::default()
    };
    let broker = ferry_broker::Broker::start(config)
        .await
        .map_err(|e| anyhow!("cannot start the broker: {e}"))?;
    let addr = broker.local_addr().to_string();
    let client = Client::connect(&addr, "slowlink-responder").await?;
    for q in [REQUESTS, ANSWERS] {
        match client.create_queue(q).await {
            Err(e) if e.code() != Some(ErrorCode::QueueExists) => return Err(e.into()),
            _ => {}
        }
    }
    let mut sub = client
        .subscribe(Subscribe {
            queue: REQUESTS.to_string(),
            order: Order::Time,
            ack: AckMode::Auto,
            prefetch: 10_000,
            selector: String::new(),
        })
        .await?;
    println!("ready");
    let mut expected = 0u64;
    let mut taken = Vec::new();
    loop {
        taken.clear();
        match sub.next_batch(&mut taken, 10_000).await {
            None => break,
            Some(Err(e)) => return Err(e.into()),
            Some(Ok(_)) => {}
        }
        let mut answers = Vec::with_capacity(taken.len());
        // Bundled requests get their answers bundled too: one message with the numbers of
        // every bundled request at hand.
        let mut bundle = BytesMut::new();
        for d in &taken {
            let seq = seq_of(&d.message.body).unwrap_or(u64::MAX);
            // Sequence 0 starts a new run of the client.
            if seq != expected && seq != 0 {
                eprintln!("slowlink: request {seq} arrived where {expected} was due");
            }
            expected = seq + 1;
            if d.message.context == BUNDLED {
                bundle.put_u64(seq);
            } else {
                answers.push(
                    OutgoingMessage::new(ANSWERS, Bytes::copy_from_slice(&seq.to_be_bytes()))
                        .non_persistent(),
                );
            }
        }
        if !bundle.is_empty() {
            answers.push(OutgoingMessage::new(ANSWERS, bundle.freeze()).non_persistent());
        }
        client.send_batch(answers).await?;
    }
    let _ = broker.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

/// Flags of the client end.
#[derive(Debug, Clone, Args)]
pub struct ClientEnd {
    /// The broker.
    #[arg(long)]
    pub server: String,
    /// How to invoke.
    #[arg(long, value_enum)]
    pub mode: Mode,
    /// Requests to send.
    #[arg(long)]
    pub messages: u64,
    /// Requests per batch (bundled).
    #[arg(long, default_value_t = 100)]
    pub bundle: u32,
    /// Requests (pipelined) or batches (bundled) in flight.
    #[arg(long, default_value_t = 64)]
    pub window: u32,
}

/// What the client end reports (one JSON line).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct ClientOutcome {
    /// Seconds from the start to the end of the session (connections, the answers'
    /// subscription and the disconnect included).
    pub total_s: f64,
    /// Seconds from the first request to the last answer: the calls alone, without setting up
    /// and ending a session (for `per-call`, whose calls each connect, the same as `total_s`).
    pub calls_s: f64,
    /// Answers received.
    pub answers: u64,
    /// Answers out of order.
    pub out_of_order: u64,
}

/// The context that marks a bundled request (its answer may be bundled with others).
const BUNDLED: u64 = 1;

fn req(seq: u64) -> OutgoingMessage {
    OutgoingMessage::new(REQUESTS, request(seq)).non_persistent()
}

fn bundled_req(seq: u64) -> OutgoingMessage {
    let mut m = req(seq);
    m.context = BUNDLED;
    m
}

fn take_answer() -> Receive {
    Receive {
        source: Source::Queue(ANSWERS.to_string()),
        order: Order::Time,
        mode: ReceiveMode::Take,
        ack: AckMode::Auto,
        wait_ms: 30_000,
        selector: String::new(),
    }
}

/// Sends the requests in `end.mode` and waits for every answer.
pub async fn client(end: &ClientEnd) -> Result<ClientOutcome> {
    let n = end.messages;
    let name = format!("slowlink-client-{}", std::process::id());
    let started = Instant::now();
    let mut out_of_order = 0;
    let mut answers = 0;
    let mut calls = (started, None);
    match end.mode {
        Mode::PerCall | Mode::Sync => {
            let mut shared = None;
            for seq in 0..n {
                if shared.is_none() {
                    shared = Some(Client::connect(&end.server, &name).await?);
                }
                let c = shared.as_ref().ok_or_else(|| anyhow!("no connection"))?;
                if seq == 0 && end.mode == Mode::Sync {
                    calls.0 = Instant::now();
                }
                // The send and the long poll for its answer go out together: one round trip.
                let (sent, got) = tokio::join!(c.send(req(seq)), c.receive(take_answer()));
                sent?;
                let d = got?.ok_or_else(|| anyhow!("no answer to {seq} in 30 s"))?;
                if seq_of(&d.message.body) != Some(seq) {
                    out_of_order += 1;
                }
                answers += 1;
                calls.1 = Some(Instant::now());
                if end.mode == Mode::PerCall {
                    if let Some(c) = shared.take() {
                        c.disconnect().await?;
                    }
                }
            }
            if let Some(c) = shared {
                c.disconnect().await?;
            }
        }
        Mode::Pipelined | Mode::Bundled => {
            let c = Client::connect(&end.server, &name).await?;
            let mut sub = c
                .subscribe(Subscribe {
                    queue: ANSWERS.to_string(),
                    order: Order::Time,
                    ack: AckMode::Auto,
                    prefetch: 10_000,
                    selector: String::new(),
                })
                .await?;
            let bundle = if end.mode == Mode::Bundled {
                u64::from(end.bundle.max(1))
            } else {
                1
            };
            calls.0 = Instant::now();
            // One task issues the calls in order; `buffered` keeps `window` of them in flight
            // and polls each new one first in that order, so they leave in sequence.
            let sender = {
                let c = c.clone();
                let window = end.window.max(1) as usize;
                tokio::spawn(async move {
                    let calls = (0..n).step_by(bundle as usize).map(move |seq| {
                        let c = c.clone();
                        let make = if bundle > 1 { bundled_req } else { req };
                        let msgs: Vec<_> = (seq..(seq + bundle).min(n)).map(make).collect();
                        async move {
                            if msgs.len() == 1 {
                                let m = msgs.into_iter().next();
                                match m {
                                    Some(m) => c.send(m).await.is_ok(),
                                    None => true,
                                }
                            } else {
                                c.send_batch(msgs)
                                    .await
                                    .is_ok_and(|r| r.iter().all(Result::is_ok))
                            }
                        }
                    });
                    futures::stream::iter(calls)
                        .buffered(window)
                        .filter(|ok| std::future::ready(!ok))
                        .count()
                        .await
                })
            };
            let mut next = 0;
            let mut batch = Vec::new();
            while answers < n {
                batch.clear();
                let got = tokio::time::timeout(
                    Duration::from_secs(60),
                    sub.next_batch(&mut batch, 10_000),
                )
                .await
                .map_err(|_| anyhow!("no answer for 60 s after {answers} of {n}"))?;
                match got {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e.into()),
                    None => bail!("the answers' subscription ended"),
                }
                for d in &batch {
                    // An answer holds one sequence number, or those of a bundle.
                    for chunk in d.message.body.chunks(8) {
                        if seq_of(chunk) != Some(next) {
                            out_of_order += 1;
                        }
                        next += 1;
                        answers += 1;
                    }
                }
            }
            calls.1 = Some(Instant::now());
            let failed = sender.await.map_err(|e| anyhow!("sender: {e}"))?;
            if failed > 0 {
                bail!("{failed} sends failed");
            }
            sub.cancel().await;
            c.disconnect().await?;
        }
    }
    let ended = Instant::now();
    Ok(ClientOutcome {
        total_s: (ended - started).as_secs_f64(),
        calls_s: (calls.1.unwrap_or(ended) - calls.0).as_secs_f64(),
        answers,
        out_of_order,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_its_sequence_number_last() {
        let r = request(41);
        assert_eq!(r.len(), REQUEST_BYTES);
        assert_eq!(seq_of(&r), Some(41));
        assert_eq!(seq_of(&42u64.to_be_bytes()), Some(42));
        assert_eq!(seq_of(b"short"), None);
    }
}
