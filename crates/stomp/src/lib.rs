//! Ferry's STOMP support. For now it holds the frame codec; the gateway that carries STOMP
//! frames over the broker's sessions (listener, WebSocket, destination and header mapping)
//! joins it in this crate.
//!
//! Modules:
//! - [`codec`]: STOMP 1.0, 1.1 and 1.2 frames, sans-IO: a cheap [`codec::check`] that says
//!   whether a whole frame (or heart-beat) is buffered without allocating, [`codec::decode()`],
//!   and [`codec::Frame::encode`] with an exact [`codec::Frame::encoded_len`]; header escaping
//!   per version, `content-length` and binary bodies, and limits enforced before a buffer
//!   grows past them.
//!
//! Why not a crate from crates.io: the STOMP crates there are either clients tied to an I/O
//! stack (and mostly unmaintained), or, like `stomp-parser`, parse a frame that is already
//! whole (so a server must find its end itself), copy every frame into owned buffers, and have
//! no limits on header count, line length or body: a server reading from untrusted peers needs
//! exactly those, so the codec is Ferry's own, tested like `ferry-protocol`.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod codec;
