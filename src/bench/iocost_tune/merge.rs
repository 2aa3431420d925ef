//! Merging iocost-tune results of one device model from many hosts, as upstream does: the
//! io.cost models the hosts measured are pooled (with more than three distinct ones, a model
//! with any parameter that Chauvenet's criterion finds too high is an outlier and its
//! sources are rejected), the merged header carries the per-parameter median model, every
//! accepted source's data points are pooled per series, and the pool is solved with the
//! default rules.

use super::fit::{mean, stdev};
use super::model::{IocostTuneRecord, IocostTuneResult};
use super::rules;
use super::solve::{solve, DFL_SCALE};
use crate::bench::merge::src::MergeSrc;
use crate::result::Entry;
use crate::spec::JobSpec;
use anyhow::{bail, Result};
use serde_json::Value;
use statrs::distribution::{ContinuousCDF, Normal};
use std::collections::{BTreeMap, BTreeSet};

const PARAMS: [&str; 6] = [
    "rbps",
    "rseqiops",
    "rrandiops",
    "wbps",
    "wseqiops",
    "wrandiops",
];

type Model = [u64; 6];

/// The model in a source's sysinfo (`iocost.model`), zeros where missing.
fn model_of(e: &Entry) -> Model {
    let si: Value = serde_json::from_str(e.sysinfo.get()).unwrap_or_default();
    PARAMS.map(|p| si["iocost"]["model"][p].as_u64().unwrap_or(0))
}

/// The distinct models' per-parameter median (outliers left out) and which are outliers.
pub fn merge_models(models: &BTreeSet<Model>) -> (Model, BTreeMap<Model, bool>) {
    let mut outlier: BTreeMap<Model, bool> = models.iter().map(|m| (*m, false)).collect();
    let n = models.len();
    if n > 3 {
        for (i, _) in PARAMS.iter().enumerate() {
            let vals: Vec<f64> = models.iter().map(|m| m[i] as f64).collect();
            if let Ok(dist) = Normal::new(mean(&vals), stdev(&vals)) {
                for (m, v) in models.iter().zip(&vals) {
                    if (1.0 - dist.cdf(*v)) * (n as f64) < 0.5 {
                        outlier.insert(*m, true);
                    }
                }
            }
        }
    }
    let mut median = [0u64; 6];
    for (i, slot) in median.iter_mut().enumerate() {
        let mut vals: Vec<f64> = outlier
            .iter()
            .filter(|(_, o)| !**o)
            .map(|(m, _)| m[i] as f64)
            .collect();
        vals.sort_by(f64::total_cmp);
        *slot = vals.get(vals.len() / 2).map_or(0, |v| v.round() as u64);
    }
    (median, outlier)
}

/// Merges the sources (rejecting those that can't take part, with the reason).
pub fn merge(srcs: &mut [MergeSrc]) -> Result<Entry> {
    let models: BTreeSet<Model> = srcs.iter().map(|s| model_of(&s.entry)).collect();
    let (median, outlier) = merge_models(&models);
    for s in srcs.iter_mut().filter(|s| s.rejected.is_none()) {
        if outlier.get(&model_of(&s.entry)) == Some(&true) {
            s.rejected = Some("model is an outlier".into());
        }
    }
    let mut first: Option<(IocostTuneRecord, IocostTuneResult)> = None;
    let mut data: BTreeMap<_, super::model::DataSeries> = BTreeMap::new();
    for s in srcs.iter_mut().filter(|s| s.rejected.is_none()) {
        let parsed = (
            crate::format::parse_record::<IocostTuneRecord>(&s.entry),
            crate::format::parse_result_opt::<IocostTuneResult>(&s.entry),
        );
        let (rec, res) = match parsed {
            (Ok(Some(rec)), Ok(Some(res))) => (rec, res),
            (Err(e), _) | (_, Err(e)) => {
                s.rejected = Some(format!("failed to parse ({:#})", e));
                continue;
            }
            _ => {
                s.rejected = Some("no record or result".into());
                continue;
            }
        };
        if let Some((_, f)) = &first {
            if (f.mem_profile, &f.isol_pct, f.isol_thr)
                != (res.mem_profile, &res.isol_pct, res.isol_thr)
            {
                s.rejected = Some(format!(
                    "memory profile {} and isolation {}/{} differ from the first source's",
                    res.mem_profile, res.isol_pct, res.isol_thr
                ));
                continue;
            }
        }
        for (sel, mut ds) in res.data.clone() {
            let dst = data.entry(sel).or_default();
            dst.data.append(&mut ds.data);
            dst.outliers.append(&mut ds.outliers);
        }
        if first.is_none() {
            first = Some((rec, res));
        }
    }
    let Some((rec, res)) = first else {
        bail!("no valid result to merge");
    };
    let res = IocostTuneResult {
        data,
        solutions: Default::default(),
        remarks: Default::default(),
        ..res
    };
    let rules = rules::rules(&[]).map_err(|(_, e)| anyhow::anyhow!(e))?;
    let res = solve(res, &rules, DFL_SCALE);
    let Some(first_src) = MergeSrc::accepted(srcs).next() else {
        bail!("no valid result to merge");
    };
    let mut sysinfo: Value = serde_json::from_str(first_src.entry.sysinfo.get())?;
    if let Some(m) = sysinfo
        .get_mut("iocost")
        .and_then(|i| i.get_mut("model"))
        .and_then(Value::as_object_mut)
    {
        for (p, v) in PARAMS.iter().zip(median) {
            m.insert(p.to_string(), v.into());
        }
    }
    let raw = |v: &Value| serde_json::value::to_raw_value(v);
    Ok(Entry {
        spec: JobSpec {
            kind: "iocost-tune".into(),
            id: None,
            passive: None,
            props: vec![Default::default()],
        },
        period: MergeSrc::period(srcs),
        sysinfo: raw(&sysinfo)?,
        record: Some(raw(&serde_json::to_value(&rec)?)?),
        result: Some(raw(&serde_json::to_value(&res)?)?),
        incomplete: false,
        unknown: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_far_above_the_others_is_an_outlier_and_the_median_skips_it() {
        let m = |r: u64, s: u64, w: u64| [r << 20, s, s, w << 20, s, s];
        let models: BTreeSet<Model> = [
            m(125, 280, 125),
            m(122, 270, 126),
            m(127, 288, 122),
            [160 << 20, 288, 289, 122 << 20, 300, 260],
        ]
        .into_iter()
        .collect();
        let (median, outlier) = merge_models(&models);
        assert_eq!(outlier.values().filter(|o| **o).count(), 1);
        assert!(outlier[&[160 << 20, 288, 289, 122 << 20, 300, 260]]);
        assert_eq!(median, m(125, 280, 125));
        // Three or fewer: no outliers, the middle one.
        let few: BTreeSet<Model> = [m(1, 1, 1), m(2, 2, 2), m(9, 9, 9)].into_iter().collect();
        let (median, outlier) = merge_models(&few);
        assert!(outlier.values().all(|o| !o));
        assert_eq!(median, m(2, 2, 2));
    }
}
