//! Background jobs: lease expiry, store upkeep (compaction), and the cluster jobs (heartbeats,
//! change reports from other nodes).

pub mod cluster;
pub mod leases;
pub mod maintenance;
