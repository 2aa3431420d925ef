//! Randomness for hashd: a small fast generator and the clamped-normal distribution.
//!
//! hashd draws several numbers per request and fills pages with random bytes, so the generator
//! must be cheap; it needs no cryptographic quality. Each worker thread owns one.

use std::f64::consts::TAU;

/// xoshiro256++ seeded through splitmix64.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng { s }
    }

    /// Seeded from the clock, the thread and a process-wide counter: distinct per call.
    pub fn from_entropy() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static CNT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let n = CNT.fetch_add(1, Ordering::Relaxed);
        Self::seeded(nanos ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9e37))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi].
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }

    /// true with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.f64() < p
    }

    /// Standard normal (Box–Muller; one of the pair is used).
    pub fn std_normal(&mut self) -> f64 {
        // 1 - u is in (0, 1], so ln() is finite.
        let u1 = 1.0 - self.f64();
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (TAU * u2).cos()
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_ne_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let v = self.next_u64().to_ne_bytes();
            let n = rest.len();
            rest.copy_from_slice(&v[..n]);
        }
    }
}

/// Normal(mean, stdev) restricted to [lo, hi]: a draw outside the bounds is replaced by a
/// uniform draw over them (not redrawn, not clamped). A large stdev therefore turns it into a
/// uniform distribution; a stdev of 0 always gives the mean (clamped into the bounds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClampedNormal {
    pub mean: f64,
    pub stdev: f64,
    pub lo: f64,
    pub hi: f64,
}

impl ClampedNormal {
    /// Bounds given in either order are sorted; a negative or non-finite stdev counts as 0.
    pub fn new(mean: f64, stdev: f64, lo: f64, hi: f64) -> Self {
        let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        let stdev = if stdev.is_finite() && stdev > 0.0 {
            stdev
        } else {
            0.0
        };
        ClampedNormal {
            mean,
            stdev,
            lo,
            hi,
        }
    }

    pub fn sample(&self, rng: &mut Rng) -> f64 {
        if self.stdev == 0.0 {
            return self.mean.clamp(self.lo, self.hi);
        }
        let v = self.mean + self.stdev * rng.std_normal();
        if v >= self.lo && v <= self.hi {
            v
        } else {
            rng.uniform(self.lo, self.hi)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(d: ClampedNormal, n: usize) -> Vec<f64> {
        let mut rng = Rng::seeded(7);
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    fn mean_sd(v: &[f64]) -> (f64, f64) {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
        (m, var.sqrt())
    }

    #[test]
    fn samples_stay_within_bounds() {
        for sd in [0.01, 0.2, 1.0, 5.0, 100.0] {
            for x in samples(ClampedNormal::new(0.3, sd, -1.0, 1.0), 20_000) {
                assert!((-1.0..=1.0).contains(&x), "sd {sd}: {x} out of bounds");
            }
        }
    }

    #[test]
    fn narrow_stdev_is_normal() {
        let v = samples(ClampedNormal::new(10.0, 1.0, 0.0, 20.0), 50_000);
        let (m, sd) = mean_sd(&v);
        assert!((m - 10.0).abs() < 0.03, "mean {m}");
        assert!((sd - 1.0).abs() < 0.03, "sd {sd}");
        // ~68 % within one sigma.
        let within = v.iter().filter(|x| (**x - 10.0).abs() < 1.0).count() as f64 / 5e4;
        assert!((within - 0.6827).abs() < 0.01, "within 1 sigma {within}");
    }

    #[test]
    fn huge_stdev_is_uniform() {
        // stdev 100 on [-1, 1]: nearly every draw is out of bounds and replaced by a uniform.
        let v = samples(ClampedNormal::new(0.0, 100.0, -1.0, 1.0), 100_000);
        let (m, sd) = mean_sd(&v);
        assert!(m.abs() < 0.02, "mean {m}");
        // Uniform[-1, 1] has sd 1/sqrt(3).
        assert!((sd - 1.0 / 3f64.sqrt()).abs() < 0.01, "sd {sd}");
        let mut bins = [0usize; 10];
        for x in &v {
            bins[(((x + 1.0) / 2.0 * 10.0) as usize).min(9)] += 1;
        }
        for b in bins {
            assert!((b as f64 - 10_000.0).abs() < 600.0, "bins {bins:?}");
        }
    }

    #[test]
    fn out_of_bounds_mass_goes_uniform_not_to_the_edges() {
        // Mean at the upper bound: half the draws fall outside and are spread uniformly, so
        // the bound itself gets no point mass.
        let v = samples(ClampedNormal::new(1.0, 0.5, 0.0, 1.0), 50_000);
        let at_edge = v.iter().filter(|x| **x > 0.999).count();
        assert!(at_edge < 200, "{at_edge} samples piled at the edge");
        let low_half = v.iter().filter(|x| **x < 0.5).count() as f64 / 5e4;
        // In bounds below 0.5: P(N(1,.5) < .5) - P(< 0) = .1587 - .0228 = .136;
        // out of bounds (.5228) spread uniformly puts half of it below .5 → .397.
        assert!((low_half - 0.397).abs() < 0.015, "below 0.5: {low_half}");
    }

    #[test]
    fn zero_stdev_returns_the_mean() {
        let mut rng = Rng::seeded(1);
        let d = ClampedNormal::new(0.25, 0.0, -1.0, 1.0);
        assert!((0..100).all(|_| d.sample(&mut rng) == 0.25));
        let d = ClampedNormal::new(5.0, 0.0, -1.0, 1.0);
        assert_eq!(d.sample(&mut rng), 1.0);
    }

    #[test]
    fn uniform_f64_range() {
        let mut rng = Rng::seeded(3);
        for _ in 0..10_000 {
            let x = rng.f64();
            assert!((0.0..1.0).contains(&x));
        }
        let mut buf = [0u8; 13];
        rng.fill(&mut buf);
        assert!(buf.iter().any(|b| *b != 0));
    }
}
