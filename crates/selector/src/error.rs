//! The one error type of this crate: what is wrong with a selector, and where.

use std::fmt;

/// Selectors longer than this many bytes are refused before they are read.
pub const MAX_SELECTOR_LEN: usize = 64 * 1024;

/// The deepest nesting accepted: parentheses, `NOT`s, unary signs and operator chains together.
///
/// Deeper input is an error rather than a risk to the stack, both while parsing and while
/// evaluating.
pub const MAX_DEPTH: usize = 128;

/// A selector that cannot be parsed.
///
/// `position` is the byte offset into the selector text where the problem was found (for input
/// over [`MAX_SELECTOR_LEN`], the limit itself). Displayed as `"<message> at position <n>"`,
/// ready to travel in an `InvalidArgument` error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorError {
    /// Byte offset of the error in the selector text.
    pub position: usize,
    /// What is wrong, without the position (e.g. `"expected ')', found end of input"`).
    pub message: String,
}

impl SelectorError {
    /// An error at `position` with the given message.
    pub fn new(position: usize, message: impl Into<String>) -> Self {
        SelectorError {
            position,
            message: message.into(),
        }
    }
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at position {}", self.message, self.position)
    }
}

impl std::error::Error for SelectorError {}
