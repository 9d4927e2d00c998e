//! The embedded engine's receives: picking messages under the state lock in bounded steps
//! (a selector walks the ready index a step at a time), waiting for what they depend on to be
//! durable, reading the bodies that are not cached from the log (without the lock), and
//! handing them out owned or lent.
//!
//! A body read that fails is retried (its record may have moved: compaction); if it still
//! fails, the message goes back to its queue (an auto-ack take is held, not removed, until its
//! body is read) and the receive reports the error unless it has other messages to hand out.

use std::time::Duration;

use ferry_protocol::{Delivery, DeliveryId, DeliveryView, Message, MessageId, ReceiveMode};

use super::bodies::{body_of, properties_of, Location};
use super::state::messages::{Handout, Walk};
use super::writer::{self, Ticket};
use crate::api::ReceiveSpec;
use crate::direct::DirectConsumer;
use crate::error::StoreError;

use super::store::{Class, EmbeddedStore};

/// Most ready entries a receive with a selector examines under one hold of the lock; a longer
/// walk goes on after other operations had their turn.
const SELECTOR_STEP: usize = 4096;

/// Tries of a body read before the message goes back to its queue.
const READ_TRIES: u32 = 3;

/// Pause before the first retry of failed body reads; doubled at each further one.
const READ_RETRY_PAUSE: Duration = Duration::from_millis(5);

impl EmbeddedStore {
    /// The messages a receive hands out, once everything they depend on is durable.
    async fn receive_handouts(
        &self,
        spec: &ReceiveSpec,
        max: usize,
        taker: Option<&dyn DirectConsumer>,
    ) -> Result<Vec<Handout>, StoreError> {
        let mut max = max.max(1);
        if spec.mode == ReceiveMode::Take {
            self.admit(Class::Frees).await?;
        }
        // Peeks too: while a failed write is carried, the in-memory state is ahead of the log,
        // and a peek must not show what a crash could still take back.
        self.writable().await?;
        // A selector passes over messages, so its walk may be long: it is done in steps of
        // at most SELECTOR_STEP entries, letting other operations have the lock in between.
        let budget = if spec.selector.is_some() {
            SELECTOR_STEP
        } else {
            usize::MAX
        };
        // A consumer with a selector is never a taker (see crate::direct), so a taker's receive
        // is one step.
        let taker = taker.filter(|_| spec.selector.is_none());
        let mut walk = Walk::default();
        let mut handouts: Vec<Handout> = Vec::new();
        let mut tickets: Vec<Ticket> = Vec::new();
        // What is taken must not stay leased to a receive that never returns it: dropped at an
        // await (its caller gave up on it) or failed, it puts it back.
        let mut unhanded = Unhanded::new(self, &[]);
        let mut failed_reads = 0;
        loop {
            let step = {
                let mut st = self.state();
                let mut log = self.log.lock();
                if let Some(taker) = taker {
                    // Under the lock, so that publishes see the consumer as taking only while
                    // a batch is really on its way (see crate::direct).
                    max = max.min(taker.begin_take() as usize);
                    if max == 0 {
                        taker.end_take(0);
                        return Ok(Vec::new());
                    }
                }
                st.receive(&mut log, spec, max - handouts.len(), &mut walk, budget)
                    .map(|(got, _wrote)| {
                        if got.is_empty() {
                            // Nothing to wait for: direct deliveries may go on at once.
                            if let Some(taker) = taker {
                                taker.end_take(0);
                            }
                        }
                        // Whatever is handed out must be durable first: a peek must not show
                        // a message whose send may still be lost, and a take's records must be
                        // on disk. Records are in state order, so the current batch covers
                        // everything the handouts depend on. Non-persistent messages depend
                        // on no record.
                        let ticket = if log.appended() || got.iter().any(|h| h.msg.persistent()) {
                            log.ticket_if_pending()
                        } else {
                            None
                        };
                        (got, ticket)
                    })
            };
            match step {
                Ok((got, ticket)) => {
                    unhanded.add(&got);
                    handouts.extend(got);
                    tickets.extend(ticket);
                }
                // Messages taken in earlier steps are handed out all the same (the queue may
                // have gone meanwhile): failing would lose auto-ack takes.
                Err(_) if !handouts.is_empty() => break,
                Err(e) => return Err(e),
            }
            if handouts.len() >= max {
                break;
            }
            if !walk.wanted.is_empty() {
                // The selector needs properties that are in the log only: read them without
                // the lock, then walk the same entries again.
                match self
                    .read_wanted_properties(&mut walk, &mut failed_reads)
                    .await
                {
                    Ok(()) => continue,
                    // What earlier steps took is handed out; nothing was taken for the
                    // messages whose properties could not be read.
                    Err(_) if !handouts.is_empty() => break,
                    Err(e) => return Err(e),
                }
            }
            if walk.end {
                break;
            }
            tokio::task::yield_now().await;
        }
        for ticket in tickets {
            writer::wait(Some(ticket)).await?;
        }
        let handouts = self.read_bodies(handouts, &mut unhanded).await?;
        unhanded.disarm();
        Ok(handouts)
    }

