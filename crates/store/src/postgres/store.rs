//! [`PostgresStore`]: the [`Store`](crate::Store) implementation over PostgreSQL.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use ferry_protocol::{AckMode, Delivery, DeliveryId, MessageId, QueueInfo, ReceiveMode};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

use super::batch::{Done, Work};
use super::batcher::Batcher;
use super::clients::{ClientIds, QueueNames};
use super::config::PostgresConfig;
use super::gather::{self, Gathers};
use super::inner::Inner;
use super::publish::Selectors;
use super::{listen, migrate};
use crate::api::{
    Heartbeat, NewMessage, Queues, ReceiveSpec, Registration, SessionId, Sessions, Topics,
    Transactions, Upkeep,
};
use crate::error::StoreError;

/// Change reports buffered per subscriber; one that lags further is told "anything changed".
const CHANGES_CAPACITY: usize = 1024;

/// Planner settings of every connection (see [`PostgresStore::open`]).
const PLANNER_OPTIONS: &str =
    "-c enable_sort=off -c enable_bitmapscan=off -c enable_seqscan=off -c jit=off";

/// How long an operation waits for a pooled connection, or for a new one to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The PostgreSQL storage engine. Open it with [`PostgresStore::open`]; share the `Arc`.
#[derive(Debug)]
pub struct PostgresStore {
    inner: Arc<Inner>,
    batcher: Batcher,
    /// Client-ack takes waiting to be served together.
    gathers: Arc<Gathers>,
    /// What the listener hears from other nodes.
    changes: broadcast::Sender<Vec<String>>,
    listener: JoinHandle<()>,
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

impl PostgresStore {
    /// Connects, applies the schema migrations the database lacks, frees what this node's
    /// previous run held (leases, session claims), records a first heartbeat, and starts the
    /// batcher and the change listener.
    pub async fn open(cfg: PostgresConfig) -> Result<Arc<PostgresStore>, StoreError> {
        let mut pg: tokio_postgres::Config = cfg.url.parse().map_err(|e| {
            StoreError::InvalidArgument(format!("bad PostgreSQL URL '{}': {e}", cfg.url))
        })?;
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(CONNECT_TIMEOUT);
        }
        if pg.get_application_name().is_none() {
            pg.application_name("ferry");
        }
        // A queue table's statistics are always stale (it is empty one moment and holds a
        // million rows the next), and a plan made for "a few rows" (a bitmap or sequential
        // scan of every ready row, then a sort; a sequential scan to find rows by ctid) turns
        // a take into a scan of the whole backlog. Ferry's statements are written for ordered
        // index scans, TID scans and index probes, so its connections price the other paths
        // out (a sort that is the only way, such as ordering a receive's few rows, still
        // runs). JIT would then compile every statement, whose cost now looks huge: off.
        let options = match pg.get_options() {
            Some(o) if !o.is_empty() => format!("{o} {PLANNER_OPTIONS}"),
            _ => PLANNER_OPTIONS.to_owned(),
        };
        pg.options(&options);
        let manager = Manager::from_config(
            pg.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(cfg.pool_size.max(2))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT * 2))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| StoreError::Internal(format!("building the connection pool: {e}")))?;
        let inner = Arc::new(Inner {
            pool,
            node: cfg.node.clone(),
            clients: ClientIds::default(),
            queue_names: QueueNames::default(),
            beating: AtomicBool::new(false),
            contact: std::sync::Mutex::new(None),
            selectors: Selectors::default(),
            flows: Default::default(),
        });
        let mut conn = inner.conn().await.map_err(StoreError::from)?;
        let before = migrate::migrate(&mut conn).await?;
        drop(conn);
        // Listen before anything can change, so no notice is missed.
        let (changes, _) = broadcast::channel(CHANGES_CAPACITY);
        let listener = listen::start(pg, cfg.node.clone(), changes.clone());
        let released = inner.release_node().await?;
        inner.beat().await?;
        tracing::info!(
            node = %cfg.node,
            schema_before = before,
            schema = migrate::latest_version(),
            released_queues = ?released,
            "postgres store opened"
        );
        let batcher = Batcher::start(inner.clone(), cfg.batch_max);
        Ok(Arc::new(PostgresStore {
            gathers: Arc::default(),
            inner,
            batcher,
            changes,
            listener,
        }))
    }

    /// What the operations share (the admin role's queries live in `admin.rs`).
    pub(super) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    async fn settle_by_removal(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
    ) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        match self
            .batcher
            .submit(Work::Ack(session, ids.to_vec()))
            .await?
        {
            Done::Ack(r) => r,
            Done::Send(_) => Err(StoreError::Internal("batcher answered out of kind".into())),
        }
    }
}

// Every role is played by the engine itself.
crate::engine_store!(PostgresStore);

#[async_trait]
impl Queues for PostgresStore {
    async fn create_queue_with(
        &self,
        name: &str,
        options: &ferry_protocol::QueueOptions,
    ) -> Result<(), StoreError> {
        self.inner.create_queue(name, options).await
    }

    async fn delete_queue(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.inner.delete_queue(name, force).await
    }

    async fn list_queues(&self) -> Result<Vec<QueueInfo>, StoreError> {
        self.inner.list_queues().await
    }

    async fn send(&self, msg: NewMessage) -> Result<MessageId, StoreError> {
        let mut results = self.send_batch(vec![msg]).await;
        results
            .pop()
            .unwrap_or_else(|| Err(StoreError::Internal("a send got no result".into())))
    }

