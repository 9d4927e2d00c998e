//! The one duration grammar of the `ferry` command line and its shell: humantime's
//! (`30s`, `500ms`, `1.5s`, `1m30s`, `2h`, `1 day`). Every duration flag (`--ttl`, `--delay`,
//! `--wait`) and every shell key (`ttl=`, `delay=`, `wait=`) goes through this module, so they
//! all read the same way.
//!
//! A number needs its unit: `--ttl 10` is refused with a message that names `10s` and `10ms`,
//! rather than guessed (seconds for one flag and milliseconds for another would be easy to get
//! wrong). `0` alone is the one exception: zero is zero in every unit.

use std::time::Duration;

use anyhow::{bail, Result};

/// Parses a duration in humantime's grammar.
pub fn parse(s: &str) -> Result<Duration> {
    let text = s.trim();
    if !text.is_empty() && text != "0" && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        bail!("'{text}' needs a unit, e.g. {text}s or {text}ms");
    }
    humantime::parse_duration(text)
        .map_err(|e| anyhow::anyhow!("'{text}' is not a duration ({e}); e.g. 30s, 500ms, 1m30s"))
}

/// A time to live or a delay in whole milliseconds (the protocol's unit); a duration that is
/// not zero must be at least 1 ms, so that it does not silently become "none".
pub fn millis(s: &str) -> Result<u64> {
    let d = parse(s)?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 && !d.is_zero() {
        bail!("'{}' is shorter than 1ms", s.trim());
    }
    Ok(ms)
}

/// A long-poll wait in whole milliseconds, rounded to the nearest (the protocol carries a
/// `u32`, so at most about 49 days).
pub fn wait_ms(s: &str) -> Result<u32> {
    let d = parse(s)?;
    let ms = (d.as_nanos() + 500_000) / 1_000_000;
    match u32::try_from(ms) {
        Ok(ms) => Ok(ms),
        Err(_) => bail!("wait time '{}' is too long (at most 49 days)", s.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar() {
        let cases = [
            ("0", 0),
            ("0s", 0),
            ("30s", 30_000),
            ("500ms", 500),
            ("1.5s", 1_500),
            ("1m30s", 90_000),
            ("2h", 7_200_000),
            (" 10m ", 600_000),
        ];
        for (text, ms) in cases {
            assert_eq!(millis(text).unwrap(), ms, "{text}");
        }
    }

    #[test]
    fn a_number_needs_its_unit() {
        for text in ["10", "1.5", "0.25"] {
            let e = parse(text).unwrap_err().to_string();
            assert!(
                e.contains("needs a unit") && e.contains(&format!("{text}s")),
                "{e}"
            );
        }
    }

    #[test]
    fn refusals() {
        for text in ["", "soon", "-1s", "10 parsecs", "s"] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains("e.g. 30s"), "{text}: {e}");
        }
        let e = millis("0.1ms").unwrap_err().to_string();
        assert!(e.contains("shorter than 1ms"), "{e}");
    }

    #[test]
    fn waits() {
        assert_eq!(wait_ms("0").unwrap(), 0);
        assert_eq!(wait_ms("2s").unwrap(), 2000);
        assert_eq!(wait_ms("250ms").unwrap(), 250);
        assert_eq!(wait_ms("400us").unwrap(), 0);
        assert_eq!(wait_ms("600us").unwrap(), 1);
        assert!(wait_ms("2").is_err());
        assert!(wait_ms("100days").is_err());
    }
}
