//! Mergeable latency histograms.
//!
//! Layout (`LAYOUT` = `"ns-log2-16"`): values are nanoseconds. Values below 16 ns get one
//! bucket each; above that every power of two `[2^e, 2^(e+1))` is split into 16 equal
//! sub-buckets. A bucket is therefore at most 1/16 of its lower bound wide and its midpoint is
//! within ~3.1 % of any value in it. Index `i` of a value `v`:
//!
//! * `v < 16`: `i = v`
//! * else, with `e = floor(log2 v)`: `i = (e − 3) · 16 + ((v >> (e − 4)) & 15)`
//!
//! Values from [`MAX_NS`] (2^35 ns ≈ 34.4 s) up land in the last bucket ([`NR_BUCKETS`] = 512
//! buckets cover 0 … 34 s, so 1 µs … 30 s with room to spare). Besides the counts a histogram
//! keeps the exact smallest and largest value, so the 0th and 100th percentiles are exact and
//! other percentiles are clamped into `[min, max]`.
//!
//! In JSON a histogram is `{"min": ns, "max": ns, "b": [[index, count], …]}` with only the
//! non-empty buckets, in index order.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

/// Name of this bucket layout, stored next to the histograms in reports.
pub const LAYOUT: &str = "ns-log2-16";
/// Sub-buckets per power of two (log2).
const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// Number of buckets.
pub const NR_BUCKETS: usize = 512;
/// Values at or above this many nanoseconds share the last bucket.
pub const MAX_NS: u64 = 1 << 35;

/// Bucket index of a latency in nanoseconds.
pub fn bucket_of(ns: u64) -> usize {
    if ns < SUB {
        return ns as usize;
    }
    if ns >= MAX_NS {
        return NR_BUCKETS - 1;
    }
    let e = 63 - ns.leading_zeros();
    let sub = (ns >> (e - SUB_BITS)) & (SUB - 1);
    ((e - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// `[lower, upper)` bounds of a bucket in nanoseconds (the last bucket is open-ended; its
/// nominal upper bound is returned).
pub fn bucket_bounds(idx: usize) -> (u64, u64) {
    let idx = idx as u64;
    if idx < SUB {
        return (idx, idx + 1);
    }
    let e = idx / SUB + SUB_BITS as u64 - 1;
    let sub = idx % SUB;
    let width = 1u64 << (e - SUB_BITS as u64);
    let lower = (SUB + sub) * width;
    (lower, lower + width)
}

/// A latency histogram in the layout of the module doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatHist {
    counts: Vec<u64>,
    total: u64,
    min_ns: u64,
    max_ns: u64,
}

impl Default for LatHist {
    fn default() -> Self {
        Self {
            counts: vec![0; NR_BUCKETS],
            total: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }
}

impl LatHist {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one latency.
    pub fn record_ns(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Records `n` latencies of the same value.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.counts[bucket_of(ns)] += n;
        self.total += n;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Records one latency given in seconds (negative and NaN values count as 0).
    pub fn record_secs(&mut self, secs: f64) {
        let ns = (secs * 1e9).round();
        self.record_ns(if ns > 0.0 { ns as u64 } else { 0 });
    }

    /// Number of recorded values.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Smallest recorded value in nanoseconds (`None` when empty).
    pub fn min_ns(&self) -> Option<u64> {
        (self.total > 0).then_some(self.min_ns)
    }

    /// Largest recorded value in nanoseconds (`None` when empty).
    pub fn max_ns(&self) -> Option<u64> {
        (self.total > 0).then_some(self.max_ns)
    }

    /// Adds all of `other`'s values.
    pub fn merge(&mut self, other: &LatHist) {
        if other.total == 0 {
            return;
        }
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c += o;
        }
        self.total += other.total;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// The values recorded in `self` but not in `earlier` (an older snapshot of the same
    /// cumulative histogram). Buckets that went backwards count as 0. min/max of a delta can't
    /// be recovered exactly; they are taken from the extreme non-empty buckets, clamped to the
    /// cumulative min/max.
    pub fn delta_since(&self, earlier: &LatHist) -> LatHist {
        let mut d = LatHist::default();
        for (i, (c, e)) in self.counts.iter().zip(&earlier.counts).enumerate() {
            let n = c.saturating_sub(*e);
            if n > 0 {
                d.counts[i] = n;
                d.total += n;
            }
        }
        if d.total > 0 {
            let first = d.counts.iter().position(|&c| c > 0).unwrap_or(0);
            let last = d.counts.iter().rposition(|&c| c > 0).unwrap_or(0);
            d.min_ns = bucket_bounds(first).0.max(self.min_ns);
            d.max_ns = (bucket_bounds(last).1 - 1).min(self.max_ns);
        }
        d
    }

    /// The value at quantile `q` (0 … 1) in seconds by nearest rank: the value of rank
    /// `max(1, ceil(q·n))`, given as its bucket's midpoint clamped into `[min, max]`; exact at 0
    /// and 1. 0 when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let q = q.clamp(0.0, 1.0);
        if q <= 0.0 {
            return ns_to_secs(self.min_ns);
        }
        if q >= 1.0 {
            return ns_to_secs(self.max_ns);
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_bounds(i);
                let mid = lo as f64 + (hi - lo) as f64 / 2.0;
                let mid = mid.clamp(self.min_ns as f64, self.max_ns as f64);
                return mid / 1e9;
            }
        }
        ns_to_secs(self.max_ns)
    }

    /// `{label → seconds}` for the given percentile labels (`"99.9"` = 0.999).
    pub fn pct_map(&self, labels: &[&str]) -> std::collections::BTreeMap<String, f64> {
        labels
            .iter()
            .map(|l| {
                let q = l.parse::<f64>().unwrap_or(0.0) / 100.0;
                (l.to_string(), self.quantile(q))
            })
            .collect()
    }

    /// Non-empty buckets as `(index, count)`.
    pub fn sparse(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i, c))
    }
}

