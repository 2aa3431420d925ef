//! Walking the per-second reports of a period and feeding them to studies.
//!
//! For every second `t` in `[start, end)` the file `<reports_dir>/<t>.json` is loaded; a
//! missing or unreadable file counts as missed. Each loaded report is handed to every study
//! with
//!
//! * `cnt`: the number of seconds it stands for — 1 plus the missed seconds right before it
//!   (leading misses count toward the first loaded report), so level values can be weighted
//!   by time;
//! * `dur`: seconds since the previous loaded report of this period by the reports' own
//!   timestamps (millisecond precision), 1.0 for the first.
//!
//! Each [`study_period`] call is one context: studies are reset at its start, so counter
//! deltas never span two disjoint periods. Unlike upstream, equal or backwards timestamps are
//! not an error: `dur` is then ≤ 0 and rate selectors skip that report.

use crate::report::{load_report, report_path, Report};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// What a study sees of one loaded report.
#[derive(Debug, Clone, Copy)]
pub struct SelArg<'a> {
    pub rep: &'a Report,
    /// The second the file is named after.
    pub sec: u64,
    /// Seconds this report stands for (≥ 1).
    pub cnt: u64,
    /// Seconds since the previous loaded report of this period (1.0 for the first).
    pub dur: f64,
}

impl SelArg<'_> {
    /// The report's timestamp in Unix seconds (millisecond precision).
    pub fn ts(&self) -> f64 {
        self.rep.timestamp.unix_millis() as f64 / 1000.0
    }
}

/// Something computed from the reports of one or more periods.
pub trait Study {
    /// Forget per-period context (previous counter readings). Called at the start of every
    /// period.
    fn reset(&mut self) {}
    /// Take in one report.
    fn study(&mut self, arg: &SelArg);
}

/// Reports loaded and missed over a period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NrReports {
    pub ok: u64,
    pub missed: u64,
}

impl NrReports {
    /// `(ok, missed)` as stored in results.
    pub fn pair(&self) -> (u64, u64) {
        (self.ok, self.missed)
    }

    /// `missed / (ok + missed)`, 0 when there were none.
    pub fn missing_ratio(&self) -> f64 {
        let total = self.ok + self.missed;
        if total == 0 {
            0.0
        } else {
            self.missed as f64 / total as f64
        }
    }
}

impl std::ops::AddAssign for NrReports {
    fn add_assign(&mut self, o: NrReports) {
        self.ok += o.ok;
        self.missed += o.missed;
    }
}

/// A period without a single loadable report.
#[derive(Debug, thiserror::Error)]
#[error("no loadable report in {} for seconds [{start}, {end}) ({missed} missing or unreadable)", dir.display())]
pub struct NoReportsError {
    pub dir: PathBuf,
    pub start: u64,
    pub end: u64,
    pub missed: u64,
}

/// Feeds the reports of `[start, end)` in `reports_dir` to `studies` (see the module doc).
/// Errors when none loads.
pub fn study_period(
    reports_dir: &Path,
    (start, end): (u64, u64),
    studies: &mut [&mut dyn Study],
) -> Result<NrReports> {
    for s in studies.iter_mut() {
        s.reset();
    }
    let mut nr = NrReports::default();
    let mut cnt = 0u64;
    let mut last_ms: Option<i64> = None;
    for sec in start..end {
        cnt += 1;
        let path = report_path(reports_dir, sec);
        let rep = match load_report(&path) {
            Ok(rep) if !rep.timestamp.is_epoch() => rep,
            Ok(_) => {
                log::debug!("{}: no timestamp, counted as missing", path.display());
                nr.missed += 1;
                continue;
            }
            Err(e) => {
                if path.exists() {
                    log::warn!("{:#}", e);
                }
                nr.missed += 1;
                continue;
            }
        };
        let ms = rep.timestamp.unix_millis();
        let dur = match last_ms {
            Some(last) => (ms - last) as f64 / 1000.0,
            None => 1.0,
        };
        last_ms = Some(ms);
        let arg = SelArg {
            rep: &rep,
            sec,
            cnt,
            dur,
        };
        for s in studies.iter_mut() {
            s.study(&arg);
        }
        nr.ok += 1;
        cnt = 0;
    }
    if nr.ok == 0 {
        return Err(NoReportsError {
            dir: reports_dir.to_path_buf(),
            start,
            end,
            missed: nr.missed,
        }
        .into());
    }
    Ok(nr)
}

