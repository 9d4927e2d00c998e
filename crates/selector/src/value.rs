//! What a selector reads from a message: borrowed values, header names and the lookup trait.

/// A value as the selector sees it, borrowed from the message (or from the selector's literals).
///
/// `Null` stands both for an absent property and for SQL's UNKNOWN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// Absent, or unknown.
    Null,
    /// `TRUE` or `FALSE`.
    Bool(bool),
    /// An exact numeric value.
    Int(i64),
    /// An approximate numeric value.
    Float(f64),
    /// A string.
    Str(&'a str),
}

impl<'a> Value<'a> {
    /// An unsigned number: `Int` when it fits in an `i64`, otherwise the nearest `Float`.
    ///
    /// For adapters whose fields are `u64` (Ferry's `context` and `created_at`).
    pub fn from_u64(n: u64) -> Value<'a> {
        match i64::try_from(n) {
            Ok(i) => Value::Int(i),
            // Precision loss is acceptable: values this large do not arise as times, and a
            // context this large can still be compared approximately.
            #[allow(clippy::cast_precision_loss)]
            Err(_) => Value::Float(n as f64),
        }
    }

    /// Whether this is `Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

impl From<bool> for Value<'_> {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value<'_> {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<f64> for Value<'_> {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Str(s)
    }
}

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A header field of a Ferry message, resolved from its identifier when the selector is parsed
/// so that evaluation never compares names for headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Header {
    /// `priority` (alias `JMSPriority`): 1 to 10, an `Int`.
    Priority,
    /// `sender`: the sending client's name, a `Str`.
    Sender,
    /// `receiver`: the addressed client's name, a `Str`, or `Null` when unaddressed.
    Receiver,
    /// `context`: the application context number, an `Int` (0 = none).
    Context,
    /// `created_at` (alias `JMSTimestamp`): arrival time in ms since the Unix epoch, an `Int`.
    CreatedAt,
}

impl Header {
    /// Every header field.
    pub const ALL: [Header; 5] = [
        Header::Priority,
        Header::Sender,
        Header::Receiver,
        Header::Context,
        Header::CreatedAt,
    ];

    /// The header an identifier names, if any. Identifiers are case-sensitive, as in JMS.
    pub fn from_identifier(name: &str) -> Option<Header> {
        Some(match name {
            "priority" | "JMSPriority" => Header::Priority,
            "sender" => Header::Sender,
            "receiver" => Header::Receiver,
            "context" => Header::Context,
            "created_at" | "JMSTimestamp" => Header::CreatedAt,
            _ => return None,
        })
    }

    /// The identifier Ferry uses for this header.
    pub fn name(self) -> &'static str {
        match self {
            Header::Priority => "priority",
            Header::Sender => "sender",
            Header::Receiver => "receiver",
            Header::Context => "context",
            Header::CreatedAt => "created_at",
        }
    }
}

/// A message as a selector reads it.
///
/// The broker implements this for its message type; both lookups return values borrowed from the
/// message, so evaluating a selector copies nothing. A property that is absent is `Value::Null`.
///
/// ```
/// use ferry_selector::{Header, SelectorSource, Value};
///
/// struct Msg { priority: u8, sender: String, properties: Vec<(String, i64)> }
///
/// impl SelectorSource for Msg {
///     fn header(&self, header: Header) -> Value<'_> {
///         match header {
///             Header::Priority => Value::Int(i64::from(self.priority)),
///             Header::Sender => Value::Str(&self.sender),
///             _ => Value::Null,
///         }
///     }
///     fn property(&self, name: &str) -> Value<'_> {
///         self.properties.iter().find(|(n, _)| n == name).map_or(Value::Null, |(_, v)| Value::Int(*v))
///     }
/// }
/// ```
pub trait SelectorSource {
    /// The value of a header field.
    fn header(&self, header: Header) -> Value<'_>;
    /// The value of the property with this exact name, or `Value::Null` when there is none.
    fn property(&self, name: &str) -> Value<'_>;
}

impl<T: SelectorSource + ?Sized> SelectorSource for &T {
    fn header(&self, header: Header) -> Value<'_> {
        (**self).header(header)
    }
    fn property(&self, name: &str) -> Value<'_> {
        (**self).property(name)
    }
}
