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
    /// The defaults: 16 MiB bodies in frames of at most 16 MiB plus 256 KiB of headers, 256
    /// headers, 16 KiB header lines (room for long selectors).
    pub const DEFAULT: Limits = Limits {
        max_frame_bytes: 16 * 1024 * 1024 + 256 * 1024,
        max_headers: 256,
        max_header_line: 16 * 1024,
        max_body_bytes: 16 * 1024 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}
