//! Mapping database and pool errors to [`StoreError`].

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use crate::error::StoreError;

/// Maps a database error: bad data is `InvalidArgument`, everything else (connection lost,
/// server shutting down, out of resources) is `Unavailable`.
pub fn db(e: tokio_postgres::Error) -> StoreError {
    if let Some(d) = e.as_db_error() {
        let class = d.code().code().get(..2).unwrap_or("");
        return match class {
            "22" => {
                StoreError::InvalidArgument(format!("database rejected a value: {}", d.message()))
            }
            _ => StoreError::Unavailable(format!(
                "database error: {} ({})",
                d.message(),
                d.code().code()
            )),
        };
    }
    StoreError::Unavailable(format!("database connection: {e}"))
}

/// Maps a failure to get a pooled connection.
pub fn pool(e: PoolError) -> StoreError {
    StoreError::Unavailable(format!("cannot get a database connection: {e}"))
}

/// Whether retrying the whole transaction may succeed (deadlock, serialization failure).
pub fn retryable(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    })
}

/// A value read from the database that does not fit its Rust type.
pub fn bad_data(what: &str) -> StoreError {
    StoreError::Internal(format!("bad data in the database: {what}"))
}
