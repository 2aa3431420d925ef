//! How sure a solution is: a bootstrap over the measured configurations. Each resample draws
//! the configurations (the vrates measured, every series' points at one vrate together, as
//! one iocost-qos run measured them) with replacement, refits the series the rules read and
//! solves again; a solution's 90 % interval is the 5th to 95th percentile of its resampled
//! values. The seed is fixed, so the same data gives the same intervals.
//!
//! A solution is *unstable* when it is missing from more than a tenth of the resamples, or
//! when the fit of the series it reads has another number of segments in more than half of
//! them (the fit flips between shapes: the answer depends on which points were measured).

use super::model::{DataPoint, IocostTuneResult};
use super::rules::{QosRule, QosTarget};
use super::sel::DataSel;
use super::solve::{refit, solve_target, Data};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// The bootstrap's parameters.
#[derive(Debug, Clone, Copy)]
pub struct BootOpts {
    pub resamples: usize,
    pub seed: u64,
    /// The interval's coverage (0.9: from the 5th to the 95th percentile).
    pub level: f64,
}

pub const DFL_BOOT: BootOpts = BootOpts {
    resamples: 200,
    seed: 0x5eed_10c0,
    level: 0.9,
};

/// Missing from more than this share of the resamples: unstable.
const UNSTABLE_MISSING: f64 = 0.1;
/// A fit of another shape in more than this share (the whole grid's shape isn't even the
/// resamples' majority): unstable.
const UNSTABLE_SHAPE: f64 = 0.5;

/// An interval's ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub lo: f64,
    pub hi: f64,
}

/// One solution's spread over the resamples. Vrates in percent of the measured model (the
/// x axis of the series), latencies in µs as io.cost takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct SolutionSpread {
    /// The solution's vrate range from all the points.
    pub vrate: (f64, f64),
    pub vrate_min: Bounds,
    pub vrate_max: Bounds,
    /// `None` where the solution sets no read (write) latency.
    pub rlat: Option<Bounds>,
    pub wlat: Option<Bounds>,
    /// The share of resamples that had the solution.
    pub found: f64,
    /// The share of resamples whose fit of the solution's main series had another number
    /// of segments than the fit of all the points.
    pub shape_changed: f64,
}

impl SolutionSpread {
    pub fn unstable(&self) -> bool {
        1.0 - self.found > UNSTABLE_MISSING || self.shape_changed > UNSTABLE_SHAPE
    }
}

/// What one solve gives for a rule: vrate range in percent of the model, latencies in µs.
#[derive(Debug, Clone, Copy)]
struct Answer {
    min: f64,
    max: f64,
    rlat: u64,
    wlat: u64,
}

/// The series a rule's solution mostly hangs on (whose fit shape is watched).
fn main_sel(t: &QosTarget) -> DataSel {
    match t {
        QosTarget::VrateRange(..) => DataSel::RLat("99".into(), "mean".into()),
        QosTarget::MofMax => DataSel::Mof,
        QosTarget::AmofMax | QosTarget::AmofMaxVrate | QosTarget::IsolatedBandwidth => {
            DataSel::Amof
        }
        QosTarget::AmofDeltaMin => DataSel::AmofDelta,
        QosTarget::LatRange(sel, _) => sel.clone(),
    }
}

/// The series any solve reads: the rules' own, MOF (the margin), isolation (which limits the
/// aMOF series) and the p99 means (the latencies of fixed-vrate solutions).
fn needed(rules: &[QosRule]) -> Vec<DataSel> {
    let mut v = vec![
        DataSel::Mof,
        DataSel::Isol,
        DataSel::RLat("99".into(), "mean".into()),
        DataSel::WLat("99".into(), "mean".into()),
    ];
    for r in rules {
        v.extend(r.target.sels());
        v.push(main_sel(&r.target));
    }
    v.sort();
    v.dedup();
    v
}

