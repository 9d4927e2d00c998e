//! [`Limits`]: what one frame may hold, enforced while it is scanned.

/// The most a frame may hold. A STOMP server advertises none of these in the protocol itself;
/// the gateway documents them (docs/stomp.md) and answers a frame over one with an ERROR frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Whole frame: command, headers, body and the NUL.
    pub max_frame_bytes: usize,
    /// Header lines in one frame.
    pub max_headers: usize,
    /// Bytes of one header line (or of the command line), without its EOL.
    pub max_header_line: usize,
    /// Body bytes, announced by `content-length` or found before the NUL.
    pub max_body_bytes: usize,
}

impl Limits {
    /// The defaults: 1 MiB bodies (the broker's default message limit) in frames of at most
    /// that plus 256 KiB of headers, 256 headers, 16 KiB header lines (room for long
    /// selectors).
    pub const DEFAULT: Limits = Limits::with_body(1024 * 1024);

    /// Room for headers in a frame, beyond its body.
    pub const HEADER_BYTES: usize = 256 * 1024;

    /// The default limits for bodies of at most `max_body_bytes` (the broker's message limit:
    /// a STOMP gateway advertises and enforces the broker's).
    pub const fn with_body(max_body_bytes: usize) -> Limits {
        Limits {
            max_frame_bytes: max_body_bytes + Limits::HEADER_BYTES,
            max_headers: 256,
            max_header_line: 16 * 1024,
            max_body_bytes,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
