//! Latency distributions: exact count, min, max, mean and standard deviation from running sums,
//! percentiles from a log-linear histogram (`hdrhistogram` with 128 linear buckets per power
//! of two: a bucket is at most 1/128 of its value wide, as fio's). Two distributions merge
//! exactly — bucket counts add — so results of several workers, runs or hosts combine without
//! re-measuring.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The largest latency tracked exactly, ns (an hour); longer ones count as this.
pub const MAX_TRACKED_NS: u64 = 3_600_000_000_000;
/// 2 significant digits: 256 sub-buckets, the upper half of them 1/128 apart.
const SIGFIG: u8 = 2;

/// fio's default percentile list.
pub const DFL_PERCENTILES: &[f64] = &[
    1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95,
    99.99,
];

#[derive(Debug, Clone)]
pub struct LatHist {
    h: Histogram<u64>,
    n: u64,
    min: u64,
    max: u64,
    mean: f64,
    /// Sum of squared deviations from the mean (Welford), for the stdev.
    m2: f64,
    /// Samples above `MAX_TRACKED_NS` (recorded as it).
    clamped: u64,
}

impl Default for LatHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatHist {
    pub fn new() -> Self {
        LatHist {
            h: Histogram::new_with_bounds(1, MAX_TRACKED_NS, SIGFIG)
                .expect("constant histogram bounds are valid"),
            n: 0,
            min: u64::MAX,
            max: 0,
            mean: 0.0,
            m2: 0.0,
            clamped: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        let v = if ns > MAX_TRACKED_NS {
            self.clamped += 1;
            MAX_TRACKED_NS
        } else {
            ns.max(1)
        };
        // In bounds by construction.
        let _ = self.h.record(v);
        self.n += 1;
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
        let x = ns as f64;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn min(&self) -> u64 {
        if self.n == 0 {
            0
        } else {
            self.min
        }
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Population standard deviation (fio's).
    pub fn stdev(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / self.n as f64).max(0.0).sqrt()
        }
    }

    /// The value at percentile `pct` (0–100): the smallest recorded value (to the bucket's
    /// precision) with at least `pct` % of the samples at or below it.
    pub fn percentile(&self, pct: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        // Bucket edges can overshoot the true extremes; the exact ones are known.
        self.h
            .value_at_quantile(pct / 100.0)
            .clamp(self.min(), self.max.max(1))
    }

    /// Adds `other`'s samples: the result is what recording both streams would have given.
    pub fn merge(&mut self, other: &LatHist) {
        if other.n == 0 {
            return;
        }
        // Same bounds on both sides: cannot fail.
        let _ = self.h.add(&other.h);
        let (n1, n2) = (self.n as f64, other.n as f64);
        let (m1, m2) = (self.mean(), other.mean());
        let n = n1 + n2;
        let delta = m2 - m1;
        self.m2 += other.m2 + delta * delta * n1 * n2 / n;
        self.mean = (m1 * n1 + m2 * n2) / n;
        self.n += other.n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.clamped += other.clamped;
    }

    /// The serialized form: summary numbers, `pcts` and every non-empty bucket.
    pub fn out(&self, pcts: &[f64]) -> LatOut {
        LatOut {
            n: self.n,
            min_ns: self.min(),
            max_ns: self.max,
            mean_ns: self.mean(),
            stdev_ns: self.stdev(),
            sum_sq_dev: self.m2,
            clamped: self.clamped,
            percentiles: pcts
                .iter()
                .map(|&p| (pct_key(p), self.percentile(p)))
                .collect(),
            bins: self
                .h
                .iter_recorded()
                .map(|v| {
                    (
                        self.h.lowest_equivalent(v.value_iterated_to()),
                        v.count_at_value(),
                    )
                })
                .collect(),
        }
    }

    /// Back from the serialized form (exactly: the buckets and the running sums are stored).
    pub fn from_out(o: &LatOut) -> Result<LatHist, String> {
        let mut l = LatHist::new();
        let mut total = 0u64;
        for (&v, &c) in &o.bins {
            if v == 0 || v > MAX_TRACKED_NS {
                return Err(format!("bucket value {} is out of range", v));
            }
            l.h.record_n(v, c)
                .map_err(|e| format!("bucket {}: {:?}", v, e))?;
            total += c;
        }
        if total != o.n {
            return Err(format!(
                "buckets hold {} samples, the count says {}",
                total, o.n
            ));
        }
        if o.n > 0 && o.min_ns > o.max_ns {
            return Err(format!("min_ns {} is above max_ns {}", o.min_ns, o.max_ns));
        }
        l.n = o.n;
        l.min = if o.n == 0 { u64::MAX } else { o.min_ns };
        l.max = o.max_ns;
        l.mean = o.mean_ns;
        l.m2 = o.sum_sq_dev;
        l.clamped = o.clamped;
        Ok(l)
    }
}

/// fio's percentile key: `"99.900000"`.
pub fn pct_key(p: f64) -> String {
    format!("{:.6}", p)
}

/// A latency distribution as stored in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatOut {
    pub n: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub stdev_ns: f64,
    /// Σ(x − mean)², so merged standard deviations stay exact.
    pub sum_sq_dev: f64,
    /// Samples longer than the tracked range (counted at its top).
    pub clamped: u64,
    pub percentiles: Vec<(String, u64)>,
    /// Non-empty buckets: the bucket's lowest value in ns → count (fio's json+ `bins`).
    pub bins: BTreeMap<u64, u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// Nearest rank: the smallest sample with at least `pct` % of the samples at or below it.
    fn exact(sorted: &[u64], pct: f64) -> u64 {
        let rank = ((pct / 100.0 * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    fn samples(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        // Log-normal-ish: most around 100 µs, a tail to tens of ms, a few 1-ns values.
        (0..n)
            .map(|i| {
                if i % 9973 == 0 {
                    1
                } else {
                    let e: f64 = rng.gen_range(0.0..1.0f64);
                    (50_000.0 * (1.0 + 8.0 * e.powi(6)).exp()) as u64
                }
            })
            .collect()
    }

    #[test]
    fn percentiles_match_exact_sorted_samples_within_a_bucket() {
        let s = samples(1, 100_000);
        let mut h = LatHist::new();
        s.iter().for_each(|&v| h.record(v));
        let mut sorted = s.clone();
        sorted.sort_unstable();
        for &p in DFL_PERCENTILES.iter().chain(&[0.001, 50.0, 99.999, 100.0]) {
            let (got, want) = (h.percentile(p), exact(&sorted, p));
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(
                err <= 1.0 / 128.0,
                "p{}: {} vs exact {} ({:.5})",
                p,
                got,
                want,
                err
            );
        }
        assert_eq!(h.min(), sorted[0]);
        assert_eq!(h.max(), *sorted.last().unwrap());
        let mean = s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64;
        let sd =
            (s.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / s.len() as f64).sqrt();
        assert!((h.mean() - mean).abs() / mean < 1e-12);
        assert!(
            (h.stdev() - sd).abs() / sd < 1e-9,
            "{} vs {}",
            h.stdev(),
            sd
        );
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let (a, b) = (samples(2, 30_000), samples(3, 50_000));
        let (mut ha, mut hb, mut all) = (LatHist::new(), LatHist::new(), LatHist::new());
        a.iter().for_each(|&v| ha.record(v));
        b.iter().for_each(|&v| hb.record(v));
        a.iter().chain(&b).for_each(|&v| all.record(v));
        ha.merge(&hb);
        let pcts = DFL_PERCENTILES;
        let (m, w) = (ha.out(pcts), all.out(pcts));
        assert_eq!((m.n, m.min_ns, m.max_ns), (w.n, w.min_ns, w.max_ns));
        assert_eq!(m.bins, w.bins);
        assert_eq!(m.percentiles, w.percentiles);
        assert!((m.mean_ns - w.mean_ns).abs() / w.mean_ns < 1e-12);
        assert!((m.stdev_ns - w.stdev_ns).abs() / w.stdev_ns < 1e-9);
    }

    #[test]
    fn the_stored_form_reads_back_exactly_and_bad_ones_are_refused() {
        let mut h = LatHist::new();
        samples(4, 10_000).iter().for_each(|&v| h.record(v));
        h.record(MAX_TRACKED_NS * 2);
        let out = h.out(&[50.0, 99.0]);
        assert_eq!(out.clamped, 1);
        assert_eq!(out.max_ns, MAX_TRACKED_NS * 2);
        let back = LatHist::from_out(&out).unwrap();
        assert_eq!(back.out(&[50.0, 99.0]), out);
        let json = serde_json::to_string(&out).unwrap();
        assert!(json.contains("\"99.000000\""), "{}", json);
        let mut bad = out.clone();
        bad.n += 1;
        assert!(LatHist::from_out(&bad)
            .unwrap_err()
            .contains("buckets hold"));
    }

    #[test]
    fn empty_is_all_zero() {
        let h = LatHist::new();
        assert_eq!((h.min(), h.max(), h.percentile(99.0)), (0, 0, 0));
        assert_eq!((h.mean(), h.stdev()), (0.0, 0.0));
    }
}
