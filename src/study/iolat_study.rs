//! The nested IO-latency study: for reads and writes and each latency percentile `L` of
//! [`IOLAT_PCTS`], the distribution over the seconds of a period of that second's `L`
//! latency, plus `cum`, `L` of the whole period. Result layout (what [`super::iolat`]
//! renders): `[read, write]`, each `{L: {time pct: seconds, …, "mean", "stdev", "cum"}}`.
//!
//! * One sample per loaded report — not weighted by `cnt` — and only from seconds that saw IO
//!   of that type (`iolat[type]["100"] > 0`).
//! * `cum`: when every report that carried latency data also carried our histograms, the
//!   histograms of the period are merged and `cum` is their exact percentile over the period
//!   (across all periods of the study). Otherwise (upstream reports) it is the `iolat_cum`
//!   of the report with the latest timestamp, i.e. cumulative since the collector started.
//! * Reports marked `iolat_unavailable` contribute nothing; when no report of the study had
//!   percentiles and at least one was so marked, every entry of the result is
//!   `{"unavailable": true}` and the formatter prints `unavailable`.

use super::dist::{MeanPcts, TIME_PCTS};
use super::reports::{SelArg, Study};
use crate::report::model::{IoLatHists, IoLatPcts, IOLAT_PCTS};
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// The IO types the study covers, in result order.
pub const STUDY_IO_TYPES: [&str; 2] = ["read", "write"];

/// One latency percentile's distribution over time, or the unavailability marker.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TimeDistJson {
    Dist(BTreeMap<String, f64>),
    Unavailable { unavailable: bool },
}

/// `[read, write]`, each `{lat pct → distribution}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoLatResult(
    pub BTreeMap<String, TimeDistJson>,
    pub BTreeMap<String, TimeDistJson>,
);

impl IoLatResult {
    /// As raw JSON.
    pub fn to_raw(&self) -> Result<Box<RawValue>> {
        let s = serde_json::to_string(self).context("serializing IO latency study")?;
        RawValue::from_string(s).context("serializing IO latency study")
    }

    /// As the typed model the formatters use.
    pub fn to_model(&self) -> Result<super::iolat::IoLat> {
        serde_json::from_str(self.to_raw()?.get()).context("re-reading IO latency study")
    }
}

/// Nested IO-latency distributions over one or more periods.
#[derive(Debug, Clone)]
pub struct IoLatStudy {
    /// `[type][lat pct index]`.
    dists: [Vec<MeanPcts>; 2],
    /// `iolat_cum` of the latest report and its timestamp (ms).
    last_cum: Option<(i64, IoLatPcts)>,
    merged: IoLatHists,
    /// Reports with percentile data, and how many of them had usable histograms.
    nr_with_pcts: u64,
    nr_with_hist: u64,
    nr_unavailable: u64,
}

impl Default for IoLatStudy {
    fn default() -> Self {
        Self::new()
    }
}

impl IoLatStudy {
    pub fn new() -> Self {
        let per_type = || vec![MeanPcts::new(); IOLAT_PCTS.len()];
        Self {
            dists: [per_type(), per_type()],
            last_cum: None,
            merged: IoLatHists::default(),
            nr_with_pcts: 0,
            nr_with_hist: 0,
            nr_unavailable: 0,
        }
    }

    /// No report of the study had percentiles and at least one said they're unavailable.
    pub fn unavailable(&self) -> bool {
        self.nr_with_pcts == 0 && self.nr_unavailable > 0
    }

    /// The period-cumulative histograms, if every report with latency data carried one.
    pub fn merged_hists(&self) -> Option<&IoLatHists> {
        (self.nr_with_pcts > 0 && self.nr_with_hist == self.nr_with_pcts).then_some(&self.merged)
    }

    fn cum(&self, ti: usize, pct: &str) -> f64 {
        let ty = STUDY_IO_TYPES[ti];
        if let Some(h) = self.merged_hists() {
            let pcts = h.get(ty).map(|h| h.pct_map(&[pct])).unwrap_or_default();
            return pcts.get(pct).copied().unwrap_or(0.0);
        }
        self.last_cum
            .as_ref()
            .and_then(|(_, cum)| cum.get(ty))
            .and_then(|m| m.get(pct))
            .copied()
            .unwrap_or(0.0)
    }

    pub fn result(&self) -> IoLatResult {
        let unavailable = self.unavailable();
        let side = |ti: usize| -> BTreeMap<String, TimeDistJson> {
            IOLAT_PCTS
                .iter()
                .enumerate()
                .map(|(pi, pct)| {
                    let v = if unavailable {
                        TimeDistJson::Unavailable { unavailable: true }
                    } else {
                        let mut d = self.dists[ti][pi].result(TIME_PCTS);
                        d.insert("cum".into(), self.cum(ti, pct));
                        TimeDistJson::Dist(d)
                    };
                    (pct.to_string(), v)
                })
                .collect()
        };
        IoLatResult(side(0), side(1))
    }
}

