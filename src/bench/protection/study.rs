//! The mem-hog study (benches-doc/protection.md): everything comes from the per-second reports and
//! the record.
//!
//! * hog periods: from the hog's first report with swap in use to its last, per run;
//! * baseline latency: hashd's control latency over the baseline period, time-weighted;
//! * isolation: hashd's completions per second over the target rate (at most 1) and latency
//!   impact: the control latency over the baseline minus 1 (at least 0), each second of the hog
//!   periods, time-weighted; a failed run adds its missing seconds as isolation 0 and impact
//!   100 % (failure padding);
//! * IO accounting over the hog periods, normalised by vrate: what the device did in all
//!   (`io_usage`), what it left idle (`io_unused`), what the hog's cgroup used
//!   (`hog_io_usage`) and what the hog's lost growth would have cost (`hog_io_loss`), giving
//!   work conservation;
//! * vrate and the nested IO latency tables over the whole scenario, resource statistics of the
//!   root, workload and system slices over the hog periods.
//!
//! Unlike upstream, every slice's counter context (not only workload's and system's) starts
//! afresh in each hog period, and so do hashd's completions in the combined summary: no delta
//! spans the gap between two periods.

use super::record::{MemHogRecord, HOG_SVC};
use super::result::{MemHogResult, PctDist};
use crate::study::dist::{Mean, MeanPcts};
use crate::study::iolat_study::IoLatStudy;
use crate::study::reports::{study_period, study_periods, DeltaSel, NrReports, SelArg, Study};
use crate::study::rstat_study::{ResourceStatStudy, ROOT_SLICE};
use crate::units::PCT_LABELS;
use anyhow::Result;
use std::path::Path;

/// hashd's control latency, time-weighted.
#[derive(Default)]
struct LatStudy(Mean);

impl Study for LatStudy {
    fn study(&mut self, arg: &SelArg) {
        self.0.push_n(arg.rep.hashd[0].lat.ctl, arg.cnt);
    }
}

/// Isolation and latency impact against one scenario's baseline.
struct IsolStudy<'a> {
    base_rps: f64,
    base_lat: f64,
    nr_done: DeltaSel,
    isol: &'a mut MeanPcts,
    lat_imp: &'a mut MeanPcts,
}

impl Study for IsolStudy<'_> {
    fn reset(&mut self) {
        self.nr_done.reset();
    }

    fn study(&mut self, arg: &SelArg) {
        let h = &arg.rep.hashd[0];
        if let Some(rps) = self.nr_done.rate(Some(h.nr_done as f64), arg.ts()) {
            if self.base_rps > 0.0 {
                self.isol.push_n((rps / self.base_rps).min(1.0), arg.cnt);
            }
        }
        if self.base_lat > 0.0 {
            let imp = h.lat.ctl.max(self.base_lat) / self.base_lat - 1.0;
            self.lat_imp.push_n(imp.max(0.0), arg.cnt);
        }
    }
}

/// Device time over the hog periods, normalised by vrate.
#[derive(Default)]
struct IoStudy {
    root: DeltaSel,
    hog: DeltaSel,
    io_usage: f64,
    io_unused: f64,
    hog_io_usage: f64,
}

impl Study for IoStudy {
    fn reset(&mut self) {
        self.root.reset();
        self.hog.reset();
    }

    fn study(&mut self, arg: &SelArg) {
        let ts = arg.ts();
        let (Some(root), Some(hog)) = (arg.rep.usages.get(ROOT_SLICE), arg.rep.usages.get(HOG_SVC))
        else {
            // Without the hog's entry the pair can't be accounted: start over after it.
            self.reset();
            return;
        };
        let v = arg.rep.iocost.vrate / 100.0;
        let droot = self.root.delta(Some(root.io_usage), ts);
        let dhog = self.hog.delta(Some(hog.io_usage), ts);
        if let Some((d, dur)) = droot {
            self.io_usage += d.max(0.0) * v;
            self.io_unused += (dur - d).max(0.0) * v;
        }
        if let Some((d, _)) = dhog {
            self.hog_io_usage += d.max(0.0) * v;
        }
    }
}

/// vrate over the whole scenario.
#[derive(Default)]
struct VrateStudy(Mean);

impl Study for VrateStudy {
    fn study(&mut self, arg: &SelArg) {
        self.0.push_n(arg.rep.iocost.vrate, arg.cnt);
    }
}

