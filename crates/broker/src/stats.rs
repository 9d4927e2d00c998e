//! Counters kept by the broker, for operators (logs, the metrics endpoint) and tests.

use std::sync::atomic::{AtomicU64, Ordering};

/// Broker-wide counters. All relaxed atomics: they are statistics, not synchronisation.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted.
    pub connections_accepted: AtomicU64,
    /// Connections refused with `ServerFull`.
    pub connections_refused_full: AtomicU64,
    /// Connections closed because a frame was malformed or oversized.
    pub connections_closed_malformed: AtomicU64,
    /// Connections refused with `ServerFull` because their address was at its limit.
    pub connections_refused_address: AtomicU64,
    /// Connects refused with `LimitExceeded`: a new name from an address over its rate.
    pub connects_refused_new_name_rate: AtomicU64,
    /// Sessions closed because they were silent for 1.5 keep-alive intervals.
    pub connections_closed_idle: AtomicU64,
    /// Connections closed because a frame took longer than the read timeout to arrive (or no
    /// connect came within the handshake timeout).
    pub connections_closed_read_timeout: AtomicU64,
    /// Connections closed because the socket took none of their replies for the write
    /// timeout, or failed.
    pub connections_closed_write: AtomicU64,
    /// Sends held back because memory was above the high watermark.
    pub sends_slowed_memory: AtomicU64,
    /// Sends refused with `ResourceExhausted` because memory was at its budget.
    pub sends_refused_memory: AtomicU64,
    /// Requests answered.
    pub requests: AtomicU64,
    /// Messages stored by sends and publishes (what the broker received).
    pub messages_sent: AtomicU64,
    /// Of those, messages published to topics.
    pub messages_published: AtomicU64,
    /// Deliveries handed out (receives and pushes).
    pub deliveries: AtomicU64,
    /// Of those, deliveries of messages that had been delivered before.
    pub redeliveries: AtomicU64,
    /// Client-ack deliveries acknowledged.
    pub acks: AtomicU64,
    /// Deliveries nacked back to their queue.
    pub nacks_requeued: AtomicU64,
    /// Deliveries nacked without requeue (rejected: dropped, or dead-lettered where the store
    /// does so).
    pub nacks_dropped: AtomicU64,
    /// Sessions started (a connect accepted).
    pub sessions_opened: AtomicU64,
    /// Authentications that proved their user.
    pub auth_succeeded: AtomicU64,
    /// Authentications that failed (wrong proof, unknown user, malformed or abandoned).
    pub auth_failed: AtomicU64,
    /// Authentications refused before starting: the address was over its failure rate.
    pub auth_refused_rate: AtomicU64,
    /// TLS handshakes that failed or timed out (plaintext clients, refused certificates,
    /// clients that vanished mid-handshake).
    pub tls_handshakes_failed: AtomicU64,
    /// Connections closed, by reason (see [`CloseKind`]).
    pub closed: [AtomicU64; CloseKind::ALL.len()],
    /// The datagram ingest's counters (`udp_listen`; all 0 without it).
    pub udp: UdpStats,
}

/// Why a connection ended, as counted for operators (`ferry_connections_closed_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseKind {
    /// The client disconnected or closed its socket.
    ClientClosed,
    /// A malformed or oversized frame, or a protocol version the broker does not speak.
    ProtocolError,
    /// Refused at the connection limit.
    ServerFull,
    /// No connect request in time, silent for 1.5 keep-alive intervals, or a request that
    /// took longer than the read timeout to arrive.
    Idle,
    /// The broker shut down (or its node was fenced).
    Shutdown,
    /// The connect was refused for its credentials.
    AuthFailure,
    /// The socket failed (reset, broken pipe).
    IoError,
    /// An operator closed the session (management API).
    Operator,
    /// The client read none of its replies for the write timeout.
    SlowReader,
}

impl CloseKind {
    /// Every kind, in counter order.
    pub const ALL: [CloseKind; 9] = [
        CloseKind::ClientClosed,
        CloseKind::ProtocolError,
        CloseKind::ServerFull,
        CloseKind::Idle,
        CloseKind::Shutdown,
        CloseKind::AuthFailure,
        CloseKind::IoError,
        CloseKind::Operator,
        CloseKind::SlowReader,
    ];

    /// The label value in metrics and logs.
    pub fn label(self) -> &'static str {
        match self {
            CloseKind::ClientClosed => "client_closed",
            CloseKind::ProtocolError => "protocol_error",
            CloseKind::ServerFull => "server_full",
            CloseKind::Idle => "idle",
            CloseKind::Shutdown => "shutdown",
            CloseKind::AuthFailure => "auth_failure",
            CloseKind::IoError => "io_error",
            CloseKind::Operator => "operator",
            CloseKind::SlowReader => "slow_reader",
        }
    }
}

/// Counters of the datagram ingest (the `ferry-udp` gateway), kept with the broker's so that
/// operators find them in one place.
#[derive(Debug, Default)]
pub struct UdpStats {
    /// Datagrams read from the socket.
    pub datagrams_received: AtomicU64,
    /// Of those, datagrams that did not parse: dropped whole, nothing published.
    pub datagrams_malformed: AtomicU64,
    /// Of those, well-formed datagrams dropped: the ingest was behind (its queue was full) or
    /// the broker refused the publish (no such topic, full disk, ...).
    pub datagrams_dropped: AtomicU64,
    /// Records published (each is one message).
    pub records_published: AtomicU64,
}

impl Stats {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Reads `counter`.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// Counts a connection closed for `kind`.
    pub fn count_close(&self, kind: CloseKind) {
        if let Some(c) = self.closed.get(kind as usize) {
            Stats::add(c, 1);
        }
    }

    /// Connections closed for `kind` so far.
    pub fn closed(&self, kind: CloseKind) -> u64 {
        self.closed.get(kind as usize).map_or(0, Stats::get)
    }
}
