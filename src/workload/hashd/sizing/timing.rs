//! How long each sizing phase runs ([`Timing`], with the normal and `--quick` presets) and the
//! verdict thresholds ([`Thresholds`]). Both are logged with the result, so a figure can be
//! traced to the settings that produced it.

use super::converge::{ConvergeCfg, Which};
use serde::{Deserialize, Serialize};

/// Phase lengths and search resolution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub quick: bool,
    /// CPU saturation: detector and round budget.
    pub cpu: ConvergeCfg,
    pub cpu_rounds: u32,
    /// Memory search: stepping up from below, bisecting, and the longer probe that settles a
    /// measurement too close to the threshold and confirms the final footprint.
    pub up: ConvergeCfg,
    pub bisect: ConvergeCfg,
    pub confirm: ConvergeCfg,
    /// The search stops once the bracket is narrower than this share of its upper end.
    pub rel_tol: f64,
    /// ... or narrower than this, absolutely (mem_frac).
    pub abs_tol: f64,
    /// Most probes of the memory search (the budget for noisy hosts).
    pub max_probes: u32,
    /// Longest warm-up before the memory search, seconds (see `mem`).
    #[serde(default)]
    pub warmup_max: u32,
    /// A memory probe's early exits ("high enough", "too low") wait at least this long,
    /// seconds (besides a window). Quick windows are shorter than the time a grown footprint
    /// takes to show: TCG guests passed 40 % "high enough" after 8 s, then failed 41 %, 40 %.
    #[serde(default)]
    pub early_after: u32,
}

const fn rps_cfg(
    converges: usize,
    period: usize,
    min_dur: u32,
    max_dur: u32,
    slope: f64,
    err_slope: f64,
    rot_mult: f64,
) -> ConvergeCfg {
    ConvergeCfg {
        which: Which::Rps,
        converges,
        period,
        min_dur,
        max_dur,
        slope,
        err_slope,
        rot_mult,
    }
}

impl Timing {
    /// Upstream's phase lengths (benches-doc/hashd.md): 15 s windows, 30–90 s probes, 60–240 s for
    /// the confirming probe, doubled on rotational devices (×4 while stepping up).
    pub const NORMAL: Timing = Timing {
        quick: false,
        cpu: rps_cfg(5, 15, 15, 90, 0.01, 0.025, 1.0),
        cpu_rounds: 5,
        up: rps_cfg(5, 15, 30, 90, 0.01, 0.025, 4.0),
        bisect: rps_cfg(5, 15, 30, 90, 0.01, 0.025, 2.0),
        confirm: rps_cfg(5, 15, 60, 240, 0.01, 0.025, 2.0),
        rel_tol: 0.025,
        abs_tol: 0.002,
        max_probes: 24,
        warmup_max: 120,
        early_after: 15,
    };

    /// `--quick`: 6 s windows, 12–40 s probes (20–60 s confirming), a bracket of 5 % instead of
    /// 2.5 %. Still
    /// real measurements of a converged workload, only with less settling and averaging.
    pub const QUICK: Timing = Timing {
        quick: true,
        cpu: rps_cfg(3, 6, 8, 40, 0.02, 0.05, 1.0),
        cpu_rounds: 3,
        up: rps_cfg(3, 6, 12, 40, 0.02, 0.05, 2.0),
        bisect: rps_cfg(3, 6, 12, 40, 0.02, 0.05, 2.0),
        confirm: rps_cfg(3, 6, 20, 60, 0.02, 0.05, 2.0),
        rel_tol: 0.05,
        abs_tol: 0.004,
        max_probes: 14,
        warmup_max: 60,
        early_after: 15,
    };

    pub fn new(quick: bool) -> Timing {
        if quick {
            Self::QUICK
        } else {
            Self::NORMAL
        }
    }
}

/// Verdict thresholds, as shares of rps_max unless noted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// A footprint is sustainable when the converged RPS reaches this (upstream's refine
    /// criterion, 92.5 %).
    pub pass: f64,
    /// A measurement within this of `pass` is too close to call: it is repeated with the
    /// confirming probe and the two averaged; if still this close, it counts as a fail.
    pub margin: f64,
    /// A probe ends early as passed once RPS rises past this (after one window).
    pub high_enough: f64,
    /// A probe ends early as failed once RPS keeps falling below this (after two windows,
    /// non-rotational devices only).
    pub too_low: f64,
    /// Stepping up from zero by this much of the footprint.
    pub up_step: f64,
    /// CPU saturation accepts a round when the controlled latency is this close to its target
    /// (relative).
    pub cpu_lat_tol: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            pass: 0.925,
            margin: 0.025,
            high_enough: 0.95,
            too_low: 0.5,
            up_step: 0.2,
            cpu_lat_tol: 0.05,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_is_shorter_in_every_phase() {
        let (n, q) = (Timing::NORMAL, Timing::QUICK);
        for (a, b) in [
            (n.cpu, q.cpu),
            (n.up, q.up),
            (n.bisect, q.bisect),
            (n.confirm, q.confirm),
        ] {
            assert!(b.min_dur < a.min_dur && b.max_dur < a.max_dur);
            assert!(b.period < a.period && b.converges <= a.converges);
            assert!(
                b.min_dur as usize >= b.period,
                "a quick probe still spans a window"
            );
        }
        assert!(q.cpu_rounds < n.cpu_rounds && q.max_probes < n.max_probes);
        assert!(Timing::new(true).quick && !Timing::new(false).quick);
    }
}
