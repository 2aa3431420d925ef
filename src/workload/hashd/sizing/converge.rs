//! The convergence detector every sizing phase runs over hashd's per-second samples
//! (benches-doc/hashd.md).
//!
//! Each second the newest `period` samples of the watched variable (RPS or controlled latency)
//! get a least-squares line; its slope and the slope of its mean absolute residual, both
//! relative to the window's mean, must be small, and the recent slopes must not keep one sign
//! (a "streak") for the second to count as converged. A run ends after `converges` converged
//! seconds within the last `period`, or at `max_dur`.
//!
//! Unlike upstream, a falling streak is counted as falling (upstream tests `s < 1e-4` where it
//! means `s < -1e-4`, so every flat second counted as falling).

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The longest history kept (upstream's HIST_MAX).
pub const HIST_MAX: usize = 600;
/// Slopes within ±this count as flat for the streak.
const STREAK_EPS: f64 = 1e-4;

/// The variable a run watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Which {
    Lat,
    Rps,
}

/// One phase's detector settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConvergeCfg {
    pub which: Which,
    /// Converged seconds within the last `period` that end the run.
    pub converges: usize,
    /// Window length, seconds.
    pub period: usize,
    /// Seconds before a second can count as converged.
    pub min_dur: u32,
    /// Seconds after which the run ends regardless.
    pub max_dur: u32,
    /// Largest |slope| per second, relative to the window mean.
    pub slope: f64,
    /// Largest |slope of the residual| per second, relative to the window mean.
    pub err_slope: f64,
    /// min_dur and max_dur are multiplied by this on rotational devices (when ≥ 1.01).
    pub rot_mult: f64,
}

impl ConvergeCfg {
    /// The settings for a device: durations scaled by `rot_mult` (rounded up) if rotational.
    pub fn for_device(&self, rotational: bool) -> ConvergeCfg {
        let mut c = *self;
        if rotational && self.rot_mult >= 1.01 {
            c.min_dur = (self.min_dur as f64 * self.rot_mult).ceil() as u32;
            c.max_dur = (self.max_dur as f64 * self.rot_mult).ceil() as u32;
        }
        c
    }
}

/// What one second of detection concluded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Seconds since the run started.
    pub t: u32,
    pub lat: f64,
    pub rps: f64,
    pub slope: f64,
    pub err_slope: f64,
    /// > 0 rising, < 0 falling, 0 no consistent trend.
    pub streak: i32,
    pub converged: bool,
    /// Converged seconds within the last `period`.
    pub count: usize,
}

/// A finished run's figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub lat: f64,
    pub rps: f64,
    /// False when no second converged and the newest sample stands in.
    pub converged: bool,
    pub secs: u32,
}

/// Least-squares slope and mean absolute residual of `ys` over x = 0, 1, 2, …
pub fn linear_fit(ys: &[f64]) -> (f64, f64) {
    let n = ys.len();
    if n < 2 {
        return (0.0, 0.0);
    }
    let xm = (n - 1) as f64 / 2.0;
    let ym = ys.iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - xm;
        sxy += dx * (y - ym);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    let err = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (y - (ym + slope * (i as f64 - xm))).abs())
        .sum::<f64>()
        / n as f64;
    (slope, err)
}

fn push_capped<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    q.push_back(v);
    while q.len() > cap {
        q.pop_front();
    }
}

/// The detector of one run; feed it one sample per second with [`Detector::tick`].
#[derive(Debug, Clone)]
pub struct Detector {
    cfg: ConvergeCfg,
    t: u32,
    /// (lat, rps), oldest first; only samples with rps > 0.
    hist: VecDeque<(f64, f64)>,
    errs: VecDeque<f64>,
    slopes: VecDeque<f64>,
    results: VecDeque<Option<(f64, f64)>>,
}

impl Detector {
    pub fn new(cfg: ConvergeCfg) -> Self {
        Detector {
            cfg,
            t: 0,
            hist: VecDeque::new(),
            errs: VecDeque::new(),
            slopes: VecDeque::new(),
            results: VecDeque::new(),
        }
    }