fn ns_to_secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

#[derive(Serialize, Deserialize)]
struct SparseHist {
    #[serde(default)]
    min: u64,
    #[serde(default)]
    max: u64,
    #[serde(default)]
    b: Vec<(usize, u64)>,
}

impl Serialize for LatHist {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SparseHist {
            min: self.min_ns().unwrap_or(0),
            max: self.max_ns().unwrap_or(0),
            b: self.sparse().collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LatHist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let sp = SparseHist::deserialize(d)?;
        let mut h = LatHist::default();
        for (i, c) in sp.b {
            if i >= NR_BUCKETS {
                return Err(D::Error::custom(format!(
                    "histogram bucket {} out of range (layout {} has {})",
                    i, LAYOUT, NR_BUCKETS
                )));
            }
            h.counts[i] += c;
            h.total += c;
        }
        if h.total > 0 {
            let first = h.counts.iter().position(|&c| c > 0).unwrap_or(0);
            let last = h.counts.iter().rposition(|&c| c > 0).unwrap_or(0);
            // Keep min/max inside the buckets they belong to even if the file disagrees.
            let (flo, fhi) = bucket_bounds(first);
            let (llo, lhi) = bucket_bounds(last);
            h.min_ns = if (flo..fhi).contains(&sp.min) {
                sp.min
            } else {
                flo
            };
            h.max_ns = if (llo..lhi).contains(&sp.max) || (last == NR_BUCKETS - 1 && sp.max >= llo)
            {
                sp.max
            } else {
                lhi - 1
            };
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_index_round_trips_bounds() {
        let mut last_hi = 0;
        for i in 0..NR_BUCKETS {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(lo, last_hi, "bucket {} is contiguous", i);
            assert!(hi > lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi - 1), i);
            // Width at most 1/16 of the lower bound past the exact range.
            if lo >= 16 {
                assert!((hi - lo) * 16 <= lo, "bucket {} too wide", i);
            }
            last_hi = hi;
        }
        assert_eq!(last_hi, MAX_NS);
        assert_eq!(bucket_of(u64::MAX), NR_BUCKETS - 1);
        assert_eq!(bucket_of(30_000_000_000), bucket_of(30_000_000_001));
        assert!(bucket_of(30_000_000_000) < NR_BUCKETS - 1);
    }

    /// Exact nearest-rank percentile of sorted values.
    fn exact(sorted: &[u64], q: f64) -> f64 {
        let n = sorted.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        sorted[rank - 1] as f64 / 1e9
    }

