//! The users' role of a store: who may connect, with what stored credential and grants.
//!
//! The store keeps the credential and the grants as opaque text ([`UserRecord`]): it knows
//! nothing of SCRAM or of what a grant means (`ferry-auth` does). On the embedded engine users
//! live in one small file beside the log, replaced atomically on every change; on PostgreSQL
//! in the `users` table, shared by every node.

use async_trait::async_trait;

use crate::error::StoreError;

/// One user, as the store keeps it.
#[derive(Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// The user name (`[A-Za-z0-9._-]`, as client names).
    pub name: String,
    /// The stored credential's text form (a salted SCRAM-SHA-256 verifier).
    pub credential: String,
    /// Grants, one line of text each, in the order given.
    pub grants: Vec<String>,
}

impl std::fmt::Debug for UserRecord {
    /// Leaves the credential out: it is not for logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserRecord")
            .field("name", &self.name)
            .field("grants", &self.grants)
            .finish_non_exhaustive()
    }
}

/// Users and their grants. Every change is durable when the call returns.
#[async_trait]
pub trait Users: Send + Sync {
    /// Adds a user. `UserExists` when the name is taken.
    async fn create_user(&self, user: &UserRecord) -> Result<(), StoreError>;

    /// Replaces a user's credential. `UserNotFound`.
    async fn set_user_credential(&self, name: &str, credential: &str) -> Result<(), StoreError>;

    /// Replaces a user's grants. `UserNotFound`.
    async fn set_user_grants(&self, name: &str, grants: &[String]) -> Result<(), StoreError>;

    /// Removes a user. `UserNotFound`.
    async fn delete_user(&self, name: &str) -> Result<(), StoreError>;

    /// One user, if it exists.
    async fn user(&self, name: &str) -> Result<Option<UserRecord>, StoreError>;

    /// Every user, sorted by name.
    async fn list_users(&self) -> Result<Vec<UserRecord>, StoreError>;

    /// Whether any user exists (the broker then requires authentication).
    async fn has_users(&self) -> Result<bool, StoreError> {
        Ok(!self.list_users().await?.is_empty())
    }
}
