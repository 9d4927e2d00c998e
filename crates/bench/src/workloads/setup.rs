//! Connecting to the target and setting up the bench queues, shared by the workloads.

use std::sync::Arc;

use anyhow::{anyhow, Result};

use crate::args::CommonArgs;
use crate::drivers::{self, Connection, Driver};

/// The driver `--target` names.
pub fn driver(common: &CommonArgs) -> Result<Arc<dyn Driver>> {
    drivers::open(common.target.into(), &common.target_options())
}

/// Connects as `name`.
pub async fn connect(driver: &dyn Driver, name: &str) -> Result<Arc<dyn Connection>> {
    let conn = driver.connect(name).await.map_err(|e| anyhow!(e.message))?;
    Ok(Arc::from(conn))
}

/// `bench-0` .. `bench-<n-1>`, created where missing.
pub async fn queues(admin: &dyn Connection, n: u32) -> Result<Vec<String>> {
    let names: Vec<String> = (0..n).map(|i| format!("bench-{i}")).collect();
    admin
        .ensure_queues(&names)
        .await
        .map_err(|e| anyhow!(e.message))?;
    Ok(names)
}

/// Removes the queues and topics a run made (the harness's own names), unless `keep`: over a
/// connection of its own, after the run's clients are gone. Failures are reported, not fatal:
/// the figures are measured by then.
pub async fn remove(
    driver: &dyn Driver,
    name: &str,
    queues: &[String],
    topics: &[String],
    keep: bool,
) {
    if keep || (queues.is_empty() && topics.is_empty()) {
        return;
    }
    let conn = match driver.connect(name).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "ferry-bench: cannot remove the run's queues and topics: {}",
                e.message
            );
            return;
        }
    };
    for q in queues {
        if let Err(e) = conn.delete_queue(q).await {
            eprintln!("ferry-bench: cannot remove queue {q}: {}", e.message);
        }
    }
    for t in topics {
        if let Err(e) = conn.delete_topic(t).await {
            eprintln!("ferry-bench: cannot remove topic {t}: {}", e.message);
        }
    }
    conn.close().await;
}

/// The queues consumer `i` of `n` subscribes to: every queue gets at least one consumer; with
/// more consumers than queues, they share queues round-robin.
pub fn assigned_queues(i: usize, n: usize, queues: &[String]) -> Vec<String> {
    if n >= queues.len() {
        crate::round_robin::pick(queues, i)
            .cloned()
            .into_iter()
            .collect()
    } else {
        queues.iter().skip(i).step_by(n).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("bench-{i}")).collect()
    }

    #[test]
    fn every_queue_has_a_consumer() {
        let q = names(5);
        let mut seen: Vec<String> = (0..2).flat_map(|i| assigned_queues(i, 2, &q)).collect();
        seen.sort();
        assert_eq!(seen, q);
        assert_eq!(
            assigned_queues(0, 2, &q),
            vec!["bench-0", "bench-2", "bench-4"]
        );
        assert_eq!(assigned_queues(3, 4, &names(2)), vec!["bench-1"]);
    }
}
