//! Pushed deliveries gathered per subscription while the reader works through what one read
//! brought, so that each subscription gets them as one batch: one lock and one channel send
//! per batch instead of per delivery.
//!
//! The reader hands a batch over before it handles any other frame (a reply, the end of a
//! subscription) and before it waits for the next read, so a subscription sees its deliveries
//! in the order the broker pushed them, and nothing waits on a delivery held back.

use bytes::Bytes;
use ferry_protocol::deliver_batch::{read_batch_entry_fields, read_batch_head_like, BatchEntry};
use ferry_protocol::deliver_run::read_run_head_like;
use ferry_protocol::wire::Reader;
use ferry_protocol::{FrameAt, FrameKind, Name, Properties, SubscriptionId, WireError, HEADER_LEN};

use crate::batch::DeliveryBatch;

/// If `frame` (of `run`, cut by `split_frames`) is a pushed delivery (kind `Deliver`,
/// `DeliverBatch` or `DeliverRun`, request id 0), decodes it into `batches` and returns `true`; `false` for
/// any other frame. `more_bytes`: how much was read behind this frame (to size a new batch).
///
/// A batch's bodies are places in the run it was started with: a frame of another run starts
/// a batch of its own (the reader drains `batches` after each run, so that is rare).
pub(crate) fn decode_push(
    run: &Bytes,
    frame: &FrameAt,
    batches: &mut PushBatches,
    more_bytes: usize,
) -> Result<bool, WireError> {
    if frame.request_id != 0 {
        return Ok(false);
    }
    // The same fields and checks as `Response::decode` for these kinds, without building (and
    // then moving out of) a `Response`, and read in place in the run: a body is a place in
    // it, and no frame of its own is cut.
    let mut r = Reader::window(run, frame.payload.clone());
    let frame_len = frame.payload.len() + HEADER_LEN;
    if frame.kind == FrameKind::Deliver as u16 {
        let subscription = r.u64()?;
        let (queue, sender) = batches.last_names(subscription);
        let (head, entry) = read_deliver(&mut r, queue.as_ref(), sender.as_ref())?;
        r.finish()?;
        // Frames behind this one are likely deliveries of about its size.
        let batch = batches.batch_for(subscription, run, 1 + more_bytes / frame_len);
        batch.push_head(head.0, head.1, head.2);
        batch.push(entry);
        return Ok(true);
    }
    if frame.kind == FrameKind::DeliverRun as u16 {
        let subscription = Reader::window(run, frame.payload.clone()).u64()?;
        let (queue, sender) = batches.last_names(subscription);
        let head = read_run_head_like(&mut r, queue.as_ref(), sender.as_ref())?;
        let expected = head.count * (1 + more_bytes / frame_len);
        let batch = batches.batch_for(subscription, run, expected);
        batch.reserve(head.count);
        batch.push_head(
            head.queue.clone(),
            head.sender.clone(),
            head.properties.clone(),
        );
        // One copy of the run's fields for all its deliveries; each adds only its body.
        batch.push_run(
            head.entry(0, 0..0),
            (0..head.count).map(|_| r.bytes_range()),
        )?;
        r.finish()?;
        return Ok(true);
    }
    if frame.kind != FrameKind::DeliverBatch as u16 {
        return Ok(false);
    }
    // The subscription comes first: peek at it to find the names the batch likely repeats.
    let subscription = Reader::window(run, frame.payload.clone()).u64()?;
    let (queue, sender) = batches.last_names(subscription);
    let head = read_batch_head_like(&mut r, queue.as_ref(), sender.as_ref())?;
    // Frames behind this one are likely batches of about as many deliveries.
    let expected = head.count * (1 + more_bytes / frame_len);
    let batch = batches.batch_for(subscription, run, expected);
    batch.reserve(head.count);
    batch.push_head(head.queue, head.sender, head.properties);
    for _ in 0..head.count {
        batch.push(read_batch_entry_fields(&mut r)?);
    }
    r.finish()?;
    Ok(true)
}

