//! Running a workload from its flags, as `ferry-bench` would, and reading the JSON report it
//! writes, checked against the schema. Shared by these tests and the peer tests (tests/peers.rs).
// Test code: a panic is how a check reports failure, so unwrap and indexing are fine here.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::Path;

use clap::Parser;
use serde_json::Value;

use crate::schema;

#[derive(Parser)]
struct Stream {
    #[command(flatten)]
    args: ferry_bench::StreamArgs,
}

#[derive(Parser)]
struct Specjms {
    #[command(flatten)]
    args: ferry_bench::SpecjmsArgs,
}

/// The command line `workload flags... -q --json out`.
fn argv<'a>(workload: &'a str, flags: &[&'a str], out: &'a Path) -> Vec<&'a str> {
    let mut argv = vec![workload];
    argv.extend_from_slice(flags);
    argv.extend(["-q", "--json", out.to_str().unwrap()]);
    argv
}

/// The JSON report at `path`, after checking it against the schema.
pub fn report(path: &Path) -> Value {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let errors = schema::validate(&schema::load(), &json);
    assert!(errors.is_empty(), "{errors:#?}\n{json:#}");
    json
}

/// Runs `stream` with `flags`, quietly; its report.
pub async fn stream(flags: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stream.json");
    let args = Stream::try_parse_from(argv("stream", flags, &out))
        .unwrap()
        .args;
    ferry_bench::workloads::run(args.with_common())
        .await
        .unwrap();
    report(&out)
}

/// The arguments of `specjms` with `flags`, quiet, its report to be written to `out`.
pub fn specjms_args(flags: &[&str], out: &Path) -> ferry_bench::SpecjmsArgs {
    Specjms::try_parse_from(argv("specjms", flags, out))
        .unwrap()
        .args
        .with_common()
}

/// Runs `specjms` with `flags`, quietly; its report.
pub async fn specjms(flags: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("specjms.json");
    ferry_bench::workloads::run(specjms_args(flags, &out))
        .await
        .unwrap();
    report(&out)
}
