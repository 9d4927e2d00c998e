//! [`SimpleMessage`]: an owned message that implements [`SelectorSource`], for tests, tools and
//! examples. The broker implements the trait for its own message type instead.

use crate::value::{Header, SelectorSource, Value};

/// An owned property value.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnedValue {
    /// `true` or `false`.
    Bool(bool),
    /// An exact number.
    Int(i64),
    /// An approximate number.
    Float(f64),
    /// A string.
    Str(String),
}

impl OwnedValue {
    /// This value, borrowed.
    pub fn as_value(&self) -> Value<'_> {
        match self {
            OwnedValue::Bool(b) => Value::Bool(*b),
            OwnedValue::Int(i) => Value::Int(*i),
            OwnedValue::Float(f) => Value::Float(*f),
            OwnedValue::Str(s) => Value::Str(s),
        }
    }
}

impl From<bool> for OwnedValue {
    fn from(b: bool) -> Self {
        OwnedValue::Bool(b)
    }
}

impl From<i64> for OwnedValue {
    fn from(i: i64) -> Self {
        OwnedValue::Int(i)
    }
}

impl From<f64> for OwnedValue {
    fn from(f: f64) -> Self {
        OwnedValue::Float(f)
    }
}

impl From<&str> for OwnedValue {
    fn from(s: &str) -> Self {
        OwnedValue::Str(s.to_string())
    }
}

impl From<String> for OwnedValue {
    fn from(s: String) -> Self {
        OwnedValue::Str(s)
    }
}

/// A message's headers and properties, owned.
///
/// ```
/// use ferry_selector::{Selector, SimpleMessage};
///
/// let msg = SimpleMessage::new("shop").with("region", "eu").with("price", 120);
/// assert!(Selector::parse("region = 'eu' AND price > 100").unwrap().matches(&msg));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SimpleMessage {
    /// `priority`.
    pub priority: i64,
    /// `sender`.
    pub sender: String,
    /// `receiver`.
    pub receiver: Option<String>,
    /// `context`.
    pub context: i64,
    /// `created_at`, ms since the Unix epoch.
    pub created_at: i64,
    /// Properties, names unique.
    pub properties: Vec<(String, OwnedValue)>,
}

impl SimpleMessage {
    /// A message from `sender` with priority 5, no receiver, context 0, time 0, no properties.
    pub fn new(sender: impl Into<String>) -> Self {
        SimpleMessage {
            priority: 5,
            sender: sender.into(),
            receiver: None,
            context: 0,
            created_at: 0,
            properties: Default::default(),
        }
    }

    /// The same message with property `name` set to `value` (replacing an earlier value).
    pub fn with(mut self, name: &str, value: impl Into<OwnedValue>) -> Self {
        let value = value.into();
        match self.properties.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v = value,
            None => self.properties.push((name.to_string(), value)),
        }
        self
    }
}

impl SelectorSource for SimpleMessage {
    fn header(&self, header: Header) -> Value<'_> {
        match header {
            Header::Priority => Value::Int(self.priority),
            Header::Sender => Value::Str(&self.sender),
            Header::Receiver => self.receiver.as_deref().into(),
            Header::Context => Value::Int(self.context),
            Header::CreatedAt => Value::Int(self.created_at),
        }
    }

    fn property(&self, name: &str) -> Value<'_> {
        self.properties
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Value::Null, |(_, v)| v.as_value())
    }
}
