//! The embedded engine's receives: picking messages under the state lock in bounded steps
//! (a selector walks the ready index a step at a time), waiting for what they depend on to be
//! durable, and handing them out owned or lent.

use ferry_protocol::{Delivery, DeliveryView, Message, ReceiveMode};

use super::state::messages::{Handout, Walk};
use super::writer::{self, Ticket};
use crate::api::ReceiveSpec;
use crate::direct::DirectConsumer;
use crate::error::StoreError;

use super::store::{Class, EmbeddedStore};

/// Most ready entries a receive with a selector examines under one hold of the lock; a longer
/// walk goes on after other operations had their turn.
const SELECTOR_STEP: usize = 4096;

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
                        let ticket = if log.appended() || got.iter().any(|h| h.msg.persistent) {
                            log.ticket_if_pending()
                        } else {
                            None
                        };
                        (got, ticket)
                    })
            };
            match step {
                Ok((got, ticket)) => {
                    handouts.extend(got);
                    tickets.extend(ticket);
                }
                // Messages taken in earlier steps are handed out all the same (the queue may
                // have gone meanwhile): failing would lose auto-ack takes.
                Err(_) if !handouts.is_empty() => break,
                Err(e) => return Err(e),
            }
            if walk.end || handouts.len() >= max {
                break;
            }
            tokio::task::yield_now().await;
        }
        for ticket in tickets {
            writer::wait(Some(ticket)).await?;
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

fn delivery(h: Handout) -> Delivery {
    let m = &h.msg;
    Delivery {
        delivery_id: h.delivery_id,
        message: Message {
            id: m.id,
            queue: h.queue.clone().into(),
            sender: m.sender.clone().into(),
            receiver: m.receiver.as_deref().map(str::to_owned),
            priority: m.priority,
            context: m.context,
            properties: m.properties.clone(),
            body: m.body.clone(),
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
        id: m.id,
        queue: &h.queue,
        sender: &m.sender,
        receiver: m.receiver.as_deref(),
        priority: m.priority,
        context: m.context,
        created_at: m.created_at,
        delivery_count: h.delivery_count,
        properties: &m.properties,
        body: &m.body,
        expires_at: m.expires_at,
    }
}