    async fn send_batch(&self, msgs: Vec<NewMessage>) -> Vec<Result<MessageId, StoreError>> {
        if msgs.is_empty() {
            return Vec::new();
        }
        let n = msgs.len();
        match self.batcher.submit(Work::Send(msgs)).await {
            Ok(Done::Send(results)) => results,
            Ok(Done::Ack(_)) => {
                vec![Err(StoreError::Internal("batcher answered out of kind".into())); n]
            }
            Err(e) => vec![Err(e); n],
        }
    }

    async fn receive(&self, spec: &ReceiveSpec, max: usize) -> Result<Vec<Delivery>, StoreError> {
        if spec.selector.is_some() {
            // Evaluated in Rust, one receive at a time: not gathered with others (`select`).
            return self.inner.receive_selected(spec, max).await;
        }
        match (spec.mode, spec.ack) {
            (ReceiveMode::Take, AckMode::Client) => {
                gather::receive(&self.inner, &self.gathers, spec, max).await
            }
            _ => self.inner.receive(spec, max).await,
        }
    }

    async fn ack(&self, session: SessionId, ids: &[DeliveryId]) -> Result<(), StoreError> {
        self.settle_by_removal(session, ids).await
    }

    async fn nack(
        &self,
        session: SessionId,
        ids: &[DeliveryId],
        requeue: bool,
    ) -> Result<Vec<String>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        if requeue {
            self.inner.requeue(session, ids).await
        } else {
            self.settle_by_removal(session, ids)
                .await
                .map(|()| Vec::new())
        }
    }

    async fn waiting_queues(&self, client: &str, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.inner.waiting_queues(client, now_ms).await
    }
}

#[async_trait]
impl Topics for PostgresStore {
    async fn create_topic(&self, name: &str) -> Result<(), StoreError> {
        self.inner.create_topic(name).await
    }

    async fn delete_topic(&self, name: &str, force: bool) -> Result<(), StoreError> {
        self.inner.delete_topic(name, force).await
    }

    async fn list_topics(&self) -> Result<Vec<ferry_protocol::TopicInfo>, StoreError> {
        self.inner.list_topics().await
    }

    async fn subscribe_topic(
        &self,
        topic: &str,
        name: &str,
        options: &ferry_protocol::SubscriptionOptions,
        owner: &str,
    ) -> Result<String, StoreError> {
        self.inner
            .subscribe_topic(topic, name, options, owner)
            .await
    }

    async fn attach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
        shared: bool,
    ) -> Result<(), StoreError> {
        self.inner
            .attach_consumer(topic, name, session, shared)
            .await
    }

    async fn detach_consumer(
        &self,
        topic: &str,
        name: &str,
        session: SessionId,
    ) -> Result<(), StoreError> {
        self.inner.detach_consumer(topic, name, session).await
    }

    async fn unsubscribe(&self, topic: &str, name: &str) -> Result<(), StoreError> {
        self.inner.unsubscribe(topic, name).await
    }
}

#[async_trait]
impl Transactions for PostgresStore {
    async fn commit(
        &self,
        session: SessionId,
        msgs: Vec<NewMessage>,
        acks: &[DeliveryId],
    ) -> Result<Vec<MessageId>, StoreError> {
        self.inner.commit(session, &msgs, acks).await
    }
}

#[async_trait]
impl Sessions for PostgresStore {
    async fn register_client(&self, name: &str) -> Result<(), StoreError> {
        self.inner.register_client(name).await
    }

    async fn client_exists(&self, name: &str) -> Result<bool, StoreError> {
        self.inner.client_exists(name).await
    }

    async fn release_session(&self, session: SessionId) -> Result<Vec<String>, StoreError> {
        self.inner.release_session(session).await
    }

    async fn claim_session(
        &self,
        client: &str,
        session: SessionId,
        registration: Registration,
    ) -> Result<(), StoreError> {
        self.inner
            .claim_session(client, session, registration)
            .await
    }

    async fn end_session(&self, client: &str, session: SessionId) -> Result<(), StoreError> {
        self.inner.end_session(client, session).await
    }

    async fn heartbeat(&self, node_timeout_ms: u64) -> Result<Heartbeat, StoreError> {
        self.inner.heartbeat(node_timeout_ms).await
    }

    async fn leave(&self) -> Result<(), StoreError> {
        self.inner.leave().await
    }

    fn subscribe_changes(&self) -> Option<broadcast::Receiver<Vec<String>>> {
        Some(self.changes.subscribe())
    }
}

#[async_trait]
impl Upkeep for PostgresStore {
    async fn expire_clients(&self, now_ms: u64, idle_ms: u64) -> Result<u64, StoreError> {
        self.inner.expire_clients(now_ms, idle_ms).await
    }

    async fn expire_leases(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.inner.expire_leases(now_ms).await
    }

    async fn next_lease_deadline(&self) -> Result<Option<u64>, StoreError> {
        self.inner.next_lease_deadline().await
    }

    async fn delayed_due(
        &self,
        after_ms: u64,
        until_ms: u64,
    ) -> Result<(Vec<String>, Option<u64>), StoreError> {
        self.inner.delayed_due(after_ms, until_ms).await
    }

    async fn purge_expired(&self, now_ms: u64) -> Result<u64, StoreError> {
        self.inner.purge_expired(now_ms).await
    }

    async fn maintain(&self) -> Result<(), StoreError> {
        // PostgreSQL's autovacuum reclaims dead rows; nothing to do here.
        Ok(())
    }

    async fn flush(&self) -> Result<(), StoreError> {
        // Every call returns after its transaction committed (synchronous_commit; a
        // transaction of non-persistent messages only does not wait for the WAL flush, and
        // such messages are not promised to survive a crash).
        Ok(())
    }
}
