//! Upstream's memory-footprint search (rd-hashd 2.2.5's `--bench` memory phase; benches-doc/hashd.md
//! describes it), chosen with `search=upstream` where a bench's MOF should be found the way
//! upstream finds it. Our own search ([`super::mem`]) is the default.
//!
//! 1. **up** — 20 %, 40 %, … of the size until a probe reads at most 75 % of rps_max.
//! 2. **bisect** — between 0 and that footprint, halving until the bracket is narrower than
//!    5 %; a probe fails at 90 % of rps_max or less. Then the opposite end is probed again
//!    (the highest pass after a fail, the lowest fail after a pass) when it was measured in
//!    this phase: if its verdict flips, the bracket moves there and bisecting goes on. The
//!    result is the lowest failing footprint.
//! 3. **refine** — from that footprint down by 2.5 % of the footprint each probe, with the long
//!    probe and no "high enough" exit, until one reads at least 92.5 % of rps_max.
//!
//! Every probe follows the one before without a pause (no warm-up, no recovery after a fail),
//! each one judged on its own (no rechecks); the detector and its early exits are ours, the
//! same as upstream's. Two differences, both where upstream never ends: the refine steps stop
//! at 0.1 % of the size, and the whole search at [`MAX_PROBES`] probes (hours of probing).

use super::converge::ConvergeCfg;
use super::phase::Phase;
use super::probe::{measure, Early, ProbeRecord};
use super::target::{Knobs, SizingTarget};
use super::timing::Timing;
use crate::logging::progress;
use anyhow::Result;
use std::collections::VecDeque;

/// Up-phase step and first footprint (upstream's grain 1.0, as its storage bench runs it).
const UP_STEP: f64 = 0.2;
/// Bisection ends once the bracket is narrower than this.
const BISECT_WIDTH: f64 = 0.05;
/// Refine steps down by this share of the current footprint.
const REFINE_STEP: f64 = 0.025;
/// Refine stops below this footprint (upstream's intended floor).
const REFINE_FLOOR: f64 = 0.001;
/// RPS errors, (rps − rps_max) / rps_max: a probe fails at or below `UP_FAIL` going up and
/// `BISECT_FAIL` bisecting, and passes at or above `REFINE_PASS` refining.
const UP_FAIL: f64 = -0.25;
const BISECT_FAIL: f64 = -0.10;
const REFINE_PASS: f64 = -0.075;
/// The early exits: "high enough" above this share of rps_max (not while refining), "too low"
/// below that one (non-rotational devices).
const HIGH_ENOUGH: f64 = 0.95;
const TOO_LOW: f64 = 0.5;
/// Most probes of one search.
pub const MAX_PROBES: u32 = 60;

struct Search<'a> {
    target: &'a mut dyn SizingTarget,
    rps_max: u32,
    hist: &'a mut Vec<ProbeRecord>,
    probes: u32,
}

