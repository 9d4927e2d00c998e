//! Larry: sends one message to a random queue addressed to a random Larry, then repeatedly
//! asks which queues hold messages for it (recorded as "query found" or "query not found"),
//! pops one from the first such queue, and bounces it to another random queue and Larry. The
//! Larrys keep as many messages circulating as there are Larrys.

use std::time::Instant;

use hdrhistogram::Histogram;

use crate::drivers::From;

use super::ops::{Op, BACKOFF};
use super::plan::Client;
use super::simple::{send, take};

/// Runs one Larry until the run stops.
pub async fn larry(mut c: Client) -> Vec<Histogram<u64>> {
    let mut context = 1u64;
    let first = c.plan.message(
        vec![c.plan.random_queue()],
        Some(c.plan.random_larry(&c.name)),
        context,
    );
    if !send(&mut c, first).await {
        return c.rec.finish();
    }
    while !c.stopping() {
        let started = Instant::now();
        let waiting = match c.conn.waiting_queues().await {
            Ok(w) => w,
            Err(e) => {
                if c.rec.failed(Op::QueryFound, &e) {
                    break;
                }
                tokio::time::sleep(BACKOFF).await;
                continue;
            }
        };
        let Some(queue) = waiting.into_iter().next() else {
            c.rec.done(Op::QueryNotFound, started);
            continue;
        };
        c.rec.done(Op::QueryFound, started);
        let Ok(got) = take(&mut c, From::Queue(queue)).await else {
            break;
        };
        if got.is_none() {
            continue;
        }
        context += 1;
        let to = c.plan.random_larry(&c.name);
        let bounce = c
            .plan
            .message(vec![c.plan.random_queue()], Some(to), context);
        if !send(&mut c, bounce).await {
            break;
        }
    }
    c.rec.finish()
}
