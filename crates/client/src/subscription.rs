//! [`Subscription`]: the deliveries the broker pushes for one `subscribe` (to a queue) or
//! `subscribe_topic`, as an async stream.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use ferry_protocol::requests::Subscribe;
use ferry_protocol::{AckMode, Delivery, DeliveryId, Request, Response, SubscriptionId};

use crate::batch::DeliveryBatch;
use futures_core::Stream;
use tokio::sync::mpsc;

use crate::checks::check_str;
use crate::client::{expect_reply, Client};
use crate::connection::SubEvent;
use crate::error::ClientError;

impl Client {
    /// Starts a push subscription; read its deliveries from the returned [`Subscription`].
    pub async fn subscribe(&self, sub: Subscribe) -> Result<Subscription, ClientError> {
        check_str("queue name", &sub.queue)?;
        check_str("selector", &sub.selector)?;
        let (events_tx, events) = mpsc::unbounded_channel();
        let ack = sub.ack;
        let prefetch = sub.prefetch;
        let queue = sub.queue.clone();
        let reply = self
            .shared()
            .submit_subscribe(&Request::Subscribe(sub), events_tx)?
            .reply()
            .await?;
        let id = expect_reply!(reply, Response::Subscribed { subscription } => subscription)?;
        Ok(Subscription::new(
            id,
            queue,
            self.clone(),
            events,
            ack,
            prefetch,
        ))
    }
}

/// A push subscription on one queue, or on one subscription of a topic (whose messages are
/// held by the queue `topic:name`, see [`Subscription::queue`]).
///
/// Read it with [`Subscription::next`], as a [`Stream`], many at a time with
/// [`Subscription::next_batch`], or as the broker pushed them, read in place, with
/// [`Subscription::next_deliveries`] (the cheapest per delivery). The broker pushes at most `prefetch` deliveries ahead of the
/// application:
/// - with [`AckMode::Auto`], this subscription grants credit back by itself as deliveries are
///   consumed (a `Credit` request each time at least half the prefetch has been taken);
/// - with [`AckMode::Client`], settling deliveries ([`Client::ack`], [`Client::nack`], or
///   [`Subscription::ack`]) restores the credit.
///
/// The stream ends (`None`) after an error item: the broker closed the subscription (its queue
/// was deleted, for instance: [`ClientError::Server`]) or the connection is gone
/// ([`ClientError::Closed`]). Deliveries that arrived before are still yielded first.
///
/// [`Subscription::cancel`] ends it; dropping it cancels it too, without waiting. Either way,
/// auto-ack deliveries already pushed but not yet read are lost (they were taken from the queue
/// when pushed: at most once), and client-ack ones go back to their queue. Ending a non-durable
/// topic subscription's consumer removes the subscription itself, with what it still holds; a
/// durable one stays, with its backlog, for the next consumer.
pub struct Subscription {
    id: SubscriptionId,
    /// The queue deliveries come from.
    queue: String,
    client: Client,
    events: mpsc::UnboundedReceiver<SubEvent>,
    /// Deliveries received and not yet handed to the application (no batch here is empty).
    buffer: VecDeque<DeliveryBatch>,
    /// Why the subscription ended, received while a batch was being handed over: reported
    /// once the deliveries before it have been.
    ended: Option<ClientError>,
    ack: AckMode,
    prefetch: u32,
    /// Auto ack: deliveries consumed since the last credit grant.
    consumed: u32,
    /// The stream has ended, or the subscription was cancelled: nothing left to do on drop.
    finished: bool,
}

impl Subscription {
    pub(crate) fn new(
        id: SubscriptionId,
        queue: String,
        client: Client,
        events: mpsc::UnboundedReceiver<SubEvent>,
        ack: AckMode,
        prefetch: u32,
    ) -> Self {
        Subscription {
            id,
            queue,
            client,
            events,
            buffer: VecDeque::new(),
            ended: None,
            ack,
            prefetch,
            consumed: 0,
            finished: false,
        }
    }

