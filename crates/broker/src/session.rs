//! A session: who the client is, its unsettled client-ack deliveries and its subscriptions.
//!
//! Shared as `Arc<Session>` between the connection task, the request futures it runs and the
//! subscription tasks. Its maps sit behind std mutexes that are never held across an `.await`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ferry_protocol::{AckMode, DeliveryId, SubscriptionId};
use ferry_store::{IdMap, SessionId};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::credit::Credit;
use crate::txn::Txn;

/// A push subscription on a topic: what to undo when it ends.
#[derive(Debug, Clone)]
pub struct TopicConsumer {
    /// The topic.
    pub topic: String,
    /// The subscription's name.
    pub name: String,
    /// Its queue (`topic:name`).
    pub queue: String,
    /// Durable subscriptions stay when their consumer ends; others are removed.
    pub durable: bool,
    /// Shared: a non-durable one is removed by the store once its last consumer ends.
    pub shared: bool,
    /// The session consuming it (the store records consumers by session).
    pub session: SessionId,
}

pub use crate::outbound::Outbound;

/// The bit that tells a session's hold id from session ids (see [`Session::hold_id`]).
const HOLD_BIT: SessionId = 1 << 63;

/// Most of a session's receives that look at the store at once (see
/// [`Session::store_receives`]).
pub const MAX_STORE_RECEIVES: usize = 16;

/// Unsettled deliveries by id.
/// Delivery ids are sequential and never chosen by the client as keys (unknown ids are only
/// looked up), so they are hashed with one multiply instead of SipHash, which cost more than the
/// rest of tracking a delivery.
type DeliveryMap = IdMap<DeliveryId, Option<SubscriptionId>>;

/// One live session.
pub struct Session {
    /// Broker-unique id; owns the session's leases in the store.
    pub id: SessionId,
    /// The client name.
    pub client: String,
    /// The client name again, shared: the sender of every message the session sends, so that
    /// a message does not copy the name.
    pub sender: Arc<str>,
    /// Frames to the client.
    pub out: Outbound,
    /// The client made its name up for this session alone (`Connect` flag
    /// [`ferry_protocol::requests::CONNECT_EPHEMERAL`]): its registration need not outlive the
    /// session.
    pub ephemeral: bool,
    /// Unsettled client-ack deliveries, and the subscription each came through (if any).
    deliveries: Mutex<DeliveryMap>,
    subscriptions: Mutex<HashMap<SubscriptionId, (SubscriptionHandle, JoinHandle<()>)>>,
    next_subscription: AtomicU64,
    /// Push subscriptions that consume topic subscriptions.
    topic_consumers: Mutex<HashMap<SubscriptionId, TopicConsumer>>,
    /// Numbers the session's non-durable subscriptions.
    next_non_durable: AtomicU64,
    /// The open transaction, if any.
    txn: Mutex<Option<Txn>>,
    /// Who the session runs as: its permissions are looked up on every request.
    pub principal: crate::access::Principal,
    /// Auto-ack subscriptions get their credit back as soon as their pushes are queued,
    /// instead of by `Credit` requests: a gateway's session ([`crate::local`]), whose
    /// clients' protocols have no credit, and whose pushes the outbound budget bounds.
    credit_on_push: std::sync::atomic::AtomicBool,
    /// Slots for receives looking at the store, [`MAX_STORE_RECEIVES`]; a receive holds one
    /// until it returns. A look may read its message's body from the log (a copy of its own,
    /// up to the largest message), and a receive that found a message while the connection's
    /// replies have no room keeps it until they have (see [`crate::connection`]): without a
    /// bound, a pipelined flood of peeks of a big message no longer cached would hold up to
    /// `max_pipelined` copies of its body. Receives waiting for a message hold no slot.
    pub store_receives: tokio::sync::Semaphore,
    /// The protocol version the client connected with: which push frames it reads (see
    /// [`crate::push::native`]).
    version: std::sync::atomic::AtomicU16,
}

