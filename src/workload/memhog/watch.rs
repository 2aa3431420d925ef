//! Keeping the host alive while the hog runs. Upstream left this to oomd; we watch ourselves,
//! once a second: free swap below 10 % of the total, or system.slice (where the hog runs)
//! stalled on memory (`full` pressure) for at least 90 % of every second for 30 seconds, ends
//! the hog. The kernel's OOM killer taking it (its cgroup has `memory.oom.group=1`), its
//! timeout and the bench having seen enough end it too; every end is recorded as a [`HogEnd`].

use serde::{Deserialize, Serialize};

/// Why the hog ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HogEnd {
    /// Free swap fell below the floor.
    SwapLow,
    /// system.slice stayed stalled on memory.
    Pressure,
    /// The kernel's OOM killer took it.
    OomKill,
    /// Its time was up.
    Timeout,
    /// The bench had what it needed (a tune probe's verdict).
    Done,
    /// It exited on its own: a failure of the hog.
    Exited,
}

impl HogEnd {
    pub fn describe(self) -> &'static str {
        match self {
            HogEnd::SwapLow => "free swap ran low",
            HogEnd::Pressure => "system.slice memory pressure stayed high",
            HogEnd::OomKill => "the kernel's OOM killer took it",
            HogEnd::Timeout => "its time was up",
            HogEnd::Done => "the probe had its verdict",
            HogEnd::Exited => "it exited on its own",
        }
    }
}

/// Free swap below this share of the total ends the hog (oomd's swap rule).
pub const SWAP_FLOOR: f64 = 0.10;
/// `full` memory pressure of system.slice at or above this …
pub const PSI_THR: f64 = 0.90;
/// … for this many seconds ends the hog (the thresholds upstream's protection gives oomd).
pub const PSI_SECS: f64 = 30.0;

/// One look at the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds (any monotonic origin).
    pub now: f64,
    pub swap_free: u64,
    pub swap_total: u64,
    /// system.slice's cumulative `full` memory stall time, microseconds.
    pub sys_mem_full_us: u64,
}

/// The watch's memory between samples.
#[derive(Debug, Clone, Default)]
pub struct Watch {
    last: Option<(f64, u64)>,
    /// Since when every second was at or above [`PSI_THR`].
    above_since: Option<f64>,
}

impl Watch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the hog must end now, and why (with the figures).
    pub fn check(&mut self, s: &Sample) -> Option<(HogEnd, String)> {
        if s.swap_total > 0 && (s.swap_free as f64) < SWAP_FLOOR * s.swap_total as f64 {
            return Some((
                HogEnd::SwapLow,
                format!(
                    "free swap {:.1}% of {} MiB is below {:.0}%",
                    s.swap_free as f64 * 100.0 / s.swap_total as f64,
                    s.swap_total >> 20,
                    SWAP_FLOOR * 100.0
                ),
            ));
        }
        let last = self.last.replace((s.now, s.sys_mem_full_us));
        let (t0, us0) = last?;
        let dt = s.now - t0;
        if dt <= 0.0 {
            return None;
        }
        let pressure = s.sys_mem_full_us.saturating_sub(us0) as f64 / 1e6 / dt;
        if pressure < PSI_THR {
            self.above_since = None;
            return None;
        }
        let since = *self.above_since.get_or_insert(t0);
        if s.now - since >= PSI_SECS {
            return Some((
                HogEnd::Pressure,
                format!(
                    "system.slice full memory pressure >= {:.0}% for {:.0}s",
                    PSI_THR * 100.0,
                    s.now - since
                ),
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn sample(now: f64, swap_free: u64, full_us: u64) -> Sample {
        Sample {
            now,
            swap_free,
            swap_total: 4 * GIB,
            sys_mem_full_us: full_us,
        }
    }

    #[test]
    fn low_swap_ends_the_hog_at_once() {
        let mut w = Watch::new();
        assert_eq!(w.check(&sample(0.0, GIB, 0)), None);
        let end = w.check(&sample(1.0, 400 << 20, 0)).unwrap();
        assert_eq!(end.0, HogEnd::SwapLow);
        assert!(end.1.contains("9.8% of 4096 MiB"), "{}", end.1);
        // No swap at all: nothing to run out of.
        let mut w = Watch::new();
        let s = Sample {
            swap_total: 0,
            swap_free: 0,
            ..sample(0.0, 0, 0)
        };
        assert_eq!(w.check(&s), None);
    }

    #[test]
    fn pressure_must_stay_high_for_thirty_seconds() {
        let mut w = Watch::new();
        let mut us = 0;
        assert_eq!(w.check(&sample(0.0, 2 * GIB, us)), None);
        // 29 s at 95 %: not yet.
        for t in 1..30 {
            us += 950_000;
            assert_eq!(w.check(&sample(t as f64, 2 * GIB, us)), None, "t={}", t);
        }
        us += 950_000;
        let end = w.check(&sample(30.0, 2 * GIB, us)).unwrap();
        assert_eq!(end.0, HogEnd::Pressure);

        // One second below the threshold starts the count again.
        let mut w = Watch::new();
        let mut us = 0;
        w.check(&sample(0.0, 2 * GIB, us));
        for t in 1..=50 {
            us += if t == 20 { 500_000 } else { 990_000 };
            let r = w.check(&sample(t as f64, 2 * GIB, us));
            // High again from second 20 on: 30 s later, at 50, it ends.
            assert_eq!(r.is_some(), t == 50, "t={}", t);
        }
        // Missing seconds count by the time that passed.
        let mut w = Watch::new();
        w.check(&sample(0.0, 2 * GIB, 0));
        assert_eq!(w.check(&sample(10.0, 2 * GIB, 9_500_000)), None);
        assert!(w.check(&sample(30.0, 2 * GIB, 28_500_000)).is_some());
    }
}
