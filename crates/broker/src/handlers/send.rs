//! send and send_batch.

use ferry_protocol::packed::PackedBodies;
use ferry_protocol::{ErrorCode, ErrorReply, Name, OutgoingMessage, PublishBatch, Response};
use ferry_store::{PublishRun, RunStored, StoreError};

use super::{store_error, to_new, txn, validate, with_topic};
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::Stats;

/// send: one message on every named queue, all or none.
pub async fn send(shared: &Shared, session: &Session, m: OutgoingMessage) -> Response {
    if session.in_txn() {
        return match txn::hold_message(shared, session, m) {
            Some(Ok(())) => Response::Sent { id: 0 },
            Some(Err(e)) => Response::Error(e),
            None => Response::error(ErrorCode::TransactionState, "the transaction ended"),
        };
    }
    if let Err(e) = validate::message(&m, &shared.limits) {
        return Response::Error(e);
    }
    let queues = m.queues.clone();
    let topic = m.topic.clone();
    let delayed = m.delay_ms > 0;
    match shared
        .store
        .queues()
        .send(to_new(m, session, shared.now_ms()))
        .await
    {
        Ok(id) => {
            Stats::add(&shared.stats.messages_sent, 1);
            if topic.is_some() {
                Stats::add(&shared.stats.messages_published, 1);
            }
            if delayed {
                shared.delayed_sent.notify_one();
            }
            shared.wakers.notify(&queues);
            if let Some(t) = topic {
                shared.wakers.notify_topic(&t);
            }
            Response::Sent { id }
        }
        Err(e) => store_error(&e),
    }
}

/// send_batch: each item succeeds or fails on its own; one durability wait covers them all.
pub async fn send_batch(
    shared: &Shared,
    session: &Session,
    items: Vec<OutgoingMessage>,
) -> Response {
    if items.len() > shared.limits.max_batch as usize {
        return Response::error(
            ErrorCode::TooLarge,
            format!(
                "a batch of {} messages exceeds the limit of {}",
                items.len(),
                shared.limits.max_batch
            ),
        );
    }
    if session.in_txn() {
        let results = items
            .into_iter()
            .map(|m| match txn::hold_message(shared, session, m) {
                Some(Ok(())) => Ok(0),
                Some(Err(e)) => Err(e),
                None => Err(ErrorReply::new(
                    ErrorCode::TransactionState,
                    "the transaction ended",
                )),
            })
            .collect();
        return Response::BatchSent(results);
    }
    let now = shared.now_ms();
    let delayed = items.iter().any(|m| m.delay_ms > 0);
    // Items that fail validation keep their slot with the error; the rest go to the store.
    let mut results: Vec<Option<Result<u64, ErrorReply>>> = Vec::with_capacity(items.len());
    let mut valid = Vec::with_capacity(items.len());
    let mut touched: Vec<String> = Vec::new();
    let mut topics: Vec<Name> = Vec::new();
    let mut last_name = validate::LastValidName::default();
    let mut valid_topics = 0u64;
    for m in items {
        match validate::message_in_batch(&m, &shared.limits, &mut last_name) {
            Ok(()) => {
                for q in &m.queues {
                    if !touched.contains(q) {
                        touched.push(q.clone());
                    }
                }
                if let Some(t) = &m.topic {
                    valid_topics += 1;
                    if !topics.contains(t) {
                        topics.push(t.clone());
                    }
                }
                results.push(None);
                valid.push(to_new(m, session, now));
            }
            Err(e) => results.push(Some(Err(e))),
        }
    }
    let stored = if valid.is_empty() {
        Vec::new()
    } else {
        shared.store.queues().send_batch(valid).await
    };
    let (results, ok) = merge_results(results, stored);
    if ok > 0 {
        if delayed {
            shared.delayed_sent.notify_one();
        }
        Stats::add(&shared.stats.messages_sent, ok);
        if !topics.is_empty() {
            // Counted per batch with a publish in it: exact for the usual batch of one kind.
            let published = valid_topics.min(ok);
            Stats::add(&shared.stats.messages_published, published);
        }
        shared.wakers.notify(&touched);
        for t in &topics {
            shared.wakers.notify_topic(t);
        }
    }
    Response::BatchSent(results)
}

