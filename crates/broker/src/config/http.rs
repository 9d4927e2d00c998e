//! The HTTP listener's bounds (the `http_max_*` and `http_*_timeout_ms` settings): how much one
//! client, or many, can make the listener hold. They are declared and checked here with the
//! broker's other settings; the `ferry-http` crate applies them (its `HttpLimits`).
//!
//! Each bound has a floor and a ceiling: zero (or a timeout too short for any real client) would
//! make the API unusable, and a value past the ceiling would let the listener hold without
//! bound what the setting is there to bound.

use super::ConfigError;

/// Default `http_max_connections`.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 256;
/// Default `http_header_timeout_ms`: 10 s.
pub const DEFAULT_HEADER_TIMEOUT_MS: u32 = 10_000;
/// Default `http_max_body_bytes`: 4 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u32 = 4 << 20;
/// Default `http_max_requests`.
pub const DEFAULT_MAX_REQUESTS: u32 = 32;
/// Default `http_body_timeout_ms`: 30 s.
pub const DEFAULT_BODY_TIMEOUT_MS: u32 = 30_000;
/// Default `http_write_timeout_ms`: 10 s.
pub const DEFAULT_WRITE_TIMEOUT_MS: u32 = 10_000;
/// Default `http_max_page_bytes`: 4 MiB.
pub const DEFAULT_MAX_PAGE_BYTES: u32 = 4 << 20;

/// The shortest timeout accepted (ms): below it a client on a slow link could not send a head or
/// a body at all.
pub const MIN_TIMEOUT_MS: u32 = 100;
/// The longest timeout accepted (ms): an hour. Longer, a stalled client would keep its slot and
/// its answer for what amounts to ever.
pub const MAX_TIMEOUT_MS: u32 = 3_600_000;
/// The most HTTP connections or requests at once accepted: each may hold an answer in memory.
pub const MAX_AT_ONCE: u32 = 100_000;
/// The smallest request body or browse page accepted: 64 KiB.
pub const MIN_BYTES: u32 = 64 << 10;
/// The largest request body or browse page accepted: 1 GiB.
pub const MAX_BYTES: u32 = 1 << 30;

/// The HTTP listener's bounds, as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpBounds {
    /// Connections served at once; one more is closed at once.
    pub max_connections: u32,
    /// Time to receive a request's headers (ms).
    pub header_timeout_ms: u32,
    /// Largest request body (bytes).
    pub max_body_bytes: u32,
    /// API requests served at once, across connections; one more gets 429 `ServerFull`.
    pub max_requests: u32,
    /// API requests served at once for one client IP address; `None`: half of
    /// [`Self::max_requests`], at least 1 (see [`Self::requests_per_address`]).
    pub max_requests_per_address: Option<u32>,
    /// Time to receive a request's body, from its admission (ms); then 408.
    pub body_timeout_ms: u32,
    /// Time an answer may wait for its client to take more of it (ms); then the connection is
    /// closed.
    pub write_timeout_ms: u32,
    /// Most bytes of JSON in a page of browsed messages.
    pub max_page_bytes: u32,
}

impl Default for HttpBounds {
    fn default() -> Self {
        HttpBounds {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout_ms: DEFAULT_HEADER_TIMEOUT_MS,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_requests: DEFAULT_MAX_REQUESTS,
            max_requests_per_address: None,
            body_timeout_ms: DEFAULT_BODY_TIMEOUT_MS,
            write_timeout_ms: DEFAULT_WRITE_TIMEOUT_MS,
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
        }
    }
}

impl HttpBounds {
    /// The requests one client IP address may have served at once: the setting, or half of
    /// [`Self::max_requests`] (at least 1), so that one client can never take every slot and
    /// lock the others (an operator's console among them) out.
    pub fn requests_per_address(&self) -> u32 {
        self.max_requests_per_address
            .unwrap_or((self.max_requests / 2).max(1))
    }

    /// Checks each bound's range, and that a client's share is no more than the whole.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let ranges = [
            ("http_max_connections", self.max_connections, 1, MAX_AT_ONCE),
            (
                "http_header_timeout_ms",
                self.header_timeout_ms,
                MIN_TIMEOUT_MS,
                MAX_TIMEOUT_MS,
            ),
            (
                "http_max_body_bytes",
                self.max_body_bytes,
                MIN_BYTES,
                MAX_BYTES,
            ),
            ("http_max_requests", self.max_requests, 1, MAX_AT_ONCE),
            (
                "http_max_requests_per_address",
                self.requests_per_address(),
                1,
                self.max_requests,
            ),
            (
                "http_body_timeout_ms",
                self.body_timeout_ms,
                MIN_TIMEOUT_MS,
                MAX_TIMEOUT_MS,
            ),
            (
                "http_write_timeout_ms",
                self.write_timeout_ms,
                MIN_TIMEOUT_MS,
                MAX_TIMEOUT_MS,
            ),
            (
                "http_max_page_bytes",
                self.max_page_bytes,
                MIN_BYTES,
                MAX_BYTES,
            ),
        ];
        for (key, value, min, max) in ranges {
            if !(min..=max).contains(&value) {
                let reason = if key == "http_max_requests_per_address" && value > max {
                    format!(
                        "must be between 1 and http_max_requests ({max}): a client's share is \
                         at most every slot"
                    )
                } else {
                    format!("must be between {min} and {max}")
                };
                return Err(ConfigError::Invalid {
                    key,
                    value: value.to_string(),
                    origin: "resolved configuration",
                    reason,
                });
            }
        }
        Ok(())
    }
}
