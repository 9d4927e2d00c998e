//! Schema migrations, embedded in the binary and applied on open.
//!
//! Each migration is a versioned SQL file. They run in one transaction that first takes a
//! transaction-level advisory lock, so nodes starting at once apply them one after another:
//! the first applies what is missing, the others find nothing left to do.

use tokio_postgres::Client;

use super::errors;
use crate::error::StoreError;

/// Every migration, in version order (version = position + 1).
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_initial.sql"),
    include_str!("migrations/0002_cluster.sql"),
    include_str!("migrations/0003_lean_rows.sql"),
    include_str!("migrations/0004_time.sql"),
    include_str!("migrations/0005_dead_letters.sql"),
    include_str!("migrations/0006_expiry_queues.sql"),
    include_str!("migrations/0007_topics.sql"),
    include_str!("migrations/0008_subscription_consumers.sql"),
    include_str!("migrations/0009_topic_patterns.sql"),
    include_str!("migrations/0010_client_expiry.sql"),
    include_str!("migrations/0011_queue_figures.sql"),
    include_str!("migrations/0012_users.sql"),
];

/// The advisory lock key that serialises migrations ("ferrymig" in ASCII).
const LOCK_KEY: i64 = 0x6665_7272_796d_6967;

/// The schema version this binary brings the database to.
pub fn latest_version() -> i32 {
    i32::try_from(MIGRATIONS.len()).unwrap_or(i32::MAX)
}

/// Brings the schema up to [`latest_version`]; returns the version found before.
pub async fn migrate(client: &mut Client) -> Result<i32, StoreError> {
    let tx = client.transaction().await.map_err(errors::db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await
        .map_err(errors::db)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS ferry_schema_version (
             version    integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(errors::db)?;
    let row = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM ferry_schema_version",
            &[],
        )
        .await
        .map_err(errors::db)?;
    let found: i32 = row.try_get(0).map_err(errors::db)?;
    if found > latest_version() {
        return Err(StoreError::Unavailable(format!(
            "the database schema is at version {found}, newer than this binary knows ({}): \
             upgrade Ferry",
            latest_version()
        )));
    }
    for (version, sql) in (1..).zip(MIGRATIONS.iter()) {
        if version <= found {
            continue;
        }
        tx.batch_execute(sql).await.map_err(|e| {
            StoreError::Unavailable(format!("applying schema migration {version}: {e}"))
        })?;
        tx.execute(
            "INSERT INTO ferry_schema_version (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(errors::db)?;
        tracing::info!(version, "applied schema migration");
    }
    tx.commit().await.map_err(errors::db)?;
    Ok(found)
}
