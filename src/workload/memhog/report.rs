//! The hog's per-second report file, written by `run` and read by `handle`.

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
