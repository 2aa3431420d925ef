//! `curve`: latency against load, the way Vdbench's `iorate=curve` sizes a device — a
//! closed-loop max run at the job's queue depth, then open-loop runs at shares of its IOPS
//! (or closed loops at queue depths, `mode=qd`), the knee where latency turns, and with
//! `lat-target` the highest rate meeting a latency percentile, found by bisection. Every run
//! is an `io` job of our engine; any `io` property but the rate passes through.
//!
//! `props.rs` the properties, `points.rs` the arithmetic (targets, knee, depths),
//! `search.rs` the bisection, `record.rs` what the run stores, `run.rs` the sequence (resumable,
//! written against a `JobRunner`), `study.rs` the answer, `report.rs` the text and headline records, `plot.rs` the SVG.

pub mod plot;
pub mod points;
pub mod props;
pub mod record;
pub mod report;
pub mod run;
pub mod search;
pub mod study;

use crate::bench::contract::api::{
    Bench, BenchDesc, DocPage, FormatOpts, Shape, SpecError, Stored,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::spec::JobSpec;
use crate::util::now;
use crate::workload::ioengine::job::{IoJob, Stop};
use anyhow::{Context, Result};
use props::CurveProps;
use record::{CurveRecord, PointOut};
use run::JobRunner;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use study::CurveResult;

pub struct Curve;

pub static DESC: BenchDesc = BenchDesc {
    kind: "curve",
    about: "Latency against load: a max run, then rates up to it (Vdbench's curve)",
    hidden: false,
    incremental: true,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &props::PROPS,
        forward: &[],
        group_props: None,
        open_keys: None,
        format_props: &[],
    },
    doc: Some(DocPage {
        title: "Latency against load",
        text: include_str!("../../../benches-doc/curve.md"),
    }),
    system: None,
};

/// Runs the jobs on the engine, reading the block device's queue statistics around each.
struct EngineRunner {
    /// The latency target's percentile, kept beside the standard ones.
    extra_pct: Option<f64>,
    /// `/sys/dev/block/M:m/stat` of the device the target is on, when it has one.
    dev_stat: Option<PathBuf>,
    /// Seconds one job takes (ramp and duration), for the estimate.
    job_secs: Option<f64>,
}

/// The block device statistics file for `target` (the device itself, or the one holding the
/// file).
fn dev_stat_of(target: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let md = std::fs::metadata(target).ok()?;
    let dev = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let p = PathBuf::from(format!("/sys/dev/block/{}:{}/stat", maj, min));
    (maj != 0 && p.exists()).then_some(p)
}

/// The block layer's weighted time in queue (ms): the stat file's 11th field.
fn time_in_queue(stat: &Path) -> Option<u64> {
    std::fs::read_to_string(stat)
        .ok()?
        .split_whitespace()
        .nth(10)?
        .parse()
        .ok()
}

impl JobRunner for EngineRunner {
    fn run(&mut self, job: &IoJob, what: &str, left: usize) -> Result<PointOut> {
        crate::logging::progress::phase(what.to_string());
        if let Some(s) = self.job_secs {
            crate::logging::progress::eta(Some(s * (left + 1) as f64));
        }
        let q0 = self.dev_stat.as_deref().and_then(time_in_queue);
        let t0 = Instant::now();
        let r = crate::workload::ioengine::run::run(job, &AtomicBool::new(false))
            .with_context(|| format!("curve {}", what))?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let q1 = self.dev_stat.as_deref().and_then(time_in_queue);
        let depth = match (q0, q1) {
            (Some(a), Some(b)) if b >= a => points::device_depth(b - a, ms),
            _ => None,
        };
        let p = PointOut::of(&r, self.extra_pct, depth);
        log::info!(
            "curve: {}: {} IOPS{}, lat mean {} p99 {}",
            what,
            crate::workload::ioengine::result::si(p.iops),
            p.target_iops
                .map(|t| format!(" of {}", crate::workload::ioengine::result::si(t)))
                .unwrap_or_default(),
            report::lat_text(p.lat_mean_ns),
            report::lat_text(p.lat(Some(99.0)).unwrap_or(0.0))
        );
        Ok(p)
    }
}

