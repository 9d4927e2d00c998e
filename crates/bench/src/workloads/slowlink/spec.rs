//! What the emulated link is like: its round trip, rate, jitter and loss, the presets, and the
//! `tc netem` arguments that make it. Both shapers read it ([`super::net`] for netem,
//! [`super::emulator`] in user space).

/// How the link is shaped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    /// The preset's name (`none`, `lan`, `wlan`, `gprs`, or `custom`).
    pub name: &'static str,
    /// Round-trip time, ms (half added each way).
    pub rtt_ms: f64,
    /// Jitter each way, ms.
    pub jitter_ms: f64,
    /// Rate each way, kbit/s; 0: unshaped.
    pub rate_kbit: f64,
    /// Packet loss each way, percent.
    pub loss_pct: f64,
}

impl LinkSpec {
    /// The presets: `none` (the veth pair as it is), `lan` (100 Mbit/s, 0.2 ms), `wlan`
    /// (20 Mbit/s, 4 ms, 1 ms jitter), `gprs` (40 kbit/s, 300 ms round trip).
    pub fn preset(name: &str) -> Option<LinkSpec> {
        let (name, rtt_ms, jitter_ms, rate_kbit) = match name {
            "none" => ("none", 0.0, 0.0, 0.0),
            "lan" => ("lan", 0.2, 0.0, 100_000.0),
            "wlan" => ("wlan", 4.0, 1.0, 20_000.0),
            "gprs" => ("gprs", 300.0, 0.0, 40.0),
            _ => return None,
        };
        Some(LinkSpec {
            name,
            rtt_ms,
            jitter_ms,
            rate_kbit,
            loss_pct: 0.0,
        })
    }

    /// Whether the link needs `tc netem`.
    pub fn shaped(&self) -> bool {
        self.rtt_ms > 0.0 || self.rate_kbit > 0.0 || self.loss_pct > 0.0 || self.jitter_ms > 0.0
    }

    /// The `tc qdisc ... netem` arguments of one end.
    pub fn netem_args(&self) -> Vec<String> {
        let mut a = vec!["netem".to_string()];
        if self.rtt_ms > 0.0 || self.jitter_ms > 0.0 {
            a.push("delay".into());
            a.push(format!("{}us", (self.rtt_ms * 500.0).round() as u64));
            if self.jitter_ms > 0.0 {
                a.push(format!("{}us", (self.jitter_ms * 1000.0).round() as u64));
            }
        }
        if self.rate_kbit > 0.0 {
            a.push("rate".into());
            a.push(format!("{}kbit", self.rate_kbit));
        }
        if self.loss_pct > 0.0 {
            a.push("loss".into());
            a.push(format!("{}%", self.loss_pct));
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_split_the_round_trip_over_both_ends() {
        let g = LinkSpec::preset("gprs").unwrap();
        assert_eq!(
            g.netem_args(),
            ["netem", "delay", "150000us", "rate", "40kbit"]
        );
        let w = LinkSpec::preset("wlan").unwrap();
        assert_eq!(
            w.netem_args(),
            ["netem", "delay", "2000us", "1000us", "rate", "20000kbit"]
        );
        assert!(!LinkSpec::preset("none").unwrap().shaped());
        assert!(LinkSpec::preset("dsl").is_none());
    }
}
