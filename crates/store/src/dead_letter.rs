//! The history a dead-lettered message carries, as properties of its copy on the dead-letter
//! queue (names that the message already had are replaced).

use ferry_protocol::{Properties, PropertyValue};

/// The queue it was dead-lettered from (string).
pub const ORIGINAL_QUEUE: &str = "ferry_original_queue";
/// Its id there (int).
pub const ORIGINAL_ID: &str = "ferry_original_id";
/// How many client-ack deliveries it had there (int).
pub const DELIVERY_COUNT: &str = "ferry_delivery_count";
/// Why (string): `max_deliveries` or `expired`.
pub const REASON: &str = "ferry_dead_letter_reason";
/// The reason for a message over its queue's maximum delivery count.
pub const MAX_DELIVERIES: &str = "max_deliveries";
/// The reason for a message moved to its queue's expiry queue.
pub const EXPIRED: &str = "expired";

/// `props` with the history of a message moved from `queue` for `reason`.
pub fn history(props: &Properties, queue: &str, id: u64, count: u32, reason: &str) -> Properties {
    let names = [ORIGINAL_QUEUE, ORIGINAL_ID, DELIVERY_COUNT, REASON];
    let mut out: Properties = props
        .iter()
        .filter(|(n, _)| !names.contains(&n.as_str()))
        .cloned()
        .collect();
    out.push((ORIGINAL_QUEUE.into(), PropertyValue::Str(queue.into())));
    out.push((ORIGINAL_ID.into(), PropertyValue::Int(id as i64)));
    out.push((DELIVERY_COUNT.into(), PropertyValue::Int(i64::from(count))));
    out.push((REASON.into(), PropertyValue::Str(reason.into())));
    out
}
