//! The iocost-qos report. `format` prints, per run, the storage and protection sub-reports
//! (in full with the `sub-full` format prop), the run's IO latency and its QoS result; both
//! `format` and `summary` end with the QoS list and the MOF and latency tables.

use super::plan::configs;
use super::props::IocostQosProps;
use super::record::{AdaptiveLog, IoCostQosResult, QosRecord, QosRun, RunResult};
use crate::bench::contract::api::FormatOpts;
use crate::bench::contract::headline::{self, num, Row};
use crate::bench::protection::{
    self, MemHogResult, MemHogTuneRecord, ScenarioRecord, ScenarioResult,
};
use crate::bench::storage::{self, props::DFL_LOOPS};
use crate::format::job_name;
use crate::format::text::{double_underline, underline};
use crate::result::Entry;
use crate::study::iolat::{format_lat_group, IoLat, LatMap, SUMMARY_PCTS};
use crate::study::reports::missing_ratio;
use crate::system::iocost::QosOverride;
use crate::units::format_pct;
use anyhow::Result;
use serde_json::{json, Value};
use std::fmt::Write;

/// Everything the report needs, parsed once.
struct Report<'a> {
    rec: QosRecord,
    res: &'a IoCostQosResult,
    /// Each run's IO latencies, read from the result's JSON.
    iolats: Vec<IoLat>,
    cfgs: Vec<QosOverride>,
    isol_pct: String,
    opts: &'a FormatOpts,
}

impl Report<'_> {
    fn run_rec(&self, i: usize) -> Option<&QosRun> {
        self.rec.runs.get(i).and_then(|r| r.as_ref())
    }

    /// The QoS configuration of run `i`: from the spec, else as recorded.
    fn cfg(&self, i: usize) -> Option<&QosOverride> {
        self.cfgs.get(i).or_else(|| self.run_rec(i).map(|r| &r.ovr))
    }

    fn describe_cfg(&self, i: usize) -> String {
        match self.cfg(i) {
            Some(cfg) => cfg.describe(&self.rec.base_qos),
            None => "?".into(),
        }
    }

    fn mem_profile(&self, i: usize) -> u32 {
        match self.run_rec(i) {
            Some(r) if r.stor.mem.profile > 0 => r.stor.mem.profile,
            _ => self.rec.mem_profile,
        }
    }

    /// The mem-hog-tune record of run `i` (its first tune scenario).
    fn tune_rec(&self, i: usize) -> Option<&MemHogTuneRecord> {
        self.run_rec(i)?
            .prot
            .scenarios
            .iter()
            .find_map(|s| match s {
                ScenarioRecord::MemHogTune(t) => Some(t),
                ScenarioRecord::MemHog(_) => None,
            })
    }

    /// The isolation percentile run `i` was judged at: as its record has it (2.1-layout files
    /// say "01"), else the entry-wide one.
    fn isol_pct(&self, i: usize) -> &str {
        self.tune_rec(i).map_or(&self.isol_pct, |t| &t.isol_pct)
    }

    fn baseline_mof(&self) -> f64 {
        self.res
            .runs
            .first()
            .and_then(|r| r.as_ref())
            .map_or(0.0, |r| r.stor.mem_offload_factor)
    }
}

fn ratio(v: f64, base: f64) -> f64 {
    if base == 0.0 {
        0.0
    } else {
        v / base
    }
}

/// The final run of the run's first mem-hog-tune scenario.
fn tune_final_run(run: &RunResult) -> Option<&MemHogResult> {
    run.prot.scenarios.iter().find_map(|s| match s {
        ScenarioResult::MemHogTune(t) => t.final_run.as_ref(),
        ScenarioResult::MemHog(_) => None,
    })
}

/// The report of `entry`, whose result and record are `res` and `rec`.
pub fn format(
    out: &mut String,
    entry: &Entry,
    res: &IoCostQosResult,
    rec: Option<QosRecord>,
    props: &IocostQosProps,
    opts: &FormatOpts,
) -> Result<()> {
    let rpt = report(entry, res, rec, props, opts)?;

    // Storage parameters of the baseline run.
    let stor = &props.storage;
    let hash_size = stor.hash_size as f64;
    let rps_max = match stor.rps_max {
        Some(v) => v as u64,
        None => rpt.run_rec(0).map_or(0, |r| r.stor.rps_max()),
    };
    let log_bps = stor.log_bps as f64;
    let _ = writeln!(
        out,
        "{}\n",
        storage::params_line(hash_size, rps_max, log_bps)
    );

    if opts.full {
        for (i, run) in rpt.res.runs.iter().enumerate() {
            if let Some(run) = run {
                format_run(out, &rpt, i, run)?;
            }
        }
        out.push('\n');
        double_underline(out, "Summary");
    }

    format_summary(out, &rpt);
    Ok(())
}

