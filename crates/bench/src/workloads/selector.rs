//! `ferry-bench selector`: one publisher on one topic, N subscriptions with (or without) a
//! selector on message properties, so that the cost of selectors can be compared with plain
//! subscriptions: published and delivered messages per second and, when the broker's process
//! can be observed (`--own-broker` or `--broker-pid`), its CPU time per published and per
//! delivered message. See [`super::pubsub::plan`] for the selectors and what they match.

use anyhow::Result;
use clap::Args;

use crate::args::CommonArgs;
use crate::report::BenchReport;
use crate::workloads::pubsub::{self, PubSubArgs, PubSubSpec, SelectorPlan};

/// The topic the workload publishes to; created if missing.
pub const TOPIC: &str = "bench-selector";

/// Flags of `ferry-bench selector`.
#[derive(Debug, Clone, Args)]
pub struct SelectorArgs {
    /// Subscriptions on the topic, each consumed by a consumer on a connection of its own.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub subscriptions: u32,
    /// Give subscription i the selector "region = 'rK' AND amount > T", K = i mod R (true),
    /// or no selector (false: every subscription gets every message).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub selectors: bool,
    /// R: distinct regions; message n has region rK, K = n mod R.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub regions: u32,
    /// T: message n has amount (n div R) mod 100 and matches when it is above T (-1: all).
    #[arg(long, default_value_t = 10, allow_negative_numbers = true)]
    pub min_amount: i64,
    #[command(flatten)]
    pub pubsub: PubSubArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

super::workload::impl_workload!(SelectorArgs, measure, pubsub::header);

/// Runs the workload and returns its report.
pub async fn measure(args: &SelectorArgs) -> Result<BenchReport> {
    let spec = PubSubSpec {
        workload: "selector",
        topic: TOPIC.to_string(),
        plan: SelectorPlan {
            subscriptions: args.subscriptions,
            selectors: args.selectors,
            regions: args.regions,
            min_amount: args.min_amount,
            with_properties: true,
        },
        args: args.pubsub.clone(),
    };
    pubsub::run_with_broker(&spec, &args.common).await
}
