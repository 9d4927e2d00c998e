//! Per-request permission checks: every destination a request touches, all or nothing, against
//! the session's grants as they are now (see [`crate::access`]).
//!
//! | request | needs |
//! |---|---|
//! | create queue | *manage* on it, *send* on its dead-letter and expiry queues |
//! | delete queue | *manage* on it |
//! | send, send batch | *send* on every queue and topic of every message |
//! | receive from a queue, subscribe to a queue | *receive* on it |
//! | receive by sender (every queue) | *receive* on every queue (a `*` grant) |
//! | create / delete topic | *manage* on it |
//! | subscribe to a topic, unsubscribe | *receive* on the topic (or pattern) |
//! | commit | *send* on every destination of the transaction, checked again |
//! | list, ack, nack, credit, cancel, ping, begin, rollback | nothing more |
//!
//! Acks and nacks settle deliveries the session received under its permission; lists show
//! names only.

use ferry_auth::{Grants, Object, Permission};
use ferry_protocol::{ErrorCode, ErrorReply, OutgoingMessage, Request, Source};

use crate::access::{denied, Principal};
use crate::session::Session;
use crate::shared::Shared;

/// What one request needs.
struct Needs<'a> {
    principal: &'a Principal,
    grants: &'a Grants,
}

impl Needs<'_> {
    fn on(&self, permission: Permission, object: Object, name: &str) -> Result<(), ErrorReply> {
        if self.grants.allows(permission, object, name) {
            Ok(())
        } else {
            Err(ErrorReply::new(
                ErrorCode::Unauthorized,
                denied(self.principal, permission, object, name),
            ))
        }
    }

    fn send(&self, m: &OutgoingMessage) -> Result<(), ErrorReply> {
        for q in &m.queues {
            self.on(Permission::Send, Object::Queue, q)?;
        }
        if let Some(t) = &m.topic {
            self.on(Permission::Send, Object::Topic, t)?;
        }
        Ok(())
    }
}

/// `Err` with the `Unauthorized` reply when the session may not make `request`.
pub fn check(shared: &Shared, session: &Session, request: &Request) -> Result<(), ErrorReply> {
    let grants = shared.access.grants(&session.principal);
    if grants.is_admin() {
        return Ok(());
    }
    let needs = Needs {
        principal: &session.principal,
        grants: &grants,
    };
    match request {
        Request::CreateQueue { name, options } => {
            needs.on(Permission::Manage, Object::Queue, name)?;
            for q in [&options.dead_letter_queue, &options.expiry_queue]
                .into_iter()
                .flatten()
            {
                needs.on(Permission::Send, Object::Queue, q)?;
            }
            Ok(())
        }
        Request::DeleteQueue { name, .. } => needs.on(Permission::Manage, Object::Queue, name),
        Request::Send(m) => needs.send(m),
        Request::SendBatch(items) => items.iter().try_for_each(|m| needs.send(m)),
        Request::PublishBatch(b) => needs.on(Permission::Send, Object::Topic, &b.topic),
        Request::Receive(r) => match &r.source {
            Source::Queue(q) => needs.on(Permission::Receive, Object::Queue, q),
            Source::Sender(_) if grants.allows_every(Permission::Receive, Object::Queue) => Ok(()),
            Source::Sender(s) => Err(ErrorReply::new(
                ErrorCode::Unauthorized,
                format!(
                    "permission denied: {} lacks 'receive' on every queue ('receive queue *'), \
                     which receiving by sender '{s}' needs",
                    session.principal.describe()
                ),
            )),
        },
        Request::Subscribe(s) => needs.on(Permission::Receive, Object::Queue, &s.queue),
        Request::CreateTopic { name } | Request::DeleteTopic { name, .. } => {
            needs.on(Permission::Manage, Object::Topic, name)
        }
        Request::SubscribeTopic(s) => needs.on(Permission::Receive, Object::Topic, &s.topic),
        Request::Unsubscribe { topic, .. } => needs.on(Permission::Receive, Object::Topic, topic),
        Request::TxnCommit => {
            let guard = session.txn();
            let Some(txn) = guard.as_ref() else {
                return Ok(());
            };
            txn.msgs.iter().try_for_each(|m| {
                m.queues
                    .iter()
                    .try_for_each(|q| needs.on(Permission::Send, Object::Queue, q))?;
                match &m.topic {
                    Some(t) => needs.on(Permission::Send, Object::Topic, t),
                    None => Ok(()),
                }
            })
        }
        Request::Connect(_)
        | Request::AuthResponse { .. }
        | Request::Disconnect
        | Request::Ping
        | Request::ListQueues
        | Request::WaitingQueues
        | Request::Ack { .. }
        | Request::Nack { .. }
        | Request::Credit { .. }
        | Request::Cancel { .. }
        | Request::ListTopics
        | Request::TxnBegin
        | Request::TxnRollback => Ok(()),
    }
}