impl Session {
    /// A new session.
    pub fn new(
        id: SessionId,
        client: String,
        out: Outbound,
        ephemeral: bool,
        principal: crate::access::Principal,
    ) -> Session {
        Session {
            id,
            sender: Arc::from(client.as_str()),
            client,
            out,
            ephemeral,
            deliveries: Mutex::new(DeliveryMap::default()),
            subscriptions: Mutex::new(HashMap::new()),
            next_subscription: AtomicU64::new(1),
            topic_consumers: Mutex::new(HashMap::new()),
            next_non_durable: AtomicU64::new(1),
            txn: Mutex::new(None),
            principal,
            credit_on_push: std::sync::atomic::AtomicBool::new(false),
            store_receives: tokio::sync::Semaphore::new(MAX_STORE_RECEIVES),
            version: std::sync::atomic::AtomicU16::new(ferry_protocol::MIN_PROTOCOL_VERSION),
        }
    }

    /// From now on, auto-ack subscriptions get their credit back as their pushes are queued
    /// (see the field).
    pub fn set_credit_on_push(&self) {
        self.credit_on_push.store(true, Ordering::Relaxed);
    }

    /// Records the protocol version the session runs (the client's, from its `Connect`).
    pub fn set_version(&self, version: u16) {
        self.version.store(version, Ordering::Relaxed);
    }

    /// The protocol version the session runs.
    pub fn version(&self) -> u16 {
        self.version.load(Ordering::Relaxed)
    }

    /// Whether auto-ack subscriptions get their credit back as their pushes are queued.
    pub fn credit_on_push(&self) -> bool {
        self.credit_on_push.load(Ordering::Relaxed)
    }

    /// The id the store holds this session's auto-ack takes under until its connection's
    /// writer settles them (see [`crate::outbound`]): apart from [`Session::id`], so that a
    /// client cannot settle them itself by guessing their delivery ids.
    pub fn hold_id(&self) -> SessionId {
        self.id | HOLD_BIT
    }

    /// Cancelled when the session starts ending: waits end at once, subscriptions stop.
    pub fn closing(&self) -> &CancellationToken {
        self.out.closing()
    }

    /// Whether the session is ending (cheap: no lock).
    pub fn is_closing(&self) -> bool {
        self.out.is_closed()
    }

    /// The open transaction (`None` inside when there is none).
    pub fn txn(&self) -> MutexGuard<'_, Option<Txn>> {
        self.txn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a transaction is open.
    pub fn in_txn(&self) -> bool {
        self.txn().is_some()
    }

    /// Whether the session holds client-ack delivery `id` unsettled.
    pub fn holds(&self, id: DeliveryId) -> bool {
        self.deliveries().contains_key(&id)
    }

    /// A fresh name for a non-durable subscription of this session: `~client.n`, outside the
    /// name alphabet so it never equals a durable subscription's name, and unique while the
    /// client's session lives (one session per client name).
    pub fn non_durable_name(&self) -> String {
        let n = self.next_non_durable.fetch_add(1, Ordering::Relaxed);
        format!("~{}.{n}", self.client)
    }