    /// The broker's id for this subscription.
    pub fn id(&self) -> SubscriptionId {
        self.id
    }

    /// The queue the deliveries come from: the subscribed queue, or for a topic subscription
    /// the queue holding its messages, `topic:name` (for a non-durable one, `name` is the one
    /// the broker gave it). Receives may name it too.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// How deliveries are settled.
    pub fn ack_mode(&self) -> AckMode {
        self.ack
    }

    /// Most deliveries pushed ahead of the application.
    pub fn prefetch(&self) -> u32 {
        self.prefetch
    }

    /// The next delivery; `None` once the subscription has ended (after an `Err` item saying
    /// why).
    pub async fn next(&mut self) -> Option<Result<Delivery, ClientError>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// Appends to `out` the deliveries at hand, at most `max` (at least one: waits for the first
    /// when none is there), in the order they were pushed. Cheaper per delivery than
    /// [`Subscription::next`] when deliveries come in bursts.
    ///
    /// Returns the number appended; `Some(Err(_))` when the subscription has ended (after the
    /// deliveries received before the end), and `None` after that. A pending call dropped before
    /// it completes takes nothing.
    pub async fn next_batch(
        &mut self,
        out: &mut Vec<Delivery>,
        max: usize,
    ) -> Option<Result<usize, ClientError>> {
        std::future::poll_fn(|cx| self.poll_next_batch(cx, out, max)).await
    }