/// The record a resumed run continues, when it was made for the same points and mode.
fn resumable(ctx: &RunCtx, props: &CurveProps) -> Option<CurveRecord> {
    let rec: CurveRecord = ctx.prev_record()?;
    (rec.points == props.points && rec.mode == props.mode.name()).then_some(rec)
}

impl Bench for Curve {
    type Props = CurveProps;
    type Record = CurveRecord;
    type Result = CurveResult;
    const RESULT_KEYS: &'static [&'static str] = &["rows", "mode"];
    const KEY_NUMBERS: &'static [&'static str] = &[
        "max_iops",
        "knee_iops",
        "knee_lat_p99_us",
        "lat_target_iops",
        "iops",
        "pt_lat_mean_us",
        "pt_lat_p99_us",
    ];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<CurveProps, SpecError> {
        props::read(spec)
    }

    fn progress(&self, props: &CurveProps, rec: &CurveRecord) -> Option<String> {
        let done: usize = rec.runs.iter().map(|r| r.points.len()).sum();
        Some(format!(
            "{} of {} points done{}",
            done,
            props.points.len() * props.repeat as usize,
            if rec.probes.is_empty() {
                String::new()
            } else {
                format!(", {} search probes", rec.probes.len())
            }
        ))
    }

    fn run(&self, ctx: &mut RunCtx, props: &CurveProps) -> Result<CurveRecord> {
        let start = now();
        let mut job = props.io.job.clone();
        let (target, written) = crate::bench::io::prepare_target(ctx, &props.io)?;
        job.target = target.clone();
        if ctx.quick() && !props.dur_given {
            job.stop = Stop::Time(Duration::from_secs_f64(props::QUICK_DUR_S));
            if let Some(ss) = &mut job.ss {
                ss.window_s = ss.window_s.min(props::QUICK_DUR_S as u32);
            }
        }
        let mut rec = resumable(ctx, props).unwrap_or_else(|| CurveRecord {
            period: (start, start),
            target: target.clone(),
            testfile_written: written,
            mode: props.mode.name().to_string(),
            job: Some(job.clone()),
            points: props.points.clone(),
            knee: props.knee,
            lat_target: props.lat_target.map(|t| t.name()),
            ..Default::default()
        });
        let mut runner = EngineRunner {
            extra_pct: props.lat_target.and_then(|t| t.pct),
            dev_stat: dev_stat_of(&target),
            job_secs: match job.stop {
                Stop::Time(d) => Some((d + job.ramp).as_secs_f64()),
                Stop::Bytes(_) => None,
            },
        };
        let mut save = |r: &CurveRecord| {
            let mut r = r.clone();
            r.period.1 = now();
            ctx.checkpoint(&r)
        };
        run::run_curve(props, &job, &mut rec, &mut runner, &mut save)?;
        rec.period.1 = now();
        Ok(rec)
    }

    fn study(&self, _ctx: &StudyCtx, rec: &CurveRecord) -> Result<CurveResult> {
        Ok(study::study(rec))
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, _opts: &FormatOpts) -> Result<()> {
        let rec = stored.record()?;
        out.push_str(&report::text(&stored.result, rec.as_ref()));
        Ok(())
    }

    fn headline(
        &self,
        stored: &Stored<Self>,
    ) -> Result<Vec<crate::bench::contract::headline::Row>> {
        Ok(report::headline(&stored.result))
    }

    fn plot(&self, stored: &Stored<Self>) -> Result<Vec<crate::bench::contract::api::PlotFile>> {
        let spec = stored.entry.spec.canonical();
        Ok(plot::svg(&stored.result, &spec)?
            .map(|svg| crate::bench::contract::api::PlotFile::svg("", svg))
            .into_iter()
            .collect())
    }
}

#[cfg(test)]
mod tests;
