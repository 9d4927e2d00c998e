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
    /// The fields of deliveries besides their bodies: one per delivery of a `Deliver` or a
    /// `DeliverBatch`, one for all the deliveries of a `DeliverRun`.
    fields: Vec<Fields>,
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

/// The fields of one delivery, or of a run of deliveries alike but for their ids and bodies.
#[derive(Clone)]
struct Fields {
    /// The fields (the first delivery's id; its body is the entry's).
    fields: BatchEntry,
    /// Its index in `heads`.
    head: usize,
}

/// One delivery: its body, and where the rest of its fields are. A delivery of a run takes
/// only this, not a copy of the run's fields.
#[derive(Clone)]
struct Entry {
    /// Its body, a place in the run.
    body: Range<usize>,
    /// Its index in `fields`.
    fields: u32,
    /// Its place in its run of deliveries: its id is the fields' id plus this.
    offset: u32,
}

impl DeliveryBatch {
    /// An empty batch whose bodies will be in `run`.
    pub(crate) fn new(run: Bytes, capacity: usize) -> Self {
        DeliveryBatch {
            run,
            heads: Vec::new(),
            fields: Vec::new(),
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
            .map(|e| self.fields_of(e).fields.delivery_id)
    }

    fn view<'a>(&'a self, e: &'a Entry) -> DeliveryView<'a> {
        let Fields { fields: f, head } = self.fields_of(e);
        let head = self.head(*head);
        DeliveryView {
            delivery_id: f.delivery_id,
            id: f.id.wrapping_add(u64::from(e.offset)),
            queue: &head.queue,
            sender: &head.sender,
            receiver: f.receiver.as_deref(),
            priority: f.priority,
            context: f.context,
            properties: &head.properties,
            body: self.run.get(e.body.clone()).unwrap_or_default(),
            created_at: f.created_at,
            delivery_count: f.delivery_count,
            expires_at: f.expires_at,
        }
    }

    /// The head at `at`. Fields are only pushed with the index of a head pushed before them.
    fn head(&self, at: usize) -> &Head {
        #[allow(clippy::indexing_slicing)]
        &self.heads[at]
    }

    /// `e`'s fields. Entries are only pushed with the index of fields pushed before them.
    fn fields_of(&self, e: &Entry) -> &Fields {
        #[allow(clippy::indexing_slicing)]
        &self.fields[e.fields as usize]
    }

    /// `e` as an owned delivery.
    fn delivery(&self, e: &Entry) -> Delivery {
        let Fields { fields, head } = self.fields_of(e);
        let head = self.head(*head);
        BatchEntry {
            id: fields.id.wrapping_add(u64::from(e.offset)),
            ..fields.clone()
        }
        .into_delivery(
            head.queue.clone(),
            head.sender.clone(),
            head.properties.clone(),
            self.body(&e.body),
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
        let body = fields.body.clone();
        let at = self.push_fields(fields);
        self.entries.push(Entry {
            body,
            fields: at,
            offset: 0,
        });
    }

    /// Adds a run of deliveries of the last head: `template`'s fields (its body unused), ids
    /// from its id on, one delivery per body place `bodies` yields, until it yields an error.
    pub(crate) fn push_run<E>(
        &mut self,
        template: BatchEntry,
        bodies: impl IntoIterator<Item = Result<Range<usize>, E>>,
    ) -> Result<(), E> {
        let at = self.push_fields(template);
        for (offset, body) in (0u32..).zip(bodies) {
            self.entries.push(Entry {
                body: body?,
                fields: at,
                offset,
            });
        }
        Ok(())
    }

    /// Keeps `fields` for deliveries of the last head; returns their index.
    fn push_fields(&mut self, fields: BatchEntry) -> u32 {
        let head = self.heads.len().saturating_sub(1);
        self.fields.push(Fields { fields, head });
        (self.fields.len() - 1) as u32
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