    pub fn cfg(&self) -> &ConvergeCfg {
        &self.cfg
    }

    /// Seconds fed so far.
    pub fn secs(&self) -> u32 {
        self.t
    }

    /// One second: `(lat, rps)` of that second. Returns `None` while the windows are too short
    /// to judge.
    pub fn tick(&mut self, lat: f64, rps: f64) -> Option<Progress> {
        self.t += 1;
        if rps > 0.0 && lat.is_finite() && rps.is_finite() {
            push_capped(&mut self.hist, (lat, rps), HIST_MAX);
        }
        if self.hist.len() <= 2 {
            return None;
        }
        let period = self.cfg.period.max(3);
        let start = self.hist.len().saturating_sub(period);
        let ys: Vec<f64> = self
            .hist
            .iter()
            .skip(start)
            .map(|&(l, r)| match self.cfg.which {
                Which::Lat => l,
                Which::Rps => r,
            })
            .collect();
        let (slope, err) = linear_fit(&ys);
        push_capped(&mut self.errs, err, period);
        if self.errs.len() <= 2 {
            return None;
        }
        let errs: Vec<f64> = self.errs.iter().copied().collect();
        let (e_slope, _) = linear_fit(&errs);
        let mean = ys.iter().sum::<f64>() / ys.len() as f64;
        let norm = if mean.abs() > f64::MIN_POSITIVE {
            mean.abs()
        } else {
            1.0
        };
        let (slope, e_slope) = (slope / norm, e_slope / norm);
        push_capped(&mut self.slopes, slope, period);

        let mut streak: i32 = self
            .slopes
            .iter()
            .map(|&s| {
                if s > STREAK_EPS {
                    1
                } else if s < -STREAK_EPS {
                    -1
                } else {
                    0
                }
            })
            .sum();
        if streak.unsigned_abs() as usize <= period / 2 || (streak > 0) != (slope > 0.0) {
            streak = 0;
        }
        let converged = self.t >= self.cfg.min_dur
            && slope.abs() <= self.cfg.slope
            && e_slope.abs() <= self.cfg.err_slope
            && streak == 0;
        let (lat, rps) = self.hist.back().copied().unwrap_or((0.0, 0.0));
        push_capped(&mut self.results, converged.then_some((lat, rps)), period);
        Some(Progress {
            t: self.t,
            lat,
            rps,
            slope,
            err_slope: e_slope,
            streak,
            converged,
            count: self.count(),
        })
    }

    fn count(&self) -> usize {
        self.results.iter().filter(|r| r.is_some()).count()
    }

    /// The run is over: `max_dur` reached or enough converged seconds.
    pub fn done(&self) -> bool {
        self.t >= self.cfg.max_dur || self.count() >= self.cfg.converges
    }

    /// The mean of the converged seconds in the window, or the newest sample if none.
    pub fn outcome(&self) -> Outcome {
        let conv: Vec<(f64, f64)> = self.results.iter().flatten().copied().collect();
        if conv.is_empty() {
            let (lat, rps) = self.hist.back().copied().unwrap_or((0.0, 0.0));
            return Outcome {
                lat,
                rps,
                converged: false,
                secs: self.t,
            };
        }
        let n = conv.len() as f64;
        Outcome {
            lat: conv.iter().map(|c| c.0).sum::<f64>() / n,
            rps: conv.iter().map(|c| c.1).sum::<f64>() / n,
            converged: true,
            secs: self.t,
        }
    }

