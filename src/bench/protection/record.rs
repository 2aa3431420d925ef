//! What a protection run records (benches-doc/protection.md), with upstream's field names so its
//! records and ours read the same; the fields past upstream's say how the hog ended, how fast it
//! ran and every tune probe (what a resumed tune continues from).

use crate::workload::memhog::watch::HogEnd;
use crate::workload::memhog::HogReport;
use serde::{Deserialize, Serialize};

/// The isolation percentile and threshold a tune judges by, unless the spec says otherwise.
pub const DFL_ISOL_PCT: &str = "05";
pub const DFL_ISOL_THR: f64 = 0.9;

/// The hog's cgroup and the name its usages go by in the reports (upstream's sysload unit).
pub const HOG_SVC: &str = "rd-sysload-mem-hog.service";
pub const HOG_CG: &str = "system.slice/rd-sysload-mem-hog.service";
/// hashd's cgroup and report name during protection runs.
pub const HASHD_SVC: &str = "rd-hashd-A.service";
pub const HASHD_CG: &str = "workload.slice/rd-hashd-A.service";

/// One hog run against hashd.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemHogRun {
    /// `(target duration, failed after, why)` when hashd or the run failed midway.
    pub failed: Option<(f64, f64, String)>,
    /// The hog's report when its cgroup first used swap: upstream's hog period starts there.
    pub first_hog_rep: HogReport,
    /// Its last report: upstream's hog period ends there.
    pub last_hog_rep: HogReport,
    /// Its mean memory.current over the last seconds, bytes.
    pub last_hog_mem: f64,
    /// Ours: how the hog ended, and the figures behind it.
    pub hog_end: Option<HogEnd>,
    pub hog_end_why: String,
    /// Ours: the hog period by the bench's own clock, unix seconds from the tick the hog's
    /// cgroup first used swap to the tick its end was seen. Under the hog its own report can
    /// stall for tens of seconds, and a period ended at that stale report leaves them out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hog_period: Option<(u64, u64)>,
}

/// A mem-hog scenario's runs (also a tune probe's single run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemHogRecord {
    pub period: (u64, u64),
    pub base_period: (u64, u64),
    /// The target rate, `rps_max × load` (what isolation is measured against).
    pub base_rps: f64,
    pub runs: Vec<MemHogRun>,
    /// Ours: the hog's growth rate (bytes/s), the speed it came from and where the device's
    /// write bandwidth it is relative to came from (`bench.json` or the kernel's io.cost model).
    pub hog_wbps: u64,
    pub speed: String,
    pub model_from: String,
}

/// How a tune probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeOutcome {
    /// The isolation percentile reached the threshold.
    Pass,
    /// Studied, below the threshold.
    Fail,
    /// Ended early: hashd stayed below the threshold too long.
    EarlyFail,
    /// hashd or the run failed.
    Error,
}

impl ProbeOutcome {
    pub fn passed(self) -> bool {
        self == ProbeOutcome::Pass
    }
}

/// Ours: one tune probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneProbe {
    /// hashd's footprint, bytes.
    pub size: f64,
    pub outcome: ProbeOutcome,
    /// The isolation percentile the verdict went by (0 without a study).
    pub isol: f64,
    pub period: (u64, u64),
    #[serde(default)]
    pub why: String,
}

/// A mem-hog-tune scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemHogTuneRecord {
    pub period: (u64, u64),
    pub base_period: (u64, u64),
    pub isol_pct: String,
    pub isol_thr: f64,
    /// The run the verdict shows: the passing probe's, else the last studied one.
    pub final_run: Option<MemHogRecord>,
    /// The largest size that passed.
    pub final_size: Option<f64>,
    /// Ours: the search (`linear` or `bisect`), every probe in order, and whether it ended.
    pub search: String,
    /// Where the search started (iocost-qos: the neighbouring configuration's size).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<f64>,
    pub probes: Vec<TuneProbe>,
    pub done: bool,
}

impl Default for MemHogTuneRecord {
    fn default() -> Self {
        Self {
            period: (0, 0),
            base_period: (0, 0),
            isol_pct: DFL_ISOL_PCT.into(),
            isol_thr: DFL_ISOL_THR,
            final_run: None,
            final_size: None,
            search: String::new(),
            hint: None,
            probes: Vec::new(),
            done: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ScenarioRecord {
    MemHog(MemHogRecord),
    MemHogTune(MemHogTuneRecord),
}

/// The protection record: one entry per finished (or, for a tune, started) scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProtectionRecord {
    pub scenarios: Vec<ScenarioRecord>,
}
