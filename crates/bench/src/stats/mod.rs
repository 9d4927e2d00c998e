//! Statistics of a run.
//!
//! - [`histogram`]: HDR latency histograms in µs and their percentile summary;
//! - [`curve`]: a histogram's percentile curve, for plots;
//! - [`student_t`]: quantiles of Student's t-distribution, for confidence intervals;
//! - [`sample`]: mean, standard deviation and t confidence intervals of a sample (e.g. the
//!   per-window rates of the measured phase);
//! - [`omission`]: coordinated-omission correction (latency against the intended send time);
//! - [`windows`]: per-window series, with warm-up and cool-down windows marked and excluded.

pub mod curve;
pub mod histogram;
pub mod omission;
pub mod sample;
pub mod student_t;
pub mod windows;

pub use curve::percentile_curve;
pub use histogram::{new_histogram, record, record_n, LatencySummary};
pub use sample::SampleSummary;
pub use windows::{WindowRow, WindowSeries};
