//! Tola and Maruja: request/reply pairs over one queue per pair. Tola sends a request
//! addressed to its Maruja with a fresh context and then reads from its Maruja (by sender)
//! until the reply with that context arrives; the time from request to reply is recorded as
//! `request_reply`. Maruja polls the pair's queue (where only messages addressed to her or to
//! nobody are visible to her) and answers each request, addressed to Tola, with the same
//! context. The context travels in the body header, as the drivers carry no context field.

use std::time::Instant;

use hdrhistogram::Histogram;

use crate::drivers::From;

use super::ops::Op;
use super::plan::Client;
use super::simple::{send, take};
use super::text::header;

/// Runs one Tola, talking to `maruja` over `queue`, until the run stops.
pub async fn tola(mut c: Client, maruja: String, queue: String) -> Vec<Histogram<u64>> {
    let mut context = 0u64;
    'requests: while !c.stopping() {
        context += 1;
        let request = c
            .plan
            .message(vec![queue.clone()], Some(maruja.clone()), context);
        let started = Instant::now();
        if !send(&mut c, request).await {
            break;
        }
        loop {
            if c.stopping() {
                break 'requests;
            }
            let Ok(got) = take(&mut c, From::Sender(maruja.clone())).await else {
                break 'requests;
            };
            let Some(reply) = got else { continue };
            if header(&reply.body) == Some((context, c.plan.run_id)) {
                c.rec.done(Op::RequestReply, started);
                break;
            }
            // A reply to an earlier run's request: dropped.
        }
    }
    c.rec.finish()
}

/// Runs one Maruja, answering `tola` on `queue`, until the run stops.
pub async fn maruja(mut c: Client, tola: String, queue: String) -> Vec<Histogram<u64>> {
    while !c.stopping() {
        let Ok(got) = take(&mut c, From::Queue(queue.clone())).await else {
            break;
        };
        let Some(request) = got else { continue };
        let Some((context, run_id)) = header(&request.body) else {
            continue;
        };
        if run_id != c.plan.run_id {
            continue;
        }
        let reply = c
            .plan
            .message(vec![queue.clone()], Some(tola.clone()), context);
        if !send(&mut c, reply).await {
            break;
        }
    }
    c.rec.finish()
}
