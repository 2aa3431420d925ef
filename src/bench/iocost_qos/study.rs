//! The iocost-qos study (benches-doc/iocost-qos.md): per measured configuration the storage and
//! protection studies of its sub-records, the adjusted MOF from the size the tune protected, and
//! over the configuration's whole period the vrate distribution and the IO latencies. A
//! configuration whose reports are gone falls back to the study kept in its run.

use super::record::{IoCostQosResult, QosRecord, QosRun, RunResult};
use crate::bench::contract::api::Bench;
use crate::bench::contract::ctx::StudyCtx;
use crate::bench::protection::{Protection, ScenarioRecord};
use crate::bench::storage::Storage;
use crate::study::dist::MeanPcts;
use crate::study::iolat_study::IoLatStudy;
use crate::study::reports::{study_period, NoReportsError, SelArg, Study};
use anyhow::{Context, Result};
use std::path::Path;

/// The vrate percentiles upstream's result lists.
const VRATE_PCTS: &[&str] = &[
    "00", "01", "10", "25", "50", "75", "90", "99", "100", "mean", "stdev",
];

/// io.cost's vrate of the scratch device, one sample per report.
#[derive(Default)]
struct VrateStudy(MeanPcts);

impl Study for VrateStudy {
    fn study(&mut self, arg: &SelArg) {
        self.0.push(arg.rep.iocost.vrate);
    }
}

pub fn study(ctx: &StudyCtx, rec: &QosRecord) -> Result<IoCostQosResult> {
    let runs = rec
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            None => Ok(None),
            Some(r) => study_or_kept(&ctx.reports_dir, i, r)
                .map(Some)
                .with_context(|| format!("run [{:02}]", i)),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(IoCostQosResult { runs })
}

/// Configuration `i`'s study from its reports or, when they are gone, the one kept in its run
/// when it finished (with a warning); any other failure stands.
pub(super) fn study_or_kept(dir: &Path, i: usize, r: &QosRun) -> Result<RunResult> {
    match (study_run(dir, r), &r.result) {
        (Err(e), Some(kept)) if e.chain().any(|c| c.is::<NoReportsError>()) => {
            log::warn!(
                "iocost-qos[{:02}]: {:#}; using the result kept when it finished",
                i,
                e
            );
            kept.read()
        }
        (res, _) => res,
    }
}

pub(super) fn study_run(dir: &Path, r: &QosRun) -> Result<RunResult> {
    let stor = Storage.study(&StudyCtx::new(dir.to_path_buf(), r.stor.period), &r.stor)?;
    let prot = Protection.study(&StudyCtx::new(dir.to_path_buf(), r.period), &r.prot)?;
    let final_size = r.prot.scenarios.iter().find_map(|s| match s {
        ScenarioRecord::MemHogTune(t) => t.final_size,
        ScenarioRecord::MemHog(_) => None,
    });
    let mof = stor.mem_offload_factor;
    // As stored: the usage is written rounded, and the aMOF divides by what is stored.
    let usage = stor.mem_usage.round().max(0.0);
    let amof = final_size.filter(|_| usage > 0.0).map(|s| s / usage);

    let mut vrate = VrateStudy::default();
    let mut iolat = IoLatStudy::new();
    let nr = study_period(dir, r.period, &mut [&mut vrate, &mut iolat])?;
    Ok(RunResult {
        stor,
        prot,
        adjusted_mem_size: final_size,
        adjusted_mem_offload_factor: amof,
        adjusted_mem_offload_delta: amof.map(|a| mof - a),
        vrate: vrate.0.result(VRATE_PCTS),
        iolat: Some(iolat.result().to_raw()?),
        nr_reports: nr.pair(),
    })
}
