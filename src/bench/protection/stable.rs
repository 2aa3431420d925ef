//! When hashd has settled at its load: windows of its throughput and memory, each fitted with
//! a line (x = the second within the window). hashd is stable once both windows are full, both
//! lines are flat relative to their mean, the values sit close to their line, and the
//! throughput is at the target load (benches-doc/protection.md).
//!
//! Upstream fits a second line through the residuals; we take their RMS relative to the mean,
//! which says the same ("the values hug a flat line") in one number.

use std::collections::VecDeque;

/// How strict the detector is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// Window length, seconds.
    pub slots: usize,
    /// Largest |slope| per second, relative to the mean.
    pub slope: f64,
    /// Largest RMS of the residuals, relative to the mean.
    pub err: f64,
    /// Largest |rps / rps_max − load|.
    pub load_err: f64,
}

impl Thresholds {
    /// Upstream's windows and bounds.
    pub const FULL: Thresholds = Thresholds {
        slots: 15,
        slope: 0.0025,
        err: 0.025,
        load_err: 0.025,
    };
    /// `--quick`: shorter windows and looser bounds, for emulated hosts where a few seconds of
    /// a slowed-down guest are all a test can afford.
    pub const QUICK: Thresholds = Thresholds {
        slots: 5,
        slope: 0.02,
        err: 0.10,
        load_err: 0.10,
    };
}

/// A window of the newest values.
#[derive(Debug, Clone)]
pub struct Window {
    slots: usize,
    vals: VecDeque<f64>,
}

/// A window's line: slope and residual RMS, both relative to the mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub mean: f64,
    pub slope: f64,
    pub err: f64,
}

impl Window {
    pub fn new(slots: usize) -> Self {
        Window {
            slots: slots.max(2),
            vals: VecDeque::new(),
        }
    }

    pub fn push(&mut self, v: f64) {
        self.vals.push_back(v);
        if self.vals.len() > self.slots {
            self.vals.pop_front();
        }
    }

    /// The least-squares line once the window is full (`None` before, or with a zero mean).
    pub fn fit(&self) -> Option<Fit> {
        if self.vals.len() < self.slots {
            return None;
        }
        let n = self.vals.len() as f64;
        let mean_x = (n - 1.0) / 2.0;
        let mean = self.vals.iter().sum::<f64>() / n;
        if mean.abs() < f64::EPSILON {
            return None;
        }
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (i, v) in self.vals.iter().enumerate() {
            let dx = i as f64 - mean_x;
            sxy += dx * (v - mean);
            sxx += dx * dx;
        }
        let slope = sxy / sxx;
        let rss: f64 = self
            .vals
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let fit = mean + slope * (i as f64 - mean_x);
                (v - fit).powi(2)
            })
            .sum();
        Some(Fit {
            mean,
            slope: slope / mean,
            err: (rss / n).sqrt() / mean,
        })
    }
}

/// The detector.
#[derive(Debug, Clone)]
pub struct Stabilizer {
    thr: Thresholds,
    rps: Window,
    mem: Window,
    unmet: Unmet,
}

/// Seconds, once the windows were full, that each condition was not met — what a long
/// warm-up waited for.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Unmet {
    pub load: u32,
    pub rps_flat: u32,
    pub mem_flat: u32,
}

impl std::fmt::Display for Unmet {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "off the load {}s, throughput unsteady {}s, memory unsteady {}s",
            self.load, self.rps_flat, self.mem_flat
        )
    }
}

impl Stabilizer {
    pub fn new(thr: Thresholds) -> Self {
        Stabilizer {
            thr,
            rps: Window::new(thr.slots),
            mem: Window::new(thr.slots),
            unmet: Unmet::default(),
        }
    }

    pub fn unmet(&self) -> Unmet {
        self.unmet
    }

    /// Takes one second's throughput and memory; whether hashd is now stable at `load` of
    /// `rps_max`.
    pub fn push(&mut self, rps: f64, mem: f64, rps_max: f64, load: f64) -> bool {
        self.rps.push(rps);
        self.mem.push(mem);
        let flat = |f: Option<Fit>| {
            f.is_some_and(|f| f.slope.abs() <= self.thr.slope && f.err <= self.thr.err)
        };
        let (rps_fit, mem_fit) = (self.rps.fit(), self.mem.fit());
        let at_load = rps_fit.is_some_and(|f| (f.mean / rps_max - load).abs() <= self.thr.load_err);
        let (rps_flat, mem_flat) = (flat(rps_fit), flat(mem_fit));
        if rps_fit.is_some() && mem_fit.is_some() {
            self.unmet.load += u32::from(!at_load);
            self.unmet.rps_flat += u32::from(!rps_flat);
            self.unmet.mem_flat += u32::from(!mem_flat);
        }
        rps_flat && mem_flat && at_load
    }
}

