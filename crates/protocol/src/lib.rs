//! Ferry's native wire protocol, sans-IO: no sockets, no runtime, only bytes in and bytes out.
//!
//! Shared by the broker and every Rust client so that both ends encode and decode with the same
//! code. Modules:
//! - [`frame`]: the frame header (length, kind, request id) and splitting a byte stream into frames;
//! - [`wire`]: checked little-endian readers and writers for the primitive field types;
//! - [`types`]: the values that travel in frames (messages, deliveries, properties, orders);
//! - [`requests`]: every request a client sends, with its encoder and decoder;
//! - [`responses`]: every reply and pushed delivery the broker sends;
//! - [`size`]: the exact encoded size of every frame, for buffers sized ahead of encoding;
//! - [`deliver_batch`]: the `DeliverBatch` push, many deliveries sharing names in one frame;
//! - [`deliver_run`]: the `DeliverRun` push, a publish run's deliveries with only their bodies;
//! - [`publish_batch`]: the `PublishBatch` request, many bodies to one topic sharing the rest;
//! - [`packed`]: [`packed::PackedBodies`], bodies back to back in one buffer (batches, runs);
//! - [`codes`]: the one [`ErrorCode`] enum with stable numbers;
//! - [`limits`]: the server limits advertised in the connect reply;
//! - [`name`]: [`Name`], the shared queue and sender names of received messages;
//! - [`properties`]: [`Properties`], a message's named values, shared between messages;
//! - [`topic`]: topic names and the wildcard patterns subscriptions may name;
//! - [`version`]: the protocol version negotiated in the handshake;
//! - `numbered`: the macro that declares the enums of wire numbers (codes, frame kinds).
//!
//! The byte layout of every frame is drawn in `docs/protocol.md`.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod batch_writer;
pub mod codes;
pub mod deliver_batch;
pub mod deliver_run;
pub mod frame;
pub mod limits;
pub mod name;
mod numbered;
pub mod packed;
pub mod properties;
pub mod publish_batch;
pub mod requests;
pub mod responses;
pub mod size;
pub mod topic;
pub mod types;
pub mod version;
pub mod wire;

pub use codes::ErrorCode;
pub use frame::{frames_in, split_frame, split_frames, FrameAt, FrameKind, RawFrame, HEADER_LEN};
pub use limits::Limits;
pub use name::Name;
pub use publish_batch::PublishBatch;
pub use requests::Request;
pub use responses::{encode_deliver, ErrorReply, Response};
pub use size::deliver_encoded_len;
pub use types::*;
pub use version::{
    speaks_version, DELIVER_BATCH_VERSION, DELIVER_RUN_VERSION, MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION, PUBLISH_BATCH_VERSION,
};
pub use wire::WireError;
