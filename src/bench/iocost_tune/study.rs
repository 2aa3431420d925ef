//! The data series iocost-tune fits, collected from an iocost-qos run as upstream collects
//! them: one point per configuration pinned to a single vrate (`min` = `max`, nothing else
//! overridden, io.cost on), its value read by the selector from that configuration's record
//! and result. The tune's isolation percentile and threshold come from the first
//! configuration's mem-hog-tune.

use super::model::{DataPoint, DataSeries, IocostTuneResult};
use super::rules::QosRule;
use super::sel::DataSel;
use crate::bench::iocost_qos::record::{IoCostQosResult, QosRecord, QosRun, RunResult};
use crate::bench::protection::record::ScenarioRecord;
use crate::bench::protection::result::{MemHogResult, ScenarioResult};
use std::collections::{BTreeMap, BTreeSet};

/// Upstream's defaults when the record has no tune.
const DFL_ISOL: (&str, f64) = ("05", 0.9);

/// The series collected by default, before the properties and rules add theirs.
pub fn default_sels() -> BTreeSet<DataSel> {
    let lat = |rw: fn(String, String) -> DataSel| {
        [
            ("50", "mean"),
            ("99", "mean"),
            ("50", "99"),
            ("99", "99"),
            ("50", "100"),
            ("100", "100"),
        ]
        .map(|(l, t)| rw(l.into(), t.into()))
    };
    [
        DataSel::Mof,
        DataSel::Amof,
        DataSel::AmofDelta,
        DataSel::Isol,
        DataSel::LatImp,
        DataSel::WorkCsv,
    ]
    .into_iter()
    .chain(lat(DataSel::RLat))
    .chain(lat(DataSel::WLat))
    .collect()
}

/// The defaults, the selectors given as properties and what the rules read.
pub fn sels(extra: &BTreeSet<DataSel>, rules: &[QosRule]) -> BTreeSet<DataSel> {
    let mut s = default_sels();
    s.extend(extra.iter().cloned());
    for r in rules {
        s.extend(r.target.sels());
    }
    s
}

/// The vrate a configuration is pinned to, if it is.
fn pinned_vrate(run: &QosRun) -> Option<f64> {
    let o = &run.ovr;
    match (o.off, o.rpct, o.rlat, o.wpct, o.wlat, o.min, o.max) {
        (false, None, None, None, None, Some(min), Some(max)) if min == max => Some(min),
        _ => None,
    }
}

/// The final run of the configuration's tune (none: the protection bench failed).
fn tune_run<'a>(rec: &QosRun, res: &'a RunResult) -> Option<&'a MemHogResult> {
    if rec.prot.scenarios.is_empty() {
        return None;
    }
    match res.prot.scenarios.first()? {
        ScenarioResult::MemHogTune(t) => t.final_run.as_ref(),
        ScenarioResult::MemHog(_) => None,
    }
}

/// `[read, write]`: latency percentile → time percentile → seconds.
type IoLatTables = [BTreeMap<String, BTreeMap<String, f64>>; 2];

fn iolat(res: &RunResult) -> Option<IoLatTables> {
    let raw = res.stor.iolat.as_ref()?;
    serde_json::from_str(raw.get()).ok()
}

/// One selector's value for one configuration; `None` leaves the configuration out.
fn select(sel: &DataSel, rec: &QosRun, res: &RunResult, isol_pct: &str) -> Option<f64> {
    let hog = tune_run(rec, res);
    let lat =
        |rw: usize, l: &str, t: &str| -> Option<f64> { iolat(res)?[rw].get(l)?.get(t).copied() };
    match sel {
        DataSel::Mof => Some(res.stor.mem_offload_factor),
        DataSel::Amof => res.adjusted_mem_offload_factor,
        DataSel::AmofDelta => res.adjusted_mem_offload_delta,
        DataSel::Isol => hog?.isol.get(isol_pct),
        DataSel::IsolPct(p) => hog?.isol.get(p),
        // A failed protection bench counts as no isolation at all.
        DataSel::IsolMean => Some(hog.and_then(|h| h.isol.get("mean")).unwrap_or(0.0)),
        DataSel::LatImp => hog?.lat_imp.get("mean"),
        DataSel::WorkCsv => hog.map(|h| h.work_csv),
        DataSel::Missing => Some(crate::study::reports::missing_ratio(res.nr_reports)),
        DataSel::RLat(l, t) => lat(0, l, t),
        DataSel::WLat(l, t) => lat(1, l, t),
    }
}

/// The result before solving: base model and QoS, the tune's isolation settings and one
/// series per selector.
pub fn collect(
    rec: &QosRecord,
    res: &IoCostQosResult,
    sels: &BTreeSet<DataSel>,
) -> IocostTuneResult {
    let (isol_pct, isol_thr) = match rec.runs.first() {
        Some(Some(run)) => match run.prot.scenarios.first() {
            Some(ScenarioRecord::MemHogTune(t)) => (t.isol_pct.clone(), t.isol_thr),
            _ => (DFL_ISOL.0.to_string(), DFL_ISOL.1),
        },
        _ => (DFL_ISOL.0.to_string(), DFL_ISOL.1),
    };
    // Upstream pairs the finished records and results in order, each list on its own.
    let pairs: Vec<(&QosRun, &RunResult)> = rec
        .runs
        .iter()
        .flatten()
        .zip(res.runs.iter().flatten())
        .collect();
    let mut data = BTreeMap::new();
    for sel in sels {
        let mut s = DataSeries::default();
        for (rr, rs) in &pairs {
            let (Some(v), Some(y)) = (pinned_vrate(rr), select(sel, rr, rs, &isol_pct)) else {
                continue;
            };
            s.data.push(DataPoint::new(v, y));
        }
        super::fit::sort_points(&mut s.data);
        data.insert(sel.clone(), s);
    }
    IocostTuneResult {
        base_model: rec.base_model.clone(),
        base_qos: rec.base_qos.clone(),
        mem_profile: rec.mem_profile,
        isol_pct,
        isol_thr,
        data,
        ..Default::default()
    }
}
