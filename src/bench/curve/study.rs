//! From the record to the answer: each point's numbers as mean and spread over the
//! repetitions, the knee, and the latency target's highest rate (or queue depth).

use super::points::knee;
use super::props::{LatTarget, Mode};
use super::record::{CurveRecord, PointOut};
use super::run::{bisection, curve_meets, meets};
use super::search::{bracket, Bracket};
use crate::study::dist::mean_stdev;
use serde::{Deserialize, Serialize};

/// A number over the repetitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub mean: f64,
    pub stdev: f64,
}

impl Stat {
    fn of(v: impl Iterator<Item = f64>) -> Stat {
        let v: Vec<f64> = v.collect();
        let (mean, stdev) = mean_stdev(&v);
        Stat { mean, stdev }
    }
}

/// One point of the curve over the repetitions. Latencies in ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The spec's point: % of the max run, or the queue depth; `None` for the max run.
    pub point: Option<f64>,
    pub target_iops: Option<f64>,
    pub qd: u32,
    pub runs: usize,
    pub iops: Stat,
    pub bps: Stat,
    pub lat_mean: Stat,
    /// `[percentile, stat]`, as the points kept them.
    pub lat_pcts: Vec<(f64, Stat)>,
    pub lat_max: Stat,
    /// `[percentile, stat]` of the completion latency (empty for old records).
    #[serde(default)]
    pub clat_pcts: Vec<(f64, Stat)>,
    pub depth_little: Stat,
    pub depth_device: Option<Stat>,
    pub cpu: Stat,
    /// Every repetition reached the rate asked (closed loops always do).
    pub reached: bool,
}

impl Row {
    fn of(point: Option<f64>, pts: &[&PointOut]) -> Option<Row> {
        let first = *pts.first()?;
        let s = |f: &dyn Fn(&PointOut) -> f64| Stat::of(pts.iter().map(|p| f(p)));
        let devs: Option<Vec<f64>> = pts.iter().map(|p| p.depth_device).collect();
        Some(Row {
            point,
            target_iops: first.target_iops,
            qd: first.qd,
            runs: pts.len(),
            iops: s(&|p| p.iops),
            bps: s(&|p| p.bps),
            lat_mean: s(&|p| p.lat_mean_ns),
            lat_pcts: first
                .lat_pcts
                .iter()
                .map(|&(pct, _)| (pct, s(&|p| p.lat(Some(pct)).unwrap_or(0.0))))
                .collect(),
            lat_max: s(&|p| p.lat_max_ns as f64),
            clat_pcts: first
                .clat_pcts
                .iter()
                .map(|&(pct, _)| (pct, s(&|p| p.clat(pct).unwrap_or(0.0))))
                .collect(),
            depth_little: s(&|p| p.depth_little),
            depth_device: devs.map(|v| Stat::of(v.into_iter())),
            cpu: s(&|p| p.cpu),
            reached: pts.iter().all(|p| p.reached()),
        })
    }

    /// The mean completion latency at `pct`, ns, when the points kept it.
    pub fn clat(&self, pct: f64) -> Option<f64> {
        self.clat_pcts
            .iter()
            .find(|x| (x.0 - pct).abs() < 1e-9)
            .map(|x| x.1.mean)
    }

    /// The mean latency at `pct` (`None`: the mean latency), ns.
    pub fn lat(&self, pct: Option<f64>) -> Option<f64> {
        match pct {
            None => Some(self.lat_mean.mean),
            Some(p) => self
                .lat_pcts
                .iter()
                .find(|x| (x.0 - p).abs() < 1e-9)
                .map(|x| x.1.mean),
        }
    }
}

