//! In-process sessions for protocol gateways (the datagram ingest, later others): a gateway
//! that speaks another protocol on its own listener turns what it reads into the native
//! protocol's [`Request`]s and runs them through the same [`dispatch`] as a connection's, so it
//! gets every check, limit, counter and store path a native client gets, and nothing new to
//! keep in step.
//!
//! Two kinds:
//! - [`RunningBroker::local_session`]: a session of the broker's own (the datagram ingest),
//!   acting for the operator, registered ephemerally, without subscriptions (the pushes would
//!   have nowhere to go): it sends and publishes.
//! - [`Sessions::open`]: a session for one client of a gateway (a STOMP connection), acting
//!   for the principal the gateway authenticated, under the client name it asked for (bound to
//!   its user as on the native protocol), with subscriptions. Its pushes are encoded by the
//!   gateway's own [`DeliveryEncoder`] per subscription and queued on the session's outbound
//!   queue as a native connection's are (same budget, credit and held auto-ack deliveries); the
//!   gateway takes them with [`Pushes::next`] and writes them to its client. So a gateway's
//!   client gets the same checks, limits, counters and store paths as a native one, and each
//!   message is encoded once, in the gateway's protocol.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use ferry_protocol::requests::{Subscribe, SubscribeTopic};
use ferry_protocol::{
    AckMode, ErrorCode, ErrorReply, Limits, ReceiveMode, Request, Response, SubscriptionId,
};
use ferry_store::Registration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::access::Principal;
use crate::admission::AddressSlot;
use crate::dispatch::dispatch;
use crate::handlers::{settle, subscribe, validate};
use crate::manage::Management;
use crate::outbound::{self, Writer};
use crate::push::DeliveryEncoder;
use crate::server::RunningBroker;
use crate::session::Session;
use crate::shared::Shared;
use crate::stats::{CloseKind, Stats};

