//! `__tune-check FILE...`: how well the iocost-tune intervals are calibrated. Per file, the
//! solutions of the whole grid, then for each half of it (every other configuration, the
//! even ones and the odd ones) the bootstrap intervals, and whether each interval holds the
//! whole grid's value. One JSON object a line; `scripts/tune-intervals` sums them up.

use crate::bench::iocost_tune::interval::{
    configs, only_at, spreads, BootOpts, Bounds, SolutionSpread, DFL_BOOT,
};
use crate::bench::iocost_tune::model::IocostTuneResult;
use crate::bench::iocost_tune::rules::QosTarget;
use crate::bench::iocost_tune::IocostTuneProps;
use crate::cli::testaid::TuneCheckArgs;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// The iocost-tune entry of a result file: its data and its props.
pub fn load(path: &Path) -> Result<(IocostTuneResult, IocostTuneProps)> {
    let entries = crate::result::load_entries(path)?;
    let e = entries
        .iter()
        .find(|e| e.spec.kind == "iocost-tune" && e.result.is_some())
        .with_context(|| format!("{}: no iocost-tune result", path.display()))?;
    let res: IocostTuneResult = crate::format::parse_result_opt(e)?.context("no result")?;
    let props = IocostTuneProps::read(&e.spec)
        .map_err(|err| anyhow::anyhow!("{}: {}", path.display(), err.msg))?;
    Ok((res, props))
}

fn inside(b: &Bounds, v: f64) -> bool {
    // A hair of slack for values that went through two-decimal rounding elsewhere.
    b.lo - 1e-9 <= v && v <= b.hi + 1e-9
}

fn check(full: &SolutionSpread, half: &SolutionSpread) -> Value {
    json!({
        "full": [full.vrate.0, full.vrate.1],
        "half": [half.vrate.0, half.vrate.1],
        "min": [half.vrate_min.lo, half.vrate_min.hi],
        "max": [half.vrate_max.lo, half.vrate_max.hi],
        "min_inside": inside(&half.vrate_min, full.vrate.0),
        "max_inside": inside(&half.vrate_max, full.vrate.1),
        "found": half.found,
        "shape_changed": half.shape_changed,
        "unstable": half.unstable(),
    })
}

fn one(path: &Path, opts: BootOpts) -> Result<Value> {
    let (res, props) = load(path)?;
    let t = Instant::now();
    let full = spreads(&res, &props.rules, props.scale, opts);
    let secs = t.elapsed().as_secs_f64();
    let xs = configs(&res.data);
    let naive: Vec<&str> = props
        .rules
        .iter()
        .filter(|r| matches!(r.target, QosTarget::VrateRange(..)))
        .map(|r| r.name.as_str())
        .collect();
    let mut halves = Vec::new();
    for parity in 0..2 {
        let keep: Vec<f64> = xs.iter().skip(parity).step_by(2).copied().collect();
        let half = spreads(
            &only_at(&res, &|x| keep.contains(&x)),
            &props.rules,
            props.scale,
            opts,
        );
        let mut sols = serde_json::Map::new();
        for (name, f) in &full {
            if naive.contains(&name.as_str()) {
                continue;
            }
            let v = match half.get(name) {
                Some(h) => check(f, h),
                None => json!(null),
            };
            sols.insert(name.clone(), v);
        }
        halves.push(Value::Object(sols));
    }
    let widths: Vec<f64> = full
        .iter()
        .filter(|(name, _)| !naive.contains(&name.as_str()))
        .flat_map(|(_, f)| {
            [
                f.vrate_min.hi - f.vrate_min.lo,
                f.vrate_max.hi - f.vrate_max.lo,
            ]
        })
        .collect();
    let unstable: Vec<&String> = full
        .iter()
        .filter(|(name, f)| f.unstable() && !naive.contains(&name.as_str()))
        .map(|(n, _)| n)
        .collect();
    Ok(json!({
        "file": path.display().to_string(),
        "configs": xs.len(),
        "full_widths": widths,
        "full_unstable": unstable,
        "secs": secs,
        "halves": halves,
    }))
}

pub fn run(a: &TuneCheckArgs) -> Result<()> {
    let opts = BootOpts {
        resamples: a.resamples,
        ..DFL_BOOT
    };
    for f in &a.files {
        match one(f, opts) {
            Ok(v) => println!("{}", v),
            Err(e) => eprintln!("{:#}", e),
        }
    }
    Ok(())
}
