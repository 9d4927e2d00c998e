//! Node identity: the name a broker goes by among the nodes sharing one database.
//!
//! Names must be unique among the live nodes: two live nodes with one name would free each
//! other's sessions and deliveries. A restarted node that keeps its name frees what its
//! previous run held at once; one with a new (generated) name has the old name's sessions and
//! deliveries freed by the heartbeat timeout instead.

use std::hash::{BuildHasher, Hasher};

/// Longest node name.
const MAX_NAME: usize = 200;

/// Whether `name` is 1 to 200 characters of `A-Z a-z 0-9 . _ -` (as client and queue names).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A fresh name: `<hostname>-<pid>-<random>`, unique for practical purposes.
pub fn generated_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(100)
        .collect();
    let host = if host.is_empty() {
        "ferry".into()
    } else {
        host
    };
    // RandomState is seeded from the OS's randomness.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        h.finish() & 0xffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_valid_and_differ() {
        let (a, b) = (generated_name(), generated_name());
        assert!(is_valid_name(&a), "{a}");
        assert_ne!(a, b);
        assert!(a.contains(&format!("-{}-", std::process::id())));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name(&"x".repeat(201)));
    }
}
