//! [`PostgresStore`]: the [`Store`](crate::Store) implementation over PostgreSQL.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

use super::batcher::Batcher;
use super::clients::{ClientIds, QueueNames};
use super::config::PostgresConfig;
use super::gather::Gathers;
use super::inner::Inner;
use super::publish::Selectors;
use super::{listen, migrate};
use crate::admin::Admin;
use crate::api::{Queues, Sessions, Store, Topics, Transactions, Upkeep};
use crate::error::StoreError;
use crate::users::Users;

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
    pub(super) inner: Arc<Inner>,
    /// Sends and acks gathered into one transaction per batch.
    pub(super) batcher: Batcher,
    /// Client-ack takes waiting to be served together.
    pub(super) gathers: Arc<Gathers>,
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
        let (changes, _) = broadcast::channel(CHANGES_CAPACITY);
        let inner = Arc::new(Inner {
            pool,
            node: cfg.node.clone(),
            clients: ClientIds::default(),
            queue_names: QueueNames::default(),
            beating: AtomicBool::new(false),
            contact: std::sync::Mutex::new(None),
            selectors: Selectors::default(),
            flows: Default::default(),
            changes: changes.clone(),
        });
        let mut conn = inner.conn().await.map_err(StoreError::from)?;
        let before = migrate::migrate(&mut conn).await?;
        drop(conn);
        // Listen before anything can change, so no notice is missed.
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
            listener,
        }))
    }
}

/// Each role is played where its work lives: queues by the engine itself (sends and acks go
/// through its batcher, client-ack takes through its gathers), every other role by `Inner`,
/// which holds what those operations share.
impl Store for PostgresStore {
    fn queues(&self) -> &dyn Queues {
        self
    }

    fn topics(&self) -> &dyn Topics {
        &*self.inner
    }

    fn transactions(&self) -> &dyn Transactions {
        &*self.inner
    }

    fn sessions(&self) -> &dyn Sessions {
        &*self.inner
    }

    fn upkeep(&self) -> &dyn Upkeep {
        &*self.inner
    }

    fn admin(&self) -> &dyn Admin {
        &*self.inner
    }

    fn users(&self) -> &dyn Users {
        &*self.inner
    }
}
