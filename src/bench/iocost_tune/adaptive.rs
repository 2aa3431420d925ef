//! Where to measure next so that the solutions become sure: the adaptive vrate grid. A coarse
//! pass over the candidate vrates first (evenly spread, the range's ends included, from the top
//! down, at most the budget), then after each configuration the solutions' intervals (see
//! `interval`) say which answer is least sure, and the next vrate is the unmeasured candidate
//! inside that interval farthest from every measured one (a point where the fit has least
//! support; without a solution yet, the candidate farthest from every measured one). It stops
//! when every solution's interval is at most `target` wide, or at `budget` configurations.
//! Pure: the caller measures (iocost-qos) or reveals a stored configuration (the replay).

use super::interval::{spreads, BootOpts, SolutionSpread};
use super::model::IocostTuneResult;
use super::rules::{QosRule, QosTarget};
use std::collections::BTreeMap;

/// The adaptive grid's parameters. Defaults: [`DFL_ADAPTIVE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adaptive {
    /// Configurations of the coarse pass.
    pub coarse: usize,
    /// At most this many configurations in all.
    pub budget: usize,
    /// Done when every interval is at most this wide (vrate points).
    pub target: f64,
}

/// A coarse pass of 5 (30 vrate points apart on iocost-tune's 5–125 grid), at most 12
/// configurations (half of that grid), done at two grid steps (10 vrate points).
pub const DFL_ADAPTIVE: Adaptive = Adaptive {
    coarse: 5,
    budget: 12,
    target: 10.0,
};

/// The configurations an interval needs: the bootstrap keeps the lowest and highest measured
/// vrate in every resample, so with two or fewer every resample is the same.
pub const MIN_CONFIGS: usize = 3;

/// What to do next, and why (for the log and the record).
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Measure { vrate: f64, why: String },
    Stop { why: String },
}

/// The coarse pass: `n` of the sorted candidates, evenly spread; both ends when `n` is 2 or
/// more, the middle one when it is 1.
fn coarse(candidates: &[f64], n: usize) -> Vec<f64> {
    let len = candidates.len();
    if n >= len || len < 2 {
        return candidates.to_vec();
    }
    if n <= 1 {
        return vec![candidates[(len - 1) / 2]];
    }
    let mut out: Vec<f64> = (0..n)
        .map(|i| candidates[(i * (len - 1) + (n - 1) / 2) / (n - 1)])
        .collect();
    out.dedup();
    out
}

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// An end's interval: (width, lo, hi, what it is).
type Wide = (f64, f64, f64, String);

/// The solutions' end intervals, widest first; naive ranges (fixed by their rule) left out.
fn widest(sp: &BTreeMap<String, SolutionSpread>, rules: &[QosRule]) -> Vec<Wide> {
    let mut v: Vec<Wide> = Vec::new();
    for r in rules {
        if matches!(r.target, QosTarget::VrateRange(..)) {
            continue;
        }
        let Some(s) = sp.get(&r.name) else { continue };
        for (end, b) in [("min", s.vrate_min), ("max", s.vrate_max)] {
            v.push((b.hi - b.lo, b.lo, b.hi, format!("{} {}", r.name, end)));
        }
    }
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.3.cmp(&b.3)));
    v
}

/// The coarse pass's next vrate, highest first (as iocost-qos walks its grid, so that each
/// configuration's hints come from the one above it); `None` once it is done. The pass never
/// takes more than the budget.
pub fn coarse_step(candidates: &[f64], measured: &[f64], plan: Adaptive) -> Option<Next> {
    let done = |v: f64| measured.iter().any(|m| near(*m, v));
    coarse(candidates, plan.coarse.min(plan.budget))
        .into_iter()
        .rev()
        .find(|v| !done(*v))
        .map(|v| Next::Measure {
            vrate: v,
            why: "coarse pass".into(),
        })
}

