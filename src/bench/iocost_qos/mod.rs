//! `iocost-qos`: MOF and protection of hashd measured under a list of io.cost QoS
//! configurations (iocost off as the baseline, then vrate steps). This module holds the typed
//! record/result models and the QoS configuration list; `props` the properties, `format` the
//! report. Running it comes with the IO engine.

mod adaptive;
mod config;
pub mod format;
pub mod plan;
pub mod props;
pub mod record;
mod run;
mod study;

pub use format::format;
use props::IocostQosProps;

use crate::bench::contract::api::{Bench, BenchDesc, DocPage, FormatOpts, SpecError, Stored};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::bench::contract::needs;
use crate::spec::JobSpec;
use anyhow::Result;

pub struct IocostQos;

pub static DESC: BenchDesc = BenchDesc {
    kind: "iocost-qos",
    about: "Compare MOF and protection across io.cost QoS settings",
    hidden: false,
    incremental: true,
    runnable: true,
    runs_first: None,
    shape: props::SHAPE,
    doc: Some(DocPage {
        title: "MOF and protection per io.cost QoS setting",
        text: include_str!("../../../benches-doc/iocost-qos.md"),
    }),
    system: Some(&needs::ALL),
};

impl Bench for IocostQos {
    type Props = IocostQosProps;
    type Record = QosRecord;
    type Result = IoCostQosResult;
    const KEY_NUMBERS: &'static [&'static str] = &["mof", "amof", "isol"];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<IocostQosProps, SpecError> {
        props::check(spec)
    }

    fn run(&self, ctx: &mut RunCtx, props: &IocostQosProps) -> Result<QosRecord> {
        run::run(ctx, props)
    }

    /// Finished configurations of an interrupted job (the skipped ones aren't counted: the
    /// device's model decides them when the job runs again).
    fn progress(&self, props: &IocostQosProps, rec: &QosRecord) -> Option<String> {
        let done = rec.finished().count();
        Some(match props.adaptive {
            Some(a) => format!(
                "{} of at most {} configurations done",
                done,
                1 + props.groups.len() + a.budget
            ),
            None => {
                let nr = plan::configs_of(props, plan::dither_offset(props, rec.dither_dist)).len();
                format!("{} of {} configurations done", done, nr)
            }
        })
    }

    fn study(&self, ctx: &StudyCtx, rec: &QosRecord) -> Result<IoCostQosResult> {
        study::study(ctx, rec)
    }

    /// Stored specs are read without a new run's checks: an entry of any version formats.
    fn stored_props(&self, spec: &JobSpec) -> Result<IocostQosProps, SpecError> {
        IocostQosProps::read(spec)
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, opts: &FormatOpts) -> Result<()> {
        let (rec, props) = (stored.record()?, stored.props()?);
        format(out, stored.entry, &stored.result, rec, &props, opts)
    }

    fn headline(
        &self,
        stored: &Stored<Self>,
    ) -> Result<Vec<crate::bench::contract::headline::Row>> {
        let (rec, props) = (stored.record()?, stored.props()?);
        format::headline(stored.entry, &stored.result, rec, &props)
    }
}

pub use crate::system::iocost::QosOverride;
pub use plan::configs;
pub use props::{DFL_VRATE_INTVS, DFL_VRATE_MAX, MAX_VRATE_INTVS};
pub use record::{IoCostQosResult, QosRecord, QosRun, RunResult};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::iocost::IoCostQos;

    fn spec(s: &str) -> JobSpec {
        JobSpec::parse(s).unwrap()
    }

    /// The configurations of a stored spec and record, as the reports see them.
    fn configs(spec: &JobSpec, rec: &QosRecord) -> Vec<QosOverride> {
        super::configs(&IocostQosProps::read(spec).unwrap(), rec)
    }

    #[test]
    fn default_grid() {
        let rec = QosRecord::default();
        let cfgs = configs(&spec("iocost-qos"), &rec);
        let maxes: Vec<Option<f64>> = cfgs.iter().map(|c| c.max).collect();
        assert!(cfgs[0].off);
        assert_eq!(
            maxes,
            vec![
                None,
                Some(100.0),
                Some(80.0),
                Some(60.0),
                Some(40.0),
                Some(20.0)
            ]
        );
    }

    #[test]
    fn dithered_grid_uses_recorded_offset() {
        let rec = QosRecord {
            dither_dist: Some(-2.0627901946921146),
            ..Default::default()
        };
        let cfgs = configs(
            &spec("iocost-qos:dither,vrate-intvs=25,vrate-max=125"),
            &rec,
        );
        assert_eq!(cfgs.len(), 26);
        assert_eq!(cfgs[1].min, Some(122.94));
        assert_eq!(cfgs[25].max, Some(2.94));
    }

    #[test]
    fn an_adaptive_grid_lists_the_vrates_it_picked_in_order() {
        use record::{AdaptiveLog, AdaptiveStep};
        let step = |v: f64| AdaptiveStep {
            vrate: v,
            why: "coarse pass".into(),
        };
        let rec = QosRecord {
            adaptive: Some(AdaptiveLog {
                steps: vec![step(100.0), step(4.0), step(52.0)],
                stop: Some("budget".into()),
            }),
            ..Default::default()
        };
        let cfgs = configs(&spec("iocost-qos:vrate-intvs=auto:rpct=90"), &rec);
        assert!(cfgs[0].off);
        assert_eq!(cfgs[1].rpct, Some(90.0));
        let maxes: Vec<Option<f64>> = cfgs[2..].iter().map(|c| c.max).collect();
        assert_eq!(maxes, vec![Some(100.0), Some(4.0), Some(52.0)]);
        // Before a vrate is picked, only the fixed ones.
        let cfgs = configs(&spec("iocost-qos:vrate-intvs=auto"), &QosRecord::default());
        assert_eq!(cfgs.len(), 1);
    }

    #[test]
    fn explicit_groups_only() {
        let rec = QosRecord::default();
        let cfgs = configs(&spec("iocost-qos::vrate=50:rpct=90,rlat=5000"), &rec);
        assert_eq!(cfgs.len(), 3);
        assert_eq!(cfgs[1].min, Some(50.0));
        let base = IoCostQos {
            rpct: 95.0,
            rlat: 12042,
            wpct: 95.0,
            wlat: 13664,
            min: 60.0,
            max: 100.0,
            ..Default::default()
        };
        assert_eq!(
            cfgs[2].describe(&base),
            "[rpct=90.00] [rlat=5000] wpct=95.00 wlat=13664 min=60.00 max=100.00"
        );
        assert_eq!(
            cfgs[1].describe(&base),
            "rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 [min=50.00] [max=50.00]"
        );
    }
}
