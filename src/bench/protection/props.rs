//! The protection properties: one scenario per group from the second on
//! (benches-doc/protection.md), their shape, typed values and rules.

use super::record::{DFL_ISOL_PCT, DFL_ISOL_THR};
use super::search::Search;
use crate::bench::contract::api::{prop, PropDesc, SpecError, ValueKind, PCT_LABELS};
use crate::spec::{Group, JobSpec};

pub const DFL_LOAD: f64 = 1.0;
pub const DFL_SPEED: &str = "2x";
pub const DFL_TUNE_INTVS: u64 = 10;
pub const DFL_MEM_HOG_LOOPS: u64 = 2;
/// How long a tune probe keeps the hog running after it started swapping (seconds).
pub const TUNE_PROBE_DUR: f64 = 200.0;

/// The tune search unless `search=` says otherwise.
pub const DFL_SEARCH: Search = Search::Linear;

/// The hog's growth speeds, relative to the device's modelled write bandwidth.
pub const SPEEDS: &[&str] = &["10%", "25%", "50%", "1x", "2x"];

/// A speed's factor of the modelled write bandwidth.
pub fn speed_factor(speed: &str) -> f64 {
    match speed {
        "10%" => 0.10,
        "25%" => 0.25,
        "50%" => 0.50,
        "1x" => 1.0,
        _ => 2.0,
    }
}

pub const SCENARIO_PROPS: [PropDesc; 10] = [
    prop(
        "scenario",
        ValueKind::Enum(&["mem-hog", "mem-hog-tune"]),
        "scenario to run",
    ),
    prop("loops", ValueKind::Int, "mem-hog: number of runs"),
    prop("load", ValueKind::Frac, "workload load level"),
    prop(
        "speed",
        ValueKind::Enum(SPEEDS),
        "memory hog growth speed relative to the device's write bandwidth",
    ),
    prop(
        "size-min",
        ValueKind::Size,
        "mem-hog-tune: smallest workload size to probe",
    ),
    prop(
        "size-max",
        ValueKind::Size,
        "mem-hog-tune: largest workload size to probe",
    ),
    prop("intvs", ValueKind::Int, "mem-hog-tune: number of probes"),
    prop(
        "isol-pct",
        ValueKind::Enum(PCT_LABELS),
        "isolation percentile to judge by",
    ),
    prop("isol-thr", ValueKind::Frac, "isolation threshold"),
    prop(
        "search",
        ValueKind::Enum(&["linear", "bisect"]),
        "mem-hog-tune: probe sizes from the top down or by bisection",
    ),
];

const MEM_HOG_KEYS: &[&str] = &["scenario", "loops", "load", "speed"];
const MEM_HOG_TUNE_KEYS: &[&str] = &[
    "scenario", "load", "speed", "size-min", "size-max", "intvs", "isol-pct", "isol-thr", "search",
];

/// A mem-hog scenario: the hog runs `loops` times against hashd at `load`.
#[derive(Debug, Clone, PartialEq)]
pub struct MemHogProps {
    pub loops: u64,
    pub load: f64,
    pub speed: String,
}

impl MemHogProps {
    pub fn read(g: &Group) -> Result<Self, SpecError> {
        Ok(Self {
            loops: g.u64("loops", ValueKind::Int)?.unwrap_or(DFL_MEM_HOG_LOOPS),
            load: g.f64("load", ValueKind::Frac)?.unwrap_or(DFL_LOAD),
            speed: g.text("speed").unwrap_or(DFL_SPEED).to_string(),
        })
    }
}

/// A mem-hog-tune scenario: the largest hashd size in `[size_min, size_max]` that keeps the
/// isolation percentile above the threshold, probed in `intvs` steps.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneProps {
    pub load: f64,
    pub speed: String,
    /// Bytes.
    pub size_min: f64,
    pub size_max: f64,
    pub intvs: u64,
    /// The isolation percentile label (of `PCT_LABELS`) and the threshold it must reach.
    pub isol_pct: String,
    pub isol_thr: f64,
    pub search: Search,
    /// A size another tune found protected, to start from (set by iocost-qos, not a spec
    /// property); see `search`.
    pub hint: Option<f64>,
}

