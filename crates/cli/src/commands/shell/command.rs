//! What one line of shell input asks for, once parsed ([`super::parse`]) and before it runs
//! ([`super::execute`](super)).

use ferry_protocol::requests::{Receive, SubscribeTopic};
use ferry_protocol::OutgoingMessage;

/// One shell command, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum ShellCommand {
    /// A blank line or a `#` comment.
    Nothing,
    /// `help`
    Help,
    /// `create Q`
    Create(String),
    /// `delete Q [force]`
    Delete {
        /// The queue.
        name: String,
        /// Drop its messages too.
        force: bool,
    },
    /// `list`
    List,
    /// `send Q[,Q2] [to=C] [prio=N] [ctx=N] [ttl=D] [delay=D] [K=V ...] -- BODY`
    Send(OutgoingMessage),
    /// `recv Q ...` or `from SENDER ...`
    Recv(Receive),
    /// `waiting`
    Waiting,
    /// `ack ID...`
    Ack(Vec<u64>),
    /// `nack ID... [drop]`
    Nack {
        /// Delivery ids.
        ids: Vec<u64>,
        /// Back to the queue (default) or dropped.
        requeue: bool,
    },
    /// `ping`
    Ping,
    /// `topic create T`
    TopicCreate(String),
    /// `topic delete T [force]`
    TopicDelete {
        /// The topic.
        name: String,
        /// Drop its subscriptions' messages too.
        force: bool,
    },
    /// `topics` or `topic list`
    TopicList,
    /// `publish T [to=C] [prio=N] [ctx=N] [ttl=D] [delay=D] [non-persistent] [K=V ...] -- BODY`
    Publish(OutgoingMessage),
    /// `subscribe T [durable=NAME] [shared] [where="SEL"] [auto] [time] [prefetch=N]`
    Subscribe(SubscribeTopic),
    /// `next [QUEUE] [wait=DURATION]`: the next message pushed to an open subscription.
    Next {
        /// The subscription's queue; `None`: the only open subscription.
        queue: Option<String>,
        /// How long to wait, in ms.
        wait_ms: u32,
    },
    /// `cancel QUEUE`: end an open subscription.
    Cancel(String),
    /// `unsubscribe T NAME`: remove a durable subscription.
    Unsubscribe {
        /// The topic.
        topic: String,
        /// The durable subscription.
        name: String,
    },
    /// `begin`
    Begin,
    /// `commit`
    Commit,
    /// `rollback`
    Rollback,
    /// `quit` or `exit`
    Quit,
}
