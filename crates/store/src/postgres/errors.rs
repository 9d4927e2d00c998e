//! Mapping database and pool errors to [`StoreError`].

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use crate::error::StoreError;

/// Maps a database error: bad data is `InvalidArgument`; a database out of disk space, memory
/// or another resource for the statement (class 53, but too many connections) is
/// `ResourceExhausted`, as a full disk is for the embedded engine (the transaction was rolled
/// back: nothing took effect); everything else (connection lost, server shutting down) is
/// `Unavailable`.
pub fn db(e: tokio_postgres::Error) -> StoreError {
    if let Some(d) = e.as_db_error() {
        let class = d.code().code().get(..2).unwrap_or("");
        return match class {
            "22" => {
                StoreError::InvalidArgument(format!("database rejected a value: {}", d.message()))
            }
            "53" if *d.code() != SqlState::TOO_MANY_CONNECTIONS => {
                StoreError::ResourceExhausted(format!(
                    "the database is short of a resource: {} ({}); nothing was stored, retry later",
                    d.message(),
                    d.code().code()
                ))
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
