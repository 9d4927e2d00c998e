//! JMS message selectors for Ferry.
//!
//! A selector is a condition over a message's header fields and properties, in the SQL-like
//! language of JMS (`region = 'eu' AND price > 100`). It is parsed once, when a subscription or
//! receive is set up, into a [`Selector`]; [`Selector::matches`] then tests each message without
//! allocating, reading the message through the [`SelectorSource`] trait the broker implements.
//! A message matches only when the selector is TRUE: FALSE and UNKNOWN (SQL's NULL) do not.
//!
//! Modules:
//! - [`error`]: [`SelectorError`] (message and byte position) and the input limits;
//! - [`value`]: [`Value`], [`Header`] and the [`SelectorSource`] trait;
//! - `lexer`: text to tokens;
//! - `parser`: tokens to an expression tree, with type checks where types are known;
//! - `ast`: the expression tree;
//! - `like`: `LIKE` patterns, compiled at parse time;
//! - `eval`: three-valued evaluation;
//! - [`simple`]: [`SimpleMessage`], an owned message for tests and tools.
//!
//! The language, its types and Ferry's choices where JMS leaves room are described in
//! `docs/selectors.md`.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

mod ast;
pub mod error;
mod eval;
mod lexer;
mod like;
mod parser;
pub mod simple;
pub mod value;

use std::fmt;
use std::str::FromStr;

pub use error::{SelectorError, MAX_DEPTH, MAX_SELECTOR_LEN};
pub use simple::{OwnedValue, SimpleMessage};
pub use value::{Header, SelectorSource, Value};

/// A parsed selector, ready to test messages. Cheap to share between threads.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    text: Box<str>,
    /// `None` for the empty selector, which selects every message.
    expr: Option<ast::Expr>,
}

impl Selector {
    /// Parses selector text.
    ///
    /// An empty (or all-whitespace) text is the empty selector, which selects every message, as
    /// JMS specifies. Errors name the byte position of the problem.
    ///
    /// ```
    /// use ferry_selector::Selector;
    ///
    /// let err = Selector::parse("price > (1 + 2").unwrap_err();
    /// assert_eq!(err.position, 14);
    /// assert_eq!(err.to_string(), "expected ')', found end of input at position 14");
    /// ```
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let expr = parser::parse(text)?;
        Ok(Selector {
            text: text.into(),
            expr,
        })
    }

    /// Whether the message is selected: the selector is TRUE for it.
    pub fn matches<S: SelectorSource + ?Sized>(&self, msg: &S) -> bool {
        self.evaluate(msg) == Some(true)
    }

    /// The selector's truth value for the message: `Some(true)`, `Some(false)`, or `None` for
    /// UNKNOWN.
    pub fn evaluate<S: SelectorSource + ?Sized>(&self, msg: &S) -> Option<bool> {
        match &self.expr {
            Some(expr) => eval::truth(expr, msg),
            None => Some(true),
        }
    }

    /// Whether this is the empty selector, which selects every message (a broker may skip
    /// evaluating it).
    pub fn selects_all(&self) -> bool {
        self.expr.is_none()
    }

    /// The text it was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Selector::parse(text)
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
