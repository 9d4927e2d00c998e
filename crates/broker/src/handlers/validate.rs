//! Checks of names, sizes and counts against the limits, before anything reaches the store.

use std::collections::HashSet;

use ferry_protocol::limits::is_valid_name;
use ferry_protocol::{ErrorCode, ErrorReply, Limits, OutgoingMessage, MAX_PRIORITY, MIN_PRIORITY};

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

/// Checks one outgoing message.
pub fn message(m: &OutgoingMessage, limits: &Limits) -> Result<(), ErrorReply> {
    let invalid = |msg: String| Err(ErrorReply::new(ErrorCode::InvalidArgument, msg));
    if m.queues.is_empty() {
        return invalid("a send needs at least one queue".into());
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
    let mut seen = HashSet::with_capacity(m.queues.len());
    for q in &m.queues {
        name("queue", q, limits)?;
        if !seen.insert(q.as_str()) {
            return invalid(format!("queue '{q}' is named twice in one send"));
        }
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
        return Err(ErrorReply::new(
            ErrorCode::TooLarge,
            format!(
                "body of {} bytes exceeds the limit of {} bytes",
                m.body.len(),
                limits.max_body_bytes
            ),
        ));
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
    let mut names = HashSet::with_capacity(m.properties.len());
    for (k, _) in &m.properties {
        if k.is_empty() {
            return invalid("a property name is empty".into());
        }
        if !names.insert(k.as_str()) {
            return invalid(format!("property '{k}' is given twice"));
        }
    }
    Ok(())
}
