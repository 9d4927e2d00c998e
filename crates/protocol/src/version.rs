//! The protocol version carried in the connect handshake.

/// The newest version this build speaks, the one its clients connect with. A broker answers a
/// connect carrying a version outside [`MIN_PROTOCOL_VERSION`]..=[`PROTOCOL_VERSION`] with
/// [`crate::ErrorCode::UnsupportedVersion`] and closes the connection; within it, the session
/// runs the client's version.
///
/// Version 2 added topics, transactions and non-persistent messages (two fields at the end of
/// every outgoing message). Version 3 added the keep-alive interval and session flags to
/// `Connect`, and the interval granted to `Connected`. Version 4 added authentication: the
/// mechanism in `Connect`, the `AuthChallenge` / `AuthResponse` exchange, and the server's final
/// message in `Connected`. Version 5 added the `DeliverBatch` push
/// ([`crate::deliver_batch`]), which a broker sends only to sessions of version 5 or later.
/// Version 6 added the `PublishBatch` request ([`crate::publish_batch`]), which a broker
/// refuses from sessions of an older version. Version 7 added the `DeliverRun` push
/// ([`crate::deliver_run`]) and the `PublishedRun` reply to a `PublishBatch`, which a broker
/// sends only to sessions of version 7 or later.
pub const PROTOCOL_VERSION: u16 = 7;

/// The oldest version a broker of this build still speaks: version 4 clients get their
/// deliveries as `Deliver` frames only, version 4 and 5 clients publish with `Send` and
/// `SendBatch` only.
pub const MIN_PROTOCOL_VERSION: u16 = 4;

/// The first version whose sessions receive `DeliverBatch` pushes.
pub const DELIVER_BATCH_VERSION: u16 = 5;

/// The first version whose sessions may send `PublishBatch` requests.
pub const PUBLISH_BATCH_VERSION: u16 = 6;

/// The first version whose sessions receive `DeliverRun` pushes and `PublishedRun` replies.
pub const DELIVER_RUN_VERSION: u16 = 7;

/// Whether a broker of this build speaks `version`.
pub fn speaks_version(version: u16) -> bool {
    (MIN_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&version)
}