    /// Reads the properties a selector's step asked for (`walk.wanted`) from the log, without
    /// the state lock, into `walk.known`. A failed read is tried again by the next step, which
    /// looks the record up again (compaction may have moved it); after [`READ_TRIES`] failed
    /// rounds the receive reports the error.
    async fn read_wanted_properties(
        &self,
        walk: &mut Walk,
        failed_reads: &mut u32,
    ) -> Result<(), StoreError> {
        let wanted = walk.wanted.clone();
        let reader = self.bodies.clone();
        let read = tokio::task::spawn_blocking(move || {
            reader.read_many_with(&wanted, |frame, id, segment| {
                properties_of(frame, id, segment)
            })
        })
        .await
        .map_err(|e| StoreError::Internal(format!("property read task failed: {e}")))?;
        let mut failure = None;
        for ((id, _), got) in walk.wanted.iter().zip(read) {
            match got {
                Ok(properties) => {
                    walk.known.insert(*id, properties);
                }
                Err(e) => failure = Some(format!("message {id}: {e}")),
            }
        }
        let Some(failure) = failure else {
            return Ok(());
        };
        *failed_reads += 1;
        if *failed_reads >= READ_TRIES {
            tracing::warn!(last_error = %failure,
                "message properties could not be read from the log for a selector");
            return Err(StoreError::Unavailable(format!(
                "reading message properties from the log failed: {failure}"
            )));
        }
        tokio::time::sleep(READ_RETRY_PAUSE * 2u32.pow(*failed_reads - 1)).await;
        Ok(())
    }

    /// Reads the bodies the handouts lack from the log, without the state lock, retrying
    /// failures; then removes the auto-ack takes held for their read, and puts back the
    /// messages whose body could not be read. Returns the handouts that have their body.
    async fn read_bodies(
        &self,
        mut handouts: Vec<Handout>,
        unhanded: &mut Unhanded<'_>,
    ) -> Result<Vec<Handout>, StoreError> {
        if handouts.iter().all(|h| h.body.is_some()) {
            return Ok(handouts);
        }
        let mut failure = String::new();
        let mut pause = READ_RETRY_PAUSE;
        for attempt in 0..READ_TRIES {
            if attempt > 0 {
                tokio::time::sleep(pause).await;
                pause *= 2;
                // Compaction may have moved a record meanwhile: look the places up again.
                let st = self.state();
                for h in handouts.iter_mut().filter(|h| h.body.is_none()) {
                    h.at = st.location(h.id);
                }
            }
            let wanted: Vec<(MessageId, Option<Location>)> = handouts
                .iter()
                .filter(|h| h.body.is_none())
                .map(|h| (h.id, h.at))
                .collect();
            // Properties in the log only come from the same records.
            let pending: std::collections::HashSet<MessageId> = handouts
                .iter()
                .filter(|h| h.properties_pending)
                .map(|h| h.id)
                .collect();
            let reader = self.bodies.clone();
            let read = tokio::task::spawn_blocking(move || {
                reader.read_many_with(&wanted, |frame, id, segment| {
                    let body = body_of(frame, id, segment)?;
                    let properties = pending
                        .contains(&id)
                        .then(|| properties_of(frame, id, segment))
                        .transpose()?;
                    Ok((body, properties))
                })
            })
            .await
            .map_err(|e| StoreError::Internal(format!("body read task failed: {e}")))?;
            // The same handouts, in the same order, as `wanted` listed.
            let mut failed = false;
            for (h, got) in handouts.iter_mut().filter(|h| h.body.is_none()).zip(read) {
                match got {
                    Ok((body, properties)) => {
                        h.body = Some(body);
                        if let Some(properties) = properties {
                            h.properties = properties;
                            h.properties_pending = false;
                        }
                    }
                    Err(e) => {
                        failure = format!("message {}: {e}", h.id);
                        failed = true;
                    }
                }
            }
            if !failed {
                break;
            }
        }
        let missing = handouts.iter().filter(|h| h.body.is_none()).count();
        if missing > 0 {
            tracing::warn!(failed = missing, last_error = %failure,
                "message bodies could not be read from the log; the messages stay queued");
        }
        let held = handouts.iter().any(|h| h.held != 0);
        if held || missing > 0 {
            let ticket = {
                let mut st = self.state();
                let mut log = self.log.lock();
                for h in &mut handouts {
                    let lease = if h.held != 0 { h.held } else { h.delivery_id };
                    if h.body.is_none() {
                        if lease != 0 {
                            st.put_back(lease);
                        }
                    } else if h.held != 0 && !st.finish_take(&mut log, h.held) {
                        // Released meanwhile (its session ended): it is queued again.
                        h.body = None;
                    }
                }
                log.ticket_if_pending()
            };
            // Every lease was ended or put back under the lock just now.
            unhanded.disarm();
            writer::wait(ticket).await?;
        }
        let before = handouts.len();
        handouts.retain(|h| h.body.is_some());
        if handouts.is_empty() && before > 0 && missing > 0 {
            return Err(StoreError::Unavailable(format!(
                "reading message bodies from the log failed: {failure}"
            )));
        }
        Ok(handouts)
    }

