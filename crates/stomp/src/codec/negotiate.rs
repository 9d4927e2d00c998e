//! What CONNECT and CONNECTED agree on: the version (`accept-version`, `version`) and
//! heart-beating (`heart-beat`).

use super::frame::Version;

/// The highest version both sides speak, from a CONNECT's `accept-version` header (a
/// comma-separated list; absent means 1.0 only). `None`: no version in common.
pub fn negotiate(accept_version: Option<&str>) -> Option<Version> {
    let Some(list) = accept_version else {
        return Some(Version::V1_0);
    };
    list.split(',')
        .filter_map(|v| Version::parse(v.trim()))
        .max()
}

/// A `heart-beat` header's two numbers of milliseconds: what the sender can send at least every
/// (0: never), and what it wants to receive at least every (0: never). Absent means `0,0`.
/// `None` when malformed.
pub fn heart_beat(value: Option<&str>) -> Option<(u32, u32)> {
    let Some(value) = value else {
        return Some((0, 0));
    };
    let (a, b) = value.split_once(',')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// The interval in ms at which one side must send, given what it offers (`can`) and what the
/// other wants (`wants`): 0 (never) if either is 0, otherwise the larger (STOMP 1.1 and 1.2).
pub fn interval(can: u32, wants: u32) -> u32 {
    if can == 0 || wants == 0 {
        0
    } else {
        can.max(wants)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_common_version_is_chosen() {
        assert_eq!(negotiate(None), Some(Version::V1_0));
        assert_eq!(negotiate(Some("1.0,1.1,1.2")), Some(Version::V1_2));
        assert_eq!(negotiate(Some("1.1, 1.0")), Some(Version::V1_1));
        assert_eq!(negotiate(Some("2.0,1.1")), Some(Version::V1_1));
        assert_eq!(negotiate(Some("2.0")), None);
        assert_eq!(negotiate(Some("")), None);
    }

    #[test]
    fn heart_beats_parse_and_combine() {
        assert_eq!(heart_beat(None), Some((0, 0)));
        assert_eq!(heart_beat(Some("1000,5000")), Some((1000, 5000)));
        assert_eq!(heart_beat(Some("1000")), None);
        assert_eq!(heart_beat(Some("a,1")), None);
        assert_eq!(heart_beat(Some("-1,1")), None);
        assert_eq!(interval(1000, 5000), 5000);
        assert_eq!(interval(0, 5000), 0);
        assert_eq!(interval(1000, 0), 0);
    }
}