impl TuneProps {
    pub fn read(g: &Group) -> Result<Self, SpecError> {
        Ok(Self {
            load: g.f64("load", ValueKind::Frac)?.unwrap_or(DFL_LOAD),
            speed: g.text("speed").unwrap_or(DFL_SPEED).to_string(),
            size_min: g.f64("size-min", ValueKind::Size)?.unwrap_or(0.0),
            size_max: g.f64("size-max", ValueKind::Size)?.unwrap_or(0.0),
            intvs: g.u64("intvs", ValueKind::Int)?.unwrap_or(DFL_TUNE_INTVS),
            isol_pct: g.text("isol-pct").unwrap_or(DFL_ISOL_PCT).to_string(),
            isol_thr: g.f64("isol-thr", ValueKind::Frac)?.unwrap_or(DFL_ISOL_THR),
            search: g
                .text("search")
                .and_then(Search::parse)
                .unwrap_or(DFL_SEARCH),
            hint: None,
        })
    }
}

/// One scenario group of a spec.
#[derive(Debug, Clone, PartialEq)]
pub enum Scenario {
    MemHog(MemHogProps),
    MemHogTune(TuneProps),
}

/// The protection properties: its scenarios in run order.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtectionProps {
    pub scenarios: Vec<Scenario>,
}

/// What runs when the spec names no scenario: mem-hog at load 1.0, then at 0.8.
pub fn default_scenarios() -> Vec<Scenario> {
    [DFL_LOAD, 0.8]
        .into_iter()
        .map(|load| {
            Scenario::MemHog(MemHogProps {
                loops: DFL_MEM_HOG_LOOPS,
                load,
                speed: DFL_SPEED.to_string(),
            })
        })
        .collect()
}

/// The rules of a spec to run: every scenario group names its scenario, holds only the keys
/// that scenario takes, no zero counts or load, and a tune range that is one.
pub fn check(spec: &JobSpec) -> Result<ProtectionProps, SpecError> {
    let mut scenarios = vec![];
    for g in spec.later_groups() {
        let Some(scenario) = g.text("scenario") else {
            return Err(
                g.err("missing scenario (accepted: scenario=mem-hog or scenario=mem-hog-tune)")
            );
        };
        let keys = match scenario {
            "mem-hog" => MEM_HOG_KEYS,
            _ => MEM_HOG_TUNE_KEYS,
        };
        if let Some(key) = g.props().keys().find(|k| !keys.contains(&k.as_str())) {
            return Err(g.err(format!(
                "{} does not apply to scenario={}; valid: {}",
                key,
                scenario,
                keys.join(", ")
            )));
        }
        g.nonzero("loops", ValueKind::Int)?;
        g.nonzero("load", ValueKind::Frac)?;
        g.nonzero("intvs", ValueKind::Int)?;
        if scenario == "mem-hog-tune" {
            let min = g.f64("size-min", ValueKind::Size)?;
            let Some(max) = g.f64("size-max", ValueKind::Size)? else {
                return Err(g.err("scenario=mem-hog-tune needs size-max, e.g. size-max=16G"));
            };
            if min.is_some_and(|min| max < min) {
                return Err(g.err(format!(
                    "size-max={} must not be smaller than size-min={}",
                    g.text("size-max").unwrap_or_default(),
                    g.text("size-min").unwrap_or_default()
                )));
            }
            scenarios.push(Scenario::MemHogTune(TuneProps::read(&g)?));
        } else {
            scenarios.push(Scenario::MemHog(MemHogProps::read(&g)?));
        }
    }
    if scenarios.is_empty() {
        scenarios = default_scenarios();
    }
    Ok(ProtectionProps { scenarios })
}
