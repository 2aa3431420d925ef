//! Where per-second IO-completion latencies come from. The reporter asks its source for one
//! sample per report; sources differ in what they can measure (tracefs block events give full
//! histograms, /proc/diskstats only mean latencies), and say so through `unavailable`.

use crate::report::model::{IoLatHists, IoLatPcts};
use std::collections::BTreeMap;

/// One second's worth of IO latency data for the scratch device.
#[derive(Debug, Clone, Default)]
pub struct IoLatSample {
    /// Completions since the previous sample, per IO type (mergeable).
    pub hists: Option<IoLatHists>,
    /// Per-second percentiles (`iolat` in the report), seconds.
    pub pcts: IoLatPcts,
    /// Percentiles since the source started (`iolat_cum`), seconds.
    pub cum: IoLatPcts,
    /// True when the source can't produce percentiles (diskstats fallback): the report is marked
    /// and tables print "unavailable" rather than zeros.
    pub unavailable: bool,
    /// Mean latency of this second per IO type with IO, seconds (`iolat_mean`). The only
    /// latency figure the diskstats fallback has.
    pub means: BTreeMap<String, f64>,
}

/// A per-second IO latency source. `sample` is called once per report, from the reporter thread,
/// and returns what completed since the previous call.
pub trait IoLatSource: Send {
    fn name(&self) -> &'static str;
    fn sample(&mut self) -> anyhow::Result<IoLatSample>;
    /// Event or error counts worth logging (name, count); none by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
