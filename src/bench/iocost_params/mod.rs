//! `iocost-params`: the io.cost model and QoS parameters benchmarked for the scratch device
//! with our IO engine or fio's (`measure`: what runs and how the numbers follow; `run`: the
//! host setup and the runs; `fio`: a run handed to fio), applied and committed for the benches
//! that need a model. The report prints
//! the recorded parameters, as upstream's does.

pub mod fio;
pub mod measure;
pub mod run;

pub use run::ensure_model;

use crate::bench::contract::api::{
    chose_upstream, prop, Apply, ApplyCommit, Bench, BenchDesc, DocPage, FormatOpts, PropDesc,
    Shape, SpecError, Stored, ValueKind, APPLY_COMMIT,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::bench::contract::headline::Row;
use crate::bench::contract::needs;
use crate::spec::JobSpec;
use crate::system::iocost::IoCostKnobs;
use anyhow::Result;
use measure::{Engine, Jobs, ENGINES, JOBS};
use run::IocostParamsRecord;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::fmt::Write;

pub struct IocostParams;

const PROPS: [PropDesc; 5] = [
    APPLY_COMMIT[0],
    APPLY_COMMIT[1],
    prop(
        "jobs",
        ValueKind::Enum(JOBS),
        "the runs' job shapes: ours, or those of upstream's fio script, in its order",
    ),
    prop(
        "engine",
        ValueKind::Enum(ENGINES),
        "what runs the jobs: our IO engine, or fio's libaio engine as upstream's script (needs fio)",
    ),
    prop(
        "file-size",
        ValueKind::Size,
        "the test file's size (default: 16G, at most twice the memory; 2G with --quick)",
    ),
];

/// The properties: what to do with the parameters, and how they are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IocostParamsProps {
    pub ac: ApplyCommit,
    pub how: run::How,
}

pub static DESC: BenchDesc = BenchDesc {
    kind: "iocost-params",
    about: "Benchmark io.cost model and QoS parameters of the scratch device",
    hidden: false,
    incremental: false,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &PROPS,
        forward: &[],
        group_props: None,
        open_keys: None,
        format_props: &[],
    },
    doc: Some(DocPage {
        title: "io.cost model and QoS parameters of the scratch device",
        text: include_str!("../../../benches-doc/iocost-params.md"),
    }),
    system: Some(&needs::IO),
};

impl Bench for IocostParams {
    type Props = IocostParamsProps;
    type Record = IocostParamsRecord;
    type Result = IocostParamsResult;
    const RESULT_KEYS: &'static [&'static str] = &["model", "qos"];
    const KEY_NUMBERS: &'static [&'static str] = &[
        "rbps",
        "wbps",
        "rrandiops",
        "wrandiops",
        "rlat",
        "wlat",
        "min",
        "max",
    ];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<IocostParamsProps, SpecError> {
        let g = spec.group(0);
        let jobs = if chose_upstream(&g, "jobs", JOBS)? {
            Jobs::Upstream
        } else {
            Jobs::Ours
        };
        let engine = match g.value("engine", ValueKind::Enum(ENGINES))? {
            Some(crate::units::parse::ParsedValue::Enum(v)) if v == "fio" => Engine::Fio,
            _ => Engine::Ours,
        };
        let file_size = g.u64("file-size", ValueKind::Size)?;
        if let Some(s) = file_size.filter(|&s| s < measure::MIN_TESTFILE) {
            return Err(g.err(format!(
                "file-size={}: the test file needs at least 256M",
                crate::units::format_size(s as f64)
            )));
        }
        Ok(IocostParamsProps {
            ac: ApplyCommit::check(&g)?,
            how: run::How {
                jobs,
                engine,
                file_size,
            },
        })
    }

    fn run(&self, ctx: &mut RunCtx, props: &IocostParamsProps) -> Result<IocostParamsRecord> {
        run::run(ctx, props.how)
    }

    fn applies(
        &self,
        props: &IocostParamsProps,
        rec: &IocostParamsRecord,
    ) -> Result<Option<Apply>> {
        let props = props.ac;
        if !props.apply {
            return Ok(None);
        }
        let knobs = &rec.knobs;
        if knobs.model.rbps == 0 || knobs.model.wbps == 0 {
            anyhow::bail!("the iocost-params record holds no model: {:?}", knobs.model);
        }
        Ok(Some(Apply::IoCost {
            knobs: knobs.clone(),
            commit: props.commit,
        }))
    }

    fn study(&self, _ctx: &StudyCtx, rec: &IocostParamsRecord) -> Result<IocostParamsResult> {
        Ok(IocostParamsResult::Knobs(Box::new(rec.knobs.clone())))
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, opts: &FormatOpts) -> Result<()> {
        format(out, stored, opts)?;
        Ok(())
    }

    /// The model (bytes and IOs per second) and the QoS targets (percentiles, µs, vrate %).
    fn headline(&self, stored: &Stored<Self>) -> Result<Vec<Row>> {
        let Some(rec) = stored.record()? else {
            return Ok(Vec::new());
        };
        let mut row = vec![("devnr", json!(rec.knobs.devnr))];
        row.extend(crate::bench::contract::headline::model_qos_row(
            &rec.knobs.model,
            &rec.knobs.qos,
        ));
        Ok(vec![row])
    }
}

/// The result: ours stores the parameters; upstream's is a bare `true`. The reports read the
/// record, which both have.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IocostParamsResult {
    Knobs(Box<IoCostKnobs>),
    Upstream(bool),
}

/// The parameters' lines; they come from the record, which upstream's entries always have.
pub fn format(out: &mut String, stored: &Stored<IocostParams>, _opts: &FormatOpts) -> Result<()> {
    let entry = stored.entry;
    let Some(rec) = stored.record()? else {
        crate::usage_bail!(
            "job[{}:{}]: the entry has a result but no record to print",
            entry.spec.kind,
            entry.spec.id.as_deref().unwrap_or("-")
        );
    };
    let rec = &rec.knobs;
    let (r, w) = rec.model.lines();
    let _ = writeln!(out, "iocost model: {}", r);
    let _ = writeln!(out, "              {}", w);
    let _ = writeln!(out, "iocost QoS: {}\n", rec.qos.line());
    Ok(())
}
