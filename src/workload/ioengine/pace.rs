//! When each IO is due. Without a rate the job is closed-loop: an IO is due the moment a queue
//! slot frees up. With one it is open-loop: IOs are due on a schedule fixed in advance —
//! `linear` at even gaps, `poisson` at exponential gaps with the same mean — whether or not the
//! device keeps up. An IO's latency counts from when it was due, so IOs that wait for a slot
//! behind a stalled device carry that wait in their latency instead of not being issued at all
//! (what a closed loop does, hiding the stall: coordinated omission).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    Linear,
    Poisson,
}

impl Arrivals {
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Linear => "linear",
            Arrivals::Poisson => "poisson",
        }
    }
}

/// An open-loop schedule: the due times (ns from the start) of one worker's IOs, in order.
#[derive(Debug, Clone)]
pub struct Schedule {
    arrivals: Arrivals,
    /// Mean gap between IOs, ns.
    gap: f64,
    /// IOs scheduled so far (linear times are `k × gap`, so no rounding drift builds up).
    k: u64,
    start: f64,
    next: f64,
    rng: SmallRng,
}

impl Schedule {
    /// `iops` IOs per second on average, the first one due at `start_ns`.
    pub fn new(iops: f64, arrivals: Arrivals, start_ns: u64, seed: u64) -> Self {
        let mut s = Schedule {
            arrivals,
            gap: 1e9 / iops.max(1e-9),
            k: 0,
            start: start_ns as f64,
            next: start_ns as f64,
            rng: SmallRng::seed_from_u64(seed),
        };
        if arrivals == Arrivals::Poisson {
            // The first arrival is a gap away too, so the process has no IO pinned to the start.
            s.next += s.exp_gap();
        }
        s
    }

    fn exp_gap(&mut self) -> f64 {
        // 1 - U is in (0, 1]: ln never sees 0.
        let u: f64 = 1.0 - self.rng.gen::<f64>();
        -u.ln() * self.gap
    }

    /// When the next IO is due.
    pub fn next_due(&self) -> u64 {
        self.next as u64
    }

    /// Takes the next IO off the schedule; returns its due time.
    pub fn take(&mut self) -> u64 {
        let due = self.next_due();
        self.k += 1;
        match self.arrivals {
            Arrivals::Linear => self.next = self.start + self.k as f64 * self.gap,
            Arrivals::Poisson => self.next += self.exp_gap(),
        }
        due
    }

    /// How many IOs are due by `now` and not yet taken.
    pub fn backlog(&self, now: u64) -> u64 {
        if now < self.next_due() {
            return 0;
        }
        match self.arrivals {
            Arrivals::Linear => ((now as f64 - self.next) / self.gap) as u64 + 1,
            // Unknown without drawing the gaps; at least one.
            Arrivals::Poisson => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_gaps_are_even_and_do_not_drift() {
        let mut s = Schedule::new(3000.0, Arrivals::Linear, 1_000, 1);
        let times: Vec<u64> = (0..3_000_001).map(|_| s.take()).collect();
        assert_eq!(times[0], 1_000);
        assert_eq!(times[1] - times[0], 333_333);
        // A million seconds... of IOs later, still on the grid (within one ns).
        let last = *times.last().unwrap() as f64;
        assert!(
            (last - (1_000.0 + 1e9 / 3000.0 * 3e6)).abs() <= 1.0,
            "{}",
            last
        );
    }

    #[test]
    fn poisson_gaps_have_the_mean_and_spread_of_an_exponential() {
        let mut s = Schedule::new(1000.0, Arrivals::Poisson, 0, 7);
        let n = 200_000;
        let mut prev = 0u64;
        let gaps: Vec<f64> = (0..n)
            .map(|_| {
                let t = s.take();
                let g = (t - prev) as f64;
                prev = t;
                g
            })
            .collect();
        let mean = gaps.iter().sum::<f64>() / n as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        // Exponential: stdev = mean = 1 ms.
        assert!((mean - 1e6).abs() < 0.01e6, "mean {}", mean);
        assert!((var.sqrt() - 1e6).abs() < 0.02e6, "stdev {}", var.sqrt());
        // Memoryless: about e^-1 of the gaps are longer than the mean.
        let longer = gaps.iter().filter(|&&g| g > 1e6).count() as f64 / n as f64;
        assert!((longer - (-1f64).exp()).abs() < 0.01, "{}", longer);
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let mut a = Schedule::new(500.0, Arrivals::Poisson, 0, 42);
        let mut b = Schedule::new(500.0, Arrivals::Poisson, 0, 42);
        for _ in 0..1000 {
            assert_eq!(a.take(), b.take());
        }
    }

    #[test]
    fn backlog_counts_the_linear_ios_due() {
        let mut s = Schedule::new(1000.0, Arrivals::Linear, 0, 0);
        assert_eq!(s.backlog(0), 1);
        assert_eq!(s.backlog(9_999_999), 10);
        s.take();
        assert_eq!(s.backlog(500_000), 0);
    }
}