/// Solves every rule on `data` (refitted in place); the answers and the main series'
/// segment counts by rule name.
fn answers(
    data: &mut Data,
    rules: &[QosRule],
    scale: (f64, f64),
    isol_thr: f64,
) -> BTreeMap<String, (Answer, usize)> {
    refit(data, isol_thr);
    let mut out = BTreeMap::new();
    for r in rules {
        if let Ok(Some((q, _))) = solve_target(&r.target, data, scale) {
            let segs = data
                .get(&main_sel(&r.target))
                .map_or(0, |s| s.lines.points.len());
            let a = Answer {
                min: q.min,
                max: q.max,
                rlat: q.rlat,
                wlat: q.wlat,
            };
            out.insert(r.name.clone(), (a, segs));
        }
    }
    out
}

/// The `q` quantile of sorted values, interpolated between neighbours.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (i, f) = (pos.floor() as usize, pos.fract());
    match sorted.get(i + 1) {
        Some(next) => sorted[i] + (next - sorted[i]) * f,
        None => sorted[i],
    }
}

fn bounds(mut v: Vec<f64>, level: f64) -> Bounds {
    v.sort_by(|a, b| a.total_cmp(b));
    let tail = (1.0 - level) / 2.0;
    Bounds {
        lo: quantile(&v, tail),
        hi: quantile(&v, 1.0 - tail),
    }
}

/// The configurations of `data`: its distinct vrates, sorted.
pub fn configs(data: &Data) -> Vec<f64> {
    let mut xs: Vec<f64> = data
        .values()
        .flat_map(|s| s.data.iter().chain(&s.outliers).map(|p| p.x))
        .collect();
    xs.sort_by(|a, b| a.total_cmp(b));
    xs.dedup();
    xs
}

/// `res` with only the points at the vrates `keep` takes (rejected points put back first).
pub fn only_at(res: &IocostTuneResult, keep: &dyn Fn(f64) -> bool) -> IocostTuneResult {
    let mut out = res.clone();
    for s in out.data.values_mut() {
        s.reset();
        s.data.retain(|p| keep(p.x));
    }
    out.data.retain(|_, s| !s.data.is_empty());
    out
}

/// How often each configuration is taken: the lowest and the highest once each (the grid's
/// range is the user's choice, not a measurement), the others drawn with replacement.
fn draw(rng: &mut ChaCha8Rng, counts: &mut [usize]) {
    let n = counts.len();
    counts.iter_mut().for_each(|c| *c = 0);
    if n <= 2 {
        counts.iter_mut().for_each(|c| *c = 1);
        return;
    }
    counts[0] = 1;
    counts[n - 1] = 1;
    for _ in 2..n {
        counts[rng.gen_range(0..n)] += 1;
    }
}

/// `data` with each configuration's points taken `counts[i]` times.
fn resampled(data: &Data, xs: &[f64], counts: &[usize]) -> Data {
    let times = |x: f64| {
        xs.binary_search_by(|c| c.total_cmp(&x))
            .map_or(0, |i| counts[i])
    };
    data.iter()
        .map(|(sel, s)| {
            let mut pts: Vec<DataPoint> = Vec::new();
            for p in s.data.iter().chain(&s.outliers) {
                pts.extend(std::iter::repeat_n(*p, times(p.x)));
            }
            let series = super::model::DataSeries {
                data: pts,
                ..Default::default()
            };
            (sel.clone(), series)
        })
        .collect()
}

