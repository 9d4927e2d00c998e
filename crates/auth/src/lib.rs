//! Ferry's authentication and authorization, independent of any wire protocol or store.
//!
//! - [`credential`]: [`StoredCredential`], the salted SCRAM-SHA-256 keys kept for a user
//!   (nothing reversible), and [`verify_password`] for gateways that receive a password;
//! - [`error`]: [`ScramError`], why an exchange or a stored credential failed;
//! - [`scram`]: the SCRAM-SHA-256 exchange (RFC 5802, RFC 7677), server and client side;
//! - [`grants`]: [`Grants`], what a user may do (manage, send, receive on name patterns,
//!   client names, monitor, admin), parsed from and shown as text.
//!
//! Every comparison of secret-derived bytes is constant-time ([`subtle`]).
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod credential;
pub mod error;
pub mod grants;
pub mod scram;

pub use credential::{verify_password, StoredCredential, DEFAULT_ITERATIONS, MIN_ITERATIONS};
pub use grants::{Grant, GrantError, Grants, Object, Pattern, Permission};
pub use scram::{ClientFirst, ScramClient, ScramError, ServerExchange, MECHANISM};
