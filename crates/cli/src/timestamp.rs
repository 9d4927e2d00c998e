//! ISO-8601 UTC formatting of broker timestamps (ms since the Unix epoch), with the `time`
//! crate.

use time::macros::format_description;
use time::OffsetDateTime;

/// Formats ms since the Unix epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`. An instant past the year
/// 9999, which ISO-8601's four-digit years cannot show, prints as the number it is.
pub fn iso8601_utc(ms: u64) -> String {
    let format =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| format!("{ms} ms after the Unix epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        for (ms, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            // The leap day of a century leap year.
            (951_827_696_789, "2000-02-29T12:34:56.789Z"),
            (1_735_689_599_999, "2024-12-31T23:59:59.999Z"),
            // 2100 is not a leap year.
            (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(iso8601_utc(ms), text, "{ms}");
        }
    }

    #[test]
    fn beyond_the_year_9999() {
        assert_eq!(
            iso8601_utc(u64::MAX),
            format!("{} ms after the Unix epoch", u64::MAX)
        );
    }
}