/// A session of the broker inside the broker's process, for a gateway.
pub struct LocalSession {
    shared: Arc<Shared>,
    session: Arc<Session>,
    /// The writer's end of what the session would push to a client, for the broker's own
    /// sessions: kept so that writes to it do not fail, and run by nobody (such a session does
    /// not subscribe, and holds no auto-ack takes for a writer to settle). A gateway's session
    /// hands it to the gateway instead ([`Pushes`]).
    _writer: Option<Writer>,
    /// Whether the session may subscribe (a gateway's).
    subscribes: bool,
    /// Whether [`LocalSession::end`] ran.
    ended: std::sync::atomic::AtomicBool,
    /// A gateway's session: in the registry until it ends (cancelled when an operator
    /// closes it), and counted by the shutdown's wait while it lives.
    registered: Option<(CancellationToken, TaskTrackerToken)>,
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
            _writer: Some(writer),
            subscribes: false,
            ended: Default::default(),
            registered: None,
        })
    }

    /// The session's client name (the sender of what it sends).
    pub fn client(&self) -> &str {
        &self.session.client
    }

    /// Runs one request as a connection would. Subscriptions are refused (`InvalidArgument`):
    /// they go through [`LocalSession::subscribe`] and [`LocalSession::subscribe_topic`]. An
    /// auto-ack take of a gateway's session is taken as a lease and settled at once (the held
    /// take a native connection's writer settles has no native writer here): the reply comes
    /// back to the caller instead.
    pub async fn request(&self, request: Request) -> Response {
        match request {
            Request::Subscribe(_) | Request::SubscribeTopic(_) => Response::error(
                ErrorCode::InvalidArgument,
                "an in-process session subscribes with LocalSession::subscribe",
            ),
            Request::Receive(mut r)
                if r.mode == ReceiveMode::Take
                    && r.ack == AckMode::Auto
                    && self.session.out.holds_enabled()
                    && !self.session.in_txn() =>
            {
                r.ack = AckMode::Client;
                let reply = dispatch(&self.shared, &self.session, 0, Request::Receive(r))
                    .await
                    .unwrap_or(Response::Received(None));
                match reply {
                    Response::Received(Some(mut d)) if d.delivery_id != 0 => {
                        match settle::ack(&self.shared, &self.session, vec![d.delivery_id]).await {
                            Response::Ok => {
                                d.delivery_id = 0;
                                Response::Received(Some(d))
                            }
                            refused => refused,
                        }
                    }
                    other => other,
                }
            }
            Request::Connect(_) | Request::Disconnect => Response::error(
                ErrorCode::InvalidArgument,
                "an in-process session is connected for its whole life",
            ),
            other => dispatch(&self.shared, &self.session, 0, other)
                .await
                .unwrap_or(Response::Ok),
        }
    }

    /// Starts a push subscription on a queue (`sub` as the native `Subscribe`), whose
    /// deliveries `encoder` writes to the session's [`Pushes`]. Checked as on a native
    /// connection: permissions, the queue's existence, the prefetch limit, the selector.
    pub async fn subscribe(
        &self,
        sub: Subscribe,
        encoder: Arc<dyn DeliveryEncoder>,
    ) -> Result<SubscriptionId, ErrorReply> {
        self.may_subscribe()?;
        crate::authorize::check(
            &self.shared,
            &self.session,
            &Request::Subscribe(sub.clone()),
        )?;
        started(subscribe::open_queue(&self.shared, &self.session, sub, encoder, |_| true).await)
    }

    /// Starts a push subscription on a topic (or pattern; durable, shared as `sub` says),
    /// whose deliveries `encoder` writes to the session's [`Pushes`].
    pub async fn subscribe_topic(
        &self,
        sub: SubscribeTopic,
        encoder: Arc<dyn DeliveryEncoder>,
    ) -> Result<SubscriptionId, ErrorReply> {
        self.may_subscribe()?;
        if sub.prefetch == 0 {
            return Err(ErrorReply::new(
                ErrorCode::InvalidArgument,
                "prefetch must be at least 1",
            ));
        }
        crate::authorize::check(
            &self.shared,
            &self.session,
            &Request::SubscribeTopic(sub.clone()),
        )?;
        started(subscribe::open_topic(&self.shared, &self.session, sub, encoder, |_, _| true).await)
    }

    fn may_subscribe(&self) -> Result<(), ErrorReply> {
        if self.subscribes {
            Ok(())
        } else {
            Err(ErrorReply::new(
                ErrorCode::InvalidArgument,
                "this in-process session cannot subscribe",
            ))
        }
    }

    /// Queues frames of the gateway's own protocol (replies, receipts, heart-beats) for its
    /// [`Pushes`], after everything queued before; false once the session is ending.
    pub fn send_frames(&self, frames: Bytes) -> bool {
        self.session.out.send(frames).is_ok()
    }

    /// Bytes queued for the gateway's client and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.session.out.queued_bytes()
    }

    /// Returns once the queued bytes are within the outbound budget (`max_outbound_bytes`),
    /// or the session is ending: a gateway reads no more from its client until then, as a
    /// native connection does.
    pub async fn wait_for_room(&self) {
        self.session.out.wait_for_room().await;
    }

    /// Whether the queued bytes are within the outbound budget.
    pub fn has_room(&self) -> bool {
        self.session.out.has_room()
    }

    /// Whether the session is ending (the broker shuts down, an operator closed it, its
    /// gateway gave up on the client).
    pub fn is_closing(&self) -> bool {
        self.session.is_closing()
    }

    /// Cancelled when the session starts ending.
    pub fn closing(&self) -> CancellationToken {
        self.session.closing().clone()
    }

    /// Cancelled when an operator closes the session (the HTTP API's force-disconnect): the
    /// gateway then tells its client and ends the session. Never cancelled for the broker's
    /// own sessions, which are not in the session registry.
    pub fn closed_by_operator(&self) -> CancellationToken {
        self.registered
            .as_ref()
            .map(|(close, _)| close.clone())
            .unwrap_or_default()
    }

    /// Ends the session as a connection's ends: an open transaction is rolled back, unsettled
    /// deliveries return to their queues, and the name is free again.
    pub async fn close(self) {
        self.end().await;
    }

    /// [`LocalSession::close`] for a session shared with tasks: once it returns, the session
    /// is over (requests on it are answered as on an ended session). Idempotent.
    pub async fn end(&self) {
        if self.ended.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        if self.session.in_txn() {
            let _ = crate::handlers::txn::rollback(&self.shared, &self.session).await;
        }
        crate::connection::end_session(&self.shared, &self.session).await;
        if self.registered.is_some() {
            self.shared.sessions.remove(self.session.id);
        }
    }
}

