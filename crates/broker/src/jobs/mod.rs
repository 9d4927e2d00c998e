//! Background jobs: lease expiry and store upkeep (compaction).

pub mod leases;
pub mod maintenance;
