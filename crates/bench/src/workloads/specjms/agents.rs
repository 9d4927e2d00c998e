//! The locations at work: initiators start each interaction at its rate, handlers answer each
//! message as the spec's interactions prescribe (an order brings an order confirmation, a
//! statistics record and a shipment departure; a call for offers brings an offer from each
//! supplier of the family; the last offer brings the purchase order; ...).
//!
//! Connections: by default each location has its own, as SPECjms agents do: those its
//! interactions start on (a [`StartPool`], which keeps a spare ready so that a start due while
//! the others are inside a transaction does not wait for their commits), one per handler (per
//! destination it consumes, opened when it first sends), one it consumes on; with `--pool N`
//! each kind of location shares N start pools, senders and consumers (a location always uses
//! the same ones), as an application server shares sessions among its components. A sender
//! connection runs one transaction at a time: a handler receives a message, then sends what it
//! causes in a transaction (committed) on its sender connection, then acknowledges the
//! message. (A JMS transacted session would consume and send in one transaction; here the
//! consume is acknowledged right after the commit: at least once, never lost.)
//!
//! Every message body starts with a [`Header`], padded to a size drawn from the type's small /
//! medium / large mix.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use anyhow::{anyhow, Result};
use hdrhistogram::Histogram;
use tokio::sync::{watch, Mutex as AsyncMutex};
use tokio::task::JoinHandle;

use super::header::Header;
use super::layout::{Dest, Loc, Plan};
use super::pacing::PacingCounters;
use super::spec::{Interaction, Kind, MessageType};
use super::starts::{StartPool, OPENED_UP_FRONT};
use super::topology::Topology;
use crate::drivers::{
    Connection, Driver, OutMessage, Properties, PropertyValue, TopicSubscription,
};
use crate::payload::now_micros;
use crate::workloads::run::{Shared, MEASURE};

/// Counters of one message type.
#[derive(Debug, Default)]
pub struct TypeCounters {
    /// Receipts in the measurement.
    pub measured: AtomicU64,
    /// Sum of their delivery times, µs.
    pub delivery_us: AtomicU64,
}

/// Counters of one interaction.
#[derive(Debug, Default)]
pub struct InteractionCounters {
    /// Its starts due in the measurement and committed, and how late they were.
    pub pacing: PacingCounters,
}

/// What every agent shares.
pub struct World {
    /// The topology.
    pub topo: Topology,
    /// The destination layout.
    pub plan: Plan,
    /// Whether sends of transactional types use transactions.
    pub transactions: bool,
    /// Phase, windows, totals.
    pub shared: Arc<Shared>,
    driver: Arc<dyn Driver>,
    /// With `--pool N`: the sender connections each kind's handlers share; empty by default,
    /// when each handler has its own ([`HandlerSender`]).
    senders: HashMap<Kind, Vec<AsyncMutex<Arc<dyn Connection>>>>,
    /// The connections interactions start on, per kind of location (apart from the handlers',
    /// so that a start does not wait for the transactions of the location's handlers).
    initiators: HashMap<Kind, Vec<StartPool>>,
    /// Per message type.
    pub types: Vec<TypeCounters>,
    /// Per interaction.
    pub interactions: Vec<InteractionCounters>,
    /// Receipts owed (a publish owes one per subscriber), whole run.
    pub owed: AtomicU64,
    /// Delivery times by destination, µs.
    pub by_destination: Mutex<BTreeMap<String, Histogram<u64>>>,
    /// Offers received per call for offers.
    offers: Mutex<HashMap<u64, u32>>,
    next_corr: AtomicU64,
    next_hq: AtomicU64,
    /// Receipts of this run in all phases.
    pub received: AtomicU64,
    /// Sends in the measurement that waited for the log (a transaction, or persistent
    /// messages), and their time from having a connection to the broker's answer, µs.
    pub commits: AtomicU64,
    /// See [`World::commits`].
    pub commit_us: AtomicU64,
}

/// The connection a handler sends what a message causes on. By default its own, opened when
/// it first sends (SPECjms runs each event handler, one per destination, in a thread with its
/// own session), so that a handler never waits for another handler's transaction; with
/// `--pool N` its location's, shared with the other handlers of the same kind.
struct HandlerSender {
    name: String,
    own: tokio::sync::OnceCell<Arc<dyn Connection>>,
}

