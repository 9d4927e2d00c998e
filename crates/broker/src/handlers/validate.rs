//! Checks of names, sizes and counts against the limits, before anything reaches the store.

use std::collections::HashSet;
use std::sync::Arc;

use ferry_protocol::limits::is_valid_name;
use ferry_protocol::topic::{check_pattern, is_pattern};
use ferry_protocol::{
    ErrorCode, ErrorReply, Limits, Name, OutgoingMessage, MAX_PRIORITY, MIN_PRIORITY,
};
use ferry_selector::Selector;

/// Checks a client or queue name; `what` is "queue", "client", ...
pub fn name(what: &str, name: &str, limits: &Limits) -> Result<(), ErrorReply> {
    if is_valid_name(name, limits.max_name_len) {
        return Ok(());
    }
    let shown: String = name.chars().take(64).collect();
    Err(ErrorReply::new(
        ErrorCode::InvalidArgument,
        format!(
            "invalid {what} name '{shown}': use 1 to {} characters of A-Z a-z 0-9 . _ -",
            limits.max_name_len
        ),
    ))
}

/// Checks what a subscription names: a topic, or a pattern of topics (`prices.*.eu`,
/// `prices.>`). Publishing to, creating or deleting a topic takes a topic name ([`name`]).
pub fn topic_or_pattern(topic: &str, limits: &Limits) -> Result<(), ErrorReply> {
    if !is_pattern(topic) {
        return name("topic", topic, limits);
    }
    check_pattern(topic, limits.max_name_len).map_err(|e| {
        let shown: String = topic.chars().take(64).collect();
        ErrorReply::new(
            ErrorCode::InvalidArgument,
            format!("invalid topic pattern '{shown}': {e}"),
        )
    })
}

/// Checks a topic to publish to, create or delete: a pattern is refused with a message
/// saying so (only subscriptions take patterns).
pub fn topic(topic: &str, limits: &Limits) -> Result<(), ErrorReply> {
    if is_pattern(topic) {
        let shown: String = topic.chars().take(64).collect();
        return Err(ErrorReply::new(
            ErrorCode::InvalidArgument,
            format!(
                "'{shown}' is a topic pattern: patterns are for subscriptions; publish to, \
                 create and delete topics by their names"
            ),
        ));
    }
    name("topic", topic, limits)
}

/// Checks the queue a receive names: a queue name, or a topic subscription's queue
/// (`topic:name`, where a non-durable subscription's name is `~client.n`).
pub fn queue_or_subscription(queue: &str, limits: &Limits) -> Result<(), ErrorReply> {
    match ferry_protocol::split_subscription_queue(queue) {
        None => name("queue", queue, limits),
        Some((topic, sub)) => {
            topic_or_pattern(topic, limits)?;
            let sub = sub.strip_prefix('~').unwrap_or(sub);
            // A non-durable name adds '~', '.' and a counter to a client name.
            if is_valid_name(sub, limits.max_name_len.saturating_add(21)) {
                Ok(())
            } else {
                name("subscription", sub, limits)
            }
        }
    }
}

/// Parses a receive's or subscription's selector, once: `None` when there is none (empty text,
/// or a selector that selects every message, such as white space). A selector that does not
/// parse is `InvalidArgument` naming the byte position of the problem.
pub fn selector(text: &str) -> Result<Option<Arc<Selector>>, ErrorReply> {
    if text.is_empty() {
        return Ok(None);
    }
    match Selector::parse(text) {
        Ok(s) if s.selects_all() => Ok(None),
        Ok(s) => Ok(Some(Arc::new(s))),
        Err(e) => Err(ErrorReply::new(
            ErrorCode::InvalidArgument,
            format!("invalid selector: {e}"),
        )),
    }
}

/// The last topic or queue name found valid in a batch: the messages of a batch usually share
/// their destination, whose name is then checked once rather than once per message.
#[derive(Debug, Default)]
pub struct LastValidName {
    /// The queue or topic name checked last, by text.
    text: String,
    /// The topic checked last: the messages of a decoded batch share their topic's allocation,
    /// so the next one is recognised by pointer.
    topic: Option<Name>,
}

impl LastValidName {
    /// [`name`], skipped when `n` is the name checked last.
    fn check(&mut self, what: &str, n: &str, limits: &Limits) -> Result<(), ErrorReply> {
        if !self.text.is_empty() && self.text == n {
            return Ok(());
        }
        name(what, n, limits)?;
        n.clone_into(&mut self.text);
        Ok(())
    }

    /// [`LastValidName::check`] of a topic name.
    fn check_topic(&mut self, topic: &Name, limits: &Limits) -> Result<(), ErrorReply> {
        if self
            .topic
            .as_ref()
            .is_some_and(|t| t.same_allocation(topic))
        {
            return Ok(());
        }
        if !self.text.is_empty() && self.text == **topic {
            return Ok(());
        }
        self::topic(topic, limits)?;
        topic.as_str().clone_into(&mut self.text);
        self.topic = Some(topic.clone());
        Ok(())
    }
}

