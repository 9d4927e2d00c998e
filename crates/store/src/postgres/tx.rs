//! Running a unit of work in a transaction, retried when PostgreSQL breaks a deadlock or a
//! serialization conflict, plus the helper that deletes messages left on no queue.

use std::future::Future;

use deadpool_postgres::Transaction;

use super::errors;
use crate::error::StoreError;

/// What a transaction body can fail with: a database error (maybe retryable) or a store error.
#[derive(Debug)]
pub enum TxError {
    /// From PostgreSQL or the connection.
    Db(tokio_postgres::Error),
    /// A store-level outcome (not found, invalid, ...).
    Store(StoreError),
}

impl From<tokio_postgres::Error> for TxError {
    fn from(e: tokio_postgres::Error) -> Self {
        TxError::Db(e)
    }
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        TxError::Store(e)
    }
}

impl From<TxError> for StoreError {
    fn from(e: TxError) -> Self {
        match e {
            TxError::Db(e) => errors::db(e),
            TxError::Store(e) => e,
        }
    }
}

/// Result of a transaction body.
pub type TxResult<T> = Result<T, TxError>;

/// How many times a transaction is tried when it deadlocks.
const ATTEMPTS: usize = 5;

/// Runs `attempt` until it succeeds, fails for good, or deadlocks [`ATTEMPTS`] times.
pub async fn retrying<T, F, Fut>(mut attempt: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = TxResult<T>>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        match attempt().await {
            Err(TxError::Db(e)) if tries < ATTEMPTS && errors::retryable(&e) => {
                tracing::debug!(error = %e, "retrying a transaction");
            }
            other => return other.map_err(StoreError::from),
        }
    }
}

/// Deletes those of `ids` whose last queue row is gone. Locks the message rows first (in id
/// order) so that two transactions removing the last two queue rows of one message cannot both
/// miss it: the second one to lock sees the first one's deletion. Only messages on several
/// queues need this; a message whose one queue row (`alone`) was removed is deleted with it.
pub async fn drop_orphans(tx: &Transaction<'_>, ids: &[i64]) -> TxResult<()> {
    if ids.is_empty() {
        return Ok(());
    }
    // The connections price sorts out (see `store`); this one is cheaper than reading the
    // whole primary key in order, so allow it for the rest of the transaction.
    tx.batch_execute("SET LOCAL enable_sort = on").await?;
    let lock = tx
        .prepare_cached("SELECT id FROM messages WHERE id = ANY($1) ORDER BY id FOR UPDATE")
        .await?;
    tx.execute(&lock, &[&ids]).await?;
    let delete = tx
        .prepare_cached(
            "DELETE FROM messages m WHERE m.id = ANY($1) \
             AND NOT EXISTS (SELECT 1 FROM message_queue mq \
               WHERE mq.message_id = m.id AND NOT mq.alone)",
        )
        .await?;
    tx.execute(&delete, &[&ids]).await?;
    Ok(())
}

/// The first column of every row, as `T` (the ids or names a `RETURNING` or `SELECT` gave).
pub fn first_column<'a, T: tokio_postgres::types::FromSql<'a>>(
    rows: &'a [tokio_postgres::Row],
) -> Result<Vec<T>, tokio_postgres::Error> {
    rows.iter().map(|r| r.try_get::<_, T>(0)).collect()
}
