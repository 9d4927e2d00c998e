//! Destinations and headers: how STOMP names and headers map onto Ferry's queues, topics and
//! message fields, in the conventions of ActiveMQ and Artemis (docs/stomp.md has the table).
//!
//! - `/queue/NAME` is queue NAME, `/topic/NAME` topic NAME (a subscription may name a pattern,
//!   `/topic/prices.*.eu` or `/topic/prices.>`).
//! - SEND: `priority` (JMS 0-9) becomes Ferry's 1-10 by adding 1 (JMS's default 4 is Ferry's
//!   default 5); `ttl` (ms) or `expires` (ms since the epoch, 0 = never) the time to live;
//!   `persistent:false` a message kept in memory only (the default is persistent);
//!   `AMQ_SCHEDULED_DELAY` or `ferry-delay` (ms) a delay; `ferry-to` the one client it is for;
//!   every other header (including `correlation-id`, `reply-to`, `content-type`) a string
//!   property of the same name.
//! - MESSAGE: `message-id`, `destination` (for a topic or pattern subscription, the topic the
//!   message was published to), `subscription`, `ack` (client modes), `priority` (JMS 0-9),
//!   `timestamp` and `expires` (ms since the epoch), `redelivered`, `ferry-sender`, `ferry-to`,
//!   and every property as a header (but the broker's topic property, which `destination`
//!   carries).

use bytes::{BufMut, Bytes, BytesMut};
use ferry_protocol::topic::TOPIC_PROPERTY;
use ferry_protocol::{DeliveryView, OutgoingMessage, PropertyValue, DEFAULT_PRIORITY};

use crate::codec::{Command, Escaping, Frame, Version};

/// What a STOMP destination names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Destination {
    /// `/queue/NAME`.
    Queue(String),
    /// `/topic/NAME` (or a pattern, for subscriptions).
    Topic(String),
    /// `/sender/NAME`: the messages client NAME sent, from every queue (subscriptions only).
    Sender(String),
}

impl Destination {
    /// Parses `/queue/NAME` or `/topic/NAME`; the error says what is accepted.
    pub fn parse(text: &str) -> Result<Destination, String> {
        let named = |kind: &str, name: &str| {
            if name.is_empty() {
                Err(format!("destination '{text}' names no {kind}"))
            } else {
                Ok(name.to_owned())
            }
        };
        if let Some(name) = text.strip_prefix("/queue/") {
            return named("queue", name).map(Destination::Queue);
        }
        if let Some(name) = text.strip_prefix("/topic/") {
            return named("topic", name).map(Destination::Topic);
        }
        if let Some(name) = text.strip_prefix("/sender/") {
            return named("sender", name).map(Destination::Sender);
        }
        Err(format!(
            "unknown destination '{}': use /queue/NAME, /topic/NAME or /sender/NAME",
            text.chars().take(100).collect::<String>()
        ))
    }
}

/// SEND headers that are not carried as properties.
const SEND_RESERVED: &[&str] = &[
    "destination",
    "content-length",
    "transaction",
    "receipt",
    "priority",
    "expires",
    "ttl",
    "persistent",
    "AMQ_SCHEDULED_DELAY",
    "ferry-delay",
    "ferry-to",
];

/// Builds the message a SEND frame describes (`now_ms`: for `expires`). The error is the
/// ERROR frame's message.
pub fn outgoing(frame: &Frame, dest: &Destination, now_ms: u64) -> Result<OutgoingMessage, String> {
    let mut msg = match dest {
        Destination::Queue(q) => OutgoingMessage::new(q.clone(), frame.body.clone()),
        Destination::Topic(t) => OutgoingMessage::to_topic(t.as_str(), frame.body.clone()),
        Destination::Sender(_) => {
            return Err("a SEND goes to /queue/NAME or /topic/NAME; /sender/NAME is for SUBSCRIBE (messages by their sender)".into())
        }
    };
    if let Some(p) = frame.header("priority") {
        msg.priority = match p.trim().parse::<u8>() {
            Ok(jms @ 0..=9) => jms + 1,
            _ => {
                return Err(format!(
                    "invalid priority '{p}': use 0 to 9 (JMS priorities)"
                ))
            }
        };
    } else {
        msg.priority = DEFAULT_PRIORITY;
    }
    if let Some(v) = frame.header("persistent") {
        msg.persistent = match v {
            "true" => true,
            "false" => false,
            _ => return Err(format!("invalid persistent '{v}': use true or false")),
        };
    }
    if let Some(v) = frame.header("ttl") {
        msg.ttl_ms = millis("ttl", v)?;
    } else if let Some(v) = frame.header("expires") {
        let at = millis("expires", v)?;
        if at != 0 {
            // Already past: the shortest life there is (it expires before anyone gets it).
            msg.ttl_ms = at.saturating_sub(now_ms).max(1);
        }
    }
    if let Some(v) = frame
        .header("AMQ_SCHEDULED_DELAY")
        .or_else(|| frame.header("ferry-delay"))
    {
        msg.delay_ms = millis("delay", v)?;
    }
    if let Some(to) = frame.header("ferry-to") {
        msg.receiver = Some(to.to_owned());
    }
    for (name, value) in &frame.headers {
        if SEND_RESERVED.contains(&name.as_str()) || msg.properties.iter().any(|(n, _)| n == name) {
            continue; // the first of a repeated header counts, as for every header
        }
        msg.properties
            .push((name.clone(), PropertyValue::Str(value.clone())));
    }
    Ok(msg)
}

