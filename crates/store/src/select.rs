//! What a selector reads of a message, shared by the engines: properties and header fields as
//! borrowed [`Value`]s, so that testing a message against a selector copies nothing.

use ferry_protocol::{Message, PropertyValue};
use ferry_selector::{Header, SelectorSource, Value};

/// The value of property `name` in `properties`, `Null` when there is none.
pub fn property<'a>(properties: &'a [(String, PropertyValue)], name: &str) -> Value<'a> {
    properties
        .iter()
        .find(|(n, _)| n == name)
        .map_or(Value::Null, |(_, v)| value(v))
}

/// A property value as a selector sees it.
pub fn value(v: &PropertyValue) -> Value<'_> {
    match v {
        PropertyValue::Bool(b) => Value::Bool(*b),
        PropertyValue::Int(i) => Value::Int(*i),
        PropertyValue::Float(f) => Value::Float(*f),
        PropertyValue::Str(s) => Value::Str(s),
    }
}

/// A header field from a message's parts.
pub fn header<'a>(
    header: Header,
    priority: u8,
    sender: &'a str,
    receiver: Option<&'a str>,
    context: u64,
    created_at: u64,
) -> Value<'a> {
    match header {
        Header::Priority => Value::Int(i64::from(priority)),
        Header::Sender => Value::Str(sender),
        Header::Receiver => receiver.map_or(Value::Null, Value::Str),
        Header::Context => Value::from_u64(context),
        Header::CreatedAt => Value::from_u64(created_at),
    }
}

/// A decoded message (as the PostgreSQL engine reads it) seen by a selector.
#[derive(Debug, Clone, Copy)]
pub struct MessageSource<'a>(pub &'a Message);

impl SelectorSource for MessageSource<'_> {
    fn header(&self, h: Header) -> Value<'_> {
        let m = self.0;
        header(
            h,
            m.priority,
            &m.sender,
            m.receiver.as_deref(),
            m.context,
            m.created_at,
        )
    }

    fn property(&self, name: &str) -> Value<'_> {
        property(&self.0.properties, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use ferry_selector::Selector;

    #[test]
    fn a_message_reads_as_its_fields() {
        let m = Message {
            id: 1,
            queue: "q".into(),
            sender: "shop".into(),
            receiver: None,
            priority: 7,
            context: u64::MAX,
            properties: vec![
                ("region".into(), PropertyValue::Str("eu".into())),
                ("n".into(), PropertyValue::Int(3)),
                ("x".into(), PropertyValue::Float(0.5)),
                ("ok".into(), PropertyValue::Bool(true)),
            ]
            .into(),
            body: Bytes::new(),
            created_at: 1_700_000_000_000,
            delivery_count: 0,
            expires_at: 0,
        };
        let src = MessageSource(&m);
        for (text, expected) in [
            ("region = 'eu' AND n = 3 AND x < 1 AND ok", true),
            (
                "priority = 7 AND sender = 'shop' AND receiver IS NULL",
                true,
            ),
            ("created_at = 1700000000000 AND context > 1e19", true),
            ("missing IS NULL AND NOT region = 1", true),
            ("n > 3", false),
        ] {
            assert_eq!(
                Selector::parse(text).unwrap().matches(&src),
                expected,
                "{text}"
            );
        }
    }
}