/// A run's hog period: first swap use to the hog's end, whole seconds, by the bench's clock
/// where the record has it, else (upstream's and older records) by the hog's first and last
/// reports; `None` when the hog never swapped (a run that failed first) or ended within the
/// second.
pub fn hog_period(run: &super::record::MemHogRun) -> Option<(u64, u64)> {
    let p = match run.hog_period {
        Some(p) => p,
        None => {
            let (a, b) = (&run.first_hog_rep.timestamp, &run.last_hog_rep.timestamp);
            if a.is_epoch() || b.is_epoch() {
                return None;
            }
            (a.unix_secs() as u64, b.unix_secs() as u64)
        }
    };
    (p.1 > p.0).then_some(p)
}

/// Baseline latency (mean, stdev) of a record: hashd's control latency over its base period.
pub fn base_lat(reports_dir: &Path, rec: &MemHogRecord) -> Result<(f64, f64)> {
    let mut lat = LatStudy::default();
    study_period(reports_dir, rec.base_period, &mut [&mut lat])?;
    let r = lat.0.result();
    Ok((r.mean, r.stdev))
}

/// One scenario's part in a study: its record and baseline latency.
pub struct Part<'a> {
    pub rec: &'a MemHogRecord,
    pub base_lat: (f64, f64),
}

/// Failure padding over `recs`' failed runs: the seconds to pad, the failure ratio and the
/// messages.
pub fn failure_padding<'a>(
    runs: impl Iterator<Item = &'a super::record::MemHogRun>,
) -> (u64, f64, Vec<String>) {
    let (mut target, mut after, mut msgs) = (0.0, 0.0, Vec::new());
    for (t, a, msg) in runs.filter_map(|r| r.failed.as_ref()) {
        target += t;
        after += a;
        msgs.push(msg.clone());
    }
    let secs = (target - after).max(0.0).ceil() as u64;
    let ratio = if target > 0.0 {
        ((target - after) / target).clamp(0.0001, 1.0)
    } else {
        0.0
    };
    (secs, ratio, msgs)
}

/// Studies the parts together (one part: a scenario; several: the combined summary, whose
/// rates and latencies the caller replaces by the weighted means).
pub fn study_parts(reports_dir: &Path, parts: &[Part]) -> Result<MemHogResult> {
    let mut isol = MeanPcts::new();
    let mut lat_imp = MeanPcts::new();
    let mut io = IoStudy::default();
    let mut root = ResourceStatStudy::new(ROOT_SLICE);
    let mut work = ResourceStatStudy::new("workload.slice");
    let mut sys = ResourceStatStudy::new("system.slice");
    let mut vrate = VrateStudy::default();
    let mut iolat = IoLatStudy::new();
    let mut nr = NrReports::default();
    let (mut periods, mut hog_periods, mut hog_ends) = (vec![], vec![], vec![]);
    let (mut hog_bytes, mut hog_lost_bytes) = (0.0, 0.0);

    for part in parts {
        let rec = part.rec;
        let hp: Vec<(u64, u64)> = rec.runs.iter().filter_map(hog_period).collect();
        let mut is = IsolStudy {
            base_rps: rec.base_rps,
            base_lat: part.base_lat.0,
            nr_done: DeltaSel::default(),
            isol: &mut isol,
            lat_imp: &mut lat_imp,
        };
        if !hp.is_empty() {
            study_periods(
                reports_dir,
                &hp,
                &mut [&mut is, &mut io, &mut root, &mut work, &mut sys],
            )?;
        }
        nr += study_period(reports_dir, rec.period, &mut [&mut vrate, &mut iolat])?;
        for run in &rec.runs {
            hog_bytes += (run.last_hog_rep.wbytes as f64 - run.last_hog_mem).max(0.0);
            hog_lost_bytes += run.last_hog_rep.wloss as f64;
            hog_ends.push(match run.hog_end {
                Some(e) => format!("{}: {}", e.describe(), run.hog_end_why),
                None => String::new(),
            });
        }
        periods.push(rec.period);
        hog_periods.extend(hp);
    }

    let (pad, fail_ratio, fail_msgs) =
        failure_padding(parts.iter().flat_map(|p| p.rec.runs.iter()));
    isol.push_n(0.0, pad);
    lat_imp.push_n(1.0, pad);

    let cost_per_byte = if hog_bytes > 0.0 {
        io.hog_io_usage / hog_bytes
    } else {
        0.0
    };
    let hog_io_loss = hog_lost_bytes * cost_per_byte;
    let work_csv = if io.io_usage > 0.0 {
        io.io_usage / (io.io_usage + io.io_unused.min(hog_io_loss))
    } else {
        1.0
    };
    let vr = vrate.0.result();
    let first = parts.first().map(|p| (p.rec.base_rps, p.base_lat));
    let (base_rps, (base_lat, base_lat_stdev)) = first.unwrap_or_default();
    Ok(MemHogResult {
        base_rps,
        base_lat,
        base_lat_stdev,
        isol: PctDist::from_labels(&isol.result(PCT_LABELS)),
        lat_imp: PctDist::from_labels(&lat_imp.result(PCT_LABELS)),
        fail_ratio,
        fail_msgs,
        work_csv,
        iolat: Some(iolat.result().to_raw()?),
        root_rstat: Some(root.result().to_raw()?),
        work_rstat: Some(work.result().to_raw()?),
        sys_rstat: Some(sys.result().to_raw()?),
        nr_reports: nr.pair(),
        periods,
        hog_periods,
        vrate: vr.mean,
        vrate_stdev: vr.stdev,
        io_usage: io.io_usage,
        io_unused: io.io_unused,
        hog_io_usage: io.hog_io_usage,
        hog_io_loss,
        hog_bytes,
        hog_lost_bytes,
        hog_ends,
        hog_wbps: parts.first().map_or(0, |p| p.rec.hog_wbps),
        model_from: parts
            .first()
            .map_or(String::new(), |p| p.rec.model_from.clone()),
    })
}