    /// Records that subscription `id` consumes a topic subscription.
    pub fn add_topic_consumer(&self, id: SubscriptionId, consumer: TopicConsumer) {
        self.topic_consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, consumer);
    }

    /// Forgets and returns what subscription `id` consumed, if it was a topic subscription.
    pub fn take_topic_consumer(&self, id: SubscriptionId) -> Option<TopicConsumer> {
        self.topic_consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
    }

    /// Forgets and returns every topic subscription consumed (disconnect).
    pub fn take_topic_consumers(&self) -> Vec<TopicConsumer> {
        self.topic_consumers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, c)| c)
            .collect()
    }

    fn deliveries(&self) -> MutexGuard<'_, DeliveryMap> {
        self.deliveries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn subs(
        &self,
    ) -> MutexGuard<'_, HashMap<SubscriptionId, (SubscriptionHandle, JoinHandle<()>)>> {
        self.subscriptions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Unsettled client-ack deliveries.
    pub fn in_flight(&self) -> usize {
        self.deliveries().len()
    }

    /// Records client-ack deliveries handed out (through `subscription`, if any).
    pub fn track(
        &self,
        ids: impl IntoIterator<Item = DeliveryId>,
        subscription: Option<SubscriptionId>,
    ) {
        let mut d = self.deliveries();
        for id in ids {
            d.insert(id, subscription);
        }
    }

    /// Forgets settled (or unknown) deliveries and gives their subscriptions credit back.
    pub fn settled(&self, ids: &[DeliveryId]) {
        // Per subscription: an ack names few of them (usually one), so a short list beats a map.
        let mut credit: Vec<(SubscriptionId, u32)> = Vec::new();
        {
            let mut d = self.deliveries();
            for id in ids {
                if let Some(Some(sub)) = d.remove(id) {
                    match credit.iter_mut().find(|(s, _)| *s == sub) {
                        Some((_, n)) => *n += 1,
                        None => credit.push((sub, 1)),
                    }
                }
            }
        }
        if credit.is_empty() {
            return;
        }
        let subs = self.subs();
        for (sub, n) in credit {
            if let Some((h, _)) = subs.get(&sub) {
                if h.ack == AckMode::Client {
                    h.add_credit(n);
                }
            }
        }
    }

    /// A fresh subscription id.
    pub fn next_subscription_id(&self) -> SubscriptionId {
        self.next_subscription.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a running subscription.
    pub fn add_subscription(&self, handle: SubscriptionHandle, task: JoinHandle<()>) {
        self.subs().insert(handle.id, (handle, task));
    }

    /// Grants credit to an auto-ack subscription. False if there is no such subscription.
    pub fn credit(&self, sub: SubscriptionId, n: u32) -> bool {
        match self.subs().get(&sub) {
            Some((h, _)) => {
                h.add_credit(n);
                true
            }
            None => false,
        }
    }

    /// Stops a subscription and waits for its task, so that it takes no more leases.
    /// False if there is no such subscription.
    pub async fn cancel(&self, sub: SubscriptionId) -> bool {
        let entry = self.subs().remove(&sub);
        match entry {
            Some((h, task)) => {
                h.cancel.cancel();
                let _ = task.await;
                true
            }
            None => false,
        }
    }

    /// Stops every subscription (disconnect) and waits for their tasks.
    pub async fn cancel_all(&self) {
        let all: Vec<_> = self.subs().drain().collect();
        for (_, (h, task)) in all {
            h.cancel.cancel();
            let _ = task.await;
        }
    }

    /// The queue and selector of every running subscription, by id (management API).
    pub fn subscription_summaries(&self) -> Vec<(SubscriptionId, Arc<str>, Arc<str>, AckMode)> {
        let mut v: Vec<_> = self
            .subs()
            .values()
            .map(|(h, _)| (h.id, h.queue.clone(), h.selector.clone(), h.ack))
            .collect();
        v.sort_by_key(|e| e.0);
        v
    }

    /// Forgets a subscription whose task ended on its own (queue deleted).
    pub fn forget_subscription(&self, sub: SubscriptionId) {
        self.subs().remove(&sub);
    }
}

/// What the session keeps of a running subscription.
#[derive(Clone)]
pub struct SubscriptionHandle {
    /// Its id.
    pub id: SubscriptionId,
    /// Its ack mode (decides who restores credit).
    pub ack: AckMode,
    pub(crate) credit: Arc<Credit>,
    /// Stops the task.
    pub cancel: CancellationToken,
    /// The queue it consumes and its selector (empty: none), for the management API.
    pub queue: Arc<str>,
    /// Its selector text; empty when none.
    pub selector: Arc<str>,
}

impl SubscriptionHandle {
    /// Gives the subscription `n` more credit, saturating.
    pub fn add_credit(&self, n: u32) {
        self.credit.grant(n);
    }
}
