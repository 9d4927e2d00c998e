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
    match e.as_db_error() {
        Some(d) => from_db(d.code(), d.message()),
        None => StoreError::Unavailable(format!("database connection: {e}")),
    }
}

/// Maps an error the database reported with `code` and `message` (see [`db`]).
fn from_db(code: &SqlState, message: &str) -> StoreError {
    match code.code().get(..2).unwrap_or("") {
        "22" => StoreError::InvalidArgument(format!("database rejected a value: {message}")),
        "53" if *code != SqlState::TOO_MANY_CONNECTIONS => StoreError::ResourceExhausted(format!(
            "the database is short of a resource: {message} ({}); nothing was stored, retry \
             later",
            code.code()
        )),
        _ => StoreError::Unavailable(format!("database error: {message} ({})", code.code())),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_protocol::ErrorCode;

    #[test]
    fn a_database_short_of_disk_or_memory_refuses_like_a_full_disk() {
        for code in [
            SqlState::DISK_FULL,
            SqlState::OUT_OF_MEMORY,
            SqlState::CONFIGURATION_LIMIT_EXCEEDED,
            SqlState::INSUFFICIENT_RESOURCES,
        ] {
            let e = from_db(&code, "could not extend file");
            assert_eq!(e.code(), ErrorCode::ResourceExhausted, "{code:?}: {e}");
            assert!(e.to_string().contains("could not extend file"), "{e}");
        }
        let e = from_db(&SqlState::TOO_MANY_CONNECTIONS, "sorry, too many clients");
        assert_eq!(e.code(), ErrorCode::StoreUnavailable);
        let e = from_db(&SqlState::ADMIN_SHUTDOWN, "terminating connection");
        assert_eq!(e.code(), ErrorCode::StoreUnavailable);
        let e = from_db(&SqlState::NUMERIC_VALUE_OUT_OF_RANGE, "out of range");
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
    }
}
