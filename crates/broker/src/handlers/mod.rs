//! One handler per operation. Each takes the shared state, the session and the decoded request
//! and returns the response; none touches sockets or bytes.
//!
//! Handlers call the store without awaiting anything first, so a store whose call takes effect
//! on its first poll (the embedded engine) sees a connection's requests in the order they came.

pub mod queues;
pub mod receive;
pub mod send;
pub mod settle;
pub mod subscribe;
pub mod topics;
pub mod txn;
pub mod validate;

use ferry_protocol::Response;
use ferry_store::StoreError;

/// The error response for a store error.
pub fn store_error(e: &StoreError) -> Response {
    Response::error(e.code(), e.to_string())
}