/// [`study_period`] over several disjoint periods, each its own context; the counts add up.
pub fn study_periods(
    reports_dir: &Path,
    periods: &[(u64, u64)],
    studies: &mut [&mut dyn Study],
) -> Result<NrReports> {
    let mut nr = NrReports::default();
    for &p in periods {
        nr += study_period(reports_dir, p, studies)?;
    }
    Ok(nr)
}

/// Latest value and time of a counter, turning readings into rates.
///
/// A reading is dropped (and the context restarted from it) when there is no previous one,
/// when the counter went backwards (a reset: the cgroup was recreated, the process
/// restarted), or when no time passed. A missing reading (`None`) forgets the previous one,
/// so a counter that disappears and comes back isn't diffed across the gap.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeltaSel {
    last: Option<(f64, f64)>,
}

impl DeltaSel {
    pub fn reset(&mut self) {
        self.last = None;
    }

    /// The per-second rate since the previous reading, if one can be computed.
    pub fn rate(&mut self, cur: Option<f64>, ts: f64) -> Option<f64> {
        self.delta(cur, ts).map(|(d, dur)| d / dur)
    }

    /// `(Δvalue, Δtime)` since the previous reading, if there is a usable one.
    pub fn delta(&mut self, cur: Option<f64>, ts: f64) -> Option<(f64, f64)> {
        let Some(cur) = cur.filter(|v| v.is_finite()) else {
            self.last = None;
            return None;
        };
        let prev = self.last.replace((cur, ts));
        let (last, last_ts) = prev?;
        let dur = ts - last_ts;
        if cur < last || dur <= 0.0 {
            return None;
        }
        Some((cur - last, dur))
    }
}

/// Ratio of the deltas of two counters read together (e.g. busy CPU time over available CPU
/// time); 0 when the denominator didn't advance. Resets like [`DeltaSel`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RatioSel {
    last: Option<(f64, f64)>,
}

impl RatioSel {
    pub fn reset(&mut self) {
        self.last = None;
    }

    pub fn ratio(&mut self, cur: Option<(f64, f64)>) -> Option<f64> {
        let Some((num, den)) = cur.filter(|(n, d)| n.is_finite() && d.is_finite()) else {
            self.last = None;
            return None;
        };
        let (lnum, lden) = self.last.replace((num, den))?;
        if num < lnum || den < lden {
            return None;
        }
        let dden = den - lden;
        Some(if dden > 0.0 { (num - lnum) / dden } else { 0.0 })
    }
}

