//! [`DeliveryBatch`]: deliveries pushed for one subscription, kept as the reader decoded them:
//! the bytes read, the names and properties they share once, and each delivery's own fields
//! with its body as a place in those bytes.
//!
//! A [`Delivery`] holds its queue, sender, properties and body by reference count. Built by
//! the reader task and dropped by the application's task, each of those counts was taken on
//! one core and released on another, every delivery touching the same few counters: for
//! small messages that cost more than decoding them. A batch takes one reference to the bytes
//! read and one per distinct head, whichever task reads it; a [`Delivery`] is built only when
//! one is asked for ([`Subscription::next`](crate::Subscription::next)), on the task that asks.

use std::ops::Range;

use bytes::Bytes;
use ferry_protocol::deliver_batch::BatchEntry;
use ferry_protocol::{Delivery, DeliveryId, DeliveryView, Name, Properties};

/// Deliveries pushed for one subscription, in the order the broker pushed them, handed over
/// whole by [`Subscription::next_deliveries`](crate::Subscription::next_deliveries).
///
/// Reading them with [`DeliveryBatch::iter`] borrows each delivery's names, properties and
/// body from the batch: nothing is allocated or reference-counted per delivery. Iterating the
/// batch by value ([`IntoIterator`]) yields owned [`Delivery`]s instead.
///
/// The batch keeps the bytes it was read from alive (a few hundred KiB at most) until it is
/// dropped: drop it once handled rather than keeping it.
///
/// ```no_run
/// # async fn demo(mut sub: ferry_client::Subscription) -> Result<(), ferry_client::ClientError> {
/// while let Some(batch) = sub.next_deliveries().await {
///     let batch = batch?;
///     let bytes: usize = batch.iter().map(|d| d.body.len()).sum();
///     println!("{} deliveries, {bytes} bytes", batch.len());
///     // Client ack: settle them all at once.
///     let ids: Vec<_> = batch.delivery_ids().filter(|&id| id != 0).collect();
///     if !ids.is_empty() {
///         sub.ack(&ids).await?;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct DeliveryBatch {
    /// The bytes read that hold the bodies.
    run: Bytes,
    /// What deliveries share: queue, sender, properties.
    heads: Vec<Head>,
    entries: Vec<Entry>,
    /// Entries before this one were handed out already.
    next: usize,
}

/// The fields a run of deliveries shares.
#[derive(Clone)]
struct Head {
    queue: Name,
    sender: Name,
    properties: Properties,
}

/// One delivery's own fields.
#[derive(Clone)]
struct Entry {
    fields: BatchEntry,
    /// Its index in `heads`.
    head: usize,
}

impl DeliveryBatch {
    /// An empty batch whose bodies will be in `run`.
    pub(crate) fn new(run: Bytes, capacity: usize) -> Self {
        DeliveryBatch {
            run,
            heads: Vec::new(),
            entries: Vec::with_capacity(capacity),
            next: 0,
        }
    }

    /// Deliveries in the batch (not yet taken from it).
    pub fn len(&self) -> usize {
        self.entries.len() - self.next
    }

