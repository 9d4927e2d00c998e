//! ISO-8601 UTC formatting of broker timestamps (ms since the Unix epoch), without a date crate:
//! the proleptic Gregorian conversion is a dozen lines and this is all the CLI needs.

/// Formats ms since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso8601_utc(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Converts days since 1970-01-01 to (year, month, day), after Howard Hinnant's `civil_from_days`
/// restricted to non-negative inputs: eras of 400 years starting on March 1st make leap days
/// fall at the end of each year.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097; // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st, 0..=365
    let mp = (5 * doy + 2) / 153; // month from March, 0..=11
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn known_instants() {
        // 2000-02-29 (leap day of a century leap year) 12:34:56.789
        assert_eq!(iso8601_utc(951_827_696_789), "2000-02-29T12:34:56.789Z");
        // 2024-12-31 23:59:59.999
        assert_eq!(iso8601_utc(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
        // 2100-03-01 (2100 is not a leap year)
        assert_eq!(iso8601_utc(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn day_boundaries_are_consistent() {
        // Every day for ~300 years: the next day's date is the successor of this day's.
        let mut prev = civil_from_days(0);
        for d in 1..110_000 {
            let cur = civil_from_days(d);
            let (y, m, dd) = prev;
            let next_ok = cur == (y, m, dd + 1) || cur == (y, m + 1, 1) || cur == (y + 1, 1, 1);
            assert!(next_ok, "{prev:?} -> {cur:?}");
            prev = cur;
        }
    }
}