    /// A deterministic spread of latencies from ~2 µs to ~2 s.
    fn samples(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                (2000.0 * 1e6f64.powf(u)) as u64
            })
            .collect()
    }

    #[test]
    fn quantiles_within_bucket_resolution_of_exact() {
        let vals = samples(10_000, 7);
        let mut h = LatHist::new();
        for &v in &vals {
            h.record_ns(v);
        }
        let mut sorted = vals.clone();
        sorted.sort_unstable();
        for q in [
            0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0,
        ] {
            let want = exact(&sorted, q);
            let got = h.quantile(q);
            let rel = (got - want).abs() / want;
            assert!(
                rel <= 1.0 / 32.0 + 1e-9,
                "q={} got {} want {}",
                q,
                got,
                want
            );
        }
        assert_eq!(h.quantile(0.0), sorted[0] as f64 / 1e9);
        assert_eq!(h.quantile(1.0), sorted[sorted.len() - 1] as f64 / 1e9);
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let a = samples(3000, 1);
        let b = samples(5000, 2);
        let (mut ha, mut hb, mut hall) = (LatHist::new(), LatHist::new(), LatHist::new());
        for &v in &a {
            ha.record_ns(v);
            hall.record_ns(v);
        }
        for &v in &b {
            hb.record_ns(v);
            hall.record_ns(v);
        }
        let mut merged = ha.clone();
        merged.merge(&hb);
        assert_eq!(merged, hall);
        assert_eq!(merged.total(), 8000);
        let mut sorted: Vec<u64> = a.iter().chain(&b).copied().collect();
        sorted.sort_unstable();
        for q in [0.5, 0.9, 0.99] {
            let want = exact(&sorted, q);
            assert!((merged.quantile(q) - want).abs() / want <= 1.0 / 32.0 + 1e-9);
        }
    }

    #[test]
    fn delta_since_recovers_the_interval() {
        let mut cum = LatHist::new();
        for v in samples(1000, 3) {
            cum.record_ns(v);
        }
        let before = cum.clone();
        let mut interval = LatHist::new();
        for v in samples(500, 4) {
            cum.record_ns(v);
            interval.record_ns(v);
        }
        let d = cum.delta_since(&before);
        assert_eq!(d.total(), 500);
        assert_eq!(
            d.sparse().collect::<Vec<_>>(),
            interval.sparse().collect::<Vec<_>>()
        );
        assert_eq!(
            bucket_of(d.min_ns().unwrap()),
            bucket_of(interval.min_ns().unwrap())
        );
        assert_eq!(
            bucket_of(d.max_ns().unwrap()),
            bucket_of(interval.max_ns().unwrap())
        );
        assert!(cum.delta_since(&cum).is_empty());
    }

    #[test]
    fn empty_and_single_value() {
        let h = LatHist::new();
        assert_eq!(h.quantile(0.5), 0.0);
        assert_eq!(h.min_ns(), None);
        let mut h = LatHist::new();
        h.record_secs(0.000_137);
        for q in [0.0, 0.3, 0.5, 1.0] {
            assert!((h.quantile(q) - 0.000_137).abs() < 1e-12, "q={}", q);
        }
        h.record_secs(-1.0);
        assert_eq!(h.min_ns(), Some(0));
    }

    #[test]
    fn json_is_sparse_and_round_trips() {
        let mut h = LatHist::new();
        h.record_n(100_000, 3);
        h.record_ns(5);
        h.record_ns(40_000_000_000);
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(
            json,
            format!(
                "{{\"min\":5,\"max\":40000000000,\"b\":[[5,1],[{},3],[{},1]]}}",
                bucket_of(100_000),
                NR_BUCKETS - 1
            )
        );
        let back: LatHist = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
        let pcts = back.pct_map(&["00", "50", "100"]);
        assert_eq!(pcts["00"], 5e-9);
        assert_eq!(pcts["100"], 40.0);
    }

    #[test]
    fn malformed_json_is_an_error() {
        assert!(serde_json::from_str::<LatHist>("{\"b\":[[512,1]]}").is_err());
        assert!(serde_json::from_str::<LatHist>("{\"b\":[[1,-1]]}").is_err());
        assert!(serde_json::from_str::<LatHist>("3").is_err());
        assert!(serde_json::from_str::<LatHist>("{\"b\": 5}").is_err());
        // min/max outside their buckets are corrected, not trusted.
        let h: LatHist = serde_json::from_str("{\"min\":0,\"max\":0,\"b\":[[100,2]]}").unwrap();
        assert_eq!(h.min_ns(), Some(bucket_bounds(100).0));
        assert_eq!(h.max_ns(), Some(bucket_bounds(100).1 - 1));
    }
}
