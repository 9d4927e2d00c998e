//! The `stream` workload's figures per transport, as the Kieker measurements gave them:
//! records per second and per minute at the reader, and the loss rate.

use serde::Serialize;

/// One transport's stream figures.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StreamFigures {
    /// Records received per second during the measurement (counted at the reader).
    pub records_per_s: f64,
    /// The same per minute, as the Kieker measurements reported.
    pub records_per_min: f64,
    /// Records the transport took per second during the measurement (at the writer).
    pub offered_per_s: f64,
    /// Records the transport took over the whole run (warm-up and drain included).
    pub sent_total: u64,
    /// Distinct records of the run the reader got, over the whole run.
    pub received_total: u64,
    /// `1 - received_total / sent_total`: records lost (by sequence numbers).
    pub loss: f64,
    /// Records the reader got more than once.
    pub duplicates: u64,
    /// Bytes of one encoded record.
    pub record_bytes: u64,
    /// Records in one message body (1: a message per record).
    pub records_per_message: u64,
    /// The datagram ingest's counters over the run (udp transport only): where the lost
    /// records went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingest: Option<IngestCounters>,
}

/// Where the datagrams of one udp run went, each counter the difference over the run.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct IngestCounters {
    /// Datagrams the writer sent.
    pub datagrams_sent: u64,
    /// Datagrams the kernel dropped at the ingest's socket, its receive buffer full (the
    /// socket's `drops` in `/proc/net/udp`); `None` when the socket was not found there.
    pub kernel_drops: Option<u64>,
    /// Datagrams the ingest read (broker's counter; `None` for a broker of another process).
    pub received: Option<u64>,
    /// Of those, datagrams that did not parse.
    pub malformed: Option<u64>,
    /// Of those, datagrams the ingest dropped (its memory budget spent, or a publish refused).
    pub dropped: Option<u64>,
}

/// The kernel's count of datagrams dropped at the UDP socket bound to `port` on this machine
/// (the `drops` column of `/proc/net/udp` and `/proc/net/udp6`).
pub fn socket_drops(port: u16) -> Option<u64> {
    let want = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"].iter().find_map(|path| {
        let text = std::fs::read_to_string(path).ok()?;
        text.lines().skip(1).find_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let local = cols.get(1)?;
            if !local.ends_with(&want) {
                return None;
            }
            cols.last()?.parse().ok()
        })
    })
}

impl StreamFigures {
    /// The loss rate of `received` out of `sent`; 0 when nothing was sent.
    pub fn loss_of(sent: u64, received: u64) -> f64 {
        if sent == 0 {
            0.0
        } else {
            1.0 - (received.min(sent) as f64 / sent as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_is_the_share_not_received() {
        assert_eq!(StreamFigures::loss_of(0, 0), 0.0);
        assert_eq!(StreamFigures::loss_of(100, 100), 0.0);
        assert!((StreamFigures::loss_of(100, 94) - 0.06).abs() < 1e-12);
    }

    #[test]
    fn socket_drops_finds_a_bound_socket_and_no_other() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        assert_eq!(socket_drops(port), Some(0));
        drop(sock);
        assert_eq!(socket_drops(port), None);
    }
}