impl HandlerSender {
    fn new(name: String) -> HandlerSender {
        HandlerSender {
            name,
            own: tokio::sync::OnceCell::new(),
        }
    }

    /// Closes its own connection, when it opened one.
    async fn close(&self) {
        if let Some(c) = self.own.get() {
            c.close().await;
        }
    }
}

/// Which connection a send goes on.
#[derive(Clone, Copy)]
enum Via<'a> {
    /// One of the location's start connections: an interaction's start.
    Start,
    /// A handler's: what a received message causes.
    Handler(&'a HandlerSender),
}

impl World {
    /// The sender connection `loc`'s handlers share (with `--pool N`).
    fn sender(&self, loc: Loc) -> Option<&AsyncMutex<Arc<dyn Connection>>> {
        crate::round_robin::pick(self.senders.get(&loc.kind)?, loc.id as usize)
    }

    /// The counters of message type `t`.
    pub fn type_counts(&self, t: MessageType) -> Option<&TypeCounters> {
        self.types.get(t.index())
    }

    /// The counters of interaction `i`.
    pub fn interaction_counts(&self, i: Interaction) -> Option<&InteractionCounters> {
        self.interactions.get(i as usize)
    }

    /// The connections `loc` starts its interactions on.
    fn starts(&self, loc: Loc) -> Option<&StartPool> {
        crate::round_robin::pick(self.initiators.get(&loc.kind)?, loc.id as usize)
    }

    /// Start connections opened in all (for the report: more than one a location means starts
    /// were due while the location's others were busy).
    pub fn start_connections(&self) -> u64 {
        self.initiators
            .values()
            .flatten()
            .map(|p| u64::from(p.opened()))
            .sum()
    }

    /// The next HQ instance: senders spread messages over them evenly.
    fn hq(&self) -> Loc {
        let n = self.next_hq.fetch_add(1, Ordering::Relaxed);
        Loc {
            kind: Kind::Hq,
            id: (n % u64::from(self.topo.hq)) as u32,
        }
    }

    /// The message of type `ty` for `to`, with the body and the properties selectors read.
    fn message(&self, ty: MessageType, to: Loc, h: Header) -> (Dest, OutMessage) {
        let dest = self.plan.route(ty, to, h.family);
        let spec = ty.spec();
        let size = ty.size_for(rand::random::<f64>());
        let mut m = OutMessage::for_topic(h.encode(size));
        m.persistent = spec.persistent;
        let mut p = Properties::new();
        let mut put = |k: &str, v: String| p.push((k.to_string(), PropertyValue::Str(v)));
        put("MessageType", spec.name.to_string());
        put("LocationType", spec.receiver.code().to_string());
        if !spec.pubsub {
            put("TargetLocationID", to.name());
        }
        if ty == MessageType::CallForOffers {
            put("Family", format!("f{}", h.family));
        }
        m.properties = p;
        m.routing_key = Some(self.plan.routing_key(ty, to, h.family));
        if let Dest::Queue(q) = &dest {
            m.queues = vec![q.clone()];
        }
        (dest, m)
    }