/// The second condition of a cold hashd's warm-up under a loose latency target: its control
/// latency has met the real target for half a window of fresh seconds in a row, so restoring
/// the real target won't set the latency controller on it.
#[derive(Debug, Clone, Copy)]
pub struct LatGate {
    need: usize,
    met: usize,
    over: u32,
}

impl LatGate {
    pub fn new(thr: Thresholds) -> Self {
        LatGate {
            need: (thr.slots / 2).max(2),
            met: 0,
            over: 0,
        }
    }

    /// One fresh second's control latency against the real target (seconds); whether the
    /// latency has now met it long enough. No latency (no request finished) doesn't count.
    pub fn push(&mut self, lat: f64, target: f64) -> bool {
        let met = lat > 0.0 && lat <= target;
        self.met = if met { self.met + 1 } else { 0 };
        self.over += u32::from(!met);
        self.met >= self.need
    }

    /// Fresh seconds the latency was over the target (or missing).
    pub fn over(&self) -> u32 {
        self.over
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_gate_opens_after_half_a_window_within_the_target() {
        let mut g = LatGate::new(Thresholds::QUICK);
        // Cold: 200 ms against a 75 ms target, then a dip under it that doesn't hold.
        for _ in 0..10 {
            assert!(!g.push(0.2, 0.075));
        }
        assert!(!g.push(0.05, 0.075));
        assert!(!g.push(0.1, 0.075));
        // A second without a finished request neither meets nor opens it.
        assert!(!g.push(0.0, 0.075));
        assert!(!g.push(0.07, 0.075));
        assert!(
            g.push(0.075, 0.075),
            "two seconds in a row: half the quick window"
        );
        assert_eq!(g.over(), 12);
        let mut full = LatGate::new(Thresholds::FULL);
        assert!(!(0..6).any(|_| full.push(0.05, 0.075)));
        assert!(
            full.push(0.05, 0.075),
            "seven seconds: half the full window"
        );
    }

    fn run(
        s: &mut Stabilizer,
        rps: impl Fn(usize) -> f64,
        mem: impl Fn(usize) -> f64,
    ) -> Option<usize> {
        (0..200).find(|&i| s.push(rps(i), mem(i), 1000.0, 1.0))
    }

    #[test]
    fn a_steady_series_is_stable_once_the_windows_fill() {
        let mut s = Stabilizer::new(Thresholds::FULL);
        assert_eq!(run(&mut s, |_| 1000.0, |_| 4e9), Some(14));
    }

    #[test]
    fn a_ramp_is_stable_only_after_it_levels_off() {
        // Memory grows 2 %/s for 50 s, then stays.
        let mut s = Stabilizer::new(Thresholds::FULL);
        let mem = |i: usize| 1e9 * (1.0 + 0.02 * i.min(50) as f64);
        let at = run(&mut s, |_| 1000.0, mem).unwrap();
        assert!((55..=66).contains(&at), "{}", at);
        // What it waited for: the memory, from the first full window on.
        let u = s.unmet();
        assert_eq!((u.load, u.rps_flat), (0, 0));
        assert_eq!(u.mem_flat as usize, at - 14);
    }

    #[test]
    fn noise_and_a_missed_load_keep_it_unstable() {
        // ±10 % alternating noise: flat, but far from the line.
        let mut s = Stabilizer::new(Thresholds::FULL);
        let noisy = |i: usize| if i % 2 == 0 { 1100.0 } else { 900.0 };
        assert_eq!(run(&mut s, noisy, |_| 4e9), None);
        // Steady at 90 % of rps_max when 100 % is asked.
        let mut s = Stabilizer::new(Thresholds::FULL);
        assert_eq!(run(&mut s, |_| 900.0, |_| 4e9), None);
        // Quick mode takes the noise and the shortfall.
        let mut s = Stabilizer::new(Thresholds::QUICK);
        let mild = |i: usize| if i % 2 == 0 { 960.0 } else { 940.0 };
        assert_eq!(run(&mut s, mild, |_| 4e9), Some(4));
    }

    #[test]
    fn the_fit_is_a_least_squares_line() {
        let mut w = Window::new(5);
        for v in [10.0, 12.0, 14.0, 16.0, 18.0] {
            w.push(v);
        }
        let f = w.fit().unwrap();
        assert_eq!(f.mean, 14.0);
        assert!((f.slope - 2.0 / 14.0).abs() < 1e-12);
        assert!(f.err < 1e-12);
    }
}