    /// One progress line: `[n/N] lat: 45.1 rps:1998.7 slope: +0.12% error_slope: -0.40% *`.
    pub fn line(&self, p: &Progress) -> String {
        let mark = if p.converged {
            "*"
        } else if p.streak > 0 {
            "^"
        } else if p.streak < 0 {
            "v"
        } else {
            ""
        };
        format!(
            "[{}/{}] lat:{:5.1} rps:{:6.1} slope:{:+6.2}% error_slope:{:+6.2}% {}",
            p.count,
            self.cfg.converges,
            p.lat * 1000.0,
            p.rps,
            p.slope * 100.0,
            p.err_slope * 100.0,
            mark
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::hashd::dist::Rng;

    fn cfg() -> ConvergeCfg {
        ConvergeCfg {
            which: Which::Rps,
            converges: 5,
            period: 15,
            min_dur: 30,
            max_dur: 90,
            slope: 0.01,
            err_slope: 0.025,
            rot_mult: 2.0,
        }
    }

    fn run(cfg: ConvergeCfg, series: impl Fn(u32) -> f64) -> Outcome {
        let mut d = Detector::new(cfg);
        while !d.done() {
            let t = d.secs();
            d.tick(0.05, series(t));
        }
        d.outcome()
    }

    #[test]
    fn linear_fit_recovers_slope_and_residual() {
        let (s, e) = linear_fit(&[1.0, 3.0, 5.0, 7.0]);
        assert!((s - 2.0).abs() < 1e-12 && e.abs() < 1e-12);
        let (s, e) = linear_fit(&[0.0, 1.0, 0.0, 1.0]);
        assert!((s - 0.2).abs() < 1e-12, "{}", s);
        assert!((e - 0.4).abs() < 1e-12, "{}", e);
    }

    #[test]
    fn flat_series_converges_right_after_min_dur() {
        let o = run(cfg(), |_| 1000.0);
        assert!(o.converged);
        assert!((o.rps - 1000.0).abs() < 1e-9);
        // min_dur 30, then 5 converged seconds.
        assert_eq!(o.secs, 34);
    }

    #[test]
    fn noisy_plateau_converges_on_its_mean() {
        let mut rng = Rng::seeded(7);
        let noise: Vec<f64> = (0..200).map(|_| rng.std_normal()).collect();
        let o = run(cfg(), |t| 1000.0 * (1.0 + 0.01 * noise[t as usize]));
        assert!(o.converged);
        assert!((o.rps - 1000.0).abs() < 15.0, "{:?}", o);
        assert!(o.secs < 60, "{:?}", o);
    }

    #[test]
    fn steady_ramp_never_converges() {
        // +2 %/s of the mean: above the 1 % slope limit, and a rising streak throughout.
        let o = run(cfg(), |t| 100.0 + 4.0 * t as f64);
        assert!(!o.converged);
        assert_eq!(o.secs, 90);
        assert!((o.rps - (100.0 + 4.0 * 89.0)).abs() < 1e-9);
    }

    #[test]
    fn step_then_plateau_converges_on_the_new_level() {
        let o = run(cfg(), |t| if t < 20 { 2000.0 } else { 1200.0 });
        assert!(o.converged);
        assert!((o.rps - 1200.0).abs() < 1e-9, "{:?}", o);
        assert!(o.secs >= 35, "{:?}", o);
    }

    #[test]
    fn exponential_approach_converges_once_flat() {
        let o = run(cfg(), |t| 1500.0 + 500.0 * (-(t as f64) / 4.0).exp());
        assert!(o.converged);
        assert!((o.rps - 1500.0).abs() < 5.0, "{:?}", o);
    }

    #[test]
    fn falling_streak_is_reported_as_falling() {
        let mut d = Detector::new(cfg());
        let mut last = None;
        for t in 0..40 {
            last = d.tick(0.05, 2000.0 - 10.0 * t as f64).or(last);
        }
        let p = last.unwrap();
        assert!(p.streak < 0, "{:?}", p);
        assert!(!p.converged);
    }

    #[test]
    fn zero_rps_seconds_are_left_out_of_the_history() {
        let mut d = Detector::new(cfg());
        for t in 0..60 {
            d.tick(0.05, if t % 10 == 0 { 0.0 } else { 800.0 });
        }
        let o = d.outcome();
        assert!(o.converged);
        assert!((o.rps - 800.0).abs() < 1e-9);
    }

    #[test]
    fn rotational_multiplier_scales_durations() {
        let c = cfg().for_device(true);
        assert_eq!((c.min_dur, c.max_dur), (60, 180));
        let c = cfg().for_device(false);
        assert_eq!((c.min_dur, c.max_dur), (30, 90));
        let mut one = cfg();
        one.rot_mult = 1.0;
        assert_eq!(one.for_device(true).max_dur, 90);
    }
}