    /// Sends `out` (type, target, header) from `from`, in one transaction when any of them is
    /// transactional and transactions are on: on one of the location's start connections for
    /// an interaction's start (`start`), else on its handlers' sender. Returns when it had its
    /// connection.
    async fn send(
        &self,
        from: Loc,
        out: Vec<(MessageType, Loc, Header)>,
        via: Via<'_>,
    ) -> Result<Instant, String> {
        let tx = self.transactions && out.iter().any(|(t, _, _)| t.spec().transactional);
        let logged = tx || out.iter().any(|(t, _, _)| t.spec().persistent);
        let owed: u64 = out
            .iter()
            .map(|(t, _, h)| self.plan.receivers(&self.topo, *t, h.family))
            .sum();
        let mut queued = Vec::new();
        let mut topics: BTreeMap<String, Vec<OutMessage>> = BTreeMap::new();
        for (t, to, h) in out {
            match self.message(t, to, h) {
                (Dest::Queue(_), m) => queued.push(m),
                (Dest::Topic(topic), m) => topics.entry(topic).or_default().push(m),
            }
        }
        let no_connection = || format!("no connection to send from {from:?}");
        let started;
        let shared;
        let conn: &Arc<dyn Connection> = match via {
            Via::Start => {
                started = self.starts(from).ok_or_else(no_connection)?.take().await?;
                &started
            }
            Via::Handler(_) if !self.senders.is_empty() => {
                shared = self.sender(from).ok_or_else(no_connection)?.lock().await;
                &shared
            }
            Via::Handler(own) => {
                own.own
                    .get_or_try_init(|| async {
                        self.driver
                            .connect(&own.name)
                            .await
                            .map(Arc::from)
                            .map_err(|e| e.message)
                    })
                    .await?
            }
        };
        let connected = Instant::now();
        let result = async {
            if tx {
                conn.begin().await.map_err(|e| e.message)?;
            }
            let mut results = Vec::new();
            if !queued.is_empty() {
                results.extend(conn.send_batch(queued).await.map_err(|e| e.message)?);
            }
            for (topic, msgs) in topics {
                results.extend(
                    conn.publish_batch(&topic, msgs)
                        .await
                        .map_err(|e| e.message)?,
                );
            }
            if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
                return Err(e.message);
            }
            if tx {
                conn.commit().await.map_err(|e| e.message)?;
            }
            Ok(())
        }
        .await;
        if result.is_ok() && logged && self.shared.phase() == MEASURE {
            self.commits.fetch_add(1, Ordering::Relaxed);
            self.commit_us
                .fetch_add(connected.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        if result.is_ok() {
            // Owed from the commit on; counted before any receipt can be.
            self.owed.fetch_add(owed, Ordering::Relaxed);
            self.shared.sent_total.fetch_add(1, Ordering::Relaxed);
        } else {
            self.shared.send_errors.fetch_add(1, Ordering::Relaxed);
        }
        result.map(|()| connected)
    }

    fn header(&self, ty: MessageType, from: Loc) -> Header {
        Header {
            ty,
            from,
            subject: 0,
            family: 0,
            corr: 0,
            expected: 0,
            sent_us: now_micros(),
        }
    }

    /// Starts interaction `i` at location index `k` (its `k`-th start); when it had its
    /// connection.
    pub(super) async fn start(&self, i: Interaction, k: u64) -> Result<Instant, String> {
        let start = Via::Start;
        let t = &self.topo;
        use Interaction as I;
        use MessageType as M;
        match i {
            I::OrderShipment => {
                let sm = Loc {
                    kind: Kind::Sm,
                    id: (k % u64::from(t.sm)) as u32,
                };
                let dc = Loc {
                    kind: Kind::Dc,
                    id: t.dc_of(sm.id),
                };
                let mut h = self.header(M::Order, sm);
                h.subject = sm.id;
                self.send(sm, vec![(M::Order, dc, h)], start).await
            }
            I::PurchaseOrder => {
                let dc = Loc {
                    kind: Kind::Dc,
                    id: (k % u64::from(t.dc)) as u32,
                };
                let family = rand::random::<u32>() % t.families;
                let mut h = self.header(M::CallForOffers, dc);
                h.family = family;
                h.corr = self.next_corr.fetch_add(1, Ordering::Relaxed);
                h.expected = t.suppliers_of(family).len() as u32;
                self.send(dc, vec![(M::CallForOffers, dc, h)], start).await
            }
            I::Inventory => {
                let sm = Loc {
                    kind: Kind::Sm,
                    id: (k % u64::from(t.sm)) as u32,
                };
                let h = self.header(M::InventoryInfo, sm);
                self.send(sm, vec![(M::InventoryInfo, sm, h)], start).await
            }
            I::SalesStatistics => {
                let sm = Loc {
                    kind: Kind::Sm,
                    id: (k % u64::from(t.sm)) as u32,
                };
                let h = self.header(M::StatInfoSm, sm);
                self.send(sm, vec![(M::StatInfoSm, self.hq(), h)], start)
                    .await
            }
            I::PriceUpdate | I::ProductAnnouncement | I::CreditCardHotList => {
                let hq = Loc {
                    kind: Kind::Hq,
                    id: (k % u64::from(t.hq)) as u32,
                };
                let ty = match i {
                    I::PriceUpdate => M::PriceUpdate,
                    I::ProductAnnouncement => M::ProductAnnouncement,
                    _ => M::CreditCardHl,
                };
                let h = self.header(ty, hq);
                self.send(hq, vec![(ty, hq, h)], start).await
            }
        }
    }

    /// Handles a message received by `at`: counts it, and sends what it causes on `sender`.
    async fn handle(
        &self,
        at: Loc,
        dest: &str,
        h: Header,
        sender: &HandlerSender,
    ) -> Result<(), String> {
        let now = now_micros();
        let delivery = now.saturating_sub(h.sent_us);
        if let (MEASURE, Some(c)) = (self.shared.phase(), self.type_counts(h.ty)) {
            c.measured.fetch_add(1, Ordering::Relaxed);
            c.delivery_us.fetch_add(delivery, Ordering::Relaxed);
            self.shared
                .received_measured
                .fetch_add(1, Ordering::Relaxed);
            let mut by = self
                .by_destination
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            // The destination's name is copied once, not per message.
            if !by.contains_key(dest) {
                by.insert(
                    dest.to_string(),
                    Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("bounds"),
                );
            }
            if let Some(hist) = by.get_mut(dest) {
                let _ = hist.record(delivery.max(1));
            }
        }
        let instant = Instant::now();
        self.shared.windows.received(instant);
        self.shared.windows.latency(instant, delivery, 1);
        use MessageType as M;
        let t = &self.topo;
        let reply = |ty: MessageType, h0: Header| Header {
            ty,
            from: at,
            sent_us: now_micros(),
            ..h0
        };
        let out = match h.ty {
            M::Order => {
                let sm = Loc {
                    kind: Kind::Sm,
                    id: h.subject,
                };
                vec![
                    (M::OrderConf, sm, reply(M::OrderConf, h)),
                    (M::StatInfoOrderDc, self.hq(), reply(M::StatInfoOrderDc, h)),
                    (M::ShipDep, at, reply(M::ShipDep, h)),
                ]
            }
            M::ShipDep => vec![(
                M::ShipInfo,
                Loc {
                    kind: Kind::Sm,
                    id: h.subject,
                },
                reply(M::ShipInfo, h),
            )],
            M::ShipInfo => vec![(
                M::ShipConf,
                Loc {
                    kind: Kind::Dc,
                    id: t.dc_of(at.id),
                },
                reply(M::ShipConf, h),
            )],
            M::CallForOffers => {
                let mut r = reply(M::Offer, h);
                r.subject = at.id;
                vec![(M::Offer, h.from, r)]
            }
            M::Offer => {
                let done = {
                    let mut offers = self.offers.lock().unwrap_or_else(PoisonError::into_inner);
                    let n = offers.entry(h.corr).or_insert(0);
                    *n += 1;
                    let done = *n >= h.expected;
                    if done {
                        offers.remove(&h.corr);
                    }
                    done
                };
                if done {
                    // The last offer in wins: any one of them would do.
                    vec![(
                        M::POrder,
                        Loc {
                            kind: Kind::Sp,
                            id: h.subject,
                        },
                        reply(M::POrder, h),
                    )]
                } else {
                    Vec::new()
                }
            }
            M::POrder => {
                let dc = h.from;
                let mut r = reply(M::PShipInfo, h);
                r.subject = at.id;
                vec![
                    (M::POrderConf, dc, reply(M::POrderConf, h)),
                    (M::Invoice, self.hq(), reply(M::Invoice, h)),
                    (M::PShipInfo, dc, r),
                ]
            }
            M::PShipInfo => vec![
                (
                    M::PShipConf,
                    Loc {
                        kind: Kind::Sp,
                        id: h.subject,
                    },
                    reply(M::PShipConf, h),
                ),
                (M::StatInfoShipDc, self.hq(), reply(M::StatInfoShipDc, h)),
            ],
            _ => Vec::new(),
        };
        let result = if out.is_empty() {
            Ok(())
        } else {
            self.send(at, out, Via::Handler(sender)).await.map(drop)
        };
        self.received.fetch_add(1, Ordering::Relaxed);
        self.shared.add_received(1);
        result
    }
}

/// How many connections the locations use.
#[derive(Debug, Clone, Copy)]
pub struct Connections {
    /// `--pool`: 0, each location its own; N, each kind's locations share N of each.
    pub pool: u32,
    /// `--start-connections`: most a location (or group) starts its interactions on.
    pub start_connections: u32,
}

/// Opens the connections, creates the destinations and subscriptions, and starts consuming.
pub async fn build(
    driver: Arc<dyn Driver>,
    topo: Topology,
    plan: Plan,
    transactions: bool,
    conns: Connections,
    shared: Arc<Shared>,
    name: &str,
) -> Result<(Arc<World>, Consumers)> {
    let admin: Arc<dyn Connection> = driver
        .connect(&format!("{name}-admin"))
        .await
        .map_err(|e| anyhow!(e.message))?
        .into();
    if transactions && !admin.transactions() {
        anyhow::bail!(
            "target '{}' runs no transactions through this harness: the spec sends most messages \
             in transactions (--transactions false runs the mix without them)",
            driver.name()
        );
    }
    // Destinations first: queues and topics.
    let mut queues = Vec::new();
    let mut topics = std::collections::BTreeSet::new();
    let mut feeds = Vec::new();
    for kind in Kind::ALL {
        for id in 0..topo.count(kind) {
            let loc = Loc { kind, id };
            for f in plan.feeds(&topo, loc) {
                match &f.dest {
                    Dest::Queue(q) => queues.push(q.clone()),
                    Dest::Topic(t) => {
                        topics.insert(t.clone());
                    }
                }
                feeds.push((loc, f));
            }
        }
    }
    for f in 0..topo.families {
        if let Dest::Topic(t) = plan.route(
            MessageType::CallForOffers,
            Loc {
                kind: Kind::Dc,
                id: 0,
            },
            f,
        ) {
            topics.insert(t);
        }
    }
    admin
        .ensure_queues(&queues)
        .await
        .map_err(|e| anyhow!(e.message))?;
    for t in &topics {
        admin
            .ensure_topic(t)
            .await
            .map_err(|e| anyhow!(e.message))?;
    }
    let mut senders = HashMap::new();
    let mut initiators = HashMap::new();
    let mut readers: HashMap<Kind, Vec<Arc<dyn Connection>>> = HashMap::new();
    for kind in Kind::ALL {
        let n = match conns.pool {
            0 => topo.count(kind),
            p => topo.count(kind).min(p),
        };
        let mut s = Vec::new();
        let mut starts = Vec::new();
        let mut r = Vec::new();
        for i in 0..n {
            if conns.pool > 0 {
                let c: Arc<dyn Connection> = driver
                    .connect(&format!("{name}-{}-s{i}", kind.code()))
                    .await
                    .map_err(|e| anyhow!(e.message))?
                    .into();
                s.push(AsyncMutex::new(c));
            }
            // Suppliers start no interaction: their pools stay empty.
            let up_front = if kind == Kind::Sp { 0 } else { OPENED_UP_FRONT };
            starts.push(
                StartPool::open(
                    driver.clone(),
                    format!("{name}-{}-i{i}", kind.code()),
                    conns.start_connections,
                    up_front,
                )
                .await?,
            );
            let c: Arc<dyn Connection> = driver
                .connect(&format!("{name}-{}-r{i}", kind.code()))
                .await
                .map_err(|e| anyhow!(e.message))?
                .into();
            r.push(c);
        }
        if conns.pool > 0 {
            senders.insert(kind, s);
        }
        initiators.insert(kind, starts);
        readers.insert(kind, r);
    }
    let world = Arc::new(World {
        topo,
        plan,
        transactions,
        shared,
        driver: driver.clone(),
        senders,
        initiators,
        types: MessageType::ALL
            .iter()
            .map(|_| TypeCounters::default())
            .collect(),
        interactions: Interaction::ALL
            .iter()
            .map(|_| InteractionCounters::default())
            .collect(),
        owed: AtomicU64::new(0),
        by_destination: Mutex::new(BTreeMap::new()),
        offers: Mutex::new(HashMap::new()),
        next_corr: AtomicU64::new(1),
        next_hq: AtomicU64::new(0),
        received: AtomicU64::new(0),
        commits: AtomicU64::new(0),
        commit_us: AtomicU64::new(0),
    });
    let (stop, stop_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut durables = Vec::new();
    for (loc, feed) in feeds {
        let conn = readers
            .get(&loc.kind)
            .and_then(|pool| crate::round_robin::pick(pool, loc.id as usize))
            .cloned()
            .ok_or_else(|| anyhow!("no reader connection for {loc:?}"))?;
        let prefetch = 256u32.min(conn.limits().max_prefetch);
        let consumer = match &feed.dest {
            Dest::Queue(q) => conn.consume(q, prefetch).await,
            Dest::Topic(t) => {
                if let Some(d) = &feed.durable {
                    // A durable subscription left by an earlier run would hold its messages.
                    let _ = conn.remove_subscription(t, d).await;
                    durables.push((t.clone(), d.clone()));
                }
                conn.subscribe_topic(
                    t,
                    &TopicSubscription {
                        durable: feed.durable.clone(),
                        selector: feed.selector.clone(),
                        client_ack: true,
                        prefetch,
                        bindings: feed.bindings.clone(),
                    },
                )
                .await
            }
        }
        .map_err(|e| anyhow!("{} for {}: {}", feed.dest.name(), loc.name(), e.message))?;
        let (world, mut stop_rx, dest) =
            (world.clone(), stop_rx.clone(), feed.dest.name().to_string());
        let sender = HandlerSender::new(format!("{name}-h{}", tasks.len()));
        tasks.push(tokio::spawn(async move {
            let mut consumer = consumer;
            let mut batch = Vec::with_capacity(64);
            loop {
                batch.clear();
                let open = tokio::select! {
                    open = consumer.next_batch(&mut batch, 64) => open,
                    _ = stop_rx.wait_for(|s| *s) => break,
                };
                for item in batch.drain(..) {
                    match item {
                        Ok(d) => {
                            match Header::decode(&d.body) {
                                Some(h) => {
                                    if let Err(e) = world.handle(loc, &dest, h, &sender).await {
                                        world.shared.note_error(e);
                                    }
                                }
                                None => {
                                    world.shared.foreign.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            if let Some(token) = d.ack {
                                consumer.ack(token);
                            }
                        }
                        Err(e) => world.shared.note_error(e.message),
                    }
                }
                if !open {
                    break;
                }
            }
            sender.close().await;
            let outcome = consumer.finish().await;
            if outcome.failed > 0 {
                world
                    .shared
                    .ack_errors
                    .fetch_add(outcome.failed, Ordering::Relaxed);
            }
        }));
    }
    let connections = readers.into_values().flatten().collect();
    Ok((
        world,
        Consumers {
            tasks,
            stop,
            admin,
            connections,
            queues,
            topics: topics.into_iter().collect(),
            durables,
        },
    ))
}

/// The consuming side of a run, and what it made.
pub struct Consumers {
    tasks: Vec<JoinHandle<()>>,
    stop: watch::Sender<bool>,
    admin: Arc<dyn Connection>,
    connections: Vec<Arc<dyn Connection>>,
    queues: Vec<String>,
    topics: Vec<String>,
    durables: Vec<(String, String)>,
}

impl Consumers {
    /// Stops consuming, closes the connections and, unless `keep`, removes every queue, topic
    /// and durable subscription the run made.
    pub async fn finish(self, world: &World, keep: bool) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        for c in self.connections {
            c.close().await;
        }
        for pool in world.senders.values() {
            for c in pool {
                c.lock().await.close().await;
            }
        }
        for pool in world.initiators.values().flatten() {
            pool.close().await;
        }
        if !keep {
            for (t, d) in &self.durables {
                let _ = self.admin.remove_subscription(t, d).await;
            }
            for t in &self.topics {
                let _ = self.admin.delete_topic(t).await;
            }
            for q in &self.queues {
                let _ = self.admin.delete_queue(q).await;
            }
        }
        self.admin.close().await;
    }
}
