//! Nodes and their sessions (the sessions role): registering client names, claiming one for a
//! session (one live session per name across every node), releasing a session's deliveries,
//! heartbeats in `nodes`, and freeing what a dead node held.
//!
//! A claim is the (node, session) pair on the client's row, set by a conditional upsert, so two
//! nodes claiming at once cannot both succeed. A node is dead when its heartbeat (database
//! clock) is older than the timeout *and* the database has been up for longer than that, so a
//! database restart does not make every node look dead at once. A node judges the others only
//! after it has itself reached the database without a break for a whole timeout: after an
//! outage (of the database, of this node's link to it, or of this process, frozen), the others
//! get the same time to beat again before anyone takes them for dead.
//!
//! Freeing a client's claim this way (a dead node, a node leaving or restarting) also drops the
//! non-durable subscriptions that client owned: no consumer of theirs is left.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::broadcast;

use super::inner::{Contact, Inner};
use super::names;
use super::notify::notify;
use super::receive::as_i64;
use super::settle::{names_after_dead_letters, UNLEASE};
use super::tally::Tally;
use super::topics::{drop_owned, drop_unconsumed_shared};
use super::tx::{first_column, retrying, TxError, TxResult};
use crate::api::{Heartbeat, Registration, SessionId, Sessions};
use crate::clock::wall_ms;
use crate::error::StoreError;

