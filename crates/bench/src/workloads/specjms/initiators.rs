//! The driver side of the locations (SPECjms's driver threads): every interaction that is on
//! is started at its rate, each start due at a fixed time and run as a task of its own, with
//! the instants a start's pacing is judged by ([`StartTiming`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::agents::World;
use super::pacing::StartTiming;
use super::spec::Interaction;

/// Most interaction starts waiting for a sender connection at once.
const MAX_PENDING_STARTS: usize = 20_000;

/// Starts every interaction that is on at its total rate, from `begin` (reached linearly over
/// `ramp`: [`super::ramp`]); each start is due at a fixed interval and runs as a task of its
/// own (so that a slow one does not hold up the next), counted as a pacing miss when it gets
/// its connection later than [`PACING_TOLERANCE`](super::pacing::PACING_TOLERANCE), with the
/// phase its lateness went to ([`pacing`](super::pacing)).
pub fn initiate(
    world: Arc<World>,
    begin: Instant,
    ramp: Duration,
    measure_start: Instant,
    measure_end: Instant,
) -> Vec<JoinHandle<()>> {
    let gate = Arc::new(Semaphore::new(MAX_PENDING_STARTS));
    Interaction::ALL
        .into_iter()
        .filter(|i| world.topo.total_rate(*i) > 0.0)
        .map(|i| {
            let (world, gate) = (world.clone(), gate.clone());
            tokio::spawn(async move {
                let rate = world.topo.total_rate(i);
                // Locations take turns from a random one, so that short runs do not favour
                // the first ones.
                let offset = rand::random::<u32>() as u64;
                let mut k = 0u64;
                while !world.shared.stopping() {
                    let due = begin + super::ramp::due(k, rate, ramp);
                    tokio::time::sleep_until(due.into()).await;
                    let woke = Instant::now();
                    if world.shared.stopping() {
                        break;
                    }
                    let Ok(permit) = gate.clone().acquire_owned().await else {
                        break;
                    };
                    let w = world.clone();
                    let n = k + offset;
                    let counted = due >= measure_start && due < measure_end;
                    tokio::spawn(async move {
                        let ran = Instant::now();
                        let ok = w.start(i, n).await;
                        if let (true, Some(c)) = (counted, w.interaction_counts(i)) {
                            match ok {
                                Ok(connected) => c.pacing.record(&StartTiming {
                                    due,
                                    woke,
                                    ran,
                                    connected,
                                }),
                                Err(e) => w.shared.note_error(e),
                            }
                        }
                        drop(permit);
                    });
                    k += 1;
                }
            })
        })
        .collect()
}
