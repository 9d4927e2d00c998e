//! [`PostgresConfig`]: where the database is and how the engine uses it.

/// Settings of the PostgreSQL engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresConfig {
    /// Connection URL, e.g. `postgres://ferry@db.example/ferry` (libpq syntax; no TLS).
    pub url: String,
    /// Most connections the pool opens (the batcher uses one at a time, receives the rest).
    pub pool_size: usize,
    /// Most messages (and acked ids) gathered into one batch transaction.
    pub batch_max: usize,
    /// This node's name, stored with the leases it hands out and the sessions it holds. Nodes
    /// sharing one database must have distinct names among the live ones; on open a node frees
    /// what its previous run (same name) left behind.
    pub node: String,
}

impl PostgresConfig {
    /// Default settings for `url`.
    pub fn new(url: impl Into<String>) -> Self {
        PostgresConfig {
            url: url.into(),
            pool_size: 16,
            batch_max: 1024,
            node: "default".into(),
        }
    }
}

/// Whether a `store` setting names the PostgreSQL engine (a `postgres://` or `postgresql://`
/// URL).
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}