impl Search<'_> {
    /// One probe of footprint `p`; returns its RPS error, (rps − rps_max) / rps_max, and
    /// records it with the verdict `pass` gives that error.
    fn round(
        &mut self,
        phase: Phase,
        p: f64,
        cfg: &ConvergeCfg,
        high_enough: bool,
        pass: impl Fn(f64) -> bool,
    ) -> Result<f64> {
        self.probes += 1;
        let knobs = Knobs {
            mem_frac: p,
            rps_target: self.rps_max,
            rps_max: self.rps_max,
            uniform: false,
        };
        let early = Early {
            rps_max: self.rps_max as f64,
            after: 0,
            high_enough: high_enough.then_some(HIGH_ENOUGH),
            too_low: Some(TOO_LOW),
        };
        let size = self.target.size() as f64;
        progress::step(format!(
            "memory search probe {} ({}, upstream's search) · {}",
            self.probes,
            phase.doing(),
            crate::units::format_size(p * size)
        ));
        let rec = measure(&mut *self.target, phase, &knobs, cfg, Some(early))?;
        let err = (rec.rps - self.rps_max as f64) / self.rps_max as f64;
        let ok = pass(err);
        log::info!(
            "memory search probe {} ({}) at {} ({:.2}%): {} — {:.1} rps, {:+.1}% off rps_max, in {}s{}",
            self.probes,
            phase.doing(),
            crate::units::format_size(p * size),
            p * 100.0,
            if ok { "passed" } else { "failed" },
            rec.rps,
            err * 100.0,
            rec.secs,
            if rec.converged { "" } else { " (unconverged: the newest second's)" },
        );
        self.hist.push(ProbeRecord {
            pass: Some(ok),
            ..rec
        });
        Ok(err)
    }

    fn out_of_probes(&self) -> bool {
        self.probes >= MAX_PROBES
    }

    /// The up phase: the first footprint that fails, `None` if even 100 % passes.
    fn up(&mut self, cfg: &ConvergeCfg) -> Result<Option<f64>> {
        let mut p = UP_STEP;
        loop {
            if self.round(Phase::MemUp, p, cfg, true, |e| e > UP_FAIL)? <= UP_FAIL {
                return Ok(Some(p));
            }
            if p >= 0.99 {
                log::info!("memory search: {:.0}% doesn't saturate", p * 100.0);
                return Ok(None);
            }
            p = (p + UP_STEP).min(1.0);
        }
    }

    fn bisect_fails(&mut self, phase: Phase, p: f64, cfg: &ConvergeCfg) -> Result<bool> {
        Ok(self.round(phase, p, cfg, true, |e| e > BISECT_FAIL)? <= BISECT_FAIL)
    }

    /// Bisection with upstream's verification of the opposite end; returns the lowest fail.
    fn bisect(&mut self, fail: f64, cfg: &ConvergeCfg) -> Result<f64> {
        // Newest first: left[0] is the highest pass, right[0] the lowest fail.
        let mut left = VecDeque::from([0.0]);
        let mut right = VecDeque::from([fail]);
        loop {
            // At least one probe per round, as upstream's loop, even after a move left the
            // bracket narrow already.
            let mut last_failed;
            loop {
                let mid = (left[0] + right[0]) / 2.0;
                last_failed = self.bisect_fails(Phase::MemBisect, mid, cfg)?;
                if last_failed {
                    right.push_front(mid);
                } else {
                    left.push_front(mid);
                }
                if right[0] - left[0] < BISECT_WIDTH || self.out_of_probes() {
                    break;
                }
            }
            if self.out_of_probes() {
                return Ok(right[0]);
            }
            if last_failed {
                if left.len() == 1 || !self.bisect_fails(Phase::MemVerify, left[0], cfg)? {
                    return Ok(right[0]);
                }
                // The highest pass failed now: it is the bracket's new upper end.
                right.pop_back();
                right.push_front(left.pop_front().expect("left holds more than one"));
            } else {
                if right.len() == 1 || self.bisect_fails(Phase::MemVerify, right[0], cfg)? {
                    return Ok(right[0]);
                }
                // The lowest fail passed now: it is the bracket's new lower end.
                left.pop_back();
                left.push_front(right.pop_front().expect("right holds more than one"));
            }
        }
    }

    /// Steps down from `p` until a long probe reads at least 92.5 % of rps_max.
    fn refine(&mut self, mut p: f64, cfg: &ConvergeCfg) -> Result<f64> {
        loop {
            let err = self.round(Phase::MemRefine, p, cfg, false, |e| e >= REFINE_PASS)?;
            let step = p * REFINE_STEP;
            if err >= REFINE_PASS || p < REFINE_FLOOR + step || self.out_of_probes() {
                if err < REFINE_PASS {
                    log::warn!(
                        "memory search: no footprint down to {:.2}% sustained {:.1}% of rps_max",
                        p * 100.0,
                        (1.0 + REFINE_PASS) * 100.0
                    );
                }
                return Ok(p);
            }
            p -= step;
        }
    }
}

/// Upstream's memory search against `target` with `timing`'s probe lengths (the up, bisect
/// and confirming probes are upstream's up, bisect and refine ones; `--quick` shortens them);
/// returns mem_frac and appends every probe to `hist`.
pub fn search(
    target: &mut dyn SizingTarget,
    rps_max: u32,
    timing: &Timing,
    hist: &mut Vec<ProbeRecord>,
) -> Result<f64> {
    let mut s = Search {
        target,
        rps_max: rps_max.max(1),
        hist,
        probes: 0,
    };
    let bisected = match s.up(&timing.up)? {
        Some(fail) => s.bisect(fail, &timing.bisect)?,
        None => 1.0,
    };
    log::info!(
        "memory search: bisection ended at {:.2}%; refining down from there",
        bisected * 100.0
    );
    s.refine(bisected, &timing.confirm)
}

#[cfg(test)]
mod tests {
    use super::super::target::Sample;
    use super::*;

    /// A workload whose RPS share at a footprint is `share(p, n)`, n counting the probes of
    /// that footprint from 1; steady within a probe, so every probe converges.
    struct Scripted<F: Fn(f64, u32) -> f64> {
        share: F,
        probed: Vec<(f64, u32)>,
        now: f64,
    }