impl Study for IoLatStudy {
    fn study(&mut self, arg: &SelArg) {
        let rep = arg.rep;
        if rep.iolat_unavailable {
            self.nr_unavailable += 1;
            return;
        }
        self.nr_with_pcts += 1;
        for (ti, ty) in STUDY_IO_TYPES.iter().enumerate() {
            let Some(lat) = rep.iolat.get(*ty) else {
                continue;
            };
            if lat.get("100").copied().unwrap_or(0.0) <= 0.0 {
                continue;
            }
            for (pi, pct) in IOLAT_PCTS.iter().enumerate() {
                if let Some(&v) = lat.get(*pct) {
                    self.dists[ti][pi].push(v);
                }
            }
        }
        if let Some(h) = rep.iolat_hist.as_ref().filter(|h| h.layout_known()) {
            self.merged.merge(h);
            self.nr_with_hist += 1;
        }
        let ms = rep.timestamp.unix_millis();
        if self.last_cum.as_ref().is_none_or(|(last, _)| ms >= *last) {
            self.last_cum = Some((ms, rep.iolat_cum.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{zero_iolat, Report};
    use crate::report::{write_report, Timestamp};
    use crate::study::reports::{study_period, study_periods};
    use std::path::Path;

    /// A report whose second saw `reads` (ns) and `writes`, with `iolat` from their
    /// histograms, `iolat_cum` set to `cum_marker` everywhere, and the histograms themselves
    /// when `with_hist`.
    fn report(sec: u64, reads: &[u64], writes: &[u64], cum_marker: f64, with_hist: bool) -> Report {
        let mut rep = Report {
            timestamp: Timestamp::from_unix(sec as f64 + 0.5),
            ..Default::default()
        };
        let mut h = IoLatHists::default();
        for &r in reads {
            h.read.record_ns(r);
        }
        for &w in writes {
            h.write.record_ns(w);
        }
        rep.iolat = h.pct_maps();
        rep.iolat_cum = zero_iolat();
        for m in rep.iolat_cum.values_mut() {
            for v in m.values_mut() {
                *v = cum_marker;
            }
        }
        if with_hist {
            rep.iolat_hist = Some(h);
        }
        rep
    }

    fn dist<'a>(side: &'a BTreeMap<String, TimeDistJson>, pct: &str) -> &'a BTreeMap<String, f64> {
        match &side[pct] {
            TimeDistJson::Dist(d) => d,
            other => panic!("{:?}", other),
        }
    }

    fn run(dir: &Path, period: (u64, u64)) -> IoLatStudy {
        let mut st = IoLatStudy::new();
        study_period(dir, period, &mut [&mut st]).unwrap();
        st
    }

    #[test]
    fn per_second_values_only_from_seconds_with_io_and_not_weighted() {
        let dir = tempfile::tempdir().unwrap();
        // 10: reads at 100 µs; 11: no IO; 12, 13 missing; 14: reads at 300 µs; 15: 200 µs.
        let r = |us: u64| vec![us * 1000; 10];
        write_report(dir.path(), 10, &report(10, &r(100), &[], 0.0, true)).unwrap();
        write_report(dir.path(), 11, &report(11, &[], &[], 0.0, true)).unwrap();
        write_report(dir.path(), 14, &report(14, &r(300), &[50_000], 0.0, true)).unwrap();
        write_report(dir.path(), 15, &report(15, &r(200), &[], 0.0, true)).unwrap();
        let st = run(dir.path(), (10, 16));
        let res = st.result();
        let p50 = dist(&res.0, "50");
        // Three samples (100, 300, 200 µs): report 14 stands for 3 s but counts once.
        assert_eq!(p50["00"], 100e-6);
        assert_eq!(p50["50"], 200e-6);
        assert_eq!(p50["100"], 300e-6);
        assert!((p50["mean"] - 200e-6).abs() < 1e-15);
        assert!((p50["stdev"] - 100e-6).abs() < 1e-12);
        // Writes: one second with IO.
        let w = dist(&res.1, "100");
        assert_eq!(w["00"], 50e-6);
        assert_eq!(w["stdev"], 0.0);
        assert_eq!(res.0.len(), IOLAT_PCTS.len());
        assert_eq!(p50.len(), TIME_PCTS.len() + 1);
    }

    #[test]
    fn cum_is_exact_over_the_period_from_histograms() {
        let dir = tempfile::tempdir().unwrap();
        // 90 fast reads in one second, 10 slow in another: the period's p50 is fast, p95
        // slow, whatever the per-second values say.
        let fast = vec![100_000u64; 90];
        let slow = vec![10_000_000u64; 10];
        write_report(dir.path(), 1, &report(1, &fast, &[], 7.0, true)).unwrap();
        write_report(dir.path(), 2, &report(2, &slow, &[], 7.0, true)).unwrap();
        let st = run(dir.path(), (1, 3));
        assert!(st.merged_hists().is_some());
        let res = st.result();
        // Exact at the extremes, within bucket resolution (≤ 1/32) in between.
        let near = |got: f64, want: f64| (got - want).abs() <= want / 32.0;
        assert!(near(dist(&res.0, "50")["cum"], 100e-6));
        assert!(near(dist(&res.0, "95")["cum"], 10e-3));
        assert_eq!(dist(&res.0, "00")["cum"], 100e-6);
        assert_eq!(dist(&res.0, "100")["cum"], 10e-3);
        // No writes at all: zeros.
        assert_eq!(dist(&res.1, "50")["cum"], 0.0);
        // Per-second p50 over the two seconds: 100 µs and 10 ms.
        assert_eq!(dist(&res.0, "50")["00"], 100e-6);
        assert_eq!(dist(&res.0, "50")["100"], 10e-3);

        // Merged across disjoint periods too.
        write_report(dir.path(), 20, &report(20, &slow, &[], 7.0, true)).unwrap();
        let mut st = IoLatStudy::new();
        study_periods(dir.path(), &[(1, 3), (20, 21)], &mut [&mut st]).unwrap();
        let res = st.result();
        assert!(near(dist(&res.0, "90")["cum"], 10e-3)); // 20 of 110 are slow
        assert!(near(dist(&res.0, "75")["cum"], 100e-6));
    }

    #[test]
    fn cum_falls_back_to_the_latest_reports_iolat_cum() {
        let dir = tempfile::tempdir().unwrap();
        write_report(dir.path(), 1, &report(1, &[100_000], &[], 1.0, true)).unwrap();
        // An upstream-style report (no histograms) with the latest timestamp…
        write_report(dir.path(), 2, &report(2, &[100_000], &[], 2.0, false)).unwrap();
        // …and one with an earlier timestamp filed under a later second.
        let mut early = report(3, &[100_000], &[], 3.0, false);
        early.timestamp = Timestamp::from_unix(1.9);
        write_report(dir.path(), 3, &early).unwrap();
        let st = run(dir.path(), (1, 4));
        assert!(st.merged_hists().is_none());
        assert_eq!(dist(&st.result().0, "99")["cum"], 2.0);
    }

    #[test]
    fn unavailable_when_no_report_had_percentiles() {
        let dir = tempfile::tempdir().unwrap();
        for sec in 1..4 {
            let mut rep = report(sec, &[], &[], 0.0, false);
            rep.iolat_unavailable = true;
            write_report(dir.path(), sec, &rep).unwrap();
        }
        let st = run(dir.path(), (1, 4));
        assert!(st.unavailable());
        let res = st.result();
        assert!(res
            .0
            .values()
            .chain(res.1.values())
            .all(|d| *d == TimeDistJson::Unavailable { unavailable: true }));
        let raw = res.to_raw().unwrap();
        assert!(
            raw.get().starts_with("[{\"00\":{\"unavailable\":true}"),
            "{}",
            raw.get()
        );

        // Rendered as "unavailable", never as zeros.
        let mut out = String::new();
        res.to_model().unwrap().format(&mut out, true);
        assert_eq!(
            out,
            "IO Latency Distribution:\n\nREAD    unavailable\n\nWRITE   unavailable\n\n\
             IO Latency: R unavailable\n            W unavailable\n"
        );

        // One report with percentiles makes the result available again.
        write_report(dir.path(), 4, &report(4, &[100_000], &[], 0.0, true)).unwrap();
        let st = run(dir.path(), (1, 5));
        assert!(!st.unavailable());
        assert_eq!(dist(&st.result().0, "50")["mean"], 100e-6);
    }

    /// Study output → the existing formatter, with the expected numbers.
    #[test]
    fn result_renders_with_the_iolat_formatter() {
        let dir = tempfile::tempdir().unwrap();
        let secs: Vec<(u64, u64)> = vec![(1, 100), (2, 200), (3, 300), (4, 400)];
        for &(sec, us) in &secs {
            let reads: Vec<u64> = (0..100).map(|i| us * 1000 + i * 10).collect();
            let rep = report(sec, &reads, &[2_000_000], 0.0, true);
            write_report(dir.path(), sec, &rep).unwrap();
        }
        let st = run(dir.path(), (1, 5));
        let model = st.result().to_model().unwrap();
        let mut out = String::new();
        model.format(&mut out, true);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "IO Latency Distribution:");
        assert_eq!(
            lines[2],
            "READ      min   p25   p50   p75   p90   p95   p99 p99.9   max   cum  mean  stdev"
        );
        // Row p50: the per-second p50s are ~100.5/200.5/300.5/400.5 µs, each reported as its
        // bucket's midpoint: [98304, 102400) → 100u, [196608, 204800) → 201u, …
        let p50: Vec<&str> = lines
            .iter()
            .find(|l| l.starts_with("p50 "))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        assert_eq!(p50.len(), 13);
        assert_eq!(&p50[1..4], ["100u", "100u", "201u"]);
        assert_eq!(p50[9], "401u"); // max
        let summary = lines
            .iter()
            .find(|l| l.starts_with("IO Latency: R"))
            .unwrap();
        assert!(summary.contains(" p50=251u:129u/401u "), "{}", summary);
        assert!(lines.last().unwrap().contains("max=2.0m:0/2.0m"), "{}", out);
        assert!(!out.contains("unavailable"));
    }
}
