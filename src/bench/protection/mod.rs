//! `protection`: how well hashd keeps its throughput while a memory hog floods the system.
//! The descriptor, typed models of the mem-hog / mem-hog-tune records and results, and their
//! text reports, used standalone and nested in `iocost-qos` runs; `props` holds the scenario
//! properties. Running it comes with the memory hog.

use crate::bench::contract::api::{
    Bench, BenchDesc, DocPage, FormatOpts, Shape, SpecError, Stored, PCT_LABELS,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::bench::contract::needs;
use crate::format::rstat_section;
use crate::format::text::{double_underline, pct_table_header, pct_table_row, underline};
use crate::spec::{Group, JobSpec};
use crate::units::{format_duration, format_pct, format_size};
use anyhow::Result;
use std::fmt::Write;

use props::TuneProps;
pub use props::{DFL_LOAD, DFL_MEM_HOG_LOOPS, DFL_SPEED, DFL_TUNE_INTVS, TUNE_PROBE_DUR};
pub use record::{MemHogTuneRecord, ProtectionRecord, ScenarioRecord, DFL_ISOL_PCT, DFL_ISOL_THR};
pub use result::{MemHogResult, MemHogTuneResult, PctDist, ProtectionResult, ScenarioResult};

mod early;
mod hog_run;
pub mod props;
pub mod record;
pub mod result;
mod run;
pub mod search;
pub mod stable;
pub mod study;
pub mod workload;

pub struct Protection;

pub static DESC: BenchDesc = BenchDesc {
    kind: "protection",
    about: "Measure how well the workload is protected from a memory hog",
    hidden: false,
    incremental: false,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &[],
        forward: &[],
        group_props: Some(&props::SCENARIO_PROPS),
        open_keys: None,
        format_props: &[],
    },
    doc: Some(DocPage {
        title: "Workload protection against a memory hog",
        text: include_str!("../../../benches-doc/protection.md"),
    }),
    system: Some(&needs::ALL),
};

impl Bench for Protection {
    type Props = props::ProtectionProps;
    type Record = ProtectionRecord;
    type Result = ProtectionResult;
    const RESULT_KEYS: &'static [&'static str] = &["scenarios"];
    const KEY_NUMBERS: &'static [&'static str] =
        &["isol_mean", "lat_imp_mean", "work_csv", "final_size"];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<props::ProtectionProps, SpecError> {
        props::check(spec)
    }

    fn run(&self, ctx: &mut RunCtx, props: &props::ProtectionProps) -> Result<ProtectionRecord> {
        run::run(ctx, props)
    }

    fn progress(&self, props: &props::ProtectionProps, rec: &ProtectionRecord) -> Option<String> {
        let done = rec
            .scenarios
            .iter()
            .zip(&props.scenarios)
            .filter(|(r, p)| match (r, p) {
                (ScenarioRecord::MemHog(r), props::Scenario::MemHog(p)) => {
                    r.runs.len() >= p.loops as usize
                }
                (ScenarioRecord::MemHogTune(r), _) => r.done,
                _ => false,
            })
            .count();
        Some(format!(
            "{} of {} scenarios done",
            done,
            props.scenarios.len()
        ))
    }

    fn study(&self, ctx: &StudyCtx, rec: &ProtectionRecord) -> Result<ProtectionResult> {
        let mut scenarios = Vec::new();
        let mut hogs = Vec::new();
        for scn in &rec.scenarios {
            match scn {
                ScenarioRecord::MemHog(r) => {
                    let out = study::study_mem_hog(&ctx.reports_dir, r)?;
                    hogs.push((r, out.clone()));
                    scenarios.push(ScenarioResult::MemHog(out));
                }
                ScenarioRecord::MemHogTune(t) => {
                    let final_run = match &t.final_run {
                        Some(r) => Some(study::study_mem_hog(&ctx.reports_dir, r)?),
                        None => None,
                    };
                    scenarios.push(ScenarioResult::MemHogTune(MemHogTuneResult { final_run }));
                }
            }
        }
        let combined_mem_hog = if hogs.is_empty() {
            None
        } else {
            let parts: Vec<_> = hogs.iter().map(|(r, o)| (*r, o)).collect();
            Some(study::combine(&ctx.reports_dir, &parts)?)
        };
        Ok(ProtectionResult {
            scenarios,
            combined_mem_hog,
        })
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, opts: &FormatOpts) -> Result<()> {
        format(out, stored, opts)?;
        Ok(())
    }

    fn headline(
        &self,
        stored: &Stored<Self>,
    ) -> Result<Vec<crate::bench::contract::headline::Row>> {
        headline(stored)
    }
}

