//! Background jobs: lease expiry, reloading the users' grants, the memory watcher, store upkeep (compaction, expired messages, the disk's free
//! space), waking waiters
//! when delayed messages become due, and the cluster jobs (heartbeats,
//! change reports from other nodes).

pub mod cluster;
pub mod delayed;
pub mod disk;
pub mod grants;
pub mod leases;
pub mod maintenance;
pub mod memory;
