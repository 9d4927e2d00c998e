//! How received messages and queue listings are shown: a human-readable block, one JSON object
//! per line, and the queue table.

use std::fmt::Write as _;

use base64::Engine as _;
use ferry_protocol::topic::TOPIC_PROPERTY;
use ferry_protocol::{Message, PropertyValue, QueueInfo};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::timestamp::iso8601_utc;

/// A message as `recv --json` prints it. Field order is the documented key order.
#[derive(Serialize)]
struct JsonMessage<'a> {
    id: u64,
    queue: &'a str,
    sender: &'a str,
    receiver: Option<&'a str>,
    priority: u8,
    context: u64,
    properties: JsonProperties<'a>,
    /// The body as text when it is valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a str>,
    /// The body in standard base64 when it is not valid UTF-8.
    #[serde(skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
    created_at: String,
    /// When the message expires (ISO 8601), if it has a time to live.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    redelivered: bool,
}

/// Properties as a JSON object with typed values, in the sender's order.
struct JsonProperties<'a>(&'a [(String, PropertyValue)]);

impl Serialize for JsonProperties<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (name, value) in self.0 {
            match value {
                PropertyValue::Bool(b) => map.serialize_entry(name, b)?,
                PropertyValue::Int(i) => map.serialize_entry(name, i)?,
                // JSON has no NaN or infinity; serde_json writes them as null.
                PropertyValue::Float(f) => map.serialize_entry(name, f)?,
                PropertyValue::Str(v) => map.serialize_entry(name, v)?,
            }
        }
        map.end()
    }
}

