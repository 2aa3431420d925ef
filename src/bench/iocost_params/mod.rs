//! `iocost-params`: the io.cost model and QoS parameters benchmarked for the scratch device
//! with our IO engine (`measure`: what runs and how the numbers follow; `run`: the host setup
//! and the runs), applied and committed for the benches that need a model. The report prints
//! the recorded parameters, as upstream's does.

pub mod measure;
pub mod run;

pub use run::ensure_model;

use crate::bench::api::{
    ApplyCommit, Bench, BenchDesc, DocPage, FormatOpts, Shape, SpecError, APPLY_COMMIT,
};
use crate::bench::headline::{num, Row};
use crate::bench::needs;
use crate::format::header::{IoCostModel, IoCostQos};
use crate::format::parse_record;
use crate::result::Entry;
use crate::spec::JobSpec;
use anyhow::Result;
use serde::Deserialize;
use serde_json::json;
use std::fmt::Write;

pub struct IocostParams;

pub static DESC: BenchDesc = BenchDesc {
    kind: "iocost-params",
    about: "Benchmark io.cost model and QoS parameters of the scratch device",
    hidden: false,
    incremental: false,
    runnable: true,
    shape: Shape {
        props: &APPLY_COMMIT,
        forward: &[],
        group_props: None,
        format_props: &[],
    },
    doc: Some(DocPage {
        title: "io.cost model and QoS parameters of the scratch device",
        text: include_str!("../../../benches-doc/iocost-params.md"),
    }),
    system: Some(&needs::IO),
};

impl Bench for IocostParams {
    type Props = ApplyCommit;

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<ApplyCommit, SpecError> {
        ApplyCommit::check(&spec.group(0))
    }

    fn run(
        &self,
        ctx: &mut crate::bench::runner::ctx::RunCtx,
        _props: &ApplyCommit,
    ) -> Result<serde_json::Value> {
        run::run(ctx)
    }

    fn applies(
        &self,
        props: &ApplyCommit,
        record: &serde_json::value::RawValue,
    ) -> Result<Option<crate::bench::api::Apply>> {
        if !props.apply {
            return Ok(None);
        }
        let knobs: crate::system::iocost::IoCostKnobs = serde_json::from_str(record.get())
            .map_err(|e| anyhow::anyhow!("parsing the iocost-params record: {}", e))?;
        if knobs.model.rbps == 0 || knobs.model.wbps == 0 {
            anyhow::bail!("the iocost-params record holds no model: {:?}", knobs.model);
        }
        Ok(Some(crate::bench::api::Apply::IoCost {
            knobs,
            commit: props.commit,
        }))
    }

    /// The result is the parameters, as upstream stores them.
    fn study(
        &self,
        _ctx: &crate::bench::runner::ctx::StudyCtx,
        record: &serde_json::value::RawValue,
    ) -> Result<serde_json::Value> {
        let knobs: crate::system::iocost::IoCostKnobs = serde_json::from_str(record.get())
            .map_err(|e| anyhow::anyhow!("parsing the iocost-params record: {}", e))?;
        Ok(serde_json::to_value(&knobs)?)
    }

    fn format(&self, out: &mut String, entry: &Entry, opts: &FormatOpts) -> Result<bool> {
        format(out, entry, opts)?;
        Ok(true)
    }

    /// The model (bytes and IOs per second) and the QoS targets (percentiles, µs, vrate %).
    fn headline(&self, entry: &Entry) -> Result<Vec<Row>> {
        let Some(rec) = parse_record::<IoCostParamsRecord>(entry)? else {
            return Ok(Vec::new());
        };
        let (m, q) = (&rec.model, &rec.qos);
        Ok(vec![vec![
            ("devnr", json!(rec.devnr)),
            ("rbps", json!(m.rbps)),
            ("rseqiops", json!(m.rseqiops)),
            ("rrandiops", json!(m.rrandiops)),
            ("wbps", json!(m.wbps)),
            ("wseqiops", json!(m.wseqiops)),
            ("wrandiops", json!(m.wrandiops)),
            ("rpct", num(q.rpct)),
            ("rlat", json!(q.rlat)),
            ("wpct", num(q.wpct)),
            ("wlat", json!(q.wlat)),
            ("min", num(q.min)),
            ("max", num(q.max)),
        ]])
    }
}

/// The recorded io.cost knobs.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct IoCostParamsRecord {
    pub devnr: String,
    pub model: IoCostModel,
    pub qos: IoCostQos,
}

pub fn format(out: &mut String, entry: &Entry, _opts: &FormatOpts) -> Result<()> {
    let Some(rec) = parse_record::<IoCostParamsRecord>(entry)? else {
        crate::usage_bail!(
            "job[{}:{}]: the entry has a result but no record to print",
            entry.spec.kind,
            entry.spec.id.as_deref().unwrap_or("-")
        );
    };
    let (r, w) = rec.model.lines();
    let _ = writeln!(out, "iocost model: {}", r);
    let _ = writeln!(out, "              {}", w);
    let _ = writeln!(out, "iocost QoS: {}\n", rec.qos.line());
    Ok(())
}
