//! Client-side checks against the limits the broker advertised, so that an oversized request
//! fails at once with [`ClientError::TooLarge`] instead of costing a round trip (or, for a frame
//! over the limit, the connection).

use ferry_protocol::requests::SubscribeTopic;
use ferry_protocol::wire::MAX_STRING_BYTES;
use ferry_protocol::{Limits, OutgoingMessage, PropertyValue};

use crate::error::ClientError;

/// A string field must fit its u16 length prefix.
pub(crate) fn check_str(what: &str, s: &str) -> Result<(), ClientError> {
    if s.len() > MAX_STRING_BYTES {
        return Err(ClientError::TooLarge(format!(
            "{what} of {} bytes exceeds the {MAX_STRING_BYTES} bytes a string field can carry",
            s.len()
        )));
    }
    Ok(())
}

/// A message must respect the body, queue-count and property-count limits.
pub(crate) fn check_message(m: &OutgoingMessage, limits: &Limits) -> Result<(), ClientError> {
    if m.body.len() > limits.max_body_bytes as usize {
        return Err(ClientError::TooLarge(format!(
            "message body of {} bytes exceeds the broker's limit of {} bytes",
            m.body.len(),
            limits.max_body_bytes
        )));
    }
    if m.queues.len() > usize::from(limits.max_queues_per_send) {
        return Err(ClientError::TooLarge(format!(
            "a send to {} queues exceeds the broker's limit of {} queues",
            m.queues.len(),
            limits.max_queues_per_send
        )));
    }
    if m.properties.len() > usize::from(limits.max_properties) {
        return Err(ClientError::TooLarge(format!(
            "{} properties exceed the broker's limit of {}",
            m.properties.len(),
            limits.max_properties
        )));
    }
    for q in &m.queues {
        check_str("queue name", q)?;
    }
    if let Some(t) = &m.topic {
        check_str("topic name", t)?;
    }
    if let Some(r) = &m.receiver {
        check_str("receiver name", r)?;
    }
    for (name, value) in &m.properties {
        check_str("property name", name)?;
        if let PropertyValue::Str(s) = value {
            // The description is built only for the error: this runs for every message sent.
            if s.len() > MAX_STRING_BYTES {
                return check_str(&format!("property '{name}'"), s);
            }
        }
    }
    Ok(())
}

/// The strings of a topic subscription must fit their fields.
pub(crate) fn check_subscribe_topic(s: &SubscribeTopic) -> Result<(), ClientError> {
    check_str("topic name", &s.topic)?;
    check_str("subscription name", &s.name)?;
    check_str("selector", &s.options.selector)?;
    if let Some(d) = &s.options.queue.dead_letter_queue {
        check_str("dead-letter queue name", d)?;
    }
    if let Some(x) = &s.options.queue.expiry_queue {
        check_str("expiry queue name", x)?;
    }
    Ok(())
}

/// A batch must not hold more messages than the broker takes in one request.
pub(crate) fn check_batch_len(n: usize, limits: &Limits) -> Result<(), ClientError> {
    if n > limits.max_batch as usize {
        return Err(ClientError::TooLarge(format!(
            "a batch of {n} messages exceeds the broker's limit of {}",
            limits.max_batch
        )));
    }
    Ok(())
}

/// An encoded frame must fit the broker's frame limit.
pub(crate) fn check_frame(len: usize, max_frame_bytes: u32) -> Result<(), ClientError> {
    if len > max_frame_bytes as usize {
        return Err(ClientError::TooLarge(format!(
            "a request of {len} bytes exceeds the broker's frame limit of {max_frame_bytes} bytes"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_body_bytes: 4,
            max_queues_per_send: 1,
            max_properties: 1,
            max_batch: 2,
            ..Limits::DEFAULT
        }
    }

    #[test]
    fn messages_within_limits_pass() {
        let m = OutgoingMessage::new("q", &b"1234"[..]);
        assert!(check_message(&m, &limits()).is_ok());
        assert!(check_batch_len(2, &limits()).is_ok());
        assert!(check_frame(100, 100).is_ok());
    }

    #[test]
    fn each_limit_is_enforced() {
        let l = limits();
        let too_big = |r: Result<(), ClientError>| matches!(r, Err(ClientError::TooLarge(_)));
        assert!(too_big(check_message(
            &OutgoingMessage::new("q", &b"12345"[..]),
            &l
        )));
        let mut m = OutgoingMessage::new("q", &b""[..]);
        m.queues.push("r".into());
        assert!(too_big(check_message(&m, &l)));
        let mut m = OutgoingMessage::new("q", &b""[..]);
        m.properties = vec![
            ("a".into(), PropertyValue::Bool(true)),
            ("b".into(), PropertyValue::Bool(true)),
        ]
        .into();
        assert!(too_big(check_message(&m, &l)));
        let mut m = OutgoingMessage::new("q", &b""[..]);
        m.properties = vec![("a".into(), PropertyValue::Str("x".repeat(70_000)))].into();
        assert!(too_big(check_message(&m, &l)));
        assert!(too_big(check_batch_len(3, &l)));
        assert!(too_big(check_frame(101, 100)));
        assert!(too_big(check_str("name", &"n".repeat(65_536))));
        let long = "t".repeat(65_536);
        assert!(too_big(check_message(
            &OutgoingMessage::to_topic(long.clone(), &b""[..]),
            &l
        )));
        assert!(check_message(&OutgoingMessage::to_topic("t", &b""[..]), &l).is_ok());
    }

    #[test]
    fn topic_subscription_strings_are_checked() {
        let long = || "x".repeat(65_536);
        let too_big =
            |s: SubscribeTopic| matches!(check_subscribe_topic(&s), Err(ClientError::TooLarge(_)));
        assert!(check_subscribe_topic(&SubscribeTopic::new("t").durable("d")).is_ok());
        assert!(too_big(SubscribeTopic::new(long())));
        assert!(too_big(SubscribeTopic::new("t").durable(long())));
        assert!(too_big(SubscribeTopic::new("t").with_selector(long())));
        for (dead_letter_queue, expiry_queue) in [(Some(long()), None), (None, Some(long()))] {
            assert!(too_big(SubscribeTopic::new("t").options(
                ferry_protocol::QueueOptions {
                    max_deliveries: 0,
                    dead_letter_queue,
                    expiry_queue,
                }
            )));
        }
    }
}