    impl<F: Fn(f64, u32) -> f64> SizingTarget for Scripted<F> {
        fn set(&mut self, _knobs: &Knobs) -> Result<()> {
            Ok(())
        }
        fn begin(&mut self, _phase: Phase, knobs: &Knobs) -> Result<()> {
            let p = knobs.mem_frac;
            let n = self.probed.iter().filter(|(q, _)| *q == p).count() as u32 + 1;
            self.probed.push((p, n));
            self.now = (self.share)(p, n);
            Ok(())
        }
        fn next_sample(&mut self) -> Result<Sample> {
            Ok(Sample {
                rps: self.now * 100.0,
                lat_ctl: 0.05,
                lat_p95: 0.05,
                mem_bytes: 0,
                swap_bytes: 0,
            })
        }
        fn size(&self) -> u64 {
            1 << 30
        }
        fn lat_target(&self) -> f64 {
            0.075
        }
    }

    fn run<F: Fn(f64, u32) -> f64>(share: F) -> (f64, Vec<ProbeRecord>) {
        let mut t = Scripted {
            share,
            probed: Vec::new(),
            now: 0.0,
        };
        let mut hist = Vec::new();
        let p = search(&mut t, 100, &Timing::QUICK, &mut hist).unwrap();
        (p, hist)
    }

    fn steps(hist: &[ProbeRecord]) -> Vec<(Phase, f64, bool)> {
        hist.iter()
            .map(|r| (r.phase, (r.mem_frac * 1e6).round() / 1e6, r.pass.unwrap()))
            .collect()
    }

    #[test]
    fn up_bisect_verify_and_refine_as_upstream() {
        // Full rate up to 23 %, 88 % of it (fails bisecting, passes going up) to 30 %, half
        // beyond.
        let (p, hist) = run(|p, _| match p {
            p if p <= 0.23 => 1.0,
            p if p <= 0.3 => 0.88,
            _ => 0.5,
        });
        use Phase::*;
        let r = |k: i32| ((0.25 * 0.975f64.powi(k)) * 1e6).round() / 1e6;
        assert_eq!(
            steps(&hist),
            vec![
                (MemUp, 0.2, true),
                (MemUp, 0.4, false),
                (MemBisect, 0.2, true),
                (MemBisect, 0.3, false),
                // 25 % − 20 % is a hair under 5 % in binary floating point, as upstream
                // computes it too: the bracket is narrow enough.
                (MemBisect, 0.25, false),
                // The last probe failed: the highest pass again, which passes: done at 25 %.
                (MemVerify, 0.2, true),
                // Refine from the lowest fail down by 2.5 % of the footprint each probe.
                (MemRefine, r(0), false),
                (MemRefine, r(1), false),
                (MemRefine, r(2), false),
                (MemRefine, r(3), false),
                (MemRefine, r(4), true),
            ]
        );
        assert!((p - 0.25 * 0.975f64.powi(4)).abs() < 1e-12, "{}", p);
    }

    #[test]
    fn a_verification_that_flips_moves_the_bracket() {
        // 20 % passes twice, then fails from its third probe on (the workload got slower).
        let (p, hist) = run(|p, n| match p {
            p if p > 0.35 => 0.5,
            p if p > 0.21 => 0.85,
            p if p == 0.2 && n >= 3 => 0.85,
            _ => 1.0,
        });
        use Phase::*;
        assert_eq!(
            steps(&hist)[2..],
            vec![
                (MemBisect, 0.2, true),
                (MemBisect, 0.3, false),
                (MemBisect, 0.25, false),
                // The highest pass fails now: the bracket becomes [0, 20 %].
                (MemVerify, 0.2, false),
                (MemBisect, 0.1, true),
                (MemBisect, 0.15, true),
                // The last probe passed: the lowest fail again, which still fails.
                (MemVerify, 0.2, false),
                (MemRefine, 0.2, false),
                (MemRefine, 0.195, true),
            ][..]
        );
        assert!((p - 0.195).abs() < 1e-12, "{}", p);
    }

    #[test]
    fn a_workload_that_never_saturates_refines_from_the_whole_size() {
        let (p, hist) = run(|_, _| 1.0);
        let phases: Vec<Phase> = hist.iter().map(|r| r.phase).collect();
        assert_eq!(
            phases,
            [[Phase::MemUp; 5].as_slice(), &[Phase::MemRefine]].concat()
        );
        assert_eq!(p, 1.0);
    }
}