/// One row per finished configuration: its QoS, the storage numbers (with the run's IO
/// latencies), MOF and aMOF against the baseline, isolation, latency impact, work
/// conservation and vrate.
pub fn headline(
    entry: &Entry,
    res: &IoCostQosResult,
    rec: Option<QosRecord>,
    props: &IocostQosProps,
) -> Result<Vec<Row>> {
    let opts = FormatOpts::default();
    let rpt = report(entry, res, rec, props, &opts)?;
    let base_mof = rpt.baseline_mof();
    let mut rows = Vec::new();
    for (i, run) in rpt.res.runs.iter().enumerate() {
        let Some(run) = run else { continue };
        let loops = rpt.run_rec(i).map_or(0, |r| r.stor.mem_sizes.len());
        let mut row: Row = vec![("config", json!(i)), ("qos", json!(rpt.describe_cfg(i)))];
        let stor = storage::headline_of(&run.stor, rpt.mem_profile(i), loops)?;
        row.extend(
            stor.into_iter()
                .filter(|(k, _)| !k.starts_with("read_lat") && !k.starts_with("write_lat")),
        );
        let hog = tune_final_run(run);
        let isol_pct = rpt.isol_pct(i);
        row.extend([
            (
                "mof_ratio",
                num(ratio(run.stor.mem_offload_factor, base_mof)),
            ),
            (
                "amof",
                run.adjusted_mem_offload_factor.map_or(Value::Null, num),
            ),
            (
                "amof_ratio",
                run.adjusted_mem_offload_factor
                    .map_or(Value::Null, |a| num(ratio(a, base_mof))),
            ),
            ("isol_pct", json!(isol_pct)),
            (
                "isol",
                hog.and_then(|h| h.isol.get(isol_pct))
                    .map_or(Value::Null, num),
            ),
            (
                "lat_imp_mean",
                hog.map_or(Value::Null, |h| num(h.lat_imp.mean)),
            ),
            (
                "lat_imp_stdev",
                hog.map_or(Value::Null, |h| num(h.lat_imp.stdev)),
            ),
            ("work_csv", hog.map_or(Value::Null, |h| num(h.work_csv))),
            (
                "vrate_mean",
                run.vrate.get("mean").map_or(Value::Null, |v| num(*v)),
            ),
            (
                "vrate_stdev",
                run.vrate.get("stdev").map_or(Value::Null, |v| num(*v)),
            ),
        ]);
        row.extend(headline::iolat_row(&rpt.iolats[i]));
        rows.push(row);
    }
    Ok(rows)
}

/// The entry parsed for its report, with the checks a report needs.
fn report<'a>(
    entry: &Entry,
    res: &'a IoCostQosResult,
    rec: Option<QosRecord>,
    props: &IocostQosProps,
    opts: &'a FormatOpts,
) -> Result<Report<'a>> {
    let Some(rec) = rec else {
        crate::usage_bail!(
            "{}: the entry has a result but no record; can't tell its QoS configurations",
            job_name(&entry.spec)
        );
    };
    if res.runs.is_empty() || rec.runs.is_empty() {
        crate::usage_bail!(
            "{}: the entry has no finished runs yet; re-run the same command to continue it",
            job_name(&entry.spec)
        );
    }
    if !matches!(res.runs.first(), Some(Some(_)))
        || rec
            .runs
            .first()
            .is_some_and(|r| r.as_ref().is_some_and(|r| !r.ovr.off))
    {
        crate::usage_bail!(
            "{}: the first run isn't the iocost-off baseline; can't compare runs",
            job_name(&entry.spec)
        );
    }
    // The records say which percentile the runs were judged at; the spec (or the default) only
    // matters when no run has a mem-hog-tune record.
    let isol_pct = rec
        .runs
        .iter()
        .flatten()
        .find_map(|r| {
            r.prot.scenarios.iter().find_map(|s| match s {
                ScenarioRecord::MemHogTune(t) => Some(t.isol_pct.clone()),
                ScenarioRecord::MemHog(_) => None,
            })
        })
        .or_else(|| props.isol_pct.clone())
        .unwrap_or_else(|| protection::DFL_ISOL_PCT.to_string());
    let cfgs = configs(props, &rec);
    let iolats = res
        .runs
        .iter()
        .map(|r| r.as_ref().map_or(Ok(IoLat::default()), RunResult::iolat))
        .collect::<Result<_>>()?;
    Ok(Report {
        rec,
        res,
        iolats,
        cfgs,
        isol_pct,
        opts,
    })
}

