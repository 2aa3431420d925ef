//! The protection result: one model that the study writes and the reports read, for our files
//! and upstream's (upstream's field names; ours added at the end of each struct, and every
//! field optional so older layouts read). The study's resource statistics and IO latencies stay
//! raw JSON: they are large, only read when printed, and stored as the study wrote them.

use crate::study::iolat::IoLat;
use crate::units::PCT_LABELS;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// A distribution over [`PCT_LABELS`] (percentiles, mean, stdev). Missing keys read as 0.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PctDist {
    #[serde(rename = "00")]
    p00: f64,
    #[serde(rename = "01")]
    p01: f64,
    #[serde(rename = "05")]
    p05: f64,
    #[serde(rename = "10")]
    p10: f64,
    #[serde(rename = "25")]
    p25: f64,
    #[serde(rename = "50")]
    p50: f64,
    #[serde(rename = "75")]
    p75: f64,
    #[serde(rename = "90")]
    p90: f64,
    #[serde(rename = "95")]
    p95: f64,
    #[serde(rename = "99")]
    p99: f64,
    #[serde(rename = "100")]
    p100: f64,
    pub mean: f64,
    pub stdev: f64,
}

impl PctDist {
    /// From a study's `{label → value}` over [`PCT_LABELS`]; a missing label reads as 0.
    pub fn from_labels(m: &BTreeMap<String, f64>) -> Self {
        let v = |l: &str| m.get(l).copied().unwrap_or(0.0);
        PctDist {
            p00: v("00"),
            p01: v("01"),
            p05: v("05"),
            p10: v("10"),
            p25: v("25"),
            p50: v("50"),
            p75: v("75"),
            p90: v("90"),
            p95: v("95"),
            p99: v("99"),
            p100: v("100"),
            mean: v("mean"),
            stdev: v("stdev"),
        }
    }

    /// Values in [`PCT_LABELS`] order.
    pub fn values(&self) -> [f64; 13] {
        [
            self.p00, self.p01, self.p05, self.p10, self.p25, self.p50, self.p75, self.p90,
            self.p95, self.p99, self.p100, self.mean, self.stdev,
        ]
    }

    /// The value for a label of [`PCT_LABELS`].
    pub fn get(&self, label: &str) -> Option<f64> {
        let idx = PCT_LABELS.iter().position(|l| *l == label)?;
        Some(self.values()[idx])
    }
}

/// The study of one mem-hog scenario, of a tune's final run, or of the combined summary.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct MemHogResult {
    pub base_rps: f64,
    pub base_lat: f64,
    pub base_lat_stdev: f64,
    pub isol: PctDist,
    pub lat_imp: PctDist,
    pub fail_ratio: f64,
    pub fail_msgs: Vec<String>,
    pub work_csv: f64,
    pub iolat: Option<Box<RawValue>>,
    pub root_rstat: Option<Box<RawValue>>,
    pub work_rstat: Option<Box<RawValue>>,
    pub sys_rstat: Option<Box<RawValue>>,
    pub nr_reports: (u64, u64),
    pub periods: Vec<(u64, u64)>,
    pub hog_periods: Vec<(u64, u64)>,
    pub vrate: f64,
    pub vrate_stdev: f64,
    pub io_usage: f64,
    pub io_unused: f64,
    pub hog_io_usage: f64,
    pub hog_io_loss: f64,
    pub hog_bytes: f64,
    pub hog_lost_bytes: f64,
    /// Ours: how each run's hog ended; the hog's growth rate (bytes/s) and where the write
    /// bandwidth its speed is relative to came from (`bench.json` or `kernel`).
    pub hog_ends: Vec<String>,
    pub hog_wbps: u64,
    pub model_from: String,
}

impl MemHogResult {
    /// The IO latency distributions (empty when the result has none).
    pub fn iolat(&self) -> Result<IoLat> {
        IoLat::from_raw(self.iolat.as_deref(), "mem-hog IO latencies")
    }

    /// The isolation value of a [`PCT_LABELS`] label (`"05"`, `"mean"`, …).
    pub fn isol_at(&self, label: &str) -> f64 {
        self.isol.get(label).unwrap_or(0.0)
    }
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct MemHogTuneResult {
    pub final_run: Option<MemHogResult>,
}

/// One scenario's study, tagged by its kind as upstream tags it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ScenarioResult {
    MemHog(MemHogResult),
    MemHogTune(MemHogTuneResult),
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ProtectionResult {
    pub scenarios: Vec<ScenarioResult>,
    /// The combined summary over the mem-hog scenarios; `None` without any.
    pub combined_mem_hog: Option<MemHogResult>,
}
