//! Distributions the studies build from per-second samples.
//!
//! * [`MeanPcts`]: every sample is kept (with a weight, so a value standing for `cnt` seconds
//!   is stored once), and percentiles are exact nearest-rank: the value of rank
//!   `max(1, ceil(q·n))` among the sorted samples — exact at 0 (min) and 1 (max). `mean` is
//!   arithmetic and `stdev` the sample standard deviation (n − 1; 0 with at most one sample).
//!   This is what upstream's CKMS quantiles approximate.
//! * [`Mean`]: mean, sample stdev, min and max.
//!
//! Weighting by `cnt` gives exactly the result of pushing the value `cnt` times.

use crate::units::PCT_LABELS;
use std::collections::BTreeMap;

/// Labels of the nested IO-latency distributions over time.
pub const TIME_PCTS: &[&str] = &[
    "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "99.9", "100", "mean", "stdev",
];

/// The quantile (0 … 1) of a percentile label (`"05"` → 0.05, `"99.9"` → 0.999); `None` for
/// `mean`, `stdev` and anything that isn't a number in 0 … 100.
pub fn label_quantile(label: &str) -> Option<f64> {
    let p: f64 = label.parse().ok()?;
    (0.0..=100.0).contains(&p).then_some(p / 100.0)
}

/// Samples with weights; percentiles, mean and stdev on demand.
#[derive(Debug, Clone, Default)]
pub struct MeanPcts {
    samples: Vec<(f64, u64)>,
    total: u64,
}

impl MeanPcts {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one sample. Non-finite values are ignored.
    pub fn push(&mut self, v: f64) {
        self.push_n(v, 1);
    }

    /// Adds `v` as if pushed `cnt` times.
    pub fn push_n(&mut self, v: f64, cnt: u64) {
        if cnt == 0 || !v.is_finite() {
            return;
        }
        self.samples.push((v, cnt));
        self.total += cnt;
    }

    /// Number of samples (counting weights).
    pub fn len(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    fn sorted(&self) -> Vec<(f64, u64)> {
        let mut s = self.samples.clone();
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
        s
    }

    fn quantile_sorted(sorted: &[(f64, u64)], total: u64, q: f64) -> f64 {
        if total == 0 {
            return 0.0;
        }
        // ceil with a little slack so 0.05·100 = 5.000000000000001 still ranks 5.
        let rank = ((q * total as f64 - 1e-9).ceil().max(1.0) as u64).min(total);
        let mut seen = 0;
        for &(v, w) in sorted {
            seen += w;
            if seen >= rank {
                return v;
            }
        }
        sorted.last().map_or(0.0, |s| s.0)
    }

    /// Nearest-rank value at quantile `q` (0 … 1); 0 without samples.
    pub fn quantile(&self, q: f64) -> f64 {
        Self::quantile_sorted(&self.sorted(), self.total, q.clamp(0.0, 1.0))
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        self.samples.iter().map(|(v, w)| v * *w as f64).sum::<f64>() / self.total as f64
    }

    /// Sample standard deviation; 0 with fewer than two samples.
    pub fn stdev(&self) -> f64 {
        if self.total <= 1 {
            return 0.0;
        }
        let mean = self.mean();
        let ss: f64 = self
            .samples
            .iter()
            .map(|(v, w)| (v - mean).powi(2) * *w as f64)
            .sum();
        (ss / (self.total - 1) as f64).sqrt()
    }

    /// `{label → value}` for the given labels (percentiles, `mean`, `stdev`); unknown labels
    /// are left out.
    pub fn result(&self, labels: &[&str]) -> BTreeMap<String, f64> {
        let sorted = self.sorted();
        labels
            .iter()
            .filter_map(|&l| {
                let v = match l {
                    "mean" => self.mean(),
                    "stdev" => self.stdev(),
                    _ => Self::quantile_sorted(&sorted, self.total, label_quantile(l)?),
                };
                Some((l.to_string(), v))
            })
            .collect()
    }

    /// The default distribution: [`PCT_LABELS`] (00 … 100, mean, stdev).
    pub fn dfl_result(&self) -> BTreeMap<String, f64> {
        self.result(PCT_LABELS)
    }
}

/// Mean, sample stdev, min and max of the samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MeanStats {
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
}

/// Collects samples for [`MeanStats`].
#[derive(Debug, Clone, Default)]
pub struct Mean {
    inner: MeanPcts,
}

impl Mean {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, v: f64) {
        self.inner.push(v);
    }

    pub fn push_n(&mut self, v: f64, cnt: u64) {
        self.inner.push_n(v, cnt);
    }

    pub fn len(&self) -> u64 {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// All zero without samples; `(v, 0, v, v)` with one.
    pub fn result(&self) -> MeanStats {
        if self.inner.is_empty() {
            return MeanStats::default();
        }
        MeanStats {
            mean: self.inner.mean(),
            stdev: self.inner.stdev(),
            min: self.inner.quantile(0.0),
            max: self.inner.quantile(1.0),
        }
    }
}