    /// Whether it holds no delivery.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The deliveries, borrowed, in the order they were pushed.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = DeliveryView<'_>> + '_ {
        self.entries
            .get(self.next..)
            .unwrap_or_default()
            .iter()
            .map(|e| self.view(e))
    }

    /// The deliveries' ids (0 for auto-ack ones), to settle them with
    /// [`Client::ack`](crate::Client::ack) or [`Client::nack`](crate::Client::nack).
    pub fn delivery_ids(&self) -> impl ExactSizeIterator<Item = DeliveryId> + '_ {
        self.entries
            .get(self.next..)
            .unwrap_or_default()
            .iter()
            .map(|e| e.fields.delivery_id)
    }

    fn view<'a>(&'a self, e: &'a Entry) -> DeliveryView<'a> {
        let f = &e.fields;
        let head = self.head(e);
        DeliveryView {
            delivery_id: f.delivery_id,
            id: f.id,
            queue: &head.queue,
            sender: &head.sender,
            receiver: f.receiver.as_deref(),
            priority: f.priority,
            context: f.context,
            properties: &head.properties,
            body: self.run.get(f.body.clone()).unwrap_or_default(),
            created_at: f.created_at,
            delivery_count: f.delivery_count,
            expires_at: f.expires_at,
        }
    }

    /// `e`'s head. Entries are only pushed with the index of a head pushed before them.
    fn head(&self, e: &Entry) -> &Head {
        #[allow(clippy::indexing_slicing)]
        &self.heads[e.head]
    }

    /// `e` as an owned delivery.
    fn delivery(&self, e: &Entry) -> Delivery {
        let head = self.head(e);
        e.fields.clone().into_delivery(
            head.queue.clone(),
            head.sender.clone(),
            head.properties.clone(),
            self.body(&e.fields.body),
        )
    }

    fn body(&self, at: &Range<usize>) -> Bytes {
        if at.end <= self.run.len() && at.start <= at.end {
            self.run.slice(at.clone())
        } else {
            Bytes::new()
        }
    }

    /// Takes the first delivery.
    pub(crate) fn pop_front(&mut self) -> Option<Delivery> {
        let d = self.entries.get(self.next).map(|e| self.delivery(e))?;
        self.next += 1;
        Some(d)
    }

    /// Takes up to `n` deliveries from the front into `out`; returns how many.
    pub(crate) fn take_into(&mut self, out: &mut Vec<Delivery>, n: usize) -> usize {
        let n = n.min(self.len());
        let end = self.next + n;
        if let Some(taken) = self.entries.get(self.next..end) {
            out.extend(taken.iter().map(|e| self.delivery(e)));
        }
        self.next = end;
        n
    }

    /// Whether the batch's bodies are in `run`.
    pub(crate) fn is_in(&self, run: &Bytes) -> bool {
        self.run.as_ptr() == run.as_ptr() && self.run.len() == run.len()
    }

    /// The last head pushed: the names and properties the next delivery likely repeats.
    pub(crate) fn last_names(&self) -> Option<(&Name, &Name)> {
        self.heads.last().map(|h| (&h.queue, &h.sender))
    }

    /// Starts a run of deliveries sharing these fields, unless the last run shares them too.
    pub(crate) fn push_head(&mut self, queue: Name, sender: Name, properties: Properties) {
        if let Some(h) = self.heads.last() {
            if h.queue.same_allocation(&queue)
                && h.sender.same_allocation(&sender)
                && h.properties == properties
            {
                return;
            }
        }
        self.heads.push(Head {
            queue,
            sender,
            properties,
        });
    }

    /// Makes room for `n` more deliveries.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
    }

    /// Adds a delivery of the last head (see [`DeliveryBatch::push_head`], called first).
    pub(crate) fn push(&mut self, fields: BatchEntry) {
        let head = self.heads.len().saturating_sub(1);
        self.entries.push(Entry { fields, head });
    }
}

impl IntoIterator for DeliveryBatch {
    type Item = Delivery;
    type IntoIter = IntoDeliveries;

    /// The deliveries as owned [`Delivery`]s, in the order they were pushed.
    fn into_iter(self) -> IntoDeliveries {
        IntoDeliveries { batch: self }
    }
}

/// The deliveries of a [`DeliveryBatch`], owned: see its [`IntoIterator`].
pub struct IntoDeliveries {
    batch: DeliveryBatch,
}

impl Iterator for IntoDeliveries {
    type Item = Delivery;

    fn next(&mut self) -> Option<Delivery> {
        self.batch.pop_front()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.batch.len(), Some(self.batch.len()))
    }
}

impl ExactSizeIterator for IntoDeliveries {}

impl std::fmt::Debug for DeliveryBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for DeliveryBatch {
    /// The same deliveries, in the same order.
    fn eq(&self, other: &DeliveryBatch) -> bool {
        self.iter().eq(other.iter())
    }
}