#[async_trait]
impl Sessions for Inner {
    /// Registers a client permanently; idempotent (an ephemeral name becomes permanent). Not
    /// answered from the cache: the name may have expired on another node.
    async fn register_client(&self, name: &str) -> Result<(), StoreError> {
        names::check("client", name)?;
        retrying(|| async {
            let conn = self.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "INSERT INTO clients (name) VALUES ($1) \
                     ON CONFLICT (name) DO UPDATE SET ephemeral = false RETURNING id",
                )
                .await?;
            let id: i64 = conn.query_one(&stmt, &[&name]).await?.try_get(0)?;
            self.clients.remember(name.to_owned(), id);
            Ok(())
        })
        .await
    }

    /// Whether a client name is registered (read from the database: it may have expired).
    async fn client_exists(&self, name: &str) -> Result<bool, StoreError> {
        retrying(|| async {
            let conn = self.conn().await?;
            let found = self.clients.lookup_fresh(&conn, &[name], false).await?;
            Ok(found.contains_key(name))
        })
        .await
    }

    /// Returns every delivery `session` holds to its queue.
    async fn release_session(&self, session: SessionId) -> Result<Vec<String>, StoreError> {
        let session = as_i64(session);
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let stmt = tx
                .prepare_cached(&format!(
                    "WITH u AS (UPDATE message_queue SET {UNLEASE} \
                       WHERE lease_node = $1 AND lease_session = $2 \
                         AND lease_delivery_id IS NOT NULL \
                       RETURNING queue_id, ctid) \
                     SELECT q.name, u.ctid::text FROM u JOIN queues q ON q.id = u.queue_id"
                ))
                .await?;
            let rows = tx.query(&stmt, &[&self.node, &session]).await?;
            let mut tally = Tally::default();
            let names = names_after_dead_letters(&tx, &rows, &mut tally).await?;
            notify(&tx, &self.node, &names).await?;
            let stmt = tx
                .prepare_cached(
                    "DELETE FROM subscription_consumers WHERE node = $1 AND session = $2 \
                     RETURNING queue_id",
                )
                .await?;
            let consumed = first_column::<i64>(&tx.query(&stmt, &[&self.node, &session]).await?)?;
            drop_unconsumed_shared(&tx, &consumed).await?;
            tx.commit().await?;
            self.count(tally);
            Ok(names)
        })
        .await
    }

    /// Registers `client` as `registration` says and claims it for `session` of this node. A
    /// name registered permanently stays so; an ephemeral one claimed as permanent becomes
    /// permanent.
    async fn claim_session(
        &self,
        client: &str,
        session: SessionId,
        registration: Registration,
    ) -> Result<(), StoreError> {
        names::check("client", client)?;
        let session = as_i64(session);
        let ephemeral = registration == Registration::Ephemeral;
        let now = as_i64(wall_ms());
        let id = retrying(|| async {
            let conn = self.conn().await?;
            let stmt = conn
                .prepare_cached(
                    "INSERT INTO clients (name, node, session, ephemeral, last_seen) \
                       VALUES ($1, $2, $3, $4, $5) \
                     ON CONFLICT (name) DO UPDATE \
                       SET node = EXCLUDED.node, session = EXCLUDED.session, \
                           ephemeral = clients.ephemeral AND EXCLUDED.ephemeral, \
                           last_seen = EXCLUDED.last_seen \
                       WHERE clients.node IS NULL \
                          OR (clients.node = EXCLUDED.node AND clients.session = EXCLUDED.session) \
                     RETURNING id",
                )
                .await?;
            let row = conn
                .query_opt(&stmt, &[&client, &self.node, &session, &ephemeral, &now])
                .await?;
            Ok(match row {
                Some(r) => Some(r.try_get::<_, i64>(0)?),
                None => None,
            })
        })
        .await?;
        match id {
            Some(id) => {
                self.clients.remember(client.to_owned(), id);
                Ok(())
            }
            None => Err(StoreError::AlreadyOnline(client.to_owned())),
        }
    }

    /// Frees `client` if `session` of this node holds it, and drops the non-durable
    /// subscriptions the client made that nobody consumes: the broker removes its own when its
    /// consumers end, so these are what a failure left behind (a shared subscription made but
    /// never attached to, or a consumer whose removal failed while the database was away).
    ///
    /// The name's expiry counts from now; an ephemeral name is deleted by the next
    /// [`crate::Upkeep::expire_clients`] once it holds nothing (telling whether it does reads the
    /// messages table, which the upkeep does once for all of them).
    async fn end_session(&self, client: &str, session: SessionId) -> Result<(), StoreError> {
        let session = as_i64(session);
        let now = as_i64(wall_ms());
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "UPDATE clients SET node = NULL, session = NULL, last_seen = $4 \
                     WHERE name = $1 AND node = $2 AND session = $3",
                )
                .await?;
            let freed = tx
                .execute(&stmt, &[&client, &self.node, &session, &now])
                .await?;
            if freed > 0 {
                // Only while the claim was ours: a later session of the same client owns
                // what it makes.
                drop_owned(&tx, &[client.to_owned()]).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Records this node's heartbeat, then reaps the nodes silent for `timeout_ms`. Reports the
    /// queues that got deliveries back and whether this node had been taken for dead.
    async fn heartbeat(&self, timeout_ms: u64) -> Result<Heartbeat, StoreError> {
        // Far beyond any real timeout, and within what an interval can hold.
        let timeout = i64::try_from(timeout_ms.min(1 << 50)).unwrap_or(i64::MAX);
        let beat = self.beat().await;
        let in_contact = self.note_contact(beat.is_ok(), Duration::from_millis(timeout_ms));
        let was_taken_for_dead = beat?;
        let returned = if in_contact >= Duration::from_millis(timeout_ms) {
            retrying(|| self.reap(timeout)).await?
        } else {
            Vec::new()
        };
        // Queue figures only: a failure is retried with the next heartbeat, never fatal.
        if let Err(e) = self.write_flows().await {
            tracing::debug!(error = %StoreError::from(e), "writing queue counters failed; kept for later");
        }
        Ok(Heartbeat {
            returned,
            was_taken_for_dead,
        })
    }

    /// A clean stop: frees what this node still holds and deletes its `nodes` row, in one
    /// transaction (the other nodes are told about deliveries that went back to their queues).
    async fn leave(&self) -> Result<(), StoreError> {
        let me = [self.node.clone()];
        if let Err(e) = self.write_flows().await {
            tracing::warn!(error = %StoreError::from(e), "writing queue counters at leave failed");
        }
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let mut tally = Tally::default();
            self.free_nodes(&tx, &me, &mut tally).await?;
            let stmt = tx
                .prepare_cached("DELETE FROM nodes WHERE name = $1")
                .await?;
            tx.execute(&stmt, &[&self.node]).await?;
            tx.commit().await?;
            self.count(tally);
            Ok(())
        })
        .await
    }

    fn subscribe_changes(&self) -> Option<broadcast::Receiver<Vec<String>>> {
        Some(self.changes.subscribe())
    }
}

impl Inner {
    /// Notes whether this heartbeat reached the database and returns how long this node has
    /// been in contact without a break. A failed beat, or a gap between beats longer than the
    /// timeout (a frozen process), starts the count again.
    fn note_contact(&self, reached: bool, timeout: Duration) -> Duration {
        let now = Instant::now();
        let mut contact = self
            .contact
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let kept = contact
            .filter(|c| reached && now.duration_since(c.last) <= timeout)
            .map(|c| c.since);
        *contact = reached.then(|| Contact {
            since: kept.unwrap_or(now),
            last: now,
        });
        contact.map_or(Duration::ZERO, |c| now.duration_since(c.since))
    }