/// Reads a `Deliver` payload after its subscription: the fields of
/// `ferry_protocol::responses::read_delivery_after`, in its order, the body as a place in the
/// run. `queue` and `sender`: the names it likely repeats (then shared, not allocated).
fn read_deliver(
    r: &mut Reader<'_>,
    queue: Option<&Name>,
    sender: Option<&Name>,
) -> Result<((Name, Name, Properties), BatchEntry), WireError> {
    let mut ids = r.fixed::<16>()?;
    let (delivery_id, id) = (ids.u64(), ids.u64());
    let queue = r.name_like("queue name", queue)?;
    let sender = r.name_like("sender", sender)?;
    let receiver = r.opt_string("receiver")?;
    let mut fixed = r.fixed::<21>()?;
    let (priority, context, created_at, delivery_count) =
        (fixed.u8(), fixed.u64(), fixed.u64(), fixed.u32());
    let properties = r.properties()?;
    let entry = BatchEntry {
        delivery_id,
        id,
        receiver,
        priority,
        context,
        created_at,
        delivery_count,
        body: r.bytes_range()?,
        expires_at: r.u64()?,
    };
    Ok(((queue, sender, properties), entry))
}

/// Deliveries not handed to their subscriptions yet, per subscription in order of first
/// arrival. Almost always one subscription: a connection usually carries one consumer.
#[derive(Default)]
pub(crate) struct PushBatches {
    batches: Vec<(SubscriptionId, DeliveryBatch)>,
}

impl PushBatches {
    /// The deliveries waiting for `subscription`, a new batch in `run` with room for
    /// `expected` if it has none (so that it is not regrown, its deliveries copied each time,
    /// as it fills).
    fn batch_for(
        &mut self,
        subscription: SubscriptionId,
        run: &Bytes,
        expected: usize,
    ) -> &mut DeliveryBatch {
        // The last subscription is the likeliest: look there first. A batch of another run
        // (the batches were not drained in between) is left as it is, its places in its run.
        let at = match self
            .batches
            .iter()
            .rposition(|(sub, _)| *sub == subscription)
        {
            Some(at) if self.batches.get(at).is_some_and(|(_, b)| b.is_in(run)) => at,
            _ => {
                let batch = DeliveryBatch::new(run.clone(), expected.clamp(1, MAX_EXPECTED));
                self.batches.push((subscription, batch));
                self.batches.len() - 1
            }
        };
        // `at` is an index of `batches`, just found or pushed.
        #[allow(clippy::indexing_slicing)]
        &mut self.batches[at].1
    }

    /// The queue and sender of the last delivery waiting for `subscription`, if any.
    fn last_names(&self, subscription: SubscriptionId) -> (Option<Name>, Option<Name>) {
        match self
            .batches
            .iter()
            .rev()
            .find(|(sub, _)| *sub == subscription)
            .and_then(|(_, batch)| batch.last_names())
        {
            Some((q, s)) => (Some(q.clone()), Some(s.clone())),
            None => (None, None),
        }
    }

    /// Whether nothing waits to be handed over.
    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Takes every batch, leaving this empty.
    pub(crate) fn drain(&mut self) -> std::vec::Drain<'_, (SubscriptionId, DeliveryBatch)> {
        self.batches.drain(..)
    }
}

