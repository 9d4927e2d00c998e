//! `ferry-bench fanout`: one publisher on one topic, N subscriptions each consumed by its own
//! consumer; published and delivered messages per second and end-to-end latency. See
//! [`super::pubsub`] for how the run goes.

use anyhow::Result;
use clap::Args;

use crate::args::{CommonArgs, NatsModeArg, TargetArg};
use crate::report::BenchReport;
use crate::workloads::pubsub::{self, PubSubArgs, PubSubSpec, SelectorPlan};

/// The topic the workload publishes to; created if missing.
pub const TOPIC: &str = "bench-fanout";

/// Flags of `ferry-bench fanout`.
#[derive(Debug, Clone, Args)]
pub struct FanoutArgs {
    /// Subscriptions on the topic, each consumed by a consumer on a connection of its own;
    /// every message reaches all of them.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub subscribers: u32,
    #[command(flatten)]
    pub pubsub: PubSubArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

super::workload::impl_workload!(FanoutArgs, measure, pubsub::header);

/// Runs the workload and returns its report.
pub async fn measure(args: &FanoutArgs) -> Result<BenchReport> {
    let spec = PubSubSpec {
        workload: "fanout",
        topic: TOPIC.to_string(),
        plan: SelectorPlan::fanout(args.subscribers),
        args: args.pubsub.clone(),
    };
    let mut common = args.common.clone();
    if common.target == TargetArg::Nats {
        // NATS stores only in JetStream: persistence picks the mode.
        common.nats_mode = if args.pubsub.persistent {
            NatsModeArg::Jetstream
        } else {
            NatsModeArg::Core
        };
    }
    pubsub::run_with_broker(&spec, &common).await
}