    /// Polls for [`Subscription::next_batch`]: appends the deliveries at hand to `out`, at most
    /// `max` (at least one), or registers `cx` to be woken when there are some.
    pub fn poll_next_batch(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut Vec<Delivery>,
        max: usize,
    ) -> Poll<Option<Result<usize, ClientError>>> {
        let max = max.max(1);
        let mut taken = 0;
        loop {
            while taken < max {
                let Some(front) = self.buffer.front_mut() else {
                    break;
                };
                taken += front.take_into(out, max - taken);
                if front.is_empty() {
                    self.buffer.pop_front();
                }
            }
            if taken == max || self.finished {
                break;
            }
            if let Some(e) = self.ended.take() {
                if taken > 0 {
                    self.ended = Some(e);
                    break;
                }
                self.finished = true;
                return Poll::Ready(Some(Err(e)));
            }
            if self.poll_event(cx).is_pending() {
                break;
            }
        }
        if taken > 0 {
            self.consumed(taken);
            Poll::Ready(Some(Ok(taken)))
        } else if self.finished {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    }

    /// The deliveries at hand as one [`DeliveryBatch`], as the broker pushed them (waits for
    /// some when none is there): read them in place with [`DeliveryBatch::iter`], without a
    /// [`Delivery`] built (and its names, properties and body reference-counted) per delivery.
    /// The cheapest way to read many small deliveries.
    ///
    /// A batch is what arrived for this subscription in one read from the connection (up to a
    /// few thousand deliveries), or the rest of it when [`Subscription::next`] or
    /// [`Subscription::next_batch`] took some of it; it is never empty. The deliveries count
    /// as consumed (for an auto-ack subscription's credit) when the batch is handed over.
    ///
    /// `Some(Err(_))` when the subscription has ended (after the deliveries received before
    /// the end), and `None` after that. A pending call dropped before it completes takes
    /// nothing.
    pub async fn next_deliveries(&mut self) -> Option<Result<DeliveryBatch, ClientError>> {
        std::future::poll_fn(|cx| self.poll_next_deliveries(cx)).await
    }

    /// Polls for [`Subscription::next_deliveries`]: the deliveries at hand as one batch, or
    /// registers `cx` to be woken when there are some.
    pub fn poll_next_deliveries(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<DeliveryBatch, ClientError>>> {
        loop {
            if let Some(batch) = self.buffer.pop_front() {
                self.consumed(batch.len());
                return Poll::Ready(Some(Ok(batch)));
            }
            if let Some(end) = self.end() {
                return Poll::Ready(end);
            }
            ready!(self.poll_event(cx));
        }
    }

    /// Waits for the reader's next event for this subscription: a batch joins the buffer, its
    /// end is noted (and taken by [`Subscription::end`] once the buffer is empty).
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match ready!(self.events.poll_recv(cx)) {
            Some(SubEvent::Batch(batch)) => self.buffer.push_back(batch),
            Some(SubEvent::Closed(e)) => self.ended = Some(e),
            None => self.finished = true,
        }
        Poll::Ready(())
    }

    /// With nothing buffered: the subscription's end if it has come (`Some(Err(_))` the first
    /// time, then `None`), or `None` when there may be more.
    fn end<T>(&mut self) -> Option<Option<Result<T, ClientError>>> {
        if self.finished {
            return Some(None);
        }
        let e = self.ended.take()?;
        self.finished = true;
        Some(Some(Err(e)))
    }

    /// Settles client-ack deliveries (same as [`Client::ack`]), giving their credit back.
    pub async fn ack(&self, ids: &[DeliveryId]) -> Result<(), ClientError> {
        self.client.ack(ids).await
    }

    /// Ends the subscription and waits until the broker has confirmed it. Errors are logged
    /// (see [`Subscription::try_cancel`] to get them).
    pub async fn cancel(self) {
        let id = self.id;
        if let Err(e) = self.try_cancel().await {
            tracing::debug!("cancel of subscription {id}: {e}");
        }
    }

    /// Ends the subscription and waits until the broker has confirmed it. Succeeds at once if
    /// it had already ended.
    pub async fn try_cancel(mut self) -> Result<(), ClientError> {
        let shared = self.client.shared().clone();
        shared.forget_subscription(self.id);
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        shared
            .call(&Request::Cancel {
                subscription: self.id,
            })
            .await
            .map(|_| ())
    }

    /// Auto ack: grants credit back once half the prefetch has been consumed.
    fn consumed(&mut self, n: usize) {
        if self.ack != AckMode::Auto {
            return;
        }
        self.consumed = self
            .consumed
            .saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        if self.consumed >= (self.prefetch / 2).max(1) {
            let credit = std::mem::take(&mut self.consumed);
            self.client.shared().send_and_forget(
                &Request::Credit {
                    subscription: self.id,
                    credit,
                },
                "credit",
            );
        }
    }
}

impl Stream for Subscription {
    type Item = Result<Delivery, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(front) = self.buffer.front_mut() {
                let d = front.pop_front();
                if front.is_empty() {
                    self.buffer.pop_front();
                }
                if let Some(d) = d {
                    self.consumed(1);
                    return Poll::Ready(Some(Ok(d)));
                }
                continue;
            }
            if let Some(end) = self.end() {
                return Poll::Ready(end);
            }
            ready!(self.poll_event(cx));
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let shared = self.client.shared();
        shared.forget_subscription(self.id);
        if !self.finished && !shared.is_closed() {
            shared.send_and_forget(
                &Request::Cancel {
                    subscription: self.id,
                },
                "cancel",
            );
        }
        // Client-ack deliveries received but never read go back to their queue.
        let mut unread: Vec<DeliveryId> =
            self.buffer.iter().flat_map(|b| b.delivery_ids()).collect();
        while let Ok(event) = self.events.try_recv() {
            if let SubEvent::Batch(ds) = event {
                unread.extend(ds.delivery_ids());
            }
        }
        unread.retain(|&id| id != 0);
        if !unread.is_empty() && !shared.is_closed() {
            shared.send_and_forget(
                &Request::Nack {
                    ids: unread,
                    requeue: true,
                },
                "returning deliveries",
            );
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("queue", &self.queue)
            .field("ack", &self.ack)
            .field("prefetch", &self.prefetch)
            .field("finished", &self.finished)
            .finish()
    }
}