/// The share of per-second reports a study missed: `missed / (found + missed)`, 0 without
/// reports.
pub fn missing_ratio(nr_reports: (u64, u64)) -> f64 {
    let total = nr_reports.0 + nr_reports.1;
    if total == 0 {
        0.0
    } else {
        nr_reports.1 as f64 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{write_report, Timestamp};

    /// Writes reports for the given seconds; the timestamp is `sec + 0.5 + jitter` and the
    /// report's `seq` is the second, so studies can tell them apart.
    pub(crate) fn write_reports(dir: &Path, secs: &[u64]) {
        for &sec in secs {
            let rep = Report {
                timestamp: Timestamp::from_unix(sec as f64 + 0.5),
                seq: sec,
                ..Default::default()
            };
            write_report(dir, sec, &rep).unwrap();
        }
    }

    #[derive(Default)]
    struct Recorder {
        seen: Vec<(u64, u64, u64, f64)>,
        resets: usize,
    }

    impl Study for Recorder {
        fn reset(&mut self) {
            self.resets += 1;
        }
        fn study(&mut self, a: &SelArg) {
            self.seen.push((a.sec, a.rep.seq, a.cnt, a.dur));
        }
    }

    #[test]
    fn missing_seconds_weight_the_next_report() {
        let dir = tempfile::tempdir().unwrap();
        // Period [100, 110): 100, 101 missing; 104, 105, 106 missing; 109 missing (trailing).
        write_reports(dir.path(), &[102, 103, 107, 108, 99, 110]);
        std::fs::write(report_path(dir.path(), 103), "{ torn").unwrap();
        let mut rec = Recorder::default();
        let nr = study_period(dir.path(), (100, 110), &mut [&mut rec]).unwrap();
        assert_eq!(nr, NrReports { ok: 3, missed: 7 });
        assert!((nr.missing_ratio() - 0.7).abs() < 1e-12);
        assert_eq!(
            rec.seen,
            vec![
                (102, 102, 3, 1.0), // leading misses 100, 101 count toward the first
                (107, 107, 5, 5.0), // 103 (unparsable) … 106
                (108, 108, 1, 1.0),
            ]
        );
        assert_eq!(rec.resets, 1);
    }

    #[test]
    fn no_reports_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        write_reports(dir.path(), &[5]);
        let mut rec = Recorder::default();
        let err = study_period(dir.path(), (10, 13), &mut [&mut rec]).unwrap_err();
        let msg = format!("{:#}", err);
        assert!(msg.contains("no loadable report"), "{}", msg);
        assert!(
            msg.contains("[10, 13)") && msg.contains("3 missing"),
            "{}",
            msg
        );
        assert!(err.downcast_ref::<NoReportsError>().is_some());
        // Empty period too.
        assert!(study_period(dir.path(), (5, 5), &mut [&mut rec]).is_err());
    }

    #[test]
    fn equal_and_backwards_timestamps_are_tolerated() {
        let dir = tempfile::tempdir().unwrap();
        for (sec, ts) in [(1u64, 1.5), (2, 1.5), (3, 1.0), (4, 4.5)] {
            let rep = Report {
                timestamp: Timestamp::from_unix(ts),
                ..Default::default()
            };
            write_report(dir.path(), sec, &rep).unwrap();
        }
        let mut rec = Recorder::default();
        study_period(dir.path(), (1, 5), &mut [&mut rec]).unwrap();
        let durs: Vec<f64> = rec.seen.iter().map(|s| s.3).collect();
        assert_eq!(durs, vec![1.0, 0.0, -0.5, 3.5]);
    }

    #[test]
    fn reports_without_timestamp_count_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        write_reports(dir.path(), &[1, 3]);
        std::fs::write(report_path(dir.path(), 2), "{\"seq\": 2}").unwrap();
        let mut rec = Recorder::default();
        let nr = study_period(dir.path(), (1, 4), &mut [&mut rec]).unwrap();
        assert_eq!(nr.pair(), (2, 1));
        assert_eq!(rec.seen[1].2, 2);
    }

    #[test]
    fn each_period_is_its_own_context() {
        let dir = tempfile::tempdir().unwrap();
        write_reports(dir.path(), &[1, 2, 3, 10, 11]);
        let mut rec = Recorder::default();
        let nr = study_periods(dir.path(), &[(1, 4), (10, 12)], &mut [&mut rec]).unwrap();
        assert_eq!(nr.pair(), (5, 0));
        assert_eq!(rec.resets, 2);
        // The first report of the second period starts afresh: dur 1.0, not 8.
        assert_eq!(rec.seen[3], (10, 10, 1, 1.0));
    }

    #[test]
    fn delta_selector() {
        let mut d = DeltaSel::default();
        assert_eq!(d.rate(Some(100.0), 1.0), None); // first reading
        assert_eq!(d.rate(Some(130.0), 4.0), Some(10.0));
        assert_eq!(d.rate(Some(20.0), 5.0), None); // counter reset: dropped
        assert_eq!(d.rate(Some(25.0), 6.0), Some(5.0));
        assert_eq!(d.rate(Some(25.0), 6.0), None); // no time passed
        assert_eq!(d.rate(Some(26.0), 7.0), Some(1.0));
        assert_eq!(d.rate(None, 8.0), None); // disappeared
        assert_eq!(d.rate(Some(1000.0), 9.0), None); // came back: not diffed across the gap
        assert_eq!(d.rate(Some(1002.0), 10.0), Some(2.0));
        d.reset();
        assert_eq!(d.rate(Some(2000.0), 11.0), None);
        assert_eq!(d.delta(Some(2003.0), 13.0), Some((3.0, 2.0)));
    }

    #[test]
    fn ratio_selector() {
        let mut r = RatioSel::default();
        assert_eq!(r.ratio(Some((1.0, 10.0))), None);
        assert_eq!(r.ratio(Some((3.0, 14.0))), Some(0.5));
        assert_eq!(r.ratio(Some((3.0, 14.0))), Some(0.0)); // base didn't advance
        assert_eq!(r.ratio(Some((1.0, 20.0))), None); // reset
        assert_eq!(r.ratio(Some((2.0, 24.0))), Some(0.25));
        assert_eq!(r.ratio(None), None);
        assert_eq!(r.ratio(Some((5.0, 30.0))), None);
    }
}
