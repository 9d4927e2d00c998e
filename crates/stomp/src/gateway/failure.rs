//! Why a STOMP connection closes with an ERROR frame: its `message` header, its body, and the
//! receipt of the frame that failed.

use ferry_protocol::{ErrorReply, Response};

/// Why the connection closes with an ERROR frame.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) details: String,
    pub(crate) receipt: Option<String>,
}

impl Failure {
    pub(crate) fn new(message: impl Into<String>, details: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            details: details.into(),
            receipt: None,
        }
    }

    pub(crate) fn with_receipt(mut self, receipt: Option<String>) -> Failure {
        self.receipt = receipt;
        self
    }

    /// A refusal by the broker (an `Unauthorized` one names the permission missing).
    pub(crate) fn refused(what: &str, e: &ErrorReply) -> Failure {
        Failure::new(
            e.message.clone(),
            format!(
                "{what} was refused by the broker: {} (Ferry error {:?})",
                e.message, e.code
            ),
        )
    }

    /// What a reply other than the one expected means.
    pub(crate) fn unexpected(what: &str, reply: &Response) -> Failure {
        match reply {
            Response::Error(e) => Failure::refused(what, e),
            other => Failure::new(
                format!("unexpected reply to {what}"),
                format!("the broker answered {:?}", other.kind()),
            ),
        }
    }
}