    /// [`Queues::receive`](crate::Queues::receive): the handouts as owned deliveries.
    pub(super) async fn receive_deliveries(
        &self,
        spec: &ReceiveSpec,
        max: usize,
    ) -> Result<Vec<Delivery>, StoreError> {
        let handouts = self.receive_handouts(spec, max, None).await?;
        Ok(handouts.into_iter().map(delivery).collect())
    }

    /// [`Queues::receive_with`](crate::Queues::receive_with): each handout lent to `sink`; returns how many.
    pub(super) async fn receive_into(
        &self,
        spec: &ReceiveSpec,
        max: usize,
        taker: Option<&dyn DirectConsumer>,
        sink: &mut (dyn for<'v> FnMut(usize, DeliveryView<'v>) + Send),
    ) -> Result<usize, StoreError> {
        let handouts = self.receive_handouts(spec, max, taker).await?;
        for h in &handouts {
            sink(handouts.len(), view(h));
        }
        Ok(handouts.len())
    }
}

/// The leases a receive holds for messages it has not handed out yet: the auto-ack takes held
/// for their body's read ([`Handout::held`]), client-ack leases and the caller's holds. If the
/// receive is dropped at an await (its caller gave up on it) or returns an error before handing
/// them out, nobody will ever settle them, so they are put back on their queues at once, as
/// they were, instead of staying leased until the session ends (or forever, for a held take:
/// it has no deadline).
struct Unhanded<'a> {
    store: &'a EmbeddedStore,
    leases: Vec<DeliveryId>,
}

impl<'a> Unhanded<'a> {
    fn new(store: &'a EmbeddedStore, handouts: &[Handout]) -> Self {
        let leases = handouts
            .iter()
            .map(|h| if h.held != 0 { h.held } else { h.delivery_id })
            .filter(|&lease| lease != 0)
            .collect();
        Unhanded { store, leases }
    }

    /// Takes on the leases of `handouts` too.
    fn add(&mut self, handouts: &[Handout]) {
        self.leases.extend(
            handouts
                .iter()
                .map(|h| if h.held != 0 { h.held } else { h.delivery_id })
                .filter(|&lease| lease != 0),
        );
    }

    /// The handouts were settled or handed out: nothing to put back.
    fn disarm(&mut self) {
        self.leases.clear();
    }
}

impl Drop for Unhanded<'_> {
    fn drop(&mut self) {
        if self.leases.is_empty() {
            return;
        }
        // No record is written: a held take wrote none, and a client-ack delivery's start
        // stays counted (as when its lease expires).
        let mut st = self.store.state();
        for &lease in &self.leases {
            st.put_back(lease);
        }
        tracing::debug!(
            messages = self.leases.len(),
            "a receive ended before handing out what it took; put back"
        );
    }
}

fn delivery(h: Handout) -> Delivery {
    let m = &h.msg;
    Delivery {
        delivery_id: h.delivery_id,
        message: Message {
            id: h.id,
            queue: h.queue.clone().into(),
            sender: h.sender.clone().into(),
            receiver: h.receiver.as_deref().map(str::to_owned),
            priority: m.priority,
            context: m.context,
            properties: h.properties,
            body: h.body.unwrap_or_default(),
            created_at: m.created_at,
            delivery_count: h.delivery_count,
            expires_at: m.expires_at,
        },
    }
}

/// A handout, borrowed as a delivery (what a push subscription encodes).
fn view(h: &Handout) -> DeliveryView<'_> {
    let m = &h.msg;
    DeliveryView {
        delivery_id: h.delivery_id,
        id: h.id,
        queue: &h.queue,
        sender: &h.sender,
        receiver: h.receiver.as_deref(),
        priority: m.priority,
        context: m.context,
        created_at: m.created_at,
        delivery_count: h.delivery_count,
        properties: &h.properties,
        body: h.body.as_deref().unwrap_or_default(),
        expires_at: m.expires_at,
    }
}
