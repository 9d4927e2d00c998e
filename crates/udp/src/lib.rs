//! Ferry's datagram ingest: monitoring records (or any small messages) sent in UDP
//! datagrams, many records per datagram, each published as one message to a topic. A
//! protocol gateway over the broker's in-process sessions ([`ferry_broker::local`]):
//! `ferry serve --udp-listen ADDR --udp-topic T` starts it.
//!
//! Datagrams are fire and forget: nothing is acknowledged, and a datagram the broker cannot
//! take is dropped and counted, never waited for. The counters (`udp` in the broker's
//! [`ferry_broker::stats::Stats`]) say how many datagrams arrived, how many did not parse, how
//! many were dropped and how many records were published.
//!
//! Modules:
//! - [`datagram`]: the format (docs/udp.md), sans-IO: parsing and packing;
//! - [`gateway`]: the socket, the bounded queue and the publisher.

pub mod datagram;
pub mod gateway;

pub use datagram::{parse, Datagram, Malformed, Packer, MAX_DATAGRAM};
pub use gateway::{BoundUdp, UdpConfig, UdpError, UdpGateway};