/// Most deliveries a new batch makes room for up front.
const MAX_EXPECTED: usize = 2048;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferry_protocol::{frames_in, split_frames, Delivery, Message, Response};

    /// What `b` holds, as owned deliveries per subscription.
    fn drained(b: &mut PushBatches) -> Vec<(u64, Vec<Delivery>)> {
        b.drain()
            .map(|(sub, batch)| (sub, batch.into_iter().collect()))
            .collect()
    }

    fn delivery(id: u64) -> Delivery {
        Delivery {
            delivery_id: id,
            message: Message {
                id,
                queue: "q".into(),
                sender: "s".into(),
                receiver: None,
                priority: 4,
                context: 0,
                properties: Default::default(),
                body: bytes::Bytes::from_static(b"body"),
                created_at: 1,
                delivery_count: 0,
                expires_at: 0,
            },
        }
    }

    /// `resp` encoded with `request_id`, cut as the reader cuts a read: the run and its frame.
    fn frame(request_id: u32, resp: &Response) -> (Bytes, FrameAt) {
        let mut buf = BytesMut::new();
        resp.encode(request_id, &mut buf);
        cut(buf)
    }

    fn cut(mut buf: BytesMut) -> (Bytes, FrameAt) {
        let (run, outcome) = split_frames(&mut buf, u32::MAX);
        outcome.expect("valid frame");
        let f = frames_in(&run).next().expect("whole frame");
        (run, f)
    }

    /// `Deliver` pushes of `(subscription, delivery id)`, encoded back to back and decoded
    /// from one read, as the reader does.
    fn decoded_in_one_run(pushes: &[(u64, u64)]) -> PushBatches {
        let mut buf = BytesMut::new();
        for &(subscription, id) in pushes {
            Response::Deliver {
                subscription,
                delivery: delivery(id),
            }
            .encode(0, &mut buf);
        }
        let (run, outcome) = split_frames(&mut buf, u32::MAX);
        outcome.unwrap();
        let mut b = PushBatches::default();
        for f in frames_in(&run) {
            assert!(decode_push(&run, &f, &mut b, 0).unwrap());
        }
        b
    }

    fn decode(
        (run, f): &(Bytes, FrameAt),
        b: &mut PushBatches,
        more: usize,
    ) -> Result<bool, WireError> {
        decode_push(run, f, b, more)
    }

    #[test]
    fn a_push_decodes_like_the_response() {
        let push = Response::Deliver {
            subscription: 7,
            delivery: delivery(3),
        };
        let mut b = PushBatches::default();
        assert!(decode(&frame(0, &push), &mut b, 1000).unwrap());
        // A reply (request id set) or another kind is not a push.
        assert!(!decode(&frame(9, &push), &mut b, 0).unwrap());
        assert!(!decode(&frame(0, &Response::Pong), &mut b, 0).unwrap());
        assert_eq!(drained(&mut b), vec![(7, vec![delivery(3)])]);
    }

    #[test]
    fn a_run_decodes_like_the_response_with_its_names_shared() {
        let deliveries: Vec<Delivery> = (10..13)
            .map(|id| {
                let mut d = delivery(0);
                d.message.id = id;
                d.message.body = Bytes::from(vec![id as u8; id as usize]);
                d
            })
            .collect();
        let push = Response::DeliverRun {
            subscription: 7,
            deliveries: deliveries.clone(),
        };
        let mut b = PushBatches::default();
        assert!(decode(&frame(0, &push), &mut b, 0).unwrap());
        // Borrowed, each delivery has its own id and body and the run's other fields.
        let batch = &b.batches[0].1;
        let views: Vec<(u64, u64, &[u8])> = batch
            .iter()
            .map(|d| (d.delivery_id, d.id, d.body))
            .collect();
        assert_eq!(
            views,
            [
                (0, 10, &[10u8; 10][..]),
                (0, 11, &[11u8; 11]),
                (0, 12, &[12u8; 12])
            ]
        );
        assert!(batch.iter().all(|d| d.queue == "q" && d.priority == 4));
        assert_eq!(batch.delivery_ids().collect::<Vec<_>>(), [0, 0, 0]);
        let got = drained(&mut b);
        assert_eq!(got, vec![(7, deliveries)]);
        let [d1, d2, ..] = &got[0].1[..] else {
            panic!("three deliveries")
        };
        assert!(d2.message.queue.same_allocation(&d1.message.queue));
        // A run cut short is an error (the reader then closes the connection).
        let (run, mut f) = frame(0, &push);
        f.payload.end -= 1;
        let mut b = PushBatches::default();
        assert!(decode_push(&run, &f, &mut b, 0).is_err());
    }

    #[test]
    fn a_truncated_push_is_an_error_though_the_run_goes_on() {
        let push = Response::Deliver {
            subscription: 7,
            delivery: delivery(3),
        };
        let (run, mut f) = frame(0, &push);
        // The frame ends a byte early; the byte is still in the run, and must not be read.
        f.payload.end -= 1;
        let mut b = PushBatches::default();
        assert!(decode_push(&run, &f, &mut b, 0).is_err());
        assert!(b.is_empty());
    }

    #[test]
    fn pushes_cut_in_one_run_decode_each_from_its_own_frame() {
        let mut b = decoded_in_one_run(&[(7, 1), (8, 2), (7, 3)]);
        assert_eq!(
            drained(&mut b),
            vec![(7, vec![delivery(1), delivery(3)]), (8, vec![delivery(2)])]
        );
    }

    #[test]
    fn a_frame_of_another_run_starts_a_batch_of_its_own_with_its_bodies() {
        let on = |id: u64, body: &'static [u8]| {
            let mut d = delivery(id);
            d.message.body = Bytes::from_static(body);
            Response::Deliver {
                subscription: 7,
                delivery: d,
            }
        };
        let mut b = PushBatches::default();
        // Not drained in between: the second body is a place in the second run.
        assert!(decode(&frame(0, &on(1, b"first")), &mut b, 0).unwrap());
        assert!(decode(&frame(0, &on(2, b"other")), &mut b, 0).unwrap());
        let got = drained(&mut b);
        assert_eq!(got.len(), 2, "one batch per run");
        let bodies: Vec<&[u8]> = got
            .iter()
            .flat_map(|(_, ds)| ds.iter().map(|d| &d.message.body[..]))
            .collect();
        assert_eq!(bodies, [&b"first"[..], &b"other"[..]]);
    }

    #[test]
    fn batches_keep_order_per_subscription() {
        let mut b = decoded_in_one_run(&[(1, 1), (2, 2), (1, 3), (2, 4), (1, 5)]);
        let got: Vec<(u64, Vec<u64>)> = drained(&mut b)
            .into_iter()
            .map(|(sub, ds)| (sub, ds.iter().map(|d| d.delivery_id).collect()))
            .collect();
        assert_eq!(got, vec![(1, vec![1, 3, 5]), (2, vec![2, 4])]);
        assert!(b.is_empty());
    }

    #[test]
    fn names_repeated_from_the_last_delivery_are_shared_and_new_ones_still_checked() {
        let on = |queue: &str, sender: &str, id: u64| {
            let mut d = delivery(id);
            d.message.queue = queue.into();
            d.message.sender = sender.into();
            Response::Deliver {
                subscription: 7,
                delivery: d,
            }
        };
        let mut b = PushBatches::default();
        for push in [on("qa", "sa", 1), on("qa", "sa", 2), on("qb", "sa", 3)] {
            assert!(decode(&frame(0, &push), &mut b, 0).unwrap());
        }
        let ms: Vec<Message> = drained(&mut b)
            .into_iter()
            .flat_map(|(_, ds)| ds)
            .map(|d| d.message)
            .collect();
        let names: Vec<(&str, &str)> = ms.iter().map(|m| (&*m.queue, &*m.sender)).collect();
        assert_eq!(names, [("qa", "sa"), ("qa", "sa"), ("qb", "sa")]);
        // A repeated name is the previous delivery's, not an allocation of its own.
        let [m1, m2, m3] = &ms[..] else {
            panic!("three deliveries")
        };
        assert!(m2.queue.same_allocation(&m1.queue));
        assert!(m2.sender.same_allocation(&m1.sender));
        assert!(m3.sender.same_allocation(&m1.sender));
        assert!(!m3.queue.same_allocation(&m1.queue));

        // A name that differs from the last delivery's in one invalid byte is refused.
        assert!(decode(&frame(0, &on("qa", "sa", 4)), &mut b, 0).unwrap());
        let mut bytes = BytesMut::new();
        on("qa", "sa", 5).encode(0, &mut bytes);
        let at = bytes.windows(2).position(|w| w == b"qa").unwrap();
        *bytes.get_mut(at + 1).unwrap() = 0xff;
        let bad = cut(bytes);
        assert_eq!(
            decode(&bad, &mut b, 0),
            Err(WireError::InvalidUtf8("queue name"))
        );
    }
}