fn format_run(out: &mut String, rpt: &Report, i: usize, run: &RunResult) -> Result<()> {
    let sub_full = rpt.opts.props.contains_key("sub-full");
    let rstat = rpt.opts.rstat;
    let title = format!("RUN {:02}", i);
    let run_rec = rpt.run_rec(i);
    let mem_profile = rpt.mem_profile(i);

    out.push('\n');
    double_underline(out, &title);
    let qos = match rpt.cfg(i) {
        Some(cfg) => cfg.describe(&rpt.rec.base_qos),
        None => "?".into(),
    };
    let _ = writeln!(out, "QoS: {}\n", qos);

    underline(out, &format!("{} - Storage", title));
    storage::format_result(out, &run.stor, mem_profile, DFL_LOOPS, sub_full, rstat)?;

    let nr = run.prot.scenarios.len();
    let dfl_trec = MemHogTuneRecord::default();
    for (j, scn) in run.prot.scenarios.iter().enumerate() {
        match scn {
            ScenarioResult::MemHogTune(tune) => {
                protection::nested_title(out, &title, j, nr, true);
                let trec = match run_rec.and_then(|r| r.prot.scenarios.get(j)) {
                    Some(ScenarioRecord::MemHogTune(t)) => t,
                    _ => &dfl_trec,
                };
                // The tune range iocost-qos gives the protection bench: from 80% of the memory
                // share up to the size storage just measured.
                let share = run_rec.map_or(0, |r| r.stor.mem.share);
                let params = protection::props::TuneProps {
                    load: protection::DFL_LOAD,
                    speed: protection::DFL_SPEED.into(),
                    size_min: (share.saturating_mul(4) / 5) as f64,
                    size_max: run.stor.mem_size.trunc(),
                    intvs: protection::DFL_TUNE_INTVS,
                    isol_pct: trec.isol_pct.clone(),
                    isol_thr: trec.isol_thr,
                    search: protection::props::DFL_SEARCH,
                    hint: None,
                };
                protection::format_tune(out, &params, tune, trec.final_size, sub_full, rstat)?;
            }
            ScenarioResult::MemHog(hog) => {
                protection::nested_title(out, &title, j, nr, false);
                protection::format_mem_hog(out, hog, sub_full, rstat)?;
                out.push('\n');
            }
        }
    }

    underline(out, &format!("{} - Result", title));
    rpt.iolats[i].format(out, true);
    out.push('\n');

    if i > 0 {
        format_vrate(out, run);
        format_qos_result(out, rpt, i, run);
    }
    Ok(())
}

/// Sort key of a distribution label: percentiles numerically, then mean, then stdev.
fn label_order(key: &str) -> (u8, f64) {
    match key {
        "mean" => (1, 0.0),
        "stdev" => (2, 0.0),
        k => (0, k.parse().unwrap_or(f64::MAX)),
    }
}

