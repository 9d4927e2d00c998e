//! State shared by every connection of one broker: the store, limits, who is online, wakers and
//! counters. Cloned as `Arc<Shared>`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ferry_protocol::Limits;
use ferry_store::{SessionId, Store};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::admission::Admission;
use crate::clock::Clock;
use crate::config::BrokerConfig;
use crate::consumers::Consumers;
use crate::delivery::Wakers;
use crate::log_limit::LogLimit;
use crate::memory::MemoryBudget;
use crate::registry::Registry;
use crate::stats::Stats;

/// How each connection is bounded: its budgets and timeouts (from the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionPolicy {
    /// Most requests in progress at once.
    pub max_pipelined: usize,
    /// Most bytes its pending requests may hold.
    pub max_pending_bytes: usize,
    /// Most bytes queued for the client before its requests are no longer read.
    pub max_outbound_bytes: usize,
    /// How long the socket may accept none of its replies.
    pub write_timeout: Duration,
    /// How long a started frame may take to arrive.
    pub read_timeout: Duration,
    /// How long a new connection has to connect.
    pub handshake_timeout: Duration,
    /// The longest keep-alive interval granted, in ms (also granted when a client asks for
    /// none).
    pub keepalive_ms: u32,
}

impl ConnectionPolicy {
    /// The policy `config` sets.
    pub fn from_config(config: &BrokerConfig) -> ConnectionPolicy {
        let ms = |v: u32| Duration::from_millis(u64::from(v));
        let bytes = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        ConnectionPolicy {
            max_pipelined: config.max_pipelined as usize,
            max_pending_bytes: bytes(config.max_pending_bytes),
            max_outbound_bytes: bytes(config.max_outbound_bytes),
            write_timeout: ms(config.write_timeout_ms),
            read_timeout: ms(config.read_timeout_ms),
            handshake_timeout: ms(config.handshake_timeout_ms),
            keepalive_ms: config.keepalive_ms,
        }
    }
}

/// Everything sessions share.
pub struct Shared {
    /// The storage engine.
    pub store: Arc<dyn Store>,
    /// Limits enforced and advertised.
    pub limits: Limits,
    /// Budgets and timeouts of each connection.
    pub policy: ConnectionPolicy,
    /// The broker-wide memory budget.
    pub memory: MemoryBudget,
    /// Connections per address and new client names per address.
    pub admission: Arc<Admission>,
    /// Client names with a live session, to enforce one session per name. A std mutex: it is
    /// never held across an `.await`.
    online: Mutex<HashMap<String, SessionId>>,
    next_session: AtomicU64,
    /// Wakes long-poll receivers and subscriptions when queues change.
    pub wakers: Wakers,
    /// Consumers of topic subscriptions on this node.
    pub consumers: Consumers,
    /// Cancelled when the broker starts shutting down.
    pub shutdown: CancellationToken,
    /// Counters for operators and tests.
    pub stats: Arc<Stats>,
    /// Where time comes from.
    pub clock: Arc<dyn Clock>,
    /// Signalled when a delayed message is stored, so the job that wakes waiters when delayed
    /// messages become due looks at the schedule again.
    pub delayed_sent: Notify,
    /// Bumped to close every session open at that moment (see [`Shared::fence_sessions`]).
    fence: watch::Sender<u64>,
    /// Live sessions with their peers, for the management API.
    pub sessions: Registry,
    /// Gateways' sessions ([`crate::local::Sessions::open`]): each holds a token until it
    /// ends, so that shutdown waits for them as for native connections.
    pub gateway_sessions: tokio_util::task::TaskTracker,
    /// Rate limit of the per-session log lines (opened, closed).
    pub session_logs: LogLimit,
    /// Users' grants, the anonymous policy and the failed-authentication limiter.
    pub access: crate::access::Access,
}

impl Shared {
    /// New shared state around a store, as `config` sets it up.
    pub fn new(store: Arc<dyn Store>, config: &BrokerConfig, clock: Arc<dyn Clock>) -> Shared {
        Shared {
            store,
            limits: config.limits,
            policy: ConnectionPolicy::from_config(config),
            memory: MemoryBudget::new(config.max_memory),
            admission: Arc::new(Admission::new(
                config.max_connections_per_address,
                config.max_new_clients_per_sec,
                config.limits.max_connections,
            )),
            online: Mutex::new(HashMap::new()),
            next_session: AtomicU64::new(1),
            wakers: Wakers::default(),
            consumers: Consumers::default(),
            shutdown: CancellationToken::new(),
            stats: Arc::new(Stats::default()),
            clock,
            delayed_sent: Notify::new(),
            fence: watch::Sender::new(0),
            sessions: Registry::default(),
            gateway_sessions: tokio_util::task::TaskTracker::new(),
            access: crate::access::Access::new(config),
            session_logs: LogLimit::default(),
        }
    }

    /// Closes every session open now (new ones are not affected). Used when this node learns
    /// that the other nodes took it for dead: they freed its sessions' client names and leases,
    /// so those sessions must end and their clients connect again, to claim their names anew.
    pub fn fence_sessions(&self) {
        self.fence.send_modify(|generation| *generation += 1);
    }

    /// Changes when [`Shared::fence_sessions`] is called; a connection watches it from the start.
    pub fn watch_fence(&self) -> watch::Receiver<u64> {
        self.fence.subscribe()
    }

    fn online(&self) -> MutexGuard<'_, HashMap<String, SessionId>> {
        // A poisoned map is still consistent (every update is a single insert or remove).
        self.online.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims `client` for a new session; `None` when another session holds it.
    pub fn claim_client(&self, client: &str) -> Option<SessionId> {
        let mut online = self.online();
        if online.contains_key(client) {
            return None;
        }
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        online.insert(client.to_owned(), id);
        Some(id)
    }

    /// Releases `client` if `session` holds it.
    pub fn release_client(&self, client: &str, session: SessionId) {
        let mut online = self.online();
        if online.get(client) == Some(&session) {
            online.remove(client);
        }
    }

    /// Number of live sessions.
    pub fn online_count(&self) -> usize {
        self.online().len()
    }

    /// The broker clock's current time, ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}