/// The reply's results: each slot's own (an item refused before the store), or else the
/// store's next one; and how many items were stored.
fn merge_results(
    slots: Vec<Option<Result<u64, ErrorReply>>>,
    stored: Vec<Result<u64, StoreError>>,
) -> (Vec<Result<u64, ErrorReply>>, u64) {
    let mut stored = stored.into_iter();
    let mut ok = 0u64;
    let results = slots
        .into_iter()
        .map(|slot| match slot {
            Some(r) => r,
            None => match stored.next() {
                Some(Ok(id)) => {
                    ok += 1;
                    Ok(id)
                }
                Some(Err(e)) => Err(ErrorReply::new(e.code(), e.to_string())),
                None => Err(ErrorReply::new(
                    ErrorCode::Internal,
                    "the store returned fewer results than messages",
                )),
            },
        })
        .collect();
    (results, ok)
}

/// publish_batch (version 6): every body a message of its own to one topic, the rest shared.
/// Each body succeeds or fails on its own, as in a `SendBatch`; the shared fields are checked
/// once, and the topic property is built once for the batch. A version 7 session whose every
/// body went in with consecutive ids gets `PublishedRun` instead of `BatchSent`.
pub async fn publish_batch(shared: &Shared, session: &Session, batch: PublishBatch) -> Response {
    if session.version() < ferry_protocol::PUBLISH_BATCH_VERSION {
        // What a broker of the session's version answers: it does not know the request.
        return Response::error(
            ErrorCode::UnknownRequest,
            format!(
                "PublishBatch needs protocol version {}; this session speaks {}",
                ferry_protocol::PUBLISH_BATCH_VERSION,
                session.version()
            ),
        );
    }
    if batch.bodies.len() > shared.limits.max_batch as usize {
        return Response::error(
            ErrorCode::TooLarge,
            format!(
                "a batch of {} messages exceeds the limit of {}",
                batch.bodies.len(),
                shared.limits.max_batch
            ),
        );
    }
    if session.in_txn() {
        let items = batch.bodies.handles().map(|b| batch.message(b)).collect();
        return send_batch(shared, session, items).await;
    }
    // The shared fields, checked once with an empty body standing for every message.
    if let Err(e) = validate::message(&batch.message(bytes::Bytes::new()), &shared.limits) {
        return Response::BatchSent(batch.bodies.iter().map(|_| Err(e.clone())).collect());
    }
    let now = shared.now_ms();
    let deliver_at_ms = match batch.delay_ms {
        0 => 0,
        d => now.saturating_add(d),
    };
    let expires_at_ms = match batch.ttl_ms {
        0 => 0,
        t => now.saturating_add(t),
    };
    let max_body = shared.limits.max_body_bytes as usize;
    let fits = |body: &[u8]| body.len() <= max_body;
    // Almost always every body fits, and the batch's packed bodies go to the store as they
    // came; otherwise the refused ones get their results here, and the others are packed
    // again.
    let n = batch.bodies.len();
    let (refused, bodies) = if batch.bodies.iter().all(fits) {
        (None, batch.bodies)
    } else {
        let refused: Vec<Option<Result<u64, ErrorReply>>> = batch
            .bodies
            .iter()
            .map(|body| {
                (!fits(body)).then(|| Err(validate::body_too_large(body.len(), &shared.limits)))
            })
            .collect();
        let kept = PackedBodies::pack(batch.bodies.iter().filter(|b| fits(b)));
        (Some(refused), kept)
    };
    let stored = if bodies.is_empty() {
        RunStored::Each(Vec::new())
    } else {
        let run = PublishRun {
            topic: batch.topic.clone(),
            persistent: batch.persistent,
            sender: session.sender.clone(),
            priority: batch.priority,
            properties: with_topic(batch.properties, Some(&batch.topic)),
            created_at: now,
            deliver_at_ms,
            expires_at_ms,
            bodies,
        };
        shared.store.queues().publish_run(run).await
    };
    // A version 7 client takes a run of consecutive ids, every body stored, in 12 bytes.
    let run = (session.version() >= ferry_protocol::DELIVER_RUN_VERSION && refused.is_none())
        .then(|| stored.consecutive())
        .flatten();
    let (reply, ok) = match run {
        Some((first_id, count)) => (Response::PublishedRun { first_id, count }, u64::from(count)),
        None => {
            let slots = refused.unwrap_or_else(|| vec![None; n]);
            let (results, ok) = merge_results(slots, stored.into_results());
            (Response::BatchSent(results), ok)
        }
    };
    if ok > 0 {
        if deliver_at_ms > 0 {
            shared.delayed_sent.notify_one();
        }
        Stats::add(&shared.stats.messages_sent, ok);
        Stats::add(&shared.stats.messages_published, ok);
        shared.wakers.notify_topic(&batch.topic);
    }
    reply
}
