//! When each IO is due. Without a rate the job is closed-loop: an IO is due the moment a queue
//! slot frees up. With one it is open-loop: IOs are due on a schedule fixed in advance —
//! `linear` at even gaps, `poisson` at exponential gaps with the same mean, `stratified` at
//! random gaps too but with each second holding exactly its share of IOs — whether or not the
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
    /// Poisson arrivals conditioned on their count per stratum: a stratum of `s` seconds
    /// from `t` holds exactly `⌊(t+s)·r⌋ − ⌊t·r⌋` IOs, placed uniformly at random in it. Given
    /// its count, a Poisson process's points are uniform, so within a stratum the gaps and the
    /// queue they build are Poisson's; at its ends the count is exact, so a short run reaches
    /// its target rate instead of missing it by the count's √n noise. The strata are the ramp
    /// and the measured time when the run has a duration, else seconds.
    Stratified,
}

impl Arrivals {
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Linear => "linear",
            Arrivals::Poisson => "poisson",
            Arrivals::Stratified => "stratified",
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
    /// Stratified: the IOs per second, the first stratum's length and the others' (s), the
    /// current stratum, its IO count, how many of them are taken and where in it (0..1) the
    /// last one fell.
    iops: f64,
    first_s: f64,
    len_s: f64,
    stratum: u64,
    in_stratum: u64,
    taken: u64,
    at: f64,
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
            iops: iops.max(1e-9),
            first_s: 1.0,
            len_s: 1.0,
            stratum: 0,
            in_stratum: 0,
            taken: 0,
            at: 0.0,
        };
        match arrivals {
            Arrivals::Linear => {}
            // The first arrival is a gap away too, so the process has no IO pinned to the start.
            Arrivals::Poisson => s.next += s.exp_gap(),
            Arrivals::Stratified => s.restrata(),
        }
        s
    }

    /// Stratified strata of `first_ns` (the ramp, or the measured time) and then `len_ns` each
    /// (the measured time), instead of seconds.
    pub fn with_strata(mut self, first_ns: u64, len_ns: u64) -> Self {
        if self.arrivals == Arrivals::Stratified && first_ns > 0 && len_ns > 0 {
            self.first_s = first_ns as f64 / 1e9;
            self.len_s = len_ns as f64 / 1e9;
            self.restrata();
        }
        self
    }

    fn restrata(&mut self) {
        self.stratum = 0;
        self.taken = 0;
        self.at = 0.0;
        self.in_stratum = self.share(0);
        self.next = self.stratified_next();
    }

    /// Where stratum `b` starts and ends, seconds from the start.
    fn bounds(&self, b: u64) -> (f64, f64) {
        let end = |b: u64| self.first_s + b as f64 * self.len_s;
        (if b == 0 { 0.0 } else { end(b - 1) }, end(b))
    }

    /// How many IOs stratum `b` holds: the cumulative count is `⌊t·r⌋` at every boundary.
    fn share(&self, b: u64) -> u64 {
        let (from, to) = self.bounds(b);
        (to * self.iops).floor() as u64 - (from * self.iops).floor() as u64
    }

    /// The due time of the next stratified IO, moving on to the next stratum with any IOs when
    /// this one's are all taken. A stratum's points come in order without being stored: given
    /// the last of k uniform points so far at `at`, the next of the n − k left is
    /// `1 − (1 − at)·V^(1/(n−k))` for V uniform (the minimum of n − k uniforms on (at, 1)).
    fn stratified_next(&mut self) -> f64 {
        while self.taken == self.in_stratum {
            self.stratum += 1;
            self.in_stratum = self.share(self.stratum);
            self.taken = 0;
            self.at = 0.0;
        }
        let v: f64 = 1.0 - self.rng.gen::<f64>();
        let left = (self.in_stratum - self.taken) as f64;
        self.at = 1.0 - (1.0 - self.at) * v.powf(1.0 / left);
        let (from, to) = self.bounds(self.stratum);
        self.start + (from + self.at * (to - from)) * 1e9
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
            Arrivals::Stratified => {
                self.taken += 1;
                self.next = self.stratified_next();
            }
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
            Arrivals::Poisson | Arrivals::Stratified => 1,
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
    fn stratified_seconds_hold_exactly_their_share_at_random_gaps() {
        // 333.3 IOs/s: seconds of 333 and 334, 3333 by the 10th, whatever the gaps.
        let mut s = Schedule::new(333.3, Arrivals::Stratified, 5, 3);
        let times: Vec<u64> = (0..100_000).map(|_| s.take()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "out of order");
        for sec in [1u64, 10, 77, 299] {
            let by = times
                .iter()
                .filter(|&&t| t < 5 + sec * 1_000_000_000)
                .count() as f64;
            assert!(
                (by - (sec as f64 * 333.3).floor()).abs() < 1.0,
                "{} by {} s",
                by,
                sec
            );
        }
        // The gaps look exponential: mean 1/r, stdev close to it (n/(n+2) of its variance),
        // about e^-1 of them longer than the mean.
        let gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!((mean / (1e9 / 333.3) - 1.0).abs() < 0.01, "mean {}", mean);
        assert!((sd / mean - 1.0).abs() < 0.03, "stdev/mean {}", sd / mean);
        let longer = gaps.iter().filter(|&&g| g > mean).count() as f64 / n;
        assert!((longer - (-1f64).exp()).abs() < 0.01, "{}", longer);
    }

    #[test]
    fn stratified_strata_follow_the_ramp_and_the_measured_time() {
        // A 2 s ramp, then 10 s strata: exactly 3000 and 15000 IOs by their ends at 1500 IOs/s.
        let s = Schedule::new(1500.0, Arrivals::Stratified, 0, 4);
        let mut s = s.with_strata(2_000_000_000, 10_000_000_000);
        let times: Vec<u64> = (0..40_000).map(|_| s.take()).collect();
        let by = |t: u64| times.iter().filter(|&&x| x < t).count();
        assert_eq!(by(2_000_000_000), 3000);
        assert_eq!(by(12_000_000_000), 18000);
        assert_eq!(by(22_000_000_000), 33000);
        // Inside a stratum the count wanders as a Poisson process's would (a Brownian
        // bridge), instead of being pinned every second: over 12 mid-stratum seconds, the
        // spread is far above one IO.
        let off: Vec<f64> = (0..12)
            .map(|k| by(2_500_000_000 + k * 800_000_000) as f64 - 1500.0 * (2.5 + k as f64 * 0.8))
            .collect();
        assert!(off.iter().any(|o| o.abs() > 5.0), "{:?}", off);
    }

    #[test]
    fn stratified_below_one_iops_skips_empty_seconds() {
        let mut s = Schedule::new(0.25, Arrivals::Stratified, 0, 9);
        let secs: Vec<u64> = (0..4).map(|_| s.take() / 1_000_000_000).collect();
        assert_eq!(secs, vec![3, 7, 11, 15]);
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