    /// Records this node's heartbeat. True when this node had beaten before and its row was
    /// gone: another node took it for dead and freed what it held.
    pub async fn beat(&self) -> Result<bool, StoreError> {
        // A database restart leaves dead connections in the pool. An idle node would spend one
        // heartbeat on each and be taken for dead before it reached a live one: skip them here.
        let mut dead_connections = 0;
        let max = self.pool.status().max_size;
        loop {
            match self.beat_once().await {
                Err(TxError::Db(e)) if e.is_closed() && dead_connections < max => {
                    dead_connections += 1;
                }
                other => return other.map_err(StoreError::from),
            }
        }
    }

    async fn beat_once(&self) -> TxResult<bool> {
        let conn = self.conn().await?;
        let stmt = conn
            .prepare_cached(
                "INSERT INTO nodes (name, heartbeat_at) VALUES ($1, now()) \
                 ON CONFLICT (name) DO UPDATE SET heartbeat_at = now() \
                 RETURNING (xmax = 0) AS inserted",
            )
            .await?;
        let inserted: bool = conn.query_one(&stmt, &[&self.node]).await?.try_get(0)?;
        let revived = inserted && self.beating.swap(true, Ordering::Relaxed);
        if revived {
            tracing::warn!(
                node = %self.node,
                "this node was taken for dead (no heartbeat within the timeout): \
                 its sessions were released and its deliveries returned"
            );
        }
        Ok(revived)
    }

    async fn reap(&self, timeout_ms: i64) -> TxResult<Vec<String>> {
        let mut conn = self.conn().await?;
        let tx = conn.transaction().await?;
        // Deleting the row serialises reapers: a second one finds nothing left.
        let stmt = tx
            .prepare_cached(
                "DELETE FROM nodes WHERE name <> $1 \
                   AND greatest(heartbeat_at, pg_postmaster_start_time()) \
                       < now() - $2::bigint * interval '1 millisecond' \
                 RETURNING name",
            )
            .await?;
        let dead = first_column::<String>(&tx.query(&stmt, &[&self.node, &timeout_ms]).await?)?;
        if dead.is_empty() {
            return Ok(Vec::new());
        }
        let mut tally = Tally::default();
        let queues = self.free_nodes(&tx, &dead, &mut tally).await?;
        tx.commit().await?;
        self.count(tally);
        tracing::warn!(nodes = ?dead, queues = ?queues, "reaped dead nodes: their sessions ended and their deliveries returned");
        Ok(queues)
    }

    /// Ends the claims of `nodes` (dropping the non-durable subscriptions of those clients)
    /// and returns their leases, within `tx`.
    async fn free_nodes(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        nodes: &[String],
        tally: &mut Tally,
    ) -> TxResult<Vec<String>> {
        let stmt = tx
            .prepare_cached(
                "UPDATE clients SET node = NULL, session = NULL, \
                   last_seen = (extract(epoch FROM now()) * 1000)::bigint \
                 WHERE node = ANY($1) RETURNING name",
            )
            .await?;
        let clients = first_column::<String>(&tx.query(&stmt, &[&nodes]).await?)?;
        // Before the leases return, so that none returns to a queue about to go.
        drop_owned(tx, &clients).await?;
        let stmt = tx
            .prepare_cached(
                "DELETE FROM subscription_consumers WHERE node = ANY($1) RETURNING queue_id",
            )
            .await?;
        let consumed = first_column::<i64>(&tx.query(&stmt, &[&nodes]).await?)?;
        drop_unconsumed_shared(tx, &consumed).await?;
        let stmt = tx
            .prepare_cached(&format!(
                "WITH u AS (UPDATE message_queue SET {UNLEASE} \
                   WHERE lease_node = ANY($1) AND lease_delivery_id IS NOT NULL \
                   RETURNING queue_id, ctid) \
                 SELECT q.name, u.ctid::text FROM u JOIN queues q ON q.id = u.queue_id"
            ))
            .await?;
        let rows = tx.query(&stmt, &[&nodes]).await?;
        // Like any other return, one over its queue's maximum delivery count is dead-lettered.
        let names = names_after_dead_letters(tx, &rows, tally).await?;
        notify(tx, &self.node, &names).await?;
        Ok(names)
    }

    /// Frees what this node's previous run held (it died or stopped with sessions and
    /// deliveries), as the embedded engine does on recovery. Returns the queues.
    pub async fn release_node(&self) -> Result<Vec<String>, StoreError> {
        let me = [self.node.clone()];
        retrying(|| async {
            let mut conn = self.conn().await?;
            let tx = conn.transaction().await?;
            let mut tally = Tally::default();
            let queues = self.free_nodes(&tx, &me, &mut tally).await?;
            tx.commit().await?;
            self.count(tally);
            Ok(queues)
        })
        .await
    }
}
