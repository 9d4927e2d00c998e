//! Workloads: what load to generate and what to measure, through a [`crate::drivers::Driver`].
//!
//! - [`throughput`]: closed-loop producers with requests in flight, client-ack consumers;
//! - [`latency`]: open loop at a fixed rate, latency against the intended send time;
//! - [`ftab`]: the FTaB client archetypes in any mix, per-operation response times;
//! - [`fanout`]: one publisher on a topic, N subscriptions each with its own consumer;
//! - [`selector`]: the same with a selector per subscription, and the broker's CPU per
//!   message, against plain subscriptions;
//! - [`pubsub`]: the engine of `fanout` and `selector`;
//! - [`specjms`]: a SPECjms2007-like supply chain with its auditor and capacity model;
//! - [`slowlink`]: request and answer over an emulated slow link, in four modes: time and
//!   bytes on the wire per message;
//! - [`stream`]: a monitoring-record stream over brokers, TCP and the datagram ingest:
//!   records per second and loss;
//! - [`connect`]: time to get a session (TLS, SCRAM), one at a time and a crowd at once;
//! - [`compare`]: one workload against several targets in alternating rounds;
//! - [`workload`]: the [`Workload`] trait they implement and [`run()`], the one way each runs;
//! - [`run`](mod@run): the phase and counters one run's tasks share; [`consumer`]: the consumer
//!   task both workloads use; [`setup`]: connecting and queue set-up.

pub mod compare;
pub mod connect;
pub mod consumer;
pub mod fanout;
pub mod ftab;
pub mod latency;
pub mod progress;
pub mod pubsub;
pub mod run;
pub mod selector;
pub mod setup;
pub mod slowlink;
pub mod specjms;
pub mod stream;
pub mod throughput;
pub mod workload;

pub use workload::{run, Workload};