/// One mem-hog record on its own.
pub fn study_mem_hog(reports_dir: &Path, rec: &MemHogRecord) -> Result<MemHogResult> {
    let base_lat = base_lat(reports_dir, rec)?;
    study_parts(reports_dir, &[Part { rec, base_lat }])
}

/// Pooled standard deviation of groups of `n_i` with stdev `s_i`:
/// `sqrt(Σ s_i²(n_i − 1) / (N − k))`, 0 unless N > k.
pub fn pooled_stdev(groups: &[(f64, u64)]) -> f64 {
    let n: u64 = groups.iter().map(|g| g.1).sum();
    let k = groups.len() as u64;
    if n <= k {
        return 0.0;
    }
    let ss: f64 = groups.iter().map(|(s, n)| s * s * (*n as f64 - 1.0)).sum();
    (ss / (n - k) as f64).sqrt()
}

/// The combined "Memory Hog Summary" over a job's mem-hog scenarios (benches-doc/protection.md):
/// the distributions re-derived from the reports with each scenario's baseline; base rate,
/// baseline latency, work conservation and vrate as run-weighted means (pooled stdevs).
pub fn combine(
    reports_dir: &Path,
    scns: &[(&MemHogRecord, &MemHogResult)],
) -> Result<MemHogResult> {
    let parts: Vec<Part> = scns
        .iter()
        .map(|(rec, out)| Part {
            rec,
            base_lat: (out.base_lat, out.base_lat_stdev),
        })
        .collect();
    let mut comb = study_parts(reports_dir, &parts)?;
    let weights: Vec<f64> = scns.iter().map(|(r, _)| r.runs.len() as f64).collect();
    let total: f64 = weights.iter().sum();
    let wmean = |f: &dyn Fn(&MemHogResult) -> f64| {
        if total > 0.0 {
            scns.iter()
                .zip(&weights)
                .map(|((_, o), w)| f(o) * w)
                .sum::<f64>()
                / total
        } else {
            0.0
        }
    };
    let pooled = |f: &dyn Fn(&MemHogResult) -> f64| {
        let groups: Vec<(f64, u64)> = scns
            .iter()
            .map(|(r, o)| (f(o), r.runs.len() as u64))
            .collect();
        pooled_stdev(&groups)
    };
    comb.base_rps = wmean(&|o| o.base_rps);
    comb.base_lat = wmean(&|o| o.base_lat);
    comb.work_csv = wmean(&|o| o.work_csv);
    comb.vrate = wmean(&|o| o.vrate);
    comb.base_lat_stdev = pooled(&|o| o.base_lat_stdev);
    comb.vrate_stdev = pooled(&|o| o.vrate_stdev);
    Ok(comb)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::protection::record::MemHogRun;
    use crate::report::model::UsageReport;
    use crate::report::{write_report, Report, Timestamp};
    use crate::workload::memhog::HogReport;

    const T0: u64 = 1_700_000_000;

    /// A report for second `T0 + i`: hashd has done `done` requests with control latency
    /// `ctl`; vrate `vrate` %; the root and hog cgroups used `root_io` and `hog_io` device
    /// seconds so far.
    fn rep(i: u64, done: u64, ctl: f64, vrate: f64, io: (f64, f64)) -> Report {
        let mut r = Report::new(1, Default::default());
        r.timestamp = Timestamp::from_unix((T0 + i) as f64 + 0.5);
        r.hashd[0].nr_done = done;
        r.hashd[0].lat.ctl = ctl;
        r.iocost.vrate = vrate;
        let usage = |io_usage| UsageReport {
            io_usage,
            ..Default::default()
        };
        r.usages.insert(ROOT_SLICE.into(), usage(io.0));
        r.usages.insert(HOG_SVC.into(), usage(io.1));
        r
    }

    fn hog_rep(i: u64, wbytes: u64, wloss: u64) -> HogReport {
        HogReport {
            timestamp: Timestamp::from_unix((T0 + i) as f64 + 0.3),
            wbytes,
            wloss,
            ..Default::default()
        }
    }

    /// Baseline 0..10 at 10 ms; hog from 10 to 30: hashd does `rate(i)` requests in second
    /// `i` at 20 ms; vrate 50 %, the device busy 0.4 s/s of which the hog 0.2 s/s. Seconds in
    /// `missing` have no report.
    fn write_scenario(dir: &Path, rate: impl Fn(u64) -> u64, missing: &[u64]) {
        let mut done = 0;
        for i in 0..30 {
            let hog = i >= 10;
            done += if hog { rate(i) } else { 200 };
            let ctl = if hog { 0.02 } else { 0.01 };
            let io = (0.4 * i as f64, 0.2 * i as f64);
            if !missing.contains(&i) {
                write_report(dir, T0 + i, &rep(i, done, ctl, 50.0, io)).unwrap();
            }
        }
    }

    fn record(runs: Vec<MemHogRun>) -> MemHogRecord {
        MemHogRecord {
            period: (T0, T0 + 30),
            base_period: (T0, T0 + 10),
            base_rps: 200.0,
            runs,
            ..Default::default()
        }
    }

    fn run(first: u64, last: u64, failed: Option<(f64, f64, String)>) -> MemHogRun {
        MemHogRun {
            failed,
            first_hog_rep: hog_rep(first, 1 << 30, 0),
            last_hog_rep: hog_rep(last, 5 << 30, 1 << 30),
            last_hog_mem: (1u64 << 30) as f64,
            ..Default::default()
        }
    }

    #[test]
    fn isolation_and_latency_impact_over_the_hog_period() {
        let dir = tempfile::tempdir().unwrap();
        write_scenario(dir.path(), |_| 100, &[]);
        let rec = record(vec![run(10, 30, None)]);
        let out = study_mem_hog(dir.path(), &rec).unwrap();
        assert!((out.base_lat - 0.01).abs() < 1e-12 && out.base_lat_stdev < 1e-12);
        assert_eq!(out.hog_periods, vec![(T0 + 10, T0 + 30)]);
        // Half the target rate; the first report of the period only starts the count.
        assert_eq!(out.isol_at("50"), 0.5);
        assert_eq!(out.isol_at("00"), 0.5);
        assert_eq!(out.isol_at("100"), 0.5);
        // 20 ms against a 10 ms baseline: +100 %.
        assert!((out.lat_imp.mean - 1.0).abs() < 1e-9);
        assert_eq!((out.fail_ratio, out.fail_msgs.len()), (0.0, 0));
        assert_eq!(out.nr_reports, (30, 0));
        assert_eq!(out.vrate, 50.0);
    }

    #[test]
    fn percentiles_follow_the_per_second_rates() {
        let dir = tempfile::tempdir().unwrap();
        // 10 seconds at the target, 10 at a quarter.
        write_scenario(dir.path(), |i| if i < 20 { 200 } else { 50 }, &[]);
        let out = study_mem_hog(dir.path(), &record(vec![run(10, 30, None)])).unwrap();
        assert_eq!(out.isol_at("05"), 0.25);
        assert_eq!(out.isol_at("95"), 1.0);
        assert_ne!(out.isol_at("05"), out.isol_at("95"));
    }

    #[test]
    fn a_missing_report_stands_for_its_seconds() {
        let dir = tempfile::tempdir().unwrap();
        // Second 15 is missing: the report at 16 covers two seconds of 100 requests each.
        write_scenario(dir.path(), |_| 100, &[15]);
        let out = study_mem_hog(dir.path(), &record(vec![run(10, 30, None)])).unwrap();
        assert_eq!(out.isol_at("00"), 0.5);
        assert_eq!(out.isol_at("100"), 0.5);
        assert_eq!(out.nr_reports, (29, 1));
        let missing = crate::study::reports::missing_ratio(out.nr_reports);
        assert!((missing - 1.0 / 30.0).abs() < 1e-9);
    }

    #[test]
    fn failed_runs_are_padded_with_zero_isolation() {
        let dir = tempfile::tempdir().unwrap();
        write_scenario(dir.path(), |_| 200, &[]);
        // The run was to last 60 s and failed after 20: 40 s of isolation 0, impact 100 %.
        let failed = Some((60.0, 20.0, "hashd stopped".to_string()));
        let out = study_mem_hog(dir.path(), &record(vec![run(10, 30, failed)])).unwrap();
        assert_eq!(out.fail_msgs, vec!["hashd stopped".to_string()]);
        assert!((out.fail_ratio - 40.0 / 60.0).abs() < 1e-9);
        // 19 seconds at 1.0 and 40 padded at 0: the median is 0, p75 is 1.
        assert_eq!(out.isol_at("50"), 0.0);
        assert_eq!(out.isol_at("75"), 1.0);
        let mean = out.isol_at("mean");
        assert!((mean - 19.0 / 59.0).abs() < 1e-9, "{}", mean);
        assert!((out.lat_imp.get("100").unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn io_accounting_and_work_conservation() {
        let dir = tempfile::tempdir().unwrap();
        write_scenario(dir.path(), |_| 200, &[]);
        let out = study_mem_hog(dir.path(), &record(vec![run(10, 30, None)])).unwrap();
        // 19 one-second pairs at vrate 50 %: root 0.4 s/s used, 0.6 s/s idle, the hog 0.2.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(out.io_usage, 19.0 * 0.4 * 0.5), "{}", out.io_usage);
        assert!(close(out.io_unused, 19.0 * 0.6 * 0.5), "{}", out.io_unused);
        assert!(close(out.hog_io_usage, 19.0 * 0.2 * 0.5));
        // 5 GiB written, 1 GiB still resident: 4 GiB pushed out; 1 GiB lost.
        let g = (1u64 << 30) as f64;
        assert_eq!((out.hog_bytes, out.hog_lost_bytes), (4.0 * g, g));
        let loss = g * out.hog_io_usage / (4.0 * g);
        assert!(close(out.hog_io_loss, loss));
        let csv = out.io_usage / (out.io_usage + out.io_unused.min(loss));
        assert!(close(out.work_csv, csv));
        assert!(out.work_csv < 1.0);
    }

    #[test]
    fn a_run_that_never_swapped_has_no_hog_period() {
        let r = MemHogRun::default();
        assert_eq!(hog_period(&r), None);
        let same_sec = run(12, 12, None);
        assert_eq!(hog_period(&same_sec), None);
    }

    #[test]
    fn the_benchs_clock_ends_the_hog_period_where_the_hogs_report_stalled() {
        // The hog's last report is from second 11; the bench saw the hog end at 30.
        let stalled = MemHogRun {
            hog_period: Some((T0 + 10, T0 + 30)),
            ..run(10, 11, None)
        };
        assert_eq!(hog_period(&stalled), Some((T0 + 10, T0 + 30)));
        assert_eq!(hog_period(&run(10, 11, None)), Some((T0 + 10, T0 + 11)));
        let dir = tempfile::tempdir().unwrap();
        write_scenario(dir.path(), |_| 100, &[]);
        let out = study_mem_hog(dir.path(), &record(vec![stalled])).unwrap();
        assert_eq!(out.hog_periods, vec![(T0 + 10, T0 + 30)]);
        assert_eq!(out.nr_reports, (30, 0));
    }

    #[test]
    fn the_summary_weights_scenarios_by_runs_and_pools_stdevs() {
        let dir = tempfile::tempdir().unwrap();
        write_scenario(dir.path(), |_| 100, &[]);
        let a = record(vec![run(10, 20, None)]);
        let b = MemHogRecord {
            base_rps: 100.0,
            ..record(vec![run(20, 25, None), run(25, 30, None)])
        };
        let oa = study_mem_hog(dir.path(), &a).unwrap();
        let ob = study_mem_hog(dir.path(), &b).unwrap();
        assert_eq!((oa.isol_at("50"), ob.isol_at("50")), (0.5, 1.0));
        let comb = combine(dir.path(), &[(&a, &oa), (&b, &ob)]).unwrap();
        assert!((comb.base_rps - (200.0 + 2.0 * 100.0) / 3.0).abs() < 1e-9);
        // Re-derived from the reports with each scenario's own target.
        assert_eq!(comb.isol_at("00"), 0.5);
        assert_eq!(comb.isol_at("100"), 1.0);
        assert_eq!(comb.hog_periods.len(), 3);
        assert_eq!(pooled_stdev(&[(1.0, 1), (2.0, 3)]), (8.0f64 / 2.0).sqrt());
        assert_eq!(pooled_stdev(&[(1.0, 1), (2.0, 1)]), 0.0);
    }
}