/// One record per scenario and one for the mem-hog summary: isolation, latency impact, work
/// conservation, failures and missing reports; a tune adds the size it found.
pub fn headline(stored: &Stored<Protection>) -> Result<Vec<crate::bench::contract::headline::Row>> {
    use crate::bench::contract::headline::num;
    use serde_json::{json, Value};
    let res = &stored.result;
    let rec = stored.record()?.unwrap_or_default();
    let row = |scenario: Value, kind: &str, r: Option<&MemHogResult>| {
        let mut row: crate::bench::contract::headline::Row =
            vec![("scenario", scenario), ("scenario_kind", json!(kind))];
        let get = |f: &dyn Fn(&MemHogResult) -> f64| r.map_or(Value::Null, |r| num(f(r)));
        row.extend([
            ("isol_mean", get(&|r| r.isol.mean)),
            ("isol_stdev", get(&|r| r.isol.stdev)),
            ("isol_p01", get(&|r| r.isol.get("01").unwrap_or(0.0))),
            ("isol_p05", get(&|r| r.isol.get("05").unwrap_or(0.0))),
            ("lat_imp_mean", get(&|r| r.lat_imp.mean)),
            ("lat_imp_stdev", get(&|r| r.lat_imp.stdev)),
            ("lat_imp_p95", get(&|r| r.lat_imp.get("95").unwrap_or(0.0))),
            ("work_csv", get(&|r| r.work_csv)),
            ("fail_pct", get(&|r| r.fail_ratio * 100.0)),
            ("hog_bytes", get(&|r| r.hog_bytes)),
            (
                "missing_pct",
                get(&|r| crate::study::reports::missing_ratio(r.nr_reports) * 100.0),
            ),
        ]);
        row
    };
    let mut rows = Vec::new();
    for (i, scn) in res.scenarios.iter().enumerate() {
        match scn {
            ScenarioResult::MemHog(r) => rows.push(row(json!(i + 1), "mem-hog", Some(r))),
            ScenarioResult::MemHogTune(t) => {
                let mut r = row(json!(i + 1), "mem-hog-tune", t.final_run.as_ref());
                let size = match rec.scenarios.get(i) {
                    Some(ScenarioRecord::MemHogTune(t)) => t.final_size,
                    _ => None,
                };
                r.push(("final_size", size.map_or(Value::Null, num)));
                rows.push(r);
            }
        }
    }
    if let Some(comb) = &res.combined_mem_hog {
        rows.push(row(json!("summary"), "summary", Some(comb)));
    }
    Ok(rows)
}

/// The mem-hog report: `Info:` (full), IO latency, slice resource stat (full), the isolation and
/// latency-impact table, and the `Result:` line(s). Ends after the last result line.
pub fn format_mem_hog(out: &mut String, res: &MemHogResult, full: bool, rstat: u8) -> Result<()> {
    if full {
        let _ = writeln!(
            out,
            "Info: baseline_rps={:.2} baseline_lat={}:{} vrate={:.2}:{:.2}",
            res.base_rps,
            format_duration(res.base_lat),
            format_duration(res.base_lat_stdev),
            res.vrate,
            res.vrate_stdev
        );
        let _ = writeln!(
            out,
            "      io_usage={:.1} io_unused={:.1} hog_io_usage={:.1} hog_io_loss={:.1}",
            res.io_usage, res.io_unused, res.hog_io_usage, res.hog_io_loss
        );
        let _ = writeln!(
            out,
            "      hog_bytes={} hog_lost_bytes={}\n",
            format_size(res.hog_bytes),
            format_size(res.hog_lost_bytes)
        );
    }

    res.iolat()?.format(out, full);
    out.push('\n');

    if full {
        out.push_str("Slice resource stat:\n\n");
        rstat_section(out, "ROOT", res.root_rstat.as_deref(), rstat)?;
        rstat_section(out, "WORKLOAD", res.work_rstat.as_deref(), rstat)?;
        rstat_section(out, "SYSTEM", res.sys_rstat.as_deref(), rstat)?;
    }

    out.push_str("Isolation and Request Latency Impact Distributions:\n\n");
    pct_table_header(out, "", 0, PCT_LABELS);
    pct_table_row(out, "isol%", 0, &res.isol.values(), format_pct);
    pct_table_row(out, "lat-imp%", 0, &res.lat_imp.values(), format_pct);
    out.push('\n');

    out.push_str("Result: ");
    if res.fail_ratio > 0.0 {
        let _ = write!(out, "FAIL={}% ", format_pct(res.fail_ratio));
    }
    let _ = writeln!(
        out,
        "isol={}:{}% lat_imp={}%:{} work_csv={}% missing={}%",
        format_pct(res.isol.mean),
        format_pct(res.isol.stdev),
        format_pct(res.lat_imp.mean),
        format_pct(res.lat_imp.stdev),
        format_pct(res.work_csv),
        format_pct(crate::study::reports::missing_ratio(res.nr_reports))
    );
    for msg in &res.fail_msgs {
        let _ = writeln!(out, "        [error] {}", msg);
    }
    Ok(())
}

