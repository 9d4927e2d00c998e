//! A consumer of the PostgreSQL queue table: PostgreSQL has no push delivery, so it polls.
//!
//! Each poll opens a transaction and takes up to a batch of rows with the FTaB statement
//! (`DELETE ... FOR UPDATE SKIP LOCKED ... RETURNING`, highest priority first). The rows are
//! handed out one by one; when all are handed out, the transaction commits if every one was
//! acknowledged (the commit is the acknowledgement) and rolls back otherwise (returning them to
//! the queue). An empty poll waits, from [`IDLE_MIN`] doubling up to [`IDLE_MAX`], before the
//! next one.

use std::collections::VecDeque;
use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::{Client, Statement};

use super::{err, received, TABLE, VISIBLE};
use crate::drivers::{AckOutcome, AckToken, Consumer, DriverError, Received};

/// Most rows taken in one poll (and the driver's prefetch limit).
pub const MAX_TAKE: u32 = 1_000;
/// First wait after an empty poll.
pub const IDLE_MIN: Duration = Duration::from_micros(500);
/// Longest wait after empty polls.
pub const IDLE_MAX: Duration = Duration::from_millis(10);

/// Polls one queue on a session of its own.
pub struct PollingConsumer {
    client: Client,
    take: Statement,
    queue: String,
    me: String,
    limit: i64,
    batch: VecDeque<Received>,
    in_transaction: bool,
    handed: u64,
    acked: u64,
    outcome: AckOutcome,
}

impl PollingConsumer {
    /// A consumer of `queue` as client `me`, taking up to `prefetch` rows per poll.
    pub async fn new(
        client: Client,
        queue: &str,
        me: &str,
        prefetch: u32,
    ) -> Result<Self, DriverError> {
        let sql = format!(
            "DELETE FROM {TABLE} WHERE id = ANY(ARRAY(SELECT id FROM {TABLE} WHERE queue = $1 \
             AND {VISIBLE} ORDER BY priority DESC, id FOR UPDATE SKIP LOCKED LIMIT $3)) \
             RETURNING id, priority, queue, sender, body"
        );
        let take = client
            .prepare(&sql)
            .await
            .map_err(|e| err("prepare take", e))?;
        Ok(PollingConsumer {
            client,
            take,
            queue: queue.to_string(),
            me: me.to_string(),
            limit: i64::from(prefetch.clamp(1, MAX_TAKE)),
            batch: VecDeque::new(),
            in_transaction: false,
            handed: 0,
            acked: 0,
            outcome: AckOutcome::default(),
        })
    }

    /// Ends the open transaction: commit when everything handed out was acknowledged.
    async fn settle(&mut self) -> Result<(), DriverError> {
        if !self.in_transaction {
            return Ok(());
        }
        self.in_transaction = false;
        let unacked = self.handed - self.acked;
        self.handed = 0;
        self.acked = 0;
        if unacked == 0 {
            self.client
                .batch_execute("COMMIT")
                .await
                .map_err(|e| err("commit", e))
        } else {
            self.outcome.failed += unacked;
            self.outcome
                .first_error
                .get_or_insert_with(|| "postgres: rows not acknowledged; rolled back".to_string());
            self.client
                .batch_execute("ROLLBACK")
                .await
                .map_err(|e| err("rollback", e))
        }
    }

    /// One poll: a transaction with up to `limit` taken rows, or none (and no transaction).
    async fn poll(&mut self) -> Result<(), DriverError> {
        self.client
            .batch_execute("BEGIN")
            .await
            .map_err(|e| err("begin", e))?;
        let rows = match self
            .client
            .query(&self.take, &[&self.queue, &self.me, &self.limit])
            .await
        {
            Ok(rows) => rows,
            Err(e) => {
                let _ = self.client.batch_execute("ROLLBACK").await;
                return Err(err("take", e));
            }
        };
        if rows.is_empty() {
            return self
                .client
                .batch_execute("COMMIT")
                .await
                .map_err(|e| err("commit", e));
        }
        let mut rows: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.get::<_, i16>("priority"),
                    r.get::<_, i64>("id"),
                    received(r),
                )
            })
            .collect();
        // RETURNING gives no order: hand them out highest priority first, then oldest.
        rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        self.batch.extend(rows.into_iter().map(|(_, _, r)| r));
        self.in_transaction = true;
        Ok(())
    }
}

#[async_trait]
impl Consumer for PollingConsumer {
    async fn next(&mut self) -> Option<Result<Received, DriverError>> {
        let mut idle = IDLE_MIN;
        loop {
            if let Some(mut r) = self.batch.pop_front() {
                self.handed += 1;
                r.ack = Some(self.handed);
                return Some(Ok(r));
            }
            if let Err(e) = self.settle().await {
                return Some(Err(e));
            }
            if let Err(e) = self.poll().await {
                return Some(Err(e));
            }
            if self.batch.is_empty() {
                tokio::time::sleep(idle).await;
                idle = (idle * 2).min(IDLE_MAX);
            }
        }
    }

    fn ack(&mut self, _token: AckToken) {
        self.acked += 1;
    }

    async fn finish(mut self: Box<Self>) -> AckOutcome {
        if !self.batch.is_empty() {
            // Rows taken but not handed out: roll the transaction back so that none is lost
            // (the handed-out rows of this last batch come back too and are delivered again).
            self.batch.clear();
            self.in_transaction = false;
            let _ = self.client.batch_execute("ROLLBACK").await;
        } else if let Err(e) = self.settle().await {
            self.outcome.first_error.get_or_insert(e.message);
        }
        self.outcome
    }
}
