//! The [`Workload`] trait every single-target workload implements (`throughput`, `latency`,
//! `ftab`, `fanout`, `selector`), and [`run`], the one way a workload runs from the command
//! line: measure, print the table under the workload's header, write the files the flags ask
//! for, and fail when sends or acknowledgements failed. `compare` runs these workloads through
//! the same trait, round after round.

use std::future::Future;
use std::path::Path;

use anyhow::Result;

use crate::args::CommonArgs;
use crate::report::environment::Environment;
use crate::report::{self, BenchReport};

/// A workload: its flags, and how to measure with them.
pub trait Workload {
    /// The flags every workload has (timing, target, output files).
    fn common(&self) -> &CommonArgs;

    /// `--report FILE.html`, for the workloads that draw one.
    fn html(&self) -> Option<&Path> {
        None
    }

    /// Runs the workload against `--target` and returns its report.
    fn measure(&self) -> impl Future<Output = Result<BenchReport>> + Send;

    /// The lines above the results table: what was run, with which parameters.
    fn header(report: &BenchReport) -> String;
}

/// Runs `workload`, prints the report and writes the files asked for.
pub async fn run<W: Workload>(workload: W) -> Result<()> {
    let common = workload.common();
    let environment = Environment::capture(common);
    let mut report = workload.measure().await?;
    report.environment = Some(environment);
    report::publish(
        &report,
        &W::header(&report),
        common.json.as_deref(),
        common.csv.as_deref(),
        workload.html(),
    )
}

/// Implements [`Workload`] for a workload's flags (a struct with a `common` field) from the
/// module's `measure` and `header` functions, and its `report` field for `--report` when the
/// workload draws one: `impl_workload!(ThroughputArgs, measure, header, html: report)`.
macro_rules! impl_workload {
    ($args:ty, $measure:path, $header:path $(, html: $report:ident)?) => {
        impl $crate::workloads::Workload for $args {
            fn common(&self) -> &$crate::args::CommonArgs {
                &self.common
            }

            $(
                fn html(&self) -> Option<&std::path::Path> {
                    self.$report.as_deref()
                }
            )?

            fn measure(
                &self,
            ) -> impl std::future::Future<Output = anyhow::Result<$crate::report::BenchReport>> + Send
            {
                $measure(self)
            }

            fn header(report: &$crate::report::BenchReport) -> String {
                $header(report)
            }
        }
    };
}
pub(crate) use impl_workload;
