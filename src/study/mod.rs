//! Study primitives and the tables rendered from study results.
//!
//! * `reports`: walking the per-second reports of a period (`cnt`/`dur` weighting) and the
//!   delta selectors;
//! * `dist`: distributions (exact nearest-rank percentiles, mean, stdev);
//! * `rstat_study` / `iolat_study`: the resource-stat and nested IO-latency studies;
//! * `rstat` / `iolat`: their result models and text tables (shared with upstream results).

pub mod dist;
pub mod iolat;
pub mod iolat_study;
pub mod reports;
pub mod rstat;
pub mod rstat_study;
