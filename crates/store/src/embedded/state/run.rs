//! A run of bodies published to one topic with every other field shared (see
//! [`crate::api::PublishRun`]), handed to the topic's direct consumers in one step: the shared
//! fields checked once, the subscriptions looked up once, one credit reservation per consumer
//! for the whole run, and ids in one range, with no message built, checked or dropped per body.
//! A run that cannot go this way goes message by message, as a `send_batch` of its messages.

use std::sync::Arc;

use ferry_protocol::{DeliveryView, MessageId, MAX_PRIORITY, MIN_PRIORITY};

use super::super::format::codec::{properties_fit, str_fits};
use super::super::writer::LogGuard;
use super::messages::BatchMemo;
use super::State;
use crate::api::PublishRun;
use crate::direct::DirectConsumer;

impl State {
    /// Publishes `run` straight to the direct consumers of its topic's subscriptions and
    /// returns the id its first body got (the others follow it); `None`, with nothing changed,
    /// unless [`crate::direct`]'s conditions hold for every body and every subscription: the run is
    /// non-persistent and visible at once, its fields would be accepted, no subscription has a
    /// selector, each has exactly one direct consumer and nothing ready on its queue, and every
    /// consumer has room for the whole run. A topic with no subscription takes the run too: its
    /// messages get ids and are stored nowhere, as a publish of each would.
    pub fn publish_run_direct(
        &mut self,
        log: &mut LogGuard<'_>,
        run: &PublishRun,
    ) -> Option<MessageId> {
        let n = u32::try_from(run.bodies.len()).ok()?;
        if n == 0
            || run.persistent
            || run.deliver_at_ms != 0
            || self.group.is_some()
            || !(MIN_PRIORITY..=MAX_PRIORITY).contains(&run.priority)
            || run.sender.is_empty()
            || !str_fits(&run.sender)
            || !properties_fit(&run.properties)
            || self.check_publish(&run.topic).is_err()
        {
            return None;
        }
        let targets = self.unfiltered_targets(&run.topic)?;
        let mut consumers: Vec<(Arc<dyn DirectConsumer>, &str)> = Vec::with_capacity(targets.len());
        for &qk in &targets {
            let consumer = self.direct.only(qk)?;
            let q = self.queues.get(&qk)?;
            if q.ready_count != 0 {
                // A backlog goes first: the message-by-message path hands it over ahead of
                // the publishes when it can.
                return None;
            }
            consumers.push((consumer.clone(), &q.name));
        }
        // All or none: a consumer without room for the run leaves it to the slower path,
        // which queues what it cannot take.
        for (at, (consumer, _)) in consumers.iter().enumerate() {
            if !consumer.try_reserve(n) {
                for (taken, _) in consumers.iter().take(at) {
                    taken.unreserve(n);
                }
                return None;
            }
        }
        // The sender is registered if it is new (a record in the log), as a publish does.
        let consumers: Vec<(Arc<dyn DirectConsumer>, Arc<str>)> = consumers
            .into_iter()
            .map(|(c, name)| (c, Arc::from(name)))
            .collect();
        if self
            .sender_key(log, &run.sender, &mut BatchMemo::default())
            .is_err()
        {
            for (consumer, _) in &consumers {
                consumer.unreserve(n);
            }
            return None;
        }
        let first = self.next_id;
        self.next_id += u64::from(n);
        self.expect_publishes(run.bodies.len());
        for (consumer, queue) in &consumers {
            let template = DeliveryView {
                delivery_id: 0,
                id: first,
                queue,
                sender: &run.sender,
                receiver: None,
                priority: run.priority,
                context: 0,
                created_at: run.created_at,
                delivery_count: 0,
                properties: &run.properties,
                body: &[],
                expires_at: run.expires_at_ms,
            };
            self.direct
                .push_run(consumer, &template, first, &run.bodies);
        }
        Some(first)
    }
}
