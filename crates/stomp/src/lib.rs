//! Ferry's STOMP support: STOMP 1.0, 1.1 and 1.2 over TCP and WebSocket, carried over the
//! broker's own sessions (docs/stomp.md is the reference).
//!
//! Modules:
//! - [`codec`]: STOMP frames, sans-IO: a cheap [`codec::check`] (and its resumable
//!   [`codec::Scanner`]) that says whether a whole frame (or heart-beat) is buffered without
//!   allocating, [`codec::decode()`], and [`codec::Frame::encode`] with an exact
//!   [`codec::Frame::encoded_len`]; header escaping per version, `content-length` and binary
//!   bodies, and limits enforced before a buffer grows past them.
//! - [`gateway`]: the listener, one broker session per STOMP connection, destinations and
//!   headers, subscriptions, acknowledgements, transactions, heart-beats.
//! - [`websocket`]: STOMP over WebSocket (RFC 6455) as a route of the HTTP listener.
//! - [`login`]: the one function that checks a CONNECT's login.
//!
//! Why not a crate from crates.io for the codec: the STOMP crates there are either clients
//! tied to an I/O stack (and mostly unmaintained), or, like `stomp-parser`, parse a frame that
//! is already whole (so a server must find its end itself), copy every frame into owned
//! buffers, and have no limits on header count, line length or body: a server reading from
//! untrusted peers needs exactly those, so the codec is Ferry's own, tested like
//! `ferry-protocol`.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod codec;
pub mod gateway;
pub mod login;
pub mod websocket;

pub use gateway::{Gateway, Settings};