impl Drop for LocalSession {
    fn drop(&mut self) {
        // A gateway that did not end its session (its task cancelled) still takes it off the
        // session list, which never names a session whose gateway is gone.
        if self.registered.is_some() && !self.ended.load(std::sync::atomic::Ordering::Acquire) {
            self.shared.sessions.remove(self.session.id);
        }
    }
}

/// What a subscription's start returned, as the gateway's answer.
fn started(r: Result<Option<SubscriptionId>, Response>) -> Result<SubscriptionId, ErrorReply> {
    match r {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(ErrorReply::new(
            ErrorCode::Internal,
            "the session ended while subscribing",
        )),
        Err(Response::Error(e)) => Err(e),
        Err(other) => Err(ErrorReply::new(
            ErrorCode::Internal,
            format!("unexpected reply to a subscribe: {:?}", other.kind()),
        )),
    }
}

/// Opens sessions for a gateway's clients. Cheap to clone; get one with
/// [`RunningBroker::sessions`].
#[derive(Clone)]
pub struct Sessions {
    shared: Arc<Shared>,
    management: Management,
}

/// Who a gateway's session is for.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    /// The client name (one live session per name).
    pub client: String,
    /// The name was made up for this session: registered for it alone.
    pub ephemeral: bool,
    /// The gateway made the name up (ephemeral, for a client that named none): for a user it
    /// must be in the user's own name space, `USER.SOMETHING` (or one its `client` grants
    /// allow), and it must be new (not registered, so it inherits nothing).
    pub generated: bool,
    /// Who the session acts as (from [`Sessions::login`], or [`Principal::Anonymous`] once
    /// [`Sessions::admit_anonymous`] allowed it).
    pub principal: Principal,
    /// The gateway's client's address (for the new-name rate per address).
    pub ip: Option<IpAddr>,
    /// The client's address as operators see it in the session list (`IP:PORT`).
    pub peer: String,
    /// The protocol the client speaks, as the session list shows it (`stomp`).
    pub protocol: &'static str,
}

impl RunningBroker {
    /// A handle to open sessions for a gateway's clients (see [`Sessions`]).
    pub fn sessions(&self) -> Sessions {
        Sessions {
            shared: self.shared().clone(),
            management: self.management(),
        }
    }
}