/// Arithmetic mean and sample standard deviation (0 for fewer than two values).
pub fn mean_stdev(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank computed the slow way from replicated values.
    fn nearest_rank(vals: &[f64], q: f64) -> f64 {
        let mut s = vals.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let rank = ((q * n as f64).ceil() as usize).max(1);
        s[rank - 1]
    }

    #[test]
    fn nearest_rank_percentiles_on_1_to_100() {
        let mut d = MeanPcts::new();
        for v in (1..=100).rev() {
            d.push(v as f64);
        }
        let r = d.dfl_result();
        let want = [
            ("00", 1.0),
            ("01", 1.0),
            ("05", 5.0),
            ("10", 10.0),
            ("25", 25.0),
            ("50", 50.0),
            ("75", 75.0),
            ("90", 90.0),
            ("95", 95.0),
            ("99", 99.0),
            ("100", 100.0),
            ("mean", 50.5),
        ];
        for (l, v) in want {
            assert_eq!(r[l], v, "label {}", l);
        }
        // Sample stdev of 1..=100: sqrt(100·101/12) = 29.011…
        assert!((r["stdev"] - 29.011_491_975_882_02).abs() < 1e-9);
        assert_eq!(r.len(), PCT_LABELS.len());
    }

    #[test]
    fn small_sets_and_fractional_labels() {
        let mut d = MeanPcts::new();
        for v in [3.0, 1.0, 2.0] {
            d.push(v);
        }
        let r = d.result(TIME_PCTS);
        assert_eq!(r["00"], 1.0);
        assert_eq!(r["25"], 1.0); // ceil(0.75) = 1
        assert_eq!(r["50"], 2.0); // ceil(1.5) = 2
        assert_eq!(r["75"], 3.0); // ceil(2.25) = 3
        assert_eq!(r["99.9"], 3.0);
        assert_eq!(r["100"], 3.0);
        assert_eq!(r["stdev"], 1.0);
        assert_eq!(r.len(), TIME_PCTS.len());
        for (q, v) in [(0.0, 1.0), (0.34, 2.0), (0.67, 3.0)] {
            assert_eq!(d.quantile(q), v);
        }
        // Ranks on exact multiples don't round up through float noise: 0.07·100 = 7.000…01.
        let mut d = MeanPcts::new();
        for v in 1..=100 {
            d.push(v as f64);
        }
        assert_eq!(d.quantile(0.07), 7.0);
        assert_eq!(d.result(&["99.9"])["99.9"], 100.0);
        assert_eq!(d.result(&["99.99", "00"])["00"], 1.0);
    }

    #[test]
    fn weights_equal_replication() {
        let pairs = [(5.0, 3), (1.0, 1), (9.0, 2), (2.0, 4)];
        let mut w = MeanPcts::new();
        let mut flat = Vec::new();
        for (v, c) in pairs {
            w.push_n(v, c);
            flat.extend(std::iter::repeat_n(v, c as usize));
        }
        assert_eq!(w.len(), flat.len() as u64);
        for l in ["00", "01", "10", "25", "50", "75", "90", "99", "100"] {
            let q = label_quantile(l).unwrap();
            assert_eq!(w.quantile(q), nearest_rank(&flat, q), "label {}", l);
        }
        let mean = flat.iter().sum::<f64>() / flat.len() as f64;
        let var = flat.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (flat.len() - 1) as f64;
        assert!((w.mean() - mean).abs() < 1e-12);
        assert!((w.stdev() - var.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn empty_single_and_non_finite() {
        let d = MeanPcts::new();
        assert!(d.dfl_result().values().all(|&v| v == 0.0));
        let mut d = MeanPcts::new();
        d.push(f64::NAN);
        d.push_n(4.0, 0);
        assert!(d.is_empty());
        d.push(4.0);
        assert_eq!(d.stdev(), 0.0);
        assert!(d
            .dfl_result()
            .iter()
            .all(|(l, &v)| v == if l == "stdev" { 0.0 } else { 4.0 }));

        assert_eq!(Mean::new().result(), MeanStats::default());
        let mut m = Mean::new();
        m.push(2.0);
        assert_eq!(
            m.result(),
            MeanStats {
                mean: 2.0,
                stdev: 0.0,
                min: 2.0,
                max: 2.0
            }
        );
        m.push_n(4.0, 3);
        let r = m.result();
        assert_eq!((r.mean, r.min, r.max), (3.5, 2.0, 4.0));
        assert!((r.stdev - 1.0).abs() < 1e-12);
    }

    #[test]
    fn labels() {
        assert_eq!(label_quantile("00"), Some(0.0));
        assert!((label_quantile("99.9").unwrap() - 0.999).abs() < 1e-15);
        assert_eq!(label_quantile("100"), Some(1.0));
        assert_eq!(label_quantile("mean"), None);
        assert_eq!(label_quantile("101"), None);
    }
}
