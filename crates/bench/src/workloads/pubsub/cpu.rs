//! The CPU time of a process (the broker), read from `/proc/<pid>/stat`: user plus system time
//! of all its threads. Linux only; elsewhere the reading is `None` and the report leaves the
//! figures out.

use std::time::Duration;

/// Clock ticks per second of the `utime`/`stime` fields. The kernel reports them in USER_HZ,
/// which is 100 on every architecture Linux exposes to user space through `/proc`.
const USER_HZ: f64 = 100.0;

/// CPU time used by process `pid` so far, or `None` when it cannot be read (no such process,
/// not Linux).
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// `utime + stime` from the text of `/proc/<pid>/stat`. The command name (field 2) is in
/// parentheses and may itself hold spaces or parentheses, so fields are counted from the last
/// `)`: `utime` and `stime` are the 12th and 13th fields after it.
fn parse_stat(text: &str) -> Option<Duration> {
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Duration::try_from_secs_f64((utime + stime) as f64 / USER_HZ).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_with_an_awkward_name() {
        let line = "4242 (ferry (x) y) S 1 4242 4242 0 -1 4194560 5000 0 0 0 250 130 0 0 20 0 \
                    9 0 123456 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 \
                    0 0 0 0 0";
        assert_eq!(parse_stat(line), Some(Duration::from_millis(3800)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn reads_this_process() {
        if cfg!(target_os = "linux") {
            assert!(cpu_time(std::process::id()).is_some());
        }
    }
}