impl Sessions {
    /// Starts a session for a gateway's client, as the native handshake does once the client
    /// is authenticated: the user may use the name, the name is free, the store registers it.
    /// The session's pushes come out of the returned [`Pushes`].
    pub async fn open(&self, req: SessionRequest) -> Result<(LocalSession, Pushes), ErrorReply> {
        let shared = &self.shared;
        if shared.shutdown.is_cancelled() {
            return Err(ErrorReply::new(
                ErrorCode::ServerFull,
                "the broker is shutting down",
            ));
        }
        validate::name("client", &req.client, &shared.limits)?;
        let (out, writer) = outbound::channel(shared.policy.max_outbound_bytes, &shared.shutdown);
        let session = crate::handshake::bind_session(
            shared,
            req.client,
            req.ephemeral,
            &out,
            req.ip,
            req.principal,
            req.generated,
        )
        .await
        .map_err(|reply| match reply {
            Response::Error(e) => e,
            other => ErrorReply::new(
                ErrorCode::Internal,
                format!("unexpected reply to a connect: {:?}", other.kind()),
            ),
        })?;
        // Auto-ack takes are held until the gateway takes them for its client (Pushes::next);
        // their credit comes back as they are queued (the outbound budget bounds them).
        out.enable_holds(session.hold_id());
        session.set_credit_on_push();
        // Counted before it is listed: a shutdown that started meanwhile still waits for it.
        let tracked = shared.gateway_sessions.token();
        Stats::add(&shared.stats.sessions_opened, 1);
        let close = shared
            .sessions
            .insert(&session, req.protocol, &req.peer, shared.now_ms());
        Ok((
            LocalSession {
                shared: shared.clone(),
                session,
                _writer: None,
                subscribes: true,
                ended: Default::default(),
                registered: Some((close, tracked)),
            },
            Pushes {
                writer,
                store: shared.store.clone(),
            },
        ))
    }

    /// Checks a user's password (see [`Management::login`]): the principal to open the
    /// session as, or `Unauthorized` / `LimitExceeded`.
    pub async fn login(
        &self,
        user: &str,
        password: &str,
        ip: Option<IpAddr>,
    ) -> Result<Principal, ErrorReply> {
        self.management.login(user, password, ip).await
    }

    /// Whether a client that gave no credentials may start a session from `ip`, by the native
    /// listener's rules (loopback only while no user exists, unless `allow_anonymous`; once
    /// users exist, only with anonymous grants); the reason when not.
    pub fn admit_anonymous(&self, ip: Option<IpAddr>) -> Result<(), String> {
        self.shared.access.admit_anonymous(ip)
    }

    /// Takes one of `ip`'s connections under the broker's limit per address (shared with the
    /// native listener's connections from the same address); the reason when it has none
    /// left. The slot is given back when dropped.
    pub fn admit_address(&self, ip: IpAddr) -> Result<AddressSlot, String> {
        let shared = &self.shared;
        shared.admission.connect(ip).ok_or_else(|| {
            Stats::add(&shared.stats.connections_refused_address, 1);
            shared.stats.count_close(CloseKind::ServerFull);
            format!(
                "{ip} has {} connections open, the limit per address",
                shared.admission.max_per_address()
            )
        })
    }

    /// A gateway's TLS handshake failed: counted with the native listener's
    /// (`ferry_tls_handshakes_failed`).
    pub fn count_tls_handshake_failed(&self) {
        Stats::add(&self.shared.stats.tls_handshakes_failed, 1);
    }

    /// The limits the broker enforces (a gateway advertises and applies the same).
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    /// Cancelled when the broker starts shutting down.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shared.shutdown.clone()
    }
}

/// A gateway session's pushes, encoded by its subscriptions' encoders, for the gateway to
/// write to its client.
pub struct Pushes {
    writer: Writer,
    store: Arc<dyn ferry_store::Store>,
}

impl Pushes {
    /// Waits for pushes and appends them to `frames` (auto-ack deliveries among them are
    /// settled first, as a native connection's writer settles them right before writing).
    /// Returns the bytes taken: give them back with [`Pushes::written`] once written, so that
    /// a client that does not read holds at most the outbound budget
    /// (`max_outbound_bytes`) and its subscriptions stop taking. `None` once the session ends.
    pub async fn next(&mut self, frames: &mut Vec<Bytes>) -> Option<usize> {
        self.writer.next_batch(&*self.store, frames).await
    }

    /// `n` bytes of [`Pushes::next`] were written to the client.
    pub fn written(&self, n: usize) {
        self.writer.written(n);
    }

    /// The gateway gives up on its client (`slow_reader`: it took nothing for the write
    /// timeout): the session starts closing.
    pub fn fail(&self, reason: String, slow_reader: bool) {
        self.writer.fail(reason, slow_reader);
    }
}
