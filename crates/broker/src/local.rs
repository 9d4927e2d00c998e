//! In-process sessions for protocol gateways (the datagram ingest, later others): a gateway
//! that speaks another protocol on its own listener turns what it reads into the native
//! protocol's [`Request`]s and runs them through the same [`dispatch`] as a connection's, so it
//! gets every check, limit, counter and store path a native client gets, and nothing new to
//! keep in step.
//!
//! A local session has a client name like any session (one live session per name), registered
//! ephemerally: nothing is stored for the name itself. It has no subscriptions of its own (the
//! pushes a subscription would make have nowhere to go), so gateways use it to send and publish.

use std::sync::Arc;

use ferry_protocol::{ErrorCode, ErrorReply, Request, Response};
use ferry_store::Registration;

use crate::dispatch::dispatch;
use crate::handlers::validate;
use crate::outbound::{self, Writer};
use crate::server::RunningBroker;
use crate::session::Session;
use crate::shared::Shared;

/// A session of the broker inside the broker's process, for a gateway.
pub struct LocalSession {
    shared: Arc<Shared>,
    session: Arc<Session>,
    /// The writer's end of what the session would push to a client: kept so that writes to it
    /// do not fail, and run by nobody (a local session does not subscribe, and holds no
    /// auto-ack takes for a writer to settle).
    _writer: Writer,
}

impl RunningBroker {
    /// Starts an in-process session as client `client` (see [`LocalSession`]).
    /// `AlreadyOnline` when the name has a live session, `InvalidArgument` for a bad name.
    pub async fn local_session(&self, client: &str) -> Result<LocalSession, ErrorReply> {
        LocalSession::open(
            self.shared().clone(),
            client,
            crate::access::Principal::Operator,
        )
        .await
    }

    /// As [`RunningBroker::local_session`], acting as `user` with that user's grants (a
    /// gateway confined by its settings) instead of the operator. `Unauthorized` when the user
    /// does not exist.
    pub async fn local_session_as(
        &self,
        client: &str,
        user: &str,
    ) -> Result<LocalSession, ErrorReply> {
        match self.shared().store.users().user(user).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(ErrorReply::new(
                    ErrorCode::Unauthorized,
                    format!("user '{user}' does not exist"),
                ))
            }
            Err(e) => return Err(ErrorReply::new(e.code(), e.to_string())),
        }
        let principal = crate::access::Principal::User(Arc::from(user));
        LocalSession::open(self.shared().clone(), client, principal).await
    }
}

impl LocalSession {
    async fn open(
        shared: Arc<Shared>,
        client: &str,
        principal: crate::access::Principal,
    ) -> Result<LocalSession, ErrorReply> {
        validate::name("client", client, &shared.limits)?;
        let Some(id) = shared.claim_client(client) else {
            return Err(ErrorReply::new(
                ErrorCode::AlreadyOnline,
                format!("client '{client}' is already online"),
            ));
        };
        if let Err(e) = shared
            .store
            .sessions()
            .claim_session(client, id, Registration::Ephemeral)
            .await
        {
            shared.release_client(client, id);
            return Err(ErrorReply::new(e.code(), e.to_string()));
        }
        let (out, writer) = outbound::channel(shared.policy.max_outbound_bytes, &shared.shutdown);
        Ok(LocalSession {
            session: Arc::new(Session::new(id, client.to_owned(), out, true, principal)),
            shared,
            _writer: writer,
        })
    }

    /// The session's client name (the sender of what it sends).
    pub fn client(&self) -> &str {
        &self.session.client
    }

    /// Runs one request as a connection would. Subscriptions are refused (`InvalidArgument`):
    /// a local session has no one to push to.
    pub async fn request(&self, request: Request) -> Response {
        match request {
            Request::Subscribe(_) | Request::SubscribeTopic(_) => Response::error(
                ErrorCode::InvalidArgument,
                "an in-process session cannot subscribe",
            ),
            Request::Connect(_) | Request::Disconnect => Response::error(
                ErrorCode::InvalidArgument,
                "an in-process session is connected for its whole life",
            ),
            other => dispatch(&self.shared, &self.session, 0, other)
                .await
                .unwrap_or(Response::Ok),
        }
    }

    /// Ends the session as a connection's ends: an open transaction is rolled back, unsettled
    /// deliveries return to their queues, and the name is free again.
    pub async fn close(self) {
        if self.session.in_txn() {
            let _ = crate::handlers::txn::rollback(&self.shared, &self.session).await;
        }
        crate::connection::end_session(&self.shared, &self.session).await;
    }
}