fn millis(what: &str, v: &str) -> Result<u64, String> {
    v.trim()
        .parse::<u64>()
        .map_err(|_| format!("invalid {what} '{v}': use a whole number of milliseconds"))
}

/// What every MESSAGE of one subscription starts with, escaped once: the command, the
/// `subscription` and the `destination` headers.
pub fn message_head(subscription: &str, destination: &str, version: Version) -> Bytes {
    let mut head = subscription_head(subscription, version);
    let esc = Escaping::of(version, true);
    head.put_slice(b"destination:");
    esc.write(&printable(destination.to_owned(), version), &mut head);
    head.put_u8(b'\n');
    head.freeze()
}

/// The command and the `subscription` header (a pattern subscription's MESSAGE frames name
/// each message's own topic: see [`put_topic_destination`]).
pub fn subscription_head(subscription: &str, version: Version) -> BytesMut {
    let esc = Escaping::of(version, true);
    let mut head = BytesMut::with_capacity(64 + subscription.len());
    head.put_slice(b"MESSAGE\nsubscription:");
    esc.write(&printable(subscription.to_owned(), version), &mut head);
    head.put_u8(b'\n');
    head
}

/// Appends the `destination` header of a message published to a topic: `/topic/` and the
/// topic the broker recorded in its [`TOPIC_PROPERTY`], or `fallback` (the subscribed
/// pattern) for a message without it.
pub fn put_topic_destination(
    out: &mut BytesMut,
    d: &DeliveryView<'_>,
    fallback: &str,
    version: Version,
) {
    let topic = d.properties.iter().find_map(|(n, v)| match v {
        PropertyValue::Str(t) if n == TOPIC_PROPERTY => Some(t.as_str()),
        _ => None,
    });
    out.put_slice(b"destination:");
    match topic {
        Some(t) => {
            out.put_slice(b"/topic/");
            Escaping::of(version, true).write(&printable(t.to_owned(), version), out);
        }
        None => Escaping::of(version, true).write(&printable(fallback.to_owned(), version), out),
    }
    out.put_u8(b'\n');
}

/// About the bytes [`put_message`] writes for `d` (exact unless headers need escaping).
pub fn message_len(head: &[u8], d: &DeliveryView<'_>) -> usize {
    let props: usize = d
        .properties
        .iter()
        .map(|(n, v)| {
            n.len()
                + 2
                + match v {
                    PropertyValue::Str(s) => s.len(),
                    _ => 24,
                }
        })
        .sum();
    head.len() + 160 + d.sender.len() + d.receiver.map_or(0, str::len) + props + d.body.len()
}