/// A mem-hog-tune scenario below its title: params, the final run's report and the verdict,
/// ending with a blank line.
pub fn format_tune(
    out: &mut String,
    params: &TuneProps,
    res: &MemHogTuneResult,
    final_size: Option<f64>,
    full: bool,
    rstat: u8,
) -> Result<()> {
    let _ = writeln!(
        out,
        "Params: load={} speed={} size={}-{} intvs={}",
        params.load,
        params.speed,
        format_size(params.size_min),
        format_size(params.size_max),
        params.intvs
    );
    let _ = writeln!(
        out,
        "        isol-{} >= {}% for {}\n",
        params.isol_pct,
        format_pct(params.isol_thr),
        format_duration(TUNE_PROBE_DUR)
    );
    match &res.final_run {
        Some(run) => format_mem_hog(out, run, full, rstat)?,
        None => out.push_str("Result: A successful full mem-hog run was not recorded\n"),
    }
    match final_size {
        Some(size) => {
            let _ = writeln!(
                out,
                "        hashd memory size {}/{} can be protected at isol-{} >= {}%\n",
                format_size(size),
                format_size(params.size_max),
                params.isol_pct,
                format_pct(params.isol_thr)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "        Failed to find size to keep isol-{} above {}% in [{}, {}]\n",
                params.isol_pct,
                format_pct(params.isol_thr),
                format_size(params.size_min),
                format_size(params.size_max)
            );
        }
    }
    Ok(())
}

fn tune_params(group: &Group, rec: &MemHogTuneRecord) -> Result<TuneProps, SpecError> {
    Ok(TuneProps {
        isol_pct: rec.isol_pct.clone(),
        isol_thr: rec.isol_thr,
        ..TuneProps::read(group)?
    })
}

/// A standalone `protection` entry: every scenario in full mode, only the tune scenarios and
/// the combined mem-hog summary otherwise.
pub fn format(out: &mut String, stored: &Stored<Protection>, opts: &FormatOpts) -> Result<()> {
    let (entry, res) = (stored.entry, &stored.result);
    let rec = stored.record()?.unwrap_or_default();
    let nr = res.scenarios.len();
    let dfl_trec = MemHogTuneRecord::default();
    for (i, scn) in res.scenarios.iter().enumerate() {
        // Scenario groups follow the (empty) first group.
        let group = entry.spec.group(i + 1);
        let spec_err = |e| entry.spec.error(e);
        match scn {
            ScenarioResult::MemHog(run) => {
                if !opts.full {
                    continue;
                }
                double_underline(out, &format!("Scenario {}/{} - Memory Hog", i + 1, nr));
                let p = match (
                    entry.spec.later_groups().count(),
                    props::default_scenarios().get(i),
                ) {
                    (0, Some(props::Scenario::MemHog(p))) => p.clone(),
                    _ => props::MemHogProps::read(&group).map_err(spec_err)?,
                };
                let _ = writeln!(
                    out,
                    "Params: loops={} load={} speed={}\n",
                    p.loops, p.load, p.speed
                );
                format_mem_hog(out, run, opts.full, opts.rstat)?;
                out.push('\n');
            }
            ScenarioResult::MemHogTune(tune) => {
                let trec = match rec.scenarios.get(i) {
                    Some(ScenarioRecord::MemHogTune(t)) => t,
                    _ => &dfl_trec,
                };
                double_underline(
                    out,
                    &format!("Scenario {}/{} - Memory Hog Tuning", i + 1, nr),
                );
                let params = tune_params(&group, trec).map_err(spec_err)?;
                format_tune(out, &params, tune, trec.final_size, opts.full, opts.rstat)?;
            }
        }
    }
    if let Some(comb) = &res.combined_mem_hog {
        double_underline(out, "Memory Hog Summary");
        format_mem_hog(out, comb, opts.full, opts.rstat)?;
        out.push('\n');
    }
    Ok(())
}

/// Title of a protection scenario nested in another bench's report.
pub fn nested_title(out: &mut String, prefix: &str, idx: usize, nr: usize, tune: bool) {
    underline(
        out,
        &format!(
            "{} - Protection Scenario {}/{} - Memory Hog{}",
            prefix,
            idx + 1,
            nr,
            if tune { " Tuning" } else { "" }
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_numbers_are_headline_fields() {
        let res = ProtectionResult {
            scenarios: vec![ScenarioResult::MemHogTune(MemHogTuneResult {
                final_run: Some(MemHogResult::default()),
            })],
            combined_mem_hog: Some(MemHogResult::default()),
        };
        let entry = crate::result::Entry {
            spec: JobSpec::parse("protection").unwrap(),
            period: (0, 1),
            sysinfo: serde_json::value::to_raw_value(&serde_json::json!({})).unwrap(),
            record: None,
            result: Some(serde_json::value::to_raw_value(&res).unwrap()),
            incomplete: false,
            unknown: Default::default(),
        };
        let rows = crate::bench::contract::api::AnyBench::headline(&Protection, &entry).unwrap();
        let missing = crate::bench::contract::headline::missing_keys(
            <Protection as crate::bench::contract::api::Bench>::KEY_NUMBERS,
            &rows,
        );
        assert!(missing.is_empty(), "{:?}", missing);
    }
}