fn format_vrate(out: &mut String, run: &RunResult) {
    let mut items: Vec<(&String, &f64)> = run.vrate.iter().collect();
    items.sort_by(|a, b| {
        let (ka, kb) = (label_order(a.0), label_order(b.0));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    out.push_str("vrate:");
    for (n, (k, v)) in items.iter().enumerate() {
        if n > 0 && n % 7 == 0 {
            out.push_str("\n      ");
        }
        let _ = write!(out, " p{}={:.2}", k, v);
    }
    out.push_str("\n\n");
}

fn format_qos_result(out: &mut String, rpt: &Report, i: usize, run: &RunResult) {
    let mem_profile = rpt.mem_profile(i);
    let base_mof = rpt.baseline_mof();
    let mof = run.stor.mem_offload_factor;
    let _ = writeln!(
        out,
        "QoS result: MOF={:.3}@{}({:.3}x) vrate={:.2}:{:.2} missing={}%",
        mof,
        mem_profile,
        ratio(mof, base_mof),
        run.vrate.get("mean").copied().unwrap_or(0.0),
        run.vrate.get("stdev").copied().unwrap_or(0.0),
        format_pct(missing_ratio(run.nr_reports))
    );
    match (run.adjusted_mem_offload_factor, tune_final_run(run)) {
        (Some(amof), Some(hog)) => {
            let isol_pct = rpt.isol_pct(i);
            let _ = writeln!(
                out,
                "            aMOF={:.3}@{}({:.3}x) isol-{}={}% lat_imp={}%:{} work_csv={}%",
                amof,
                mem_profile,
                ratio(amof, base_mof),
                isol_pct,
                format_pct(hog.isol.get(isol_pct).unwrap_or(0.0)),
                format_pct(hog.lat_imp.mean),
                format_pct(hog.lat_imp.stdev),
                format_pct(hog.work_csv)
            );
        }
        (Some(amof), None) => {
            let _ = writeln!(
                out,
                "            aMOF={:.3}@{}({:.3}x) isol=- lat_imp=- work_csv=-",
                amof,
                mem_profile,
                ratio(amof, base_mof)
            );
        }
        (None, _) => out.push_str("            aMOF=FAIL isol=FAIL lat_imp=FAIL work_csv=FAIL\n"),
    }
    out.push('\n');
}

/// An adaptive grid's picks, numbered as the runs (the first after the `fixed` ones), and why
/// it stopped.
fn adaptive_steps(out: &mut String, a: &AdaptiveLog, fixed: usize) {
    let _ = writeln!(out, "Adaptive grid, the vrates in the order picked:");
    for (k, st) in a.steps.iter().enumerate() {
        let _ = writeln!(out, "[{:02}] {:6.2}  {}", fixed + k, st.vrate, st.why);
    }
    match &a.stop {
        Some(why) => writeln!(out, "Stopped: {}\n", why),
        None => writeln!(out, "Not finished\n"),
    }
    .ok();
}

fn format_summary(out: &mut String, rpt: &Report) {
    let nr = rpt.cfgs.len().max(rpt.res.runs.len());
    for i in 0..nr {
        let desc = rpt.describe_cfg(i);
        if rpt.cfg(i).is_some_and(|c| c.off) {
            let _ = writeln!(
                out,
                "[{:02}] QoS: {} mem_profile={}",
                i, desc, rpt.rec.mem_profile
            );
        } else {
            let _ = writeln!(out, "[{:02}] QoS: {}", i, desc);
        }
    }
    out.push('\n');
    if let Some(a) = &rpt.rec.adaptive {
        adaptive_steps(out, a, rpt.cfgs.len().saturating_sub(a.steps.len()));
    }

    let _ = writeln!(
        out,
        "         MOF     aMOF  isol-{}%       lat-imp%  work-csv%  missing%",
        rpt.isol_pct
    );
    for (i, run) in rpt.res.runs.iter().enumerate() {
        let Some(run) = run else {
            let _ = writeln!(out, "[{:02}]  SKIP", i);
            continue;
        };
        let _ = write!(out, "[{:02}] {:7.3}  ", i, run.stor.mem_offload_factor);
        let missing = missing_ratio(run.nr_reports) * 100.0;
        match (run.adjusted_mem_offload_factor, tune_final_run(run)) {
            (Some(amof), Some(hog)) => {
                let _ = writeln!(
                    out,
                    "{:7.3}     {:5.1}  {:6.1}:{:6.1}      {:5.1}     {:5.1}",
                    amof,
                    hog.isol.get(rpt.isol_pct(i)).unwrap_or(0.0) * 100.0,
                    hog.lat_imp.mean * 100.0,
                    hog.lat_imp.stdev * 100.0,
                    hog.work_csv * 100.0,
                    missing
                );
            }
            (amof, _) => {
                let amof = amof.map_or("FAIL".to_string(), |v| format!("{:.3}", v));
                let _ = writeln!(
                    out,
                    "{:>7}     {:>5}  {:>6}:{:>6}      {:>5}     {:5.1}",
                    amof, "-", "-", "-", "-", missing
                );
            }
        }
    }

    lat_table(out, rpt, "RLAT", IoLat::read);
    lat_table(out, rpt, "WLAT", IoLat::write);
    out.push('\n');
}

fn lat_table(out: &mut String, rpt: &Report, title: &str, sel: impl Fn(&IoLat) -> &LatMap) {
    let _ = writeln!(
        out,
        "\n{:<17}  p50                p90                p99                max",
        title
    );
    for (i, run) in rpt.res.runs.iter().enumerate() {
        if run.is_none() {
            let _ = writeln!(out, "[{:02}]  Skipped", i);
            continue;
        }
        let map = sel(&rpt.iolats[i]);
        let groups: Vec<String> = SUMMARY_PCTS
            .iter()
            .map(|(key, _)| format_lat_group(&map.get(*key).cloned().unwrap_or_default()))
            .collect();
        let _ = writeln!(out, "[{:02}] {}", i, groups.join("  "));
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::AdaptiveStep;
    use super::*;

    #[test]
    fn an_adaptive_grids_picks_are_numbered_as_its_runs() {
        let step = |vrate: f64, why: &str| AdaptiveStep {
            vrate,
            why: why.into(),
        };
        let mut a = AdaptiveLog {
            steps: vec![step(122.94, "coarse pass"), step(7.5, "bandwidth max is …")],
            stop: Some("every interval is at most 10.0 wide".into()),
        };
        let mut out = String::new();
        adaptive_steps(&mut out, &a, 2);
        assert_eq!(
            out,
            "Adaptive grid, the vrates in the order picked:\n\
             [02] 122.94  coarse pass\n\
             [03]   7.50  bandwidth max is …\n\
             Stopped: every interval is at most 10.0 wide\n\n"
        );
        a.stop = None;
        let mut out = String::new();
        adaptive_steps(&mut out, &a, 1);
        assert!(
            out.ends_with("[02]   7.50  bandwidth max is …\nNot finished\n\n"),
            "{}",
            out
        );
    }
}