/// Appends the MESSAGE frame of delivery `d` to `out`, straight from the delivery's fields:
/// `head` (from [`message_head`]), `message-id`, `ack` (client acknowledgement modes: the id
/// ACK and NACK name), `priority` (JMS 0-9), `timestamp`, `expires`, `redelivered`,
/// `ferry-sender`, `ferry-to`, every property as a header, `content-length`, the body.
pub fn put_message(
    out: &mut BytesMut,
    head: &[u8],
    d: &DeliveryView<'_>,
    ack: Option<u64>,
    version: Version,
) {
    let esc = Escaping::of(version, true);
    let mut num = itoa::Buffer::new();
    out.reserve(message_len(head, d));
    out.put_slice(head);
    out.put_slice(b"message-id:");
    out.put_slice(num.format(d.id).as_bytes());
    if let Some(ack) = ack {
        out.put_slice(b"\nack:");
        out.put_slice(num.format(ack).as_bytes());
    }
    out.put_slice(b"\npriority:");
    out.put_slice(num.format(d.priority.saturating_sub(1)).as_bytes());
    out.put_slice(b"\ntimestamp:");
    out.put_slice(num.format(d.created_at).as_bytes());
    if d.expires_at != 0 {
        out.put_slice(b"\nexpires:");
        out.put_slice(num.format(d.expires_at).as_bytes());
    }
    out.put_slice(if d.delivery_count > 0 {
        b"\nredelivered:true\nferry-sender:".as_slice()
    } else {
        b"\nredelivered:false\nferry-sender:".as_slice()
    });
    esc.write(d.sender, out);
    out.put_u8(b'\n');
    if let Some(to) = d.receiver {
        out.put_slice(b"ferry-to:");
        esc.write(&printable(to.to_owned(), version), out);
        out.put_u8(b'\n');
    }
    for (name, value) in d.properties {
        // The topic is in `destination` already.
        if name == "content-length" || name == TOPIC_PROPERTY || !writable_name(name, version) {
            continue;
        }
        esc.write(name, out);
        out.put_u8(b':');
        match value {
            PropertyValue::Str(s) if needs_care(s, version) => {
                esc.write(&printable(s.clone(), version), out)
            }
            PropertyValue::Str(s) => esc.write(s, out),
            PropertyValue::Int(i) => out.put_slice(num.format(*i).as_bytes()),
            PropertyValue::Float(x) => out.put_slice(x.to_string().as_bytes()),
            PropertyValue::Bool(b) => out.put_slice(if *b { b"true" } else { b"false" }),
        }
        out.put_u8(b'\n');
    }
    if !d.body.is_empty() {
        out.put_slice(b"content-length:");
        out.put_slice(num.format(d.body.len()).as_bytes());
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.put_slice(d.body);
    out.put_u8(0);
}

/// Appends a RECEIPT frame for `receipt` to `out` (without building a [`Frame`]).
pub fn put_receipt(out: &mut BytesMut, receipt: &str, version: Version) {
    out.put_slice(b"RECEIPT\nreceipt-id:");
    if needs_care(receipt, version) {
        Escaping::of(version, true).write(&printable(receipt.to_owned(), version), out);
    } else {
        Escaping::of(version, true).write(receipt, out);
    }
    out.put_slice(b"\n\n\0");
}

/// Whether a value has line ends the version cannot carry (see [`printable`]).
fn needs_care(value: &str, version: Version) -> bool {
    match version {
        Version::V1_2 => false,
        Version::V1_1 => value.contains('\r'),
        Version::V1_0 => value.contains(['\r', '\n']),
    }
}

/// A header value as the version can write it: 1.0 cannot carry line ends, 1.1 no CR.
fn printable(value: String, version: Version) -> String {
    match version {
        Version::V1_2 => value,
        Version::V1_1 if !value.contains('\r') => value,
        Version::V1_1 => value.replace('\r', " "),
        Version::V1_0 if !value.contains(['\r', '\n']) => value,
        Version::V1_0 => value.replace(['\r', '\n'], " "),
    }
}

/// Whether a property name can be a header name in `version` (1.0 has no escapes).
fn writable_name(name: &str, version: Version) -> bool {
    match version {
        Version::V1_0 => !name.contains([':', '\r', '\n']),
        Version::V1_1 => !name.contains('\r'),
        Version::V1_2 => true,
    }
}

/// Encodes a frame for a peer speaking `version`; headers it cannot carry were dropped before.
pub fn encode(frame: &Frame, version: Version) -> Bytes {
    let mut out = Vec::with_capacity(frame.encoded_len(version));
    if frame.encode(version, &mut out).is_err() {
        // Only a header the version cannot carry gets here: written without the headers.
        out.clear();
        let bare = Frame {
            command: frame.command,
            headers: Vec::new(),
            body: frame.body.clone(),
        };
        let _ = bare.encode(version, &mut out);
    }
    Bytes::from(out)
}

/// An ERROR frame: `message` (one line) says what went wrong, the body the details.
pub fn error(message: &str, details: &str, receipt: Option<&str>, version: Version) -> Frame {
    let line: String = message
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .take(1000)
        .collect();
    let mut f = Frame::new(Command::Error).header_with("message", line);
    if let Some(r) = receipt {
        f.headers
            .push(("receipt-id".into(), printable(r.to_owned(), version)));
    }
    f.headers.push(("content-type".into(), "text/plain".into()));
    let mut body = details.to_owned();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    f.body = Bytes::from(body);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(headers: &[(&str, &str)]) -> Frame {
        let mut f = Frame::new(Command::Send).body_with(&b"x"[..]);
        for (n, v) in headers {
            f = f.header_with(*n, *v);
        }
        f
    }

    #[test]
    fn destinations_name_queues_and_topics() {
        assert_eq!(
            Destination::parse("/queue/orders"),
            Ok(Destination::Queue("orders".into()))
        );
        assert_eq!(
            Destination::parse("/topic/prices.>"),
            Ok(Destination::Topic("prices.>".into()))
        );
        assert!(Destination::parse("/queue/").is_err());
        assert!(Destination::parse("orders").is_err());
        assert!(Destination::parse("/exchange/x").is_err());
    }

    #[test]
    fn send_headers_map_onto_the_message() {
        let dest = Destination::Queue("q".into());
        let f = send(&[
            ("destination", "/queue/q"),
            ("priority", "9"),
            ("persistent", "false"),
            ("ttl", "5000"),
            ("AMQ_SCHEDULED_DELAY", "250"),
            ("correlation-id", "c1"),
            ("reply-to", "/queue/answers"),
            ("ferry-to", "bob"),
            ("region", "eu"),
            ("region", "us"),
        ]);
        let m = outgoing(&f, &dest, 1000).expect("valid");
        assert_eq!(m.priority, 10);
        assert!(!m.persistent);
        assert_eq!((m.ttl_ms, m.delay_ms), (5000, 250));
        assert_eq!(m.receiver.as_deref(), Some("bob"));
        let names: Vec<&str> = m.properties.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["correlation-id", "reply-to", "region"]);
        assert_eq!(m.properties[2].1, PropertyValue::Str("eu".into()));
        let expires = send(&[("expires", "4000")]);
        assert_eq!(outgoing(&expires, &dest, 1000).expect("valid").ttl_ms, 3000);
        let default = outgoing(&send(&[]), &dest, 0).expect("valid");
        assert_eq!((default.priority, default.persistent), (5, true));
    }

    #[test]
    fn bad_send_headers_are_refused_with_a_reason() {
        let dest = Destination::Queue("q".into());
        for (h, v) in [
            ("priority", "10"),
            ("priority", "x"),
            ("persistent", "yes"),
            ("ttl", "-1"),
            ("AMQ_SCHEDULED_DELAY", "soon"),
        ] {
            let e = outgoing(&send(&[(h, v)]), &dest, 0).expect_err(h);
            assert!(e.contains(v), "{e}");
        }
    }

    #[test]
    fn a_delivery_becomes_a_message_frame_that_decodes_back() {
        let props = vec![
            (
                "region".to_owned(),
                PropertyValue::Str("eu:west\nline".into()),
            ),
            ("count".to_owned(), PropertyValue::Int(-3)),
            ("ok".to_owned(), PropertyValue::Bool(true)),
        ];
        let d = DeliveryView {
            delivery_id: 42,
            id: 7,
            queue: "q",
            sender: "alice",
            receiver: Some("bob"),
            priority: 10,
            context: 0,
            created_at: 1000,
            delivery_count: 1,
            properties: &props.into(),
            body: b"bin\0ary",
            expires_at: 5000,
        };
        for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
            let head = message_head("sub:1", "/queue/q", version);
            let mut out = BytesMut::new();
            put_message(&mut out, &head, &d, Some(42), version);
            let mut buf = out.clone();
            let limits = crate::codec::Limits::with_body(1 << 20);
            let item = crate::codec::decode(&mut buf, version, &limits)
                .expect("decodes")
                .expect("whole");
            let crate::codec::Item::Frame(f) = item else {
                panic!("a frame");
            };
            assert_eq!(f.command, Command::Message);
            assert_eq!(&f.body[..], b"bin\0ary");
            let h = |n: &str| f.header(n).unwrap_or_default().to_owned();
            assert_eq!(h("message-id"), "7");
            assert_eq!(h("ack"), "42");
            assert_eq!(h("priority"), "9");
            assert_eq!(
                (h("timestamp"), h("expires")),
                ("1000".into(), "5000".into())
            );
            assert_eq!(h("redelivered"), "true");
            assert_eq!(
                (h("ferry-sender"), h("ferry-to")),
                ("alice".into(), "bob".into())
            );
            assert_eq!((h("count"), h("ok")), ("-3".into(), "true".into()));
            assert_eq!(h("destination"), "/queue/q");
            if version == Version::V1_2 {
                assert_eq!(h("subscription"), "sub:1");
                assert_eq!(h("region"), "eu:west\nline");
            }
            assert!(
                out.len() <= message_len(&head, &d) + 16,
                "sized about right"
            );
        }
        let mut r = BytesMut::new();
        put_receipt(&mut r, "r:1", Version::V1_2);
        assert_eq!(&r[..], b"RECEIPT\nreceipt-id:r\\c1\n\n\0");
    }
}