/// What the latency target's search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetAnswer {
    /// As given: `p99/2ms`.
    pub target: String,
    /// `met`: `x` is the highest rate (IOPS asked) or queue depth that met it; `below`: even
    /// the lowest point missed it; `all`: every point met it (`x` is the highest point's).
    pub outcome: String,
    pub x: Option<f64>,
    /// The achieved IOPS and the latency the target names at `x`, ns.
    pub iops: Option<f64>,
    pub lat_ns: Option<f64>,
    /// The bisection's probes (with the curve points that bracket it, where the answer lies).
    pub probes: usize,
    /// The bracket the search ended with: `[lo, hi]`.
    pub bracket: Option<(f64, f64)>,
    /// With `below`: the lowest point above that met the target anyway (a curve that isn't
    /// monotonic, noise), so the report doesn't say it was missed everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_above: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurveResult {
    pub mode: String,
    pub target: std::path::PathBuf,
    pub max: Option<Row>,
    pub rows: Vec<Row>,
    pub knee_factor: f64,
    /// Index into `rows`.
    pub knee: Option<usize>,
    pub lat_target: Option<TargetAnswer>,
    /// The engine's job as the max run (or the first point) ran it, for the report's header.
    pub job: Option<crate::workload::ioengine::job::IoJob>,
}

fn mode_of(rec: &CurveRecord) -> Mode {
    if rec.mode == "qd" {
        Mode::Qd
    } else {
        Mode::Rate
    }
}

pub fn study(rec: &CurveRecord) -> CurveResult {
    let maxes: Vec<&PointOut> = rec.runs.iter().filter_map(|r| r.max.as_ref()).collect();
    let rows: Vec<Row> = rec
        .points
        .iter()
        .enumerate()
        .filter_map(|(k, &x)| {
            let pts: Vec<&PointOut> = rec.runs.iter().filter_map(|r| r.points.get(k)).collect();
            Row::of(Some(x), &pts)
        })
        .collect();
    let p99: Vec<f64> = rows
        .iter()
        .map(|r| r.lat(Some(99.0)).unwrap_or(0.0))
        .collect();
    CurveResult {
        mode: rec.mode.clone(),
        target: rec.target.clone(),
        max: Row::of(None, &maxes),
        knee: knee(&p99, rec.knee),
        knee_factor: rec.knee,
        lat_target: rec
            .lat_target
            .as_deref()
            .and_then(|t| LatTarget::parse(t).ok().map(|lt| (t, lt)))
            .map(|(text, lt)| answer(rec, text, &lt)),
        rows,
        job: rec.job.clone(),
    }
}

fn answer(rec: &CurveRecord, text: &str, t: &LatTarget) -> TargetAnswer {
    let mode = mode_of(rec);
    let curve = curve_meets(rec, mode, t);
    let mut a = TargetAnswer {
        target: text.to_string(),
        outcome: String::new(),
        x: None,
        iops: None,
        lat_ns: None,
        probes: rec.probes.len(),
        bracket: None,
        met_above: None,
    };
    // The point or probe at x, for its achieved rate and latency.
    let at = |x: f64| -> Option<&PointOut> {
        rec.probes
            .iter()
            .filter(|p| p.x == x)
            .map(|p| &p.point)
            .chain(
                rec.runs
                    .iter()
                    .flat_map(|r| r.points.iter())
                    .filter(|p| match mode {
                        Mode::Rate => p.target_iops == Some(x),
                        Mode::Qd => p.qd as f64 == x,
                    }),
            )
            .find(|p| meets(p, t))
    };
    let x = match bracket(&curve) {
        Bracket::BelowLowest => {
            a.outcome = "below".into();
            a.met_above = curve.iter().find(|p| p.1).map(|p| p.0);
            None
        }
        Bracket::AtHighest(x) => {
            a.outcome = "all".into();
            Some(x)
        }
        Bracket::Between { .. } => {
            a.outcome = "met".into();
            // The bisection replayed over the probes: its `lo` is the answer.
            let b = bisection(rec, mode, u32::MAX, t);
            a.bracket = b.as_ref().map(|b| (b.lo, b.hi));
            b.map(|b| b.lo)
        }
    };
    if let Some(x) = x {
        a.x = Some(x);
        if let Some(p) = at(x) {
            a.iops = Some(p.iops);
            a.lat_ns = p.lat(t.pct);
        }
    }
    a
}
