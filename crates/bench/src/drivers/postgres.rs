//! The `postgres` driver: a plain queue table in PostgreSQL, in the FTaB report's design,
//! through `tokio-postgres`.
//!
//! One table, `ferry_bench_queue` (id, queue, priority, sender, receiver, body), indexed by
//! (queue, priority, id) and (sender, id). A send is one `INSERT` (a batch, or a send to several
//! queues, is one multi-row `INSERT`: one transaction); a take is
//! `DELETE ... WHERE id = (SELECT id ... ORDER BY ... FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING`,
//! so concurrent takers skip each other's rows instead of queueing on them. Consumers (module
//! [`consumer`]) poll with the same statement taking up to a batch of rows in a transaction
//! that commits once every row of it is acknowledged: that commit is the acknowledgement.
//!
//! Sessions: the clients of a run share at most `--postgres-sessions` database sessions
//! (default [`DEFAULT_SESSIONS`]), as the clients of the FTaB report shared the middleware's
//! connection pool: up to that many clients have a session each, further clients take turns on
//! them (tokio-postgres pipelines their statements; PostgreSQL runs a session's statements one
//! after another). PostgreSQL refuses sessions beyond its `max_connections` (100 by default), so
//! a mix of 100 clients could not run one session per client. Statements are prepared once per
//! session. Consumers keep a session of their own (their takes are transactions).
//!
//! Durability: every statement commits on its own with the server's `fsync = on` and
//! `synchronous_commit = on` (as `scripts/peers up` starts it): a send returns once its commit
//! record is fsynced to the WAL (PostgreSQL groups concurrent commits into one flush).
//!
//! Capabilities: SQL makes all of them plain queries: by-sender retrieval, addressed messages
//! (`receiver`), priorities and the "which queues hold messages for me" query.

pub mod consumer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tokio_postgres::{Client, NoTls, Row, Statement};

use super::{
    Capabilities, Connection, Consumer, Driver, DriverError, DriverLimits, From, OutMessage,
    ReceiveOne, Received,
};

