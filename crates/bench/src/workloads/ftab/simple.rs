//! The archetypes on plain queues: Alice (sends to random queues), Bob (pops from a random
//! queue), Carl (sends requests without waiting) and Rick (pops and drops them). Each is a
//! closed loop: one request, wait for its answer, the next.

use std::time::Instant;

use hdrhistogram::Histogram;

use crate::drivers::{From, ReceiveOne};

use super::ops::{Op, BACKOFF};
use super::plan::{Client, REQUEST_QUEUE};

/// Alice: sends to `targets_per_send` random queues, no receiver, until the run stops.
pub async fn alice(mut c: Client) -> Vec<Histogram<u64>> {
    let mut context = 0u64;
    while !c.stopping() {
        context += 1;
        let queues = c.plan.random_queues(c.plan.targets_per_send);
        let msg = c.plan.message(queues, None, context);
        if !send(&mut c, msg).await {
            break;
        }
    }
    c.rec.finish()
}

/// Carl: sends requests to the request queue without waiting for answers.
pub async fn carl(mut c: Client) -> Vec<Histogram<u64>> {
    let mut context = 0u64;
    while !c.stopping() {
        context += 1;
        let msg = c
            .plan
            .message(vec![REQUEST_QUEUE.to_string()], None, context);
        if !send(&mut c, msg).await {
            break;
        }
    }
    c.rec.finish()
}

/// Bob: pops the highest-priority message of a random queue, if any.
pub async fn bob(mut c: Client) -> Vec<Histogram<u64>> {
    while !c.stopping() {
        let queue = c.plan.random_queue();
        if !pop(&mut c, queue).await {
            break;
        }
    }
    c.rec.finish()
}

/// Rick: pops Carl's requests and drops them.
pub async fn rick(mut c: Client) -> Vec<Histogram<u64>> {
    while !c.stopping() {
        if !pop(&mut c, REQUEST_QUEUE.to_string()).await {
            break;
        }
    }
    c.rec.finish()
}

/// One timed send; `false` when the client must stop.
pub async fn send(c: &mut Client, msg: crate::drivers::OutMessage) -> bool {
    let started = Instant::now();
    match c.conn.send(msg).await {
        Ok(()) => {
            c.rec.done(Op::Send, started);
            true
        }
        Err(e) => {
            let fatal = c.rec.failed(Op::Send, &e);
            tokio::time::sleep(BACKOFF).await;
            !fatal
        }
    }
}

/// One timed pop from `queue`, recorded as a read or an empty read; `false` when the client
/// must stop.
pub async fn pop(c: &mut Client, queue: String) -> bool {
    take(c, From::Queue(queue)).await.is_ok()
}

/// One timed receive from `from`: `Ok(Some(body))` for a message, `Ok(None)` for none, `Err`
/// when the client must stop.
pub async fn take(c: &mut Client, from: From) -> Result<Option<crate::drivers::Received>, ()> {
    let started = Instant::now();
    let req = ReceiveOne {
        from,
        by_priority: c.plan.by_priority,
    };
    match c.conn.receive_one(req).await {
        Ok(Some(m)) => {
            c.rec.done(Op::Read, started);
            Ok(Some(m))
        }
        Ok(None) => {
            c.rec.done(Op::ReadEmpty, started);
            Ok(None)
        }
        Err(e) => {
            let fatal = c.rec.failed(Op::Read, &e);
            tokio::time::sleep(BACKOFF).await;
            if fatal {
                Err(())
            } else {
                Ok(None)
            }
        }
    }
}
