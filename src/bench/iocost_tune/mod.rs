//! `iocost-tune` (benches-doc/iocost-tune.md): io.cost QoS solutions derived from iocost-qos
//! results — data series per vrate, the lines fitted to them and the solutions the rules pick.
//! This version reads and prints stored results (`summary`, `format` with its graphs,
//! `:high-level`, `:hwdb`, `:hwdb-fwrev`); running and solving are not available yet.

pub mod model;
pub mod report;
pub mod rules;
pub mod sel;

use crate::bench::api::{
    prop, Bench, BenchDesc, DocPage, FormatOpts, Shape, SpecError, Stored, ValueKind,
};
use crate::format::header::HeaderSysInfo;
use crate::spec::JobSpec;
use anyhow::Result;
use model::{IocostTuneRecord, IocostTuneResult};
use rules::QosRule;

pub struct IocostTune;

pub static DESC: BenchDesc = BenchDesc {
    kind: "iocost-tune",
    about: "Derive io.cost QoS solutions from iocost-qos results",
    hidden: false,
    incremental: true,
    runnable: false,
    shape: Shape {
        props: &[],
        forward: &[],
        group_props: None,
        format_props: &[
            prop(
                "high-level",
                ValueKind::Bool,
                "only the points, the base model and each solution's scale",
            ),
            prop(
                "hwdb",
                ValueKind::Bool,
                "the solutions as systemd hwdb lines for the device model",
            ),
            prop(
                "hwdb-fwrev",
                ValueKind::Bool,
                "the hwdb lines for the device model and its firmware revision",
            ),
        ],
    },
    doc: Some(DocPage {
        title: "QoS solutions derived from iocost-qos results",
        text: include_str!("../../../benches-doc/iocost-tune.md"),
    }),
    system: None,
};

/// The rules of a stored spec (its groups 2+, or the defaults).
fn stored_rules(spec: &JobSpec) -> Result<Vec<QosRule>> {
    rules::rules(spec.props.get(1..).unwrap_or(&[])).map_err(|(i, e)| {
        crate::error::UsageError::new(format!(
            "{}: rule {} of the stored spec can't be read: {}",
            crate::format::job_name(spec),
            i + 1,
            e
        ))
        .into()
    })
}

impl Bench for IocostTune {
    /// Nothing is run in this version.
    type Props = ();
    type Record = IocostTuneRecord;
    type Result = IocostTuneResult;

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, _spec: &JobSpec) -> Result<(), SpecError> {
        Ok(())
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, opts: &FormatOpts) -> Result<bool> {
        let res = &stored.result;
        let rules = stored_rules(&stored.entry.spec)?;
        let (hwdb, hwdb_fwrev) = (opts.flag("hwdb"), opts.flag("hwdb-fwrev"));
        if hwdb || hwdb_fwrev {
            let sys = HeaderSysInfo::parse(stored.entry)?;
            let rep = sys.sysreqs_report.unwrap_or_default();
            let fwrev = hwdb_fwrev.then_some(rep.scr_dev_fwrev.as_str());
            report::hwdb(out, res, &rep.scr_dev_model, fwrev);
            return Ok(true);
        }
        if opts.flag("high-level") {
            report::high_level(out, res, &rules);
            return Ok(true);
        }
        if opts.full {
            report::graphs(out, res);
        }
        report::solutions(out, res, &rules);
        report::remarks(out, res);
        out.push('\n');
        Ok(true)
    }
}
