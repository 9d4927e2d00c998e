//! STOMP 1.0, 1.1 and 1.2 frames, sans-IO: bytes in, frames out, and back.
//!
//! ```text
//! COMMAND EOL
//! name:value EOL          (zero or more headers; the first of a repeated name wins)
//! EOL
//! body NUL                (content-length bytes, or up to the first NUL without it)
//! EOL*                    (heart-beats, between frames)
//! ```
//!
//! EOL is LF or CR LF, in every version (STOMP 1.2 allows CR LF; 1.0 and 1.1 peers that send
//! it are understood too).
//!
//! Reading is in two steps, as for `ferry-protocol`: [`check`] scans the buffered bytes and says
//! whether a heart-beat or a whole frame is there, and how long it is, without allocating; it
//! enforces the [`Limits`] while it scans, so a peer that sends an endless header line, too
//! many headers, an announced or actual body over the limit, or a frame over the frame limit
//! is refused as soon as the bytes show it, before the caller buffers more. [`decode()`] then
//! takes the frame off the buffer (the body shares the buffer's allocation) and parses its
//! command and headers.
//!
//! Headers are escaped as each version says: in 1.2 `\r`, `\n`, `\c` (colon) and `\\`; in 1.1
//! the same without `\r`; 1.0 has no escaping; CONNECT, STOMP and CONNECTED frames are never
//! escaped (their version is not known yet). An undefined escape is an error. Header names and
//! values must be UTF-8; values are not trimmed. A header line is split at its first colon.
//!
//! Only SEND, MESSAGE and ERROR frames may carry a body (the spec's rule, enforced both ways).
//! The encoder adds `content-length` to every frame with a body, so binary bodies (with NUL
//! bytes) always survive; a frame that already names a content-length must name its body's.
//!
//! Limits (see [`Limits::DEFAULT`]): frame bytes (command, headers and body), header count,
//! header line length (also the command line), body bytes. Each refusal is its own
//! [`FrameError`] variant; a STOMP server answers it with an ERROR frame and closes the
//! connection.
//!
//! Modules: [`command`] (the commands of every version), [`frame`] ([`Frame`], [`Version`]),
//! [`limits`], [`scan`] ([`check`]), [`decode`](mod@decode), [`encode`] (on [`Frame`]), [`escape`],
//! [`error`], [`negotiate`] (accept-version and heart-beat headers).

pub mod command;
pub mod decode;
pub mod encode;
pub mod error;
pub mod escape;
pub mod frame;
pub mod limits;
pub mod negotiate;
pub mod scan;

pub use command::Command;
pub use decode::{decode, decode_with, Item};
pub use encode::HEARTBEAT;
pub use error::{EncodeError, FrameError};
pub use escape::Escaping;
pub use frame::{Frame, Version};
pub use limits::Limits;
pub use scan::{check, Check, Scanner};