/// One line of JSON (no trailing newline) for a received message.
pub fn message_json(m: &Message) -> String {
    let (body, body_base64) = match std::str::from_utf8(&m.body) {
        Ok(text) => (Some(text), None),
        Err(_) => (
            None,
            Some(base64::engine::general_purpose::STANDARD.encode(&m.body)),
        ),
    };
    let json = JsonMessage {
        id: m.id,
        queue: &m.queue,
        sender: &m.sender,
        receiver: m.receiver.as_deref(),
        priority: m.priority,
        context: m.context,
        properties: JsonProperties(&m.properties),
        body,
        body_base64,
        created_at: iso8601_utc(m.created_at),
        expires_at: (m.expires_at != 0).then(|| iso8601_utc(m.expires_at)),
        redelivered: m.redelivered(),
    };
    // Serialising plain strings, numbers and maps with string keys cannot fail.
    serde_json::to_string(&json).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// Properties as `name=value` pairs separated by spaces; strings are quoted so that `n=5` and
/// `n="5"` can be told apart.
pub fn properties_text(props: &[(String, PropertyValue)]) -> String {
    let parts: Vec<String> = props
        .iter()
        .map(|(name, value)| match value {
            PropertyValue::Bool(b) => format!("{name}={b}"),
            PropertyValue::Int(i) => format!("{name}={i}"),
            // Debug formatting keeps the `.0` of whole floats, so they do not read as integers.
            PropertyValue::Float(f) => format!("{name}={f:?}"),
            PropertyValue::Str(s) => format!("{name}={}", quote(s)),
        })
        .collect();
    if parts.is_empty() {
        "(none)".to_string()
    } else {
        parts.join(" ")
    }
}

/// A string in double quotes with JSON escapes, so control characters cannot garble a terminal.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The human-readable block for a received message, ending with a newline. `delivery_id` is
/// shown when the user has to settle the delivery by that id (the shell).
pub fn message_block(m: &Message, delivery_id: Option<u64>) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "id:          {}", m.id);
    if let Some(d) = delivery_id {
        let _ = writeln!(out, "delivery:    {d}");
    }
    let _ = writeln!(out, "queue:       {}", m.queue);
    // A publish names its topic in a property the broker sets: shown as a field of its own
    // (what a pattern subscription's receiver wants to know), not among the sender's.
    let topic = m.properties.iter().find_map(|(n, v)| match v {
        PropertyValue::Str(t) if n == TOPIC_PROPERTY => Some(t.as_str()),
        _ => None,
    });
    if let Some(topic) = topic {
        let _ = writeln!(out, "topic:       {topic}");
    }
    let _ = writeln!(out, "sender:      {}", m.sender);
    let _ = writeln!(
        out,
        "receiver:    {}",
        m.receiver.as_deref().unwrap_or("(none)")
    );
    let _ = writeln!(out, "priority:    {}", m.priority);
    let _ = writeln!(out, "context:     {}", m.context);
    let own: Vec<(String, PropertyValue)> = m
        .properties
        .iter()
        .filter(|(n, _)| n != TOPIC_PROPERTY)
        .cloned()
        .collect();
    let _ = writeln!(out, "properties:  {}", properties_text(&own));
    let _ = writeln!(out, "created_at:  {}", iso8601_utc(m.created_at));
    if m.expires_at != 0 {
        let _ = writeln!(out, "expires_at:  {}", iso8601_utc(m.expires_at));
    }
    let _ = writeln!(out, "redelivered: {}", m.redelivered());
    out.push('\n');
    match std::str::from_utf8(&m.body) {
        Ok(text) => {
            out.push_str(text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        Err(_) => {
            let _ = writeln!(
                out,
                "({} bytes, not UTF-8; base64:)\n{}",
                m.body.len(),
                base64::engine::general_purpose::STANDARD.encode(&m.body)
            );
        }
    }
    out
}

/// The queue table: name, ready, in flight, with columns sized to fit.
pub fn queue_table(queues: &[QueueInfo]) -> String {
    let name_w = queues
        .iter()
        .map(|q| q.name.len())
        .chain(std::iter::once("NAME".len()))
        .max()
        .unwrap_or(4);
    let mut out = format!(
        "{:<name_w$}  {:>10}  {:>10}\n",
        "NAME", "READY", "IN FLIGHT"
    );
    for q in queues {
        let _ = writeln!(
            out,
            "{:<name_w$}  {:>10}  {:>10}",
            q.name, q.ready, q.in_flight
        );
    }
    out
}

/// The queue listing as a JSON array, for scripts.
pub fn queue_list_json(queues: &[QueueInfo]) -> String {
    let rows: Vec<serde_json::Value> = queues
        .iter()
        .map(|q| serde_json::json!({"name": q.name, "ready": q.ready, "in_flight": q.in_flight}))
        .collect();
    serde_json::Value::Array(rows).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn message(body: &'static [u8]) -> Message {
        Message {
            id: 42,
            queue: "orders".into(),
            sender: "alice".into(),
            receiver: None,
            priority: 7,
            context: 9,
            properties: vec![
                ("n".into(), PropertyValue::Int(5)),
                ("f".into(), PropertyValue::Float(2.0)),
                ("b".into(), PropertyValue::Bool(true)),
                ("s".into(), PropertyValue::Str("5".into())),
            ]
            .into(),
            body: Bytes::from_static(body),
            created_at: 951_827_696_789,
            delivery_count: 1,
            expires_at: 0,
        }
    }

    #[test]
    fn json_has_documented_keys_in_order() {
        let line = message_json(&message(b"hello"));
        assert_eq!(
            line,
            r#"{"id":42,"queue":"orders","sender":"alice","receiver":null,"priority":7,"context":9,"properties":{"n":5,"f":2.0,"b":true,"s":"5"},"body":"hello","created_at":"2000-02-29T12:34:56.789Z","redelivered":true}"#
        );
    }

    #[test]
    fn json_names_the_expiry_time_when_there_is_one() {
        let mut m = message(b"hello");
        m.expires_at = m.created_at + 1_000;
        let line = message_json(&m);
        assert!(
            line.ends_with(r#""created_at":"2000-02-29T12:34:56.789Z","expires_at":"2000-02-29T12:34:57.789Z","redelivered":true}"#),
            "{line}"
        );
    }

    #[test]
    fn json_uses_base64_for_binary_bodies() {
        let v: serde_json::Value =
            serde_json::from_str(&message_json(&message(&[0xff, 0x00, 0x80]))).unwrap();
        assert!(v.get("body").is_none());
        assert_eq!(v["body_base64"], "/wCA");
    }

    #[test]
    fn json_receiver_when_set() {
        let mut m = message(b"x");
        m.receiver = Some("bob".into());
        let v: serde_json::Value = serde_json::from_str(&message_json(&m)).unwrap();
        assert_eq!(v["receiver"], "bob");
    }

    #[test]
    fn block_shows_every_field_then_body() {
        let block = message_block(&message(b"hello"), Some(3));
        assert_eq!(
            block,
            "id:          42\n\
             delivery:    3\n\
             queue:       orders\n\
             sender:      alice\n\
             receiver:    (none)\n\
             priority:    7\n\
             context:     9\n\
             properties:  n=5 f=2.0 b=true s=\"5\"\n\
             created_at:  2000-02-29T12:34:56.789Z\n\
             redelivered: true\n\
             \n\
             hello\n"
        );
    }

    #[test]
    fn block_for_binary_body() {
        let block = message_block(&message(&[0xff]), None);
        assert!(!block.contains("delivery:"));
        assert!(
            block.ends_with("(1 bytes, not UTF-8; base64:)\n/w==\n"),
            "{block}"
        );
    }

    #[test]
    fn table_aligns_columns() {
        let t = queue_table(&[
            QueueInfo {
                name: "a".into(),
                ready: 3,
                in_flight: 1,
            },
            QueueInfo {
                name: "longer-name".into(),
                ready: 10,
                in_flight: 0,
            },
        ]);
        assert_eq!(
            t,
            "NAME              READY   IN FLIGHT\n\
             a                     3           1\n\
             longer-name          10           0\n"
        );
    }

    #[test]
    fn list_json() {
        let j = queue_list_json(&[QueueInfo {
            name: "a".into(),
            ready: 3,
            in_flight: 1,
        }]);
        assert_eq!(j, r#"[{"in_flight":1,"name":"a","ready":3}]"#);
    }
}