/// Checks one outgoing message.
pub fn message(m: &OutgoingMessage, limits: &Limits) -> Result<(), ErrorReply> {
    message_in_batch(m, limits, &mut LastValidName::default())
}

/// [`message`] for the next message of a batch; `last` carries a valid name from one call to
/// the next.
pub fn message_in_batch(
    m: &OutgoingMessage,
    limits: &Limits,
    last: &mut LastValidName,
) -> Result<(), ErrorReply> {
    let invalid = |msg: String| Err(ErrorReply::new(ErrorCode::InvalidArgument, msg));
    match &m.topic {
        Some(_) if !m.queues.is_empty() => {
            return invalid("a message goes to queues or to a topic, not both".into())
        }
        Some(topic) => last.check_topic(topic, limits)?,
        None if m.queues.is_empty() => {
            return invalid("a send needs at least one queue".into());
        }
        None => {}
    }
    if m.queues.len() > usize::from(limits.max_queues_per_send) {
        return Err(ErrorReply::new(
            ErrorCode::TooLarge,
            format!(
                "a send names {} queues; the limit is {}",
                m.queues.len(),
                limits.max_queues_per_send
            ),
        ));
    }
    for q in &m.queues {
        last.check("queue", q, limits)?;
    }
    if let Some(q) = first_duplicate(m.queues.iter().map(String::as_str)) {
        return invalid(format!("queue '{q}' is named twice in one send"));
    }
    if let Some(r) = &m.receiver {
        name("receiver", r, limits)?;
    }
    if !(MIN_PRIORITY..=MAX_PRIORITY).contains(&m.priority) {
        return invalid(format!(
            "priority {} is outside {MIN_PRIORITY} to {MAX_PRIORITY}",
            m.priority
        ));
    }
    if m.body.len() > limits.max_body_bytes as usize {
        return Err(body_too_large(m.body.len(), limits));
    }
    if m.properties.len() > usize::from(limits.max_properties) {
        return Err(ErrorReply::new(
            ErrorCode::TooLarge,
            format!(
                "{} properties exceed the limit of {}",
                m.properties.len(),
                limits.max_properties
            ),
        ));
    }
    if m.properties.iter().any(|(k, _)| k.is_empty()) {
        return invalid("a property name is empty".into());
    }
    if let Some(k) = first_duplicate(m.properties.iter().map(|(k, _)| k.as_str())) {
        return invalid(format!("property '{k}' is given twice"));
    }
    Ok(())
}

/// The `TooLarge` reply for a body of `len` bytes, over the limit.
pub fn body_too_large(len: usize, limits: &Limits) -> ErrorReply {
    ErrorReply::new(
        ErrorCode::TooLarge,
        format!(
            "body of {len} bytes exceeds the limit of {} bytes",
            limits.max_body_bytes
        ),
    )
}

/// The first name that occurs twice. Sends name few queues and properties, so small lists are
/// compared pairwise, without allocating, on this per-message path.
fn first_duplicate<'a>(names: impl Iterator<Item = &'a str> + Clone) -> Option<&'a str> {
    let n = names.clone().count();
    if n <= 16 {
        for (i, a) in names.clone().enumerate() {
            if names.clone().skip(i + 1).any(|b| b == a) {
                return Some(a);
            }
        }
        return None;
    }
    let mut seen = HashSet::with_capacity(n);
    names.into_iter().find(|&name| !seen.insert(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_checks_every_new_name_and_remembers_only_valid_ones() {
        let limits = Limits::DEFAULT;
        let mut last = LastValidName::default();
        let empty = OutgoingMessage::new("", "x");
        assert!(
            message_in_batch(&empty, &limits, &mut last).is_err(),
            "an empty name is refused, also before any name was remembered"
        );
        let good = OutgoingMessage::to_topic("prices", "x");
        for _ in 0..2 {
            message_in_batch(&good, &limits, &mut last).unwrap();
        }
        let bad = OutgoingMessage::to_topic("no spaces", "x");
        for _ in 0..2 {
            let e = message_in_batch(&bad, &limits, &mut last).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidArgument);
            assert!(e.message.contains("topic name 'no spaces'"), "{e:?}");
        }
        // One invalid topic shared by the messages of a batch is refused in each of them: only
        // a valid topic is remembered by its allocation.
        let shared_bad = OutgoingMessage::to_topic(Name::from("no spaces"), "x");
        for _ in 0..2 {
            let e = message_in_batch(&shared_bad.clone(), &limits, &mut last).unwrap_err();
            assert!(e.message.contains("topic name 'no spaces'"), "{e:?}");
        }
        let bad_queue = OutgoingMessage::new("no spaces", "x");
        let e = message_in_batch(&bad_queue, &limits, &mut last).unwrap_err();
        assert!(e.message.contains("queue name"), "{e:?}");
        message_in_batch(&OutgoingMessage::new("prices", "x"), &limits, &mut last).unwrap();
    }
}
