//! The memory hog (spec §2): a process that grows anonymous memory at a set rate until it is
//! killed, so a workload's protection can be measured while something else floods memory.
//!
//! `run` is the hog itself (the hidden `__mem-hog` subcommand); `debt` its rate keeping,
//! `fill` its page contents; `handle` starts and ends it from a bench; `watch` decides when the
//! host is in danger and the hog must go.

pub mod debt;
pub mod fill;
pub mod handle;
pub mod run;
pub mod watch;

pub use handle::{HogOpts, MemHog};
pub use run::MemHogArgs;

use crate::report::model::Timestamp;
use serde::{Deserialize, Serialize};

/// The hog's per-second report (upstream's field names): rates over the last second,
/// cumulative bytes, current debt and cumulative loss, all in bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HogReport {
    pub timestamp: Timestamp,
    pub wbps: u64,
    pub rbps: u64,
    pub wbytes: u64,
    pub rbytes: u64,
    pub wdebt: u64,
    pub rdebt: u64,
    pub wloss: u64,
    pub rloss: u64,
}

impl HogReport {
    pub fn load(path: &std::path::Path) -> anyhow::Result<HogReport> {
        use anyhow::Context;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }
}