/// The next step, given the candidate vrates (sorted), the ones measured and the data of
/// those (the series' points at the measured vrates).
pub fn next(
    candidates: &[f64],
    measured: &[f64],
    data: &IocostTuneResult,
    rules: &[QosRule],
    scale: (f64, f64),
    plan: Adaptive,
    boot: BootOpts,
) -> Next {
    if let Some(n) = coarse_step(candidates, measured, plan) {
        return n;
    }
    let done = |v: f64| measured.iter().any(|m| near(*m, v));
    // Fewer configurations give no interval: the bootstrap keeps the range's ends.
    let few = measured.len() < MIN_CONFIGS;
    let wide = match few {
        true => Vec::new(),
        false => widest(&spreads(data, rules, scale, boot), rules),
    };
    if wide.first().is_some_and(|w| w.0 <= plan.target) {
        return Next::Stop {
            why: format!("every interval is at most {:.1} wide", plan.target),
        };
    }
    let unknown = match few {
        true => "too few configurations for an interval",
        false => "no solution but the naive one",
    };
    if measured.len() >= plan.budget {
        return Next::Stop {
            why: match wide.first() {
                Some(w) => format!(
                    "budget of {} configurations reached ({} still {:.1} wide)",
                    plan.budget, w.3, w.0
                ),
                None => format!(
                    "budget of {} configurations reached ({})",
                    plan.budget, unknown
                ),
            },
        };
    }
    let gap = |v: f64| {
        measured
            .iter()
            .map(|m| (m - v).abs())
            .fold(f64::INFINITY, f64::min)
    };
    let farthest = |lo: f64, hi: f64| {
        candidates
            .iter()
            .copied()
            .filter(|v| !done(*v) && *v >= lo && *v <= hi)
            .max_by(|a, b| gap(*a).total_cmp(&gap(*b)))
    };
    if wide.is_empty() {
        // Nothing to narrow yet: fill the largest gap, where a solution may hide.
        return match farthest(f64::NEG_INFINITY, f64::INFINITY) {
            Some(v) => Next::Measure {
                vrate: v,
                why: format!(
                    "{} yet; {:.1} is farthest from a measured vrate",
                    unknown, v
                ),
            },
            None => Next::Stop {
                why: "every candidate vrate is measured".into(),
            },
        };
    }
    for (w, lo, hi, what) in wide.iter().filter(|w| w.0 > plan.target) {
        if let Some(v) = farthest(*lo, *hi) {
            return Next::Measure {
                vrate: v,
                why: format!(
                    "{} is {:.1} wide ({:.1}-{:.1}); {:.1} is farthest from a measured vrate in it",
                    what, w, lo, hi, v
                ),
            };
        }
    }
    Next::Stop {
        why: format!(
            "every vrate inside the intervals wider than {:.1} is measured",
            plan.target
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::iocost_tune::interval::DFL_BOOT;
    use crate::bench::iocost_tune::model::{DataPoint, DataSeries};
    use crate::bench::iocost_tune::sel::DataSel;

    /// Read p99 flat at 1 ms to vrate 40, rising to 3 ms at 60: a slope to solve on, with a
    /// wobble so that the intervals have a width.
    fn data(xs: &[f64]) -> IocostTuneResult {
        let series = |f: &dyn Fn(f64) -> f64| DataSeries {
            data: xs.iter().map(|&x| DataPoint::new(x, f(x))).collect(),
            ..Default::default()
        };
        let wobble = |x: f64| 1.0 + 0.2 * ((x * 0.7).sin());
        let mut res = IocostTuneResult::default();
        res.data.insert(
            DataSel::RLat("99".into(), "mean".into()),
            series(&|x| (0.001 + 0.002 * ((x - 40.0) / 20.0).clamp(0.0, 1.0)) * wobble(x)),
        );
        res.data.insert(
            DataSel::WLat("99".into(), "mean".into()),
            series(&|_| 0.002),
        );
        res.data.insert(DataSel::Mof, series(&|_| 1.5));
        res
    }

    #[test]
    fn coarse_first_then_inside_the_widest_interval_then_stop() {
        let rules = vec![QosRule {
            name: "q2".into(),
            target: QosTarget::LatRange(DataSel::RLat("99".into(), "mean".into()), (0.5, 0.75)),
        }];
        let cands: Vec<f64> = (1..=20).map(|i| i as f64 * 5.0).collect();
        let plan = DFL_ADAPTIVE;
        let step = |measured: &[f64], plan: Adaptive| {
            next(
                &cands,
                measured,
                &data(measured),
                &rules,
                (1.0, 100.0),
                plan,
                DFL_BOOT,
            )
        };
        let mut measured = Vec::new();
        for _ in 0..plan.coarse {
            match step(&measured, plan) {
                Next::Measure { vrate, why } => {
                    assert_eq!(why, "coarse pass");
                    measured.push(vrate);
                }
                n => panic!("{:?}", n),
            }
        }
        assert_eq!(measured, [100.0, 75.0, 55.0, 30.0, 5.0]);
        match step(&measured, plan) {
            Next::Measure { vrate, why } => {
                assert!(!measured.contains(&vrate), "{}", vrate);
                assert!(why.starts_with("q2 "), "{}", why);
            }
            n => panic!("{:?}", n),
        }
        let full = Adaptive {
            budget: measured.len(),
            ..plan
        };
        assert!(matches!(step(&measured, full), Next::Stop { why } if why.starts_with("budget")));
        let loose = Adaptive {
            target: 1000.0,
            ..plan
        };
        assert!(matches!(step(&measured, loose), Next::Stop { why } if why.starts_with("every")));
    }

    #[test]
    fn the_coarse_pass_spreads_evenly_with_both_ends() {
        let c: Vec<f64> = (1..=25).map(|i| i as f64 * 5.0).collect();
        assert_eq!(coarse(&c, 6), [5.0, 30.0, 55.0, 75.0, 100.0, 125.0]);
        assert_eq!(coarse(&c[..4], 6), c[..4]);
        assert_eq!(coarse(&c[..3], 2), [5.0, 15.0]);
        assert_eq!(coarse(&c, 1), [65.0]);
        // A budget below the coarse pass cuts it.
        let tight = Adaptive {
            budget: 2,
            ..DFL_ADAPTIVE
        };
        let first = coarse_step(&c, &[], tight);
        assert!(matches!(first, Some(Next::Measure { vrate, .. }) if vrate == 125.0));
        assert!(
            matches!(coarse_step(&c, &[125.0], tight), Some(Next::Measure { vrate, .. }) if vrate == 5.0)
        );
        assert_eq!(coarse_step(&c, &[125.0, 5.0], tight), None);
    }

    #[test]
    fn without_a_solution_the_largest_gap_is_filled_until_the_budget() {
        let rules = vec![QosRule {
            name: "q2".into(),
            target: QosTarget::LatRange(DataSel::RLat("99".into(), "mean".into()), (0.5, 0.75)),
        }];
        let cands: Vec<f64> = (1..=20).map(|i| i as f64 * 5.0).collect();
        let plan = Adaptive {
            coarse: 3,
            budget: 4,
            target: 10.0,
        };
        // No series at all: no solution can be found.
        let empty = IocostTuneResult::default();
        let step = |m: &[f64]| next(&cands, m, &empty, &rules, (1.0, 100.0), plan, DFL_BOOT);
        match step(&[100.0, 55.0, 5.0]) {
            Next::Measure { vrate, why } => {
                assert!(vrate == 30.0, "{}", vrate);
                assert!(
                    why.starts_with("no solution but the naive one yet"),
                    "{}",
                    why
                );
            }
            n => panic!("{:?}", n),
        }
        assert!(
            matches!(step(&[100.0, 55.0, 5.0, 30.0]), Next::Stop { why } if why.contains("no solution but the naive one"))
        );
        // One or two configurations give no interval, whatever the data: never "sure".
        let one = Adaptive {
            coarse: 1,
            budget: 1,
            target: 10.0,
        };
        let d = data(&[50.0]);
        let at = |m: &[f64], plan| next(&cands, m, &d, &rules, (1.0, 100.0), plan, DFL_BOOT);
        assert!(
            matches!(at(&[50.0], one), Next::Stop { why } if why == "budget of 1 configurations reached (too few configurations for an interval)")
        );
        let two = Adaptive { budget: 4, ..one };
        match at(&[50.0], two) {
            Next::Measure { vrate, why } => {
                assert_eq!(vrate, 100.0);
                assert!(
                    why.starts_with("too few configurations for an interval yet"),
                    "{}",
                    why
                );
            }
            n => panic!("{:?}", n),
        }
    }
}
