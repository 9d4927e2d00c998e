//! A subscription's definition as the log holds it, in a `SubscriptionCreated` record and in
//! the subscriptions trailer of a segment header (the same bytes in both places):
//!
//! ```text
//! string  topic
//! string  name
//! u8      flags: 0x01 durable, 0x02 shared
//! string  selector text (empty: every message)
//! string  owner (the client that made it)
//! u32     max deliveries of its queue (0 = unlimited)
//! u8      dead-letter queue present (0/1), then string
//! u8      expiry queue present (0/1), then string
//! ```

use super::codec::{put_str, put_u32, Reader};
use super::FormatError;

const DURABLE: u8 = 0x01;
const SHARED: u8 = 0x02;

/// A subscription's definition, borrowed, for writing.
#[derive(Debug, Clone, Copy)]
pub struct SubscriptionFields<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Kept across restarts.
    pub durable: bool,
    /// Consumed by several sessions at once.
    pub shared: bool,
    /// Selector text; empty for none.
    pub selector: &'a str,
    /// The client that made it.
    pub owner: &'a str,
    /// Its queue's maximum delivery count (0 = unlimited).
    pub max_deliveries: u32,
    /// Its queue's dead-letter queue.
    pub dead_letter: Option<&'a str>,
    /// Its queue's expiry queue.
    pub expiry: Option<&'a str>,
}

/// A subscription's definition, decoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriptionDef {
    /// Its topic.
    pub topic: String,
    /// Its name.
    pub name: String,
    /// Kept across restarts.
    pub durable: bool,
    /// Consumed by several sessions at once.
    pub shared: bool,
    /// Selector text; empty for none.
    pub selector: String,
    /// The client that made it.
    pub owner: String,
    /// Its queue's maximum delivery count (0 = unlimited).
    pub max_deliveries: u32,
    /// Its queue's dead-letter queue.
    pub dead_letter: Option<String>,
    /// Its queue's expiry queue.
    pub expiry: Option<String>,
}

impl SubscriptionDef {
    /// The definition, borrowed.
    pub fn fields(&self) -> SubscriptionFields<'_> {
        SubscriptionFields {
            topic: &self.topic,
            name: &self.name,
            durable: self.durable,
            shared: self.shared,
            selector: &self.selector,
            owner: &self.owner,
            max_deliveries: self.max_deliveries,
            dead_letter: self.dead_letter.as_deref(),
            expiry: self.expiry.as_deref(),
        }
    }
}

fn put_opt(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
        None => out.push(0),
    }
}

/// Appends a definition.
pub fn put(out: &mut Vec<u8>, s: &SubscriptionFields<'_>) {
    put_str(out, s.topic);
    put_str(out, s.name);
    let mut flags = 0;
    if s.durable {
        flags |= DURABLE;
    }
    if s.shared {
        flags |= SHARED;
    }
    out.push(flags);
    put_str(out, s.selector);
    put_str(out, s.owner);
    put_u32(out, s.max_deliveries);
    put_opt(out, s.dead_letter);
    put_opt(out, s.expiry);
}

fn read_opt(r: &mut Reader<'_>, field: &'static str) -> Result<Option<String>, FormatError> {
    match r.u8(field)? {
        0 => Ok(None),
        1 => Ok(Some(r.str(field)?)),
        v => Err(FormatError::Invalid {
            field,
            value: u64::from(v),
        }),
    }
}

/// Reads a definition written by [`put`].
pub fn read(r: &mut Reader<'_>) -> Result<SubscriptionDef, FormatError> {
    let topic = r.str("topic name")?;
    let name = r.str("subscription name")?;
    let flags = r.u8("subscription flags")?;
    if flags & !(DURABLE | SHARED) != 0 {
        return Err(FormatError::Invalid {
            field: "subscription flags",
            value: u64::from(flags),
        });
    }
    Ok(SubscriptionDef {
        topic,
        name,
        durable: flags & DURABLE != 0,
        shared: flags & SHARED != 0,
        selector: r.str("selector")?,
        owner: r.str("owner")?,
        max_deliveries: r.u32("max deliveries")?,
        dead_letter: read_opt(r, "dead-letter queue")?,
        expiry: read_opt(r, "expiry queue")?,
    })
}

/// Fewest bytes a definition takes (for checking counts read from disk).
pub const MIN_LEN: usize = 2 + 2 + 1 + 2 + 2 + 4 + 1 + 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_truncations() {
        let def = SubscriptionDef {
            topic: "prices".into(),
            name: "audit".into(),
            durable: true,
            shared: true,
            selector: "region = 'eu'".into(),
            owner: "alice".into(),
            max_deliveries: 3,
            dead_letter: Some("dlq".into()),
            expiry: None,
        };
        let mut out = Vec::new();
        put(&mut out, &def.fields());
        let mut r = Reader::new(&out);
        assert_eq!(read(&mut r).unwrap(), def);
        r.finish().unwrap();
        for cut in 0..out.len() {
            assert!(read(&mut Reader::new(&out[..cut])).is_err(), "{cut}");
        }
        let mut empty = Vec::new();
        put(&mut empty, &SubscriptionDef::default().fields());
        assert_eq!(empty.len(), MIN_LEN);
    }
}