/// The default URL: the port and database `scripts/peers up` sets up.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5433/ferrybench";
/// The queue table.
pub const TABLE: &str = "ferry_bench_queue";
/// Sessions the clients share at most, by default.
pub const DEFAULT_SESSIONS: usize = 32;
/// Priority of a message sent without one (the middle of 1-10).
const DEFAULT_PRIORITY: i16 = 5;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS ferry_bench_queue (
    id bigserial PRIMARY KEY,
    queue text NOT NULL,
    priority smallint NOT NULL,
    sender text NOT NULL,
    receiver text,
    body bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS ferry_bench_queue_take ON ferry_bench_queue (queue, priority DESC, id);
CREATE INDEX IF NOT EXISTS ferry_bench_queue_sender ON ferry_bench_queue (sender, id);
";

const INSERT: &str = "INSERT INTO ferry_bench_queue (queue, priority, sender, receiver, body) \
    SELECT q, p, $5, r, b FROM unnest($1::text[], $2::int2[], $3::text[], $4::bytea[]) AS t(q, p, r, b)";

/// Rows visible to client `$2`: not addressed, or addressed to it.
const VISIBLE: &str = "(receiver IS NULL OR receiver = $2)";

/// The single take of one row where `column = $1`, visible to `$2`, in `order`.
fn take_one_sql(column: &str, order: &str) -> String {
    format!(
        "DELETE FROM {TABLE} WHERE id = (SELECT id FROM {TABLE} WHERE {column} = $1 AND {VISIBLE} \
         ORDER BY {order} FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING queue, sender, body"
    )
}

/// A PostgreSQL database at one URL.
#[derive(Debug)]
pub struct PostgresDriver {
    url: String,
    max_sessions: usize,
    sessions: Mutex<Sessions>,
}

/// The sessions a driver's clients share.
#[derive(Debug, Default)]
struct Sessions {
    open: Vec<Arc<Session>>,
    next: usize,
}

impl PostgresDriver {
    /// A driver for the database at `url` (`postgres://USER@HOST:PORT/DB`) whose clients
    /// share at most `max_sessions` sessions.
    pub fn new(url: String, max_sessions: usize) -> Self {
        PostgresDriver {
            url,
            max_sessions: max_sessions.max(1),
            sessions: Mutex::new(Sessions::default()),
        }
    }

    /// A session for one more client: a new one while fewer than the maximum are open, else
    /// the open ones in turn.
    async fn session(&self) -> Result<Arc<Session>, DriverError> {
        {
            let mut s = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            if s.open.len() >= self.max_sessions {
                let turn = s.next;
                s.next += 1;
                if let Some(session) = crate::round_robin::pick(&s.open, turn) {
                    return Ok(session.clone());
                }
            }
        }
        let session = Arc::new(Session {
            client: open_client(&self.url).await?,
            statements: Mutex::new(HashMap::new()),
        });
        self.sessions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .push(session.clone());
        Ok(session)
    }
}

/// One database session and its prepared statements.
#[derive(Debug)]
struct Session {
    client: Client,
    statements: Mutex<HashMap<String, Statement>>,
}

impl Session {
    /// `sql`, prepared on this session once.
    async fn prepared(&self, sql: &str) -> Result<Statement, DriverError> {
        let cached = self
            .statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(sql)
            .cloned();
        if let Some(s) = cached {
            return Ok(s);
        }
        let s = self
            .client
            .prepare(sql)
            .await
            .map_err(|e| err("prepare", e))?;
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

fn err(what: &str, e: tokio_postgres::Error) -> DriverError {
    DriverError::failed("postgres", what, describe(&e))
}

/// A `tokio-postgres` error in one line: the server's own message for database errors (the
/// error's `Display` is only "db error"), the error itself otherwise.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

/// A hint for a refused connection: PostgreSQL's connection limit is the usual cause with many
/// bench clients, each of which is one connection (consumers one more).
fn connect_hint(e: &tokio_postgres::Error) -> &'static str {
    match e.code() {
        Some(c) if *c == tokio_postgres::error::SqlState::TOO_MANY_CONNECTIONS => {
            "every bench client is one PostgreSQL connection: raise the server's max_connections \
             or run fewer clients"
        }
        _ => "is 'scripts/peers up' running?",
    }
}

/// Opens a client on `url`; its connection runs on a task of its own until the client drops.
pub async fn open_client(url: &str) -> Result<Client, DriverError> {
    let (client, connection) =
        tokio_postgres::connect(url, NoTls)
            .await
            .map_err(|e| DriverError {
                message: format!(
                    "cannot connect to PostgreSQL at {url}: {} ({})",
                    describe(&e),
                    connect_hint(&e)
                ),
                fatal: true,
            })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

#[async_trait]
impl Driver for PostgresDriver {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn durability(&self) -> String {
        "PostgreSQL queue table, fsync=on and synchronous_commit=on: a send returns after its \
         commit is fsynced to the WAL (group commit)"
            .to_string()
    }

    async fn connect(&self, client_name: &str) -> Result<Box<dyn Connection>, DriverError> {
        Ok(Box::new(PostgresConnection {
            session: self.session().await?,
            url: self.url.clone(),
            name: client_name.to_string(),
        }))
    }
}

/// One bench client: a name on a (possibly shared) session; concurrent statements pipeline on
/// the session.
struct PostgresConnection {
    session: Arc<Session>,
    url: String,
    name: String,
}

fn received(row: &Row) -> Received {
    let body: Vec<u8> = row.get("body");
    Received {
        body: body.into(),
        queue: row.get::<_, String>("queue").into(),
        sender: Some(row.get::<_, String>("sender").into()),
        ack: None,
    }
}

#[async_trait]
impl Connection for PostgresConnection {
    fn limits(&self) -> DriverLimits {
        DriverLimits {
            max_batch: 10_000,
            max_prefetch: consumer::MAX_TAKE,
        }
    }

    async fn ensure_queues(&self, _queues: &[String]) -> Result<(), DriverError> {
        // Queues are values in one table: only the table needs to exist. The advisory lock
        // keeps concurrent set-ups from racing on CREATE.
        let sql = format!("BEGIN; SELECT pg_advisory_xact_lock(7256); {SCHEMA} COMMIT;");
        self.session
            .client
            .batch_execute(&sql)
            .await
            .map_err(|e| err("create the queue table", e))?;
        let fsync: String = self
            .session
            .client
            .query_one("SHOW fsync", &[])
            .await
            .map_err(|e| err("SHOW fsync", e))?
            .get(0);
        if fsync != "on" {
            eprintln!(
                "ferry-bench: warning: PostgreSQL runs with fsync={fsync}: figures are not durable"
            );
        }
        Ok(())
    }

    async fn send(&self, msg: OutMessage) -> Result<(), DriverError> {
        let mut results = self.send_batch(vec![msg]).await?;
        results.pop().unwrap_or(Ok(()))
    }

    async fn send_batch(
        &self,
        msgs: Vec<OutMessage>,
    ) -> Result<Vec<Result<(), DriverError>>, DriverError> {
        let rows: usize = msgs.iter().map(|m| m.queues.len()).sum();
        let (mut queues, mut prios, mut receivers, mut bodies) = (
            Vec::with_capacity(rows),
            Vec::with_capacity(rows),
            Vec::with_capacity(rows),
            Vec::with_capacity(rows),
        );
        for m in &msgs {
            for q in &m.queues {
                queues.push(q.as_str());
                prios.push(m.priority.map_or(DEFAULT_PRIORITY, i16::from));
                receivers.push(m.to.as_deref());
                bodies.push(m.body.as_ref());
            }
        }
        let insert = self.session.prepared(INSERT).await?;
        self.session
            .client
            .execute(&insert, &[&queues, &prios, &receivers, &bodies, &self.name])
            .await
            .map_err(|e| err("insert", e))?;
        Ok(msgs.iter().map(|_| Ok(())).collect())
    }

    async fn receive_one(&self, req: ReceiveOne) -> Result<Option<Received>, DriverError> {
        let order = if req.by_priority {
            "priority DESC, id"
        } else {
            "id"
        };
        let (column, key) = match &req.from {
            From::Queue(q) => ("queue", q),
            From::Sender(s) => ("sender", s),
        };
        let take = self.session.prepared(&take_one_sql(column, order)).await?;
        let row = self
            .session
            .client
            .query_opt(&take, &[key, &self.name])
            .await
            .map_err(|e| err("take", e))?;
        Ok(row.as_ref().map(received))
    }

    async fn waiting_queues(&self) -> Result<Vec<String>, DriverError> {
        let query = self
            .session
            .prepared(&format!(
                "SELECT DISTINCT queue FROM {TABLE} WHERE receiver = $1 ORDER BY queue"
            ))
            .await?;
        let rows = self
            .session
            .client
            .query(&query, &[&self.name])
            .await
            .map_err(|e| err("queue query", e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn consume(&self, queue: &str, prefetch: u32) -> Result<Box<dyn Consumer>, DriverError> {
        let client = open_client(&self.url).await?;
        Ok(Box::new(
            consumer::PollingConsumer::new(client, queue, &self.name, prefetch).await?,
        ))
    }

    async fn close(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_statement_has_the_ftab_shape() {
        let sql = take_one_sql("queue", "priority DESC, id");
        assert!(sql.starts_with("DELETE FROM ferry_bench_queue WHERE id = (SELECT id"));
        assert!(sql.contains("FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING"));
    }
}
