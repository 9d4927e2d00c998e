//! Integration tests of the harness: each workload runs for about two seconds against an
//! in-process broker ([`ferry_testkit::TestServer`]) and its JSON report validates against
//! `schema/result.schema.json`. They check structure and that figures are positive, never
//! thresholds: benchmarks are not timed tests.
//!
//! Modules: [`schema`] (a validator for the subset of JSON Schema the schema file uses),
//! [`workloads`], [`ftab`] (the ftab workload and compare), [`report`] (the HTML page),
//! [`cli`] (the `ferry-bench` binary as a subprocess), [`docs`] (the benchmark page and its
//! results files), [`seeds`] (the seed documents' workloads), [`run`] (a workload run from its
//! flags, its report read and checked).

mod cli;
mod docs;
mod ftab;
mod report;
mod run;
mod schema;
mod seeds;
mod workloads;
