//! Server limits: configured in one place, enforced by the broker, advertised in the connect reply.

/// The limits a broker enforces. The broker sends its values in the connect reply so that clients
/// can check before they send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame accepted, header included. Larger frames close the connection.
    pub max_frame_bytes: u32,
    /// Largest message body.
    pub max_body_bytes: u32,
    /// Longest client or queue name (names are also restricted to `[A-Za-z0-9._-]`).
    pub max_name_len: u16,
    /// Most concurrent connections; the next one gets `ServerFull`.
    pub max_connections: u32,
    /// Most queues in the broker.
    pub max_queues: u32,
    /// Most unsettled client-ack deliveries per session.
    pub max_in_flight_per_session: u32,
    /// Largest prefetch a subscription may ask for.
    pub max_prefetch: u32,
    /// Most messages in one `send_batch`.
    pub max_batch: u32,
    /// Most queues named by one send.
    pub max_queues_per_send: u16,
    /// Most properties on one message.
    pub max_properties: u16,
    /// How long a client-ack delivery stays leased before it returns to its queue, in ms.
    pub lease_ms: u32,
}

impl Limits {
    /// The defaults a broker starts with.
    pub const DEFAULT: Limits = Limits {
        max_frame_bytes: 16 * 1024 * 1024,
        max_body_bytes: 1024 * 1024,
        max_name_len: 200,
        max_connections: 1024,
        max_queues: 100_000,
        max_in_flight_per_session: 100_000,
        max_prefetch: 65_536,
        max_batch: 10_000,
        max_queues_per_send: 100,
        max_properties: 64,
        lease_ms: 60_000,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Whether `name` is a valid client or queue name: 1 to `max_len` characters of `[A-Za-z0-9._-]`.
pub fn is_valid_name(name: &str, max_len: u16) -> bool {
    !name.is_empty()
        && name.len() <= usize::from(max_len)
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}
