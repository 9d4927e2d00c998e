//! The memory watcher: every [`TICK`] adds up the broker's memory and sets the pressure
//! publishers are slowed or refused by (see [`crate::memory`]).

use std::sync::Arc;

use tracing::{info, warn};

use crate::memory::{resident_bytes, Pressure, TICK};
use crate::shared::Shared;

/// Keeps the pressure current until shutdown.
pub async fn run(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.shutdown.cancelled() => return,
        }
        let budget = &shared.memory;
        let before = budget.pressure();
        let resident = resident_bytes();
        budget.update(shared.store.queues().memory_bytes(), resident);
        // The store's cache of what it can read back goes first: while memory is short it
        // stays empty, and the budget is counted again without it before anyone is slowed.
        let short = budget.pressure() != Pressure::Normal;
        if shared.store.queues().relieve_memory(short) {
            budget.update(shared.store.queues().memory_bytes(), resident);
        }
        let after = budget.pressure();
        if let Some(pressure) = (after != before).then_some(after) {
            let (counted, resident) = budget.usage();
            let max = budget.max();
            match pressure {
                Pressure::Normal => info!(
                    counted,
                    resident, max, "memory back below the high watermark"
                ),
                Pressure::High => warn!(
                    counted,
                    resident, max, "memory above the high watermark: slowing publishers"
                ),
                Pressure::Full => warn!(
                    counted,
                    resident, max, "memory budget reached: refusing sends with ResourceExhausted"
                ),
            }
        }
    }
}