/// The spread of every solution `rules` find on all of `res`'s points (a rule without a
/// solution there has none). Only the series a solve reads are refitted.
pub fn spreads(
    res: &IocostTuneResult,
    rules: &[QosRule],
    scale: (f64, f64),
    opts: BootOpts,
) -> BTreeMap<String, SolutionSpread> {
    let sels = needed(rules);
    let data: Data = res
        .data
        .iter()
        .filter(|(sel, _)| sels.contains(sel))
        .map(|(sel, s)| (sel.clone(), s.clone()))
        .collect();
    let full = answers(&mut data.clone(), rules, scale, res.isol_thr);
    let xs = configs(&data);
    if xs.is_empty() || full.is_empty() {
        return BTreeMap::new();
    }
    // All draws first, so that the answers don't depend on how the work is split.
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let draws: Vec<Vec<usize>> = (0..opts.resamples)
        .map(|_| {
            let mut counts = vec![0; xs.len()];
            draw(&mut rng, &mut counts);
            counts
        })
        .collect();
    let solve_all = |draws: &[Vec<usize>]| -> Vec<BTreeMap<String, (Answer, usize)>> {
        draws
            .iter()
            .map(|counts| {
                answers(
                    &mut resampled(&data, &xs, counts),
                    rules,
                    scale,
                    res.isol_thr,
                )
            })
            .collect()
    };
    // A merge of several runs has many configurations, and the fits grow steeply with them.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = draws.len().div_ceil(threads).max(1);
    let per_draw: Vec<BTreeMap<String, (Answer, usize)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = draws
            .chunks(chunk)
            .map(|c| sc.spawn(move || solve_all(c)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut got: BTreeMap<&str, Vec<(Answer, usize)>> = BTreeMap::new();
    for answers in per_draw {
        for (name, a) in answers {
            if let Some((k, _)) = full.get_key_value(&name) {
                got.entry(k.as_str()).or_default().push(a);
            }
        }
    }
    full.iter()
        .map(|(name, (a, segs))| {
            let v = got.remove(name.as_str()).unwrap_or_default();
            let n = opts.resamples.max(1) as f64;
            let spread = |f: fn(&Answer) -> f64, full: f64| {
                if v.is_empty() {
                    Bounds { lo: full, hi: full }
                } else {
                    bounds(v.iter().map(|(a, _)| f(a)).collect(), opts.level)
                }
            };
            // Whole µs, as io.cost takes them.
            let lat = |f: fn(&Answer) -> f64, full: u64| {
                (full > 0).then(|| {
                    let b = spread(f, full as f64);
                    Bounds {
                        lo: b.lo.round(),
                        hi: b.hi.round(),
                    }
                })
            };
            let s = SolutionSpread {
                vrate: (a.min, a.max),
                vrate_min: spread(|a| a.min, a.min),
                vrate_max: spread(|a| a.max, a.max),
                rlat: lat(|a| a.rlat as f64, a.rlat),
                wlat: lat(|a| a.wlat as f64, a.wlat),
                found: v.len() as f64 / n,
                shape_changed: v.iter().filter(|(_, s)| s != segs).count() as f64 / n,
            };
            (name.clone(), s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::iocost_tune::model::DataSeries;

    fn series(pts: Vec<DataPoint>) -> DataSeries {
        DataSeries {
            data: pts,
            ..Default::default()
        }
    }

    /// A standard normal draw (Box–Muller).
    fn normal(rng: &mut ChaCha8Rng) -> f64 {
        let (u, v): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    /// The true read p99: 1 ms up to vrate 40, rising to 3 ms at 60, flat after.
    fn true_rlat(x: f64) -> f64 {
        0.001 + 0.002 * ((x - 40.0) / 20.0).clamp(0.0, 1.0)
    }

    /// One run of a 20-point grid with noise of `sd` (relative) around the true lines.
    fn noisy_run(seed: u64, sd: f64) -> IocostTuneResult {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Dithered, as the iocost-qos runs iocost-tune asks for: another grid each run.
        let off: f64 = rng.gen_range(0.0..5.0);
        let xs: Vec<f64> = (1..=20).map(|i| i as f64 * 5.0 - off).collect();
        let mut pts = |f: &dyn Fn(f64) -> f64| -> Vec<DataPoint> {
            xs.iter()
                .map(|&x| DataPoint::new(x, f(x) * (1.0 + sd * normal(&mut rng))))
                .collect()
        };
        let mut data = Data::new();
        data.insert(
            DataSel::RLat("99".into(), "mean".into()),
            series(pts(&true_rlat)),
        );
        data.insert(
            DataSel::WLat("99".into(), "mean".into()),
            series(pts(&|_| 0.002)),
        );
        data.insert(DataSel::Mof, series(pts(&|_| 1.5)));
        IocostTuneResult {
            data,
            isol_thr: 0.9,
            ..Default::default()
        }
    }

    fn q2_rule() -> Vec<QosRule> {
        vec![QosRule {
            name: "q2".into(),
            target: QosTarget::LatRange(DataSel::RLat("99".into(), "mean".into()), (0.5, 0.75)),
        }]
    }

    #[test]
    fn intervals_cover_the_true_solution_at_about_their_level() {
        // The true q2 range: half to three quarters of the slope from 40 to 60.
        let (lo, hi) = (50.0, 55.0);
        let opts = BootOpts {
            resamples: 100,
            ..DFL_BOOT
        };
        let (mut covered, mut ends, mut width) = (0, 0, 0.0);
        for seed in 0..40 {
            // Noise of the size the community's latency series have.
            let s = spreads(&noisy_run(seed, 0.3), &q2_rule(), (1.0, 100.0), opts);
            let s = &s["q2"];
            for (b, truth) in [(s.vrate_min, lo), (s.vrate_max, hi)] {
                ends += 1;
                covered += (b.lo <= truth && truth <= b.hi) as usize;
                width += b.hi - b.lo;
            }
        }
        let rate = covered as f64 / ends as f64;
        // 90 % nominal; 80 draws leave a few points of sampling error either way.
        assert!((0.8..=0.99).contains(&rate), "coverage {}", rate);
        // And they say something: about a quarter of the range at this noise.
        assert!(
            width / (ends as f64) < 30.0,
            "mean width {}",
            width / ends as f64
        );
    }

    #[test]
    fn less_noise_gives_narrower_intervals_and_the_same_seed_the_same_ones() {
        let width = |sd: f64| -> f64 {
            (0..10)
                .map(|seed| {
                    let s = spreads(&noisy_run(seed, sd), &q2_rule(), (1.0, 100.0), DFL_BOOT);
                    let s = &s["q2"];
                    s.vrate_min.hi - s.vrate_min.lo + s.vrate_max.hi - s.vrate_max.lo
                })
                .sum()
        };
        assert!(
            width(0.02) < width(0.4) / 2.0,
            "{} {}",
            width(0.02),
            width(0.4)
        );
        let a = spreads(&noisy_run(3, 0.1), &q2_rule(), (1.0, 100.0), DFL_BOOT);
        let b = spreads(&noisy_run(3, 0.1), &q2_rule(), (1.0, 100.0), DFL_BOOT);
        assert_eq!(a, b);
        let s = &a["q2"];
        assert!(s.rlat.is_some() && s.wlat.is_none());
        assert!(s.vrate_min.lo <= s.vrate.0 && s.vrate.0 <= s.vrate_min.hi);
    }

    #[test]
    fn a_solution_missing_from_many_resamples_is_unstable() {
        // The read latency rises only at two configurations near the top: resamples without
        // both have no slope to solve on.
        let mut res = noisy_run(1, 0.0);
        let pts: Vec<DataPoint> = (1..=20)
            .map(|i| {
                let y = if i == 18 || i == 19 { 0.003 } else { 0.001 };
                DataPoint::new(i as f64 * 5.0, y)
            })
            .collect();
        res.data
            .insert(DataSel::RLat("99".into(), "mean".into()), series(pts));
        let s = spreads(&res, &q2_rule(), (1.0, 100.0), DFL_BOOT);
        let s = s.get("q2").expect("a solution on all the points");
        assert!(s.found < 0.9 && s.unstable(), "{:?}", s);
        let solid = spreads(&noisy_run(1, 0.1), &q2_rule(), (1.0, 100.0), DFL_BOOT);
        assert!(!solid["q2"].unstable(), "{:?}", solid["q2"]);
        assert!(quantile(&[1.0, 2.0, 3.0], 0.5) == 2.0 && quantile(&[1.0, 3.0], 0.25) == 1.5);
    }
}
