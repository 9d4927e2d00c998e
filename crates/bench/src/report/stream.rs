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
}
