//! `qos-study`: how much an IO control profile protects a latency-sensitive client from
//! background work, and what it costs the background — Ceph's mClock/WPQ study
//! (a client and a recovery side by side under each scheduler profile) on cgroup2's IO
//! controllers. Three services, each an IO engine job in a process and cgroup of its own;
//! each alone first (the device's capacity), then every profile `repeat` times.
//!
//! `profiles.rs` the profiles as data and the knob values they make (pure), `props.rs` the
//! properties, `record.rs` what the run stores, `run.rs` the runs (resumable), `study.rs`
//! per-profile means and spreads, `report.rs` the text and headline records, `plot.rs` the
//! SVGs.

pub mod plot;
pub mod profiles;
pub mod props;
pub mod record;
pub mod report;
pub mod run;
pub mod study;

use crate::bench::contract::api::{
    Bench, BenchDesc, DocPage, FormatOpts, PlotFile, Shape, SpecError, Stored,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::bench::contract::needs;
use crate::spec::JobSpec;
use anyhow::Result;
use props::QosStudyProps;
use record::QosStudyRecord;
use study::QosStudyResult;

pub struct QosStudy;

pub static DESC: BenchDesc = BenchDesc {
    kind: "qos-study",
    about: "A latency-sensitive client against background work under IO control profiles",
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
        title: "IO control profiles: a client against background work",
        text: include_str!("../../../benches-doc/qos-study.md"),
    }),
    system: Some(&needs::IO),
};

impl Bench for QosStudy {
    type Props = QosStudyProps;
    type Record = QosStudyRecord;
    type Result = QosStudyResult;
    const RESULT_KEYS: &'static [&'static str] = &["rows", "alone"];
    const KEY_NUMBERS: &'static [&'static str] = &[
        "client_iops",
        "client_lat_mean_us",
        "client_lat_p99_us",
        "bg_bps",
        "bg_secs",
    ];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<QosStudyProps, SpecError> {
        props::read(spec)
    }

    fn progress(&self, props: &QosStudyProps, rec: &QosStudyRecord) -> Option<String> {
        Some(format!(
            "{} services alone, {} of {} profile runs done",
            rec.alone.len(),
            rec.runs.len(),
            props.profiles.len() * rec.repeat.max(1) as usize
        ))
    }

    fn run(&self, ctx: &mut RunCtx, props: &QosStudyProps) -> Result<QosStudyRecord> {
        run::run(ctx, props)
    }

    fn study(&self, _ctx: &StudyCtx, rec: &QosStudyRecord) -> Result<QosStudyResult> {
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

    fn plot(&self, stored: &Stored<Self>) -> Result<Vec<PlotFile>> {
        let Some(rec) = stored.record()? else {
            return Ok(Vec::new());
        };
        let spec = stored.entry.spec.canonical();
        Ok(plot::svgs(&stored.result, &rec, &spec)?
            .into_iter()
            .map(|(suffix, svg)| PlotFile::svg(suffix, svg))
            .collect())
    }
}
