//! Test oracle: upstream's up / bisect (with verification) / refine memory search as
//! benches-doc/hashd.md describes it, driven through our probe runner. Used only to check that our
//! search finds the same footprint.

use super::converge::ConvergeCfg;
use super::phase::Phase;
use super::probe::{measure, Early};
use super::target::{Knobs, SizingTarget};
use super::timing::Timing;
use anyhow::Result;
use std::collections::VecDeque;

const GRAIN: f64 = 1.0;
const MAX_STEPS: usize = 60;

fn round(
    t: &mut dyn SizingTarget,
    rps_max: u32,
    p: f64,
    cfg: &ConvergeCfg,
    phase: Phase,
    high_enough: bool,
) -> Result<f64> {
    let knobs = Knobs {
        mem_frac: p,
        rps_target: rps_max,
        rps_max,
        uniform: false,
    };
    let early = Early {
        rps_max: rps_max as f64,
        after: 0,
        high_enough: high_enough.then_some(0.95),
        too_low: Some(0.5),
    };
    let rec = measure(t, phase, &knobs, cfg, Some(early))?;
    Ok((rec.rps - rps_max as f64) / rps_max as f64)
}

/// Upstream's mem_frac for `t`.
pub fn upstream_search(t: &mut dyn SizingTarget, rps_max: u32) -> Result<f64> {
    let n = Timing::NORMAL;
    let (up, bisect, refine) = (n.up, n.bisect, n.confirm);

    // Up.
    let mut p = 0.2 * GRAIN;
    let mut fail_at = None;
    loop {
        if round(t, rps_max, p, &up, Phase::MemUp, true)? <= -0.25 {
            fail_at = Some(p);
            break;
        }
        if p >= 1.0 {
            break;
        }
        p = (p + 0.2 * GRAIN).min(1.0);
    }

    // Bisect with verification.
    let mut result = 1.0;
    if let Some(f) = fail_at {
        let mut left: VecDeque<f64> = VecDeque::from([0.0]);
        let mut right: VecDeque<f64> = VecDeque::from([f]);
        let fails = |err: f64| err <= -0.10;
        let mut steps = 0;
        'outer: loop {
            let mut last_failed = true;
            while right[0] - left[0] >= 0.05 * GRAIN && steps < MAX_STEPS {
                steps += 1;
                let mid = (left[0] + right[0]) / 2.0;
                if fails(round(t, rps_max, mid, &bisect, Phase::MemBisect, true)?) {
                    right.push_front(mid);
                    last_failed = true;
                } else {
                    left.push_front(mid);
                    last_failed = false;
                }
            }
            if steps >= MAX_STEPS {
                break;
            }
            steps += 1;
            if last_failed {
                if left.len() > 1
                    && fails(round(t, rps_max, left[0], &bisect, Phase::MemVerify, true)?)
                {
                    if right.len() > 1 {
                        right.pop_back();
                    }
                    if let Some(l) = left.pop_front() {
                        right.push_front(l);
                    }
                    continue 'outer;
                }
            } else if right.len() > 1
                && !fails(round(
                    t,
                    rps_max,
                    right[0],
                    &bisect,
                    Phase::MemVerify,
                    true,
                )?)
            {
                if let Some(r) = right.pop_front() {
                    left.push_front(r);
                }
                if left.len() > 1 {
                    left.pop_back();
                }
                continue 'outer;
            }
            break;
        }
        result = right[0];
    }

    // Refine.
    let mut p = result;
    for _ in 0..MAX_STEPS {
        if round(t, rps_max, p, &refine, Phase::MemRefine, false)? >= -0.075 {
            break;
        }
        p *= 1.0 - 0.025 * GRAIN;
    }
    Ok(p)
}
