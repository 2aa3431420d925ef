//! One configuration of an iocost-qos job (benches-doc/iocost-qos.md): what it starts from
//! (the job's base, the hints and ceiling the runs before it hand on), its QoS applied and
//! checked, then storage and protection nested with their checkpoints in the job's record.

use super::plan::{self, Planned};
use super::props::IocostQosProps;
use super::record::{KeptResult, QosRecord, QosRun};
use crate::bench::contract::api::{Apply, Bench};
use crate::bench::contract::ctx::RunCtx;
use crate::bench::protection::props::{Scenario, TuneProps};
use crate::bench::protection::search::Search;
use crate::bench::protection::{Protection, ProtectionRecord};
use crate::bench::storage::props::StorageProps;
use crate::bench::storage::{Ceiling, Storage, StorageRecord};
use crate::system::iocost::{self, IoCostKnobs, IoCostQos};
use crate::units::{format_duration, format_size};
use crate::util::now;
use anyhow::{bail, Context, Result};
use serde_json::value::RawValue;

/// The hog's speed and the tune's steps, as upstream's iocost-qos runs them.
pub(super) const TUNE_SPEED: &str = "2x";
pub(super) const TUNE_INTVS: u64 = 10;

/// What the job measures with: the io.cost parameters and memory profile its runs are
/// compared under.
pub(super) struct Base {
    pub(super) knobs: IoCostKnobs,
    pub(super) profile: u32,
}

impl Base {
    pub(super) fn plan_base(&self) -> plan::Base {
        plan::Base {
            model: self.knobs.model.clone(),
            qos: self.knobs.qos.clone(),
            profile: self.profile,
        }
    }
}

/// Configuration `i` (`p`) with what the runs before it hand on: where its tune and storage
/// searches start (`tune-hint`, `mof-hint`: the last of `before` that has one) and the
/// baseline's ceiling (`mof-ceiling`: `before[0]`, when `baseline_off`).
pub(super) fn config_of<'a>(
    props: &IocostQosProps,
    p: &'a Planned,
    i: usize,
    baseline_off: bool,
    params: &'a str,
    before: &[Option<QosRun>],
) -> Config<'a> {
    // Time-saver: the tune starts where the previous configuration's ended.
    let hint = if props.tune_hint {
        before.iter().rev().flatten().find_map(tune_hint)
    } else {
        None
    };
    let stor_hint = if props.mof_hint {
        before.iter().rev().flatten().find_map(storage_frac)
    } else {
        None
    };
    // Time-saver: a configuration with io.cost on can't sustain a footprint the
    // baseline, with io.cost off, failed.
    let ceiling = match before.first() {
        Some(Some(base)) if props.mof_ceiling && i > 0 && baseline_off => base.stor.ceiling(),
        _ => None,
    };
    Config {
        i,
        p,
        params,
        hint,
        stor_hint,
        ceiling,
    }
}

/// The run of configuration `c`: resumed from its own checkpoints if the last job was
/// killed inside it, else a new one; placed last in the record's `inc_runs` (its index
/// returned), checkpointed.
fn open_run(ctx: &mut RunCtx, rec: &mut QosRecord, c: &Config) -> Result<(QosRun, usize)> {
    let resumed = match rec.inc_runs.last() {
        Some(r) if !r.done && r.ovr == c.p.ovr && r.params.as_deref() == Some(c.params) => {
            log::info!("iocost-qos[{:02}]: resuming from its checkpoints", c.i);
            rec.inc_runs.pop()
        }
        _ => None,
    };
    rec.inc_runs.retain(|r| r.done);
    let run = resumed.unwrap_or_else(|| QosRun {
        period: (now(), 0),
        ovr: c.p.ovr,
        params: Some(c.params.to_string()),
        done: false,
        ..Default::default()
    });
    let k = rec.inc_runs.len();
    rec.inc_runs.push(run.clone());
    ctx.checkpoint(rec)?;
    Ok((run, k))
}

/// The nested storage bench of configuration `c`: the job's storage properties, its loops,
/// and the searches' hint and ceiling; applying and committing are the job's business.
fn storage_props(props: &IocostQosProps, c: &Config) -> StorageProps {
    let mut sprops: StorageProps = props.storage.clone();
    sprops.loops = if c.i == 0 {
        props.storage_base_loops
    } else {
        props.storage_loops
    };
    sprops.apply = false;
    sprops.commit = false;
    sprops.hint = c.stor_hint;
    sprops.hint_loops = props.mof_hint;
    sprops.stop_agree = props.early_stop;
    if let Some(h) = c.stor_hint {
        log::info!(
            "iocost-qos[{:02}]: storage: the memory search starts next to {:.1}% \
             (mof-hint: the previous configuration's)",
            c.i,
            h * 100.0
        );
    }
    if let Some(ceil) = &c.ceiling {
        log::info!(
            "iocost-qos[{:02}]: storage: no footprint from {:.1}% up is probed \
             (mof-ceiling: the baseline failed it with io.cost off)",
            c.i,
            ceil.mem_frac * 100.0
        );
    }
    sprops.ceiling = c.ceiling.clone();
    sprops
}

/// Storage of run `k` (configuration `i`), retried as `retries` allows, checkpointed into the
/// job's record; then hashd at the size it found, for the protection after it.
fn run_storage(
    ctx: &mut RunCtx,
    props: &IocostQosProps,
    rec: &mut QosRecord,
    run: &mut QosRun,
    k: usize,
    i: usize,
    sprops: &StorageProps,
) -> Result<()> {
    let mut attempt = 0;
    let stor: StorageRecord = loop {
        let prev = to_raw_opt(&run.stor)?;
        let outer = serde_json::to_value(&*rec)?;
        let at = format!("/inc_runs/{}/stor", k);
        match ctx.nested(outer, &at, prev, |c| Storage.run(c, sprops)) {
            Ok(stor) => break stor,
            Err(e) if attempt < props.retries => {
                attempt += 1;
                log::warn!(
                    "iocost-qos[{:02}]: storage failed ({:#}); attempt {} of {}",
                    i,
                    e,
                    attempt + 1,
                    props.retries + 1
                );
                run.stor = StorageRecord::default();
            }
            Err(e) => return Err(e.context("storage benchmark failed too many times")),
        }
    };
    run.stor = stor;
    rec.inc_runs[k] = run.clone();
    ctx.checkpoint(rec)?;

    let mut aprops = sprops.clone();
    aprops.apply = true;
    let knobs = match Storage.applies(&aprops, &run.stor)? {
        Some(Apply::Hashd { knobs, .. }) => knobs,
        _ => bail!("storage gave no hashd parameters"),
    };
    ctx.session()
        .context("iocost-qos needs the host session")?
        .apply_hashd(knobs, false)
}

/// Protection of run `k`: the largest hashd size it keeps isolated, from 4/5 of the share up
/// to the size storage found. A failure costs the configuration its aMOF only (upstream's
/// rule).
fn run_protection(
    ctx: &mut RunCtx,
    props: &IocostQosProps,
    rec: &mut QosRecord,
    run: &mut QosRun,
    k: usize,
    c: &Config,
) -> Result<()> {
    let (i, hint) = (c.i, c.hint);
    let share = run.stor.mem.share as f64;
    let size_max = crate::study::dist::mean_stdev(&run.stor.mem_sizes).0;
    let size_min = (share * 4.0 / 5.0).min(size_max);
    let pprops = crate::bench::protection::props::ProtectionProps {
        scenarios: vec![Scenario::MemHogTune(tune_props(
            props,
            size_min,
            size_max,
            hint.map(|h| h.size),
        ))],
    };
    log::info!(
        "iocost-qos[{:02}]: protection: mem-hog-tune of hashd sizes {} to {}{}",
        i,
        format_size(size_min),
        format_size(size_max),
        hint.map_or(String::new(), |h| format!(
            ", starting next to {} (tune-hint: {})",
            format_size(h.size),
            if h.protected {
                "the size the previous configuration protected"
            } else {
                "the previous configuration protected none; its smallest size"
            }
        ))
    );
    let prev = to_raw_opt(&run.prot)?;
    let outer = serde_json::to_value(&*rec)?;
    let at = format!("/inc_runs/{}/prot", k);
    match ctx.nested(outer, &at, prev, |c| Protection.run(c, &pprops)) {
        Ok(prot) => run.prot = prot,
        Err(e) => {
            log::warn!(
                "iocost-qos[{:02}]: protection failed, no aMOF for this configuration: {:#}",
                i,
                e
            );
            run.prot = ProtectionRecord::default();
        }
    }
    Ok(())
}

/// The footprint (mem_frac) a run's storage loops found, on average.
fn storage_frac(r: &QosRun) -> Option<f64> {
    let f: Vec<f64> = r.stor.loops.iter().map(|l| l.mem_frac).collect();
    (!f.is_empty()).then(|| f.iter().sum::<f64>() / f.len() as f64)
}

/// Where a tune starts (`tune-hint`): a size from the previous configuration's tune.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct TuneHint {
    pub(super) size: f64,
    /// Whether that tune protected `size` (else it is the smallest size it failed).
    pub(super) protected: bool,
}

/// Where a run's mem-hog-tune leaves the next one's start: the size it found protected or,
/// when it walked to the bottom and protected none, the smallest size it probed. On a slow
/// device whole runs of configurations protect nothing (hdd: upstream's walk failed all eleven
/// sizes in most); the next tune then starts near the bottom instead of walking down from the
/// top again, and still climbs if its start passes.
pub(super) fn tune_hint(r: &QosRun) -> Option<TuneHint> {
    r.prot.scenarios.iter().find_map(|s| match s {
        crate::bench::protection::ScenarioRecord::MemHogTune(t) => match t.final_size {
            Some(size) => Some(TuneHint {
                size,
                protected: true,
            }),
            None if t.done => t
                .probes
                .iter()
                .map(|p| p.size)
                .min_by(f64::total_cmp)
                .map(|size| TuneHint {
                    size,
                    protected: false,
                }),
            None => None,
        },
        crate::bench::protection::ScenarioRecord::MemHog(_) => None,
    })
}

/// The mem-hog-tune a configuration runs over hashd sizes `size_min`..`size_max`, starting
/// above `hint` (tune-hint) and bisecting with tune-bisect (from the top without a hint,
/// below the hint when the walk down to it fails).
pub(super) fn tune_props(
    props: &IocostQosProps,
    size_min: f64,
    size_max: f64,
    hint: Option<f64>,
) -> TuneProps {
    TuneProps {
        load: 1.0,
        speed: TUNE_SPEED.into(),
        size_min,
        size_max,
        intvs: TUNE_INTVS,
        isol_pct: props.isol_pct().to_string(),
        isol_thr: props.isol_thr,
        search: if props.tune_bisect {
            Search::Bisect
        } else {
            crate::bench::protection::props::DFL_SEARCH
        },
        hint,
    }
}

/// The QoS configuration `p` on the scratch device: io.cost off for the baseline, else the
/// base model with `p` on top of the base QoS (applied to this job, not committed).
fn apply_qos(ctx: &mut RunCtx, base: &Base, p: &Planned) -> Result<Option<IoCostQos>> {
    let mut host = ctx.session().context("iocost-qos needs the host session")?;
    if p.ovr.off {
        host.iocost_off_for_job()?;
        return Ok(None);
    }
    let qos = p.ovr.apply(&base.knobs.qos);
    host.apply_iocost(
        IoCostKnobs {
            devnr: base.knobs.devnr.clone(),
            model: base.knobs.model.clone(),
            qos: qos.clone(),
            upstream_jobs: base.knobs.upstream_jobs,
            fio_engine: base.knobs.fio_engine,
        },
        false,
    )?;
    Ok(Some(qos))
}

/// The QoS the kernel has for the scratch device, which must be the one asked for.
fn check_qos(ctx: &mut RunCtx, base: &Base, want: &IoCostQos) -> Result<()> {
    let host = ctx.session().context("iocost-qos needs the host session")?;
    let devnr = base.knobs.devnr.parse().map_err(anyhow::Error::msg)?;
    let have = iocost::read_qos(host.hp(), devnr)?;
    if !have.same_params(want) || have.enable != 1 {
        bail!(
            "the kernel's io.cost QoS is \"{}\", not the configuration's \"{}\"",
            have.rounded().line(),
            want.rounded().line()
        );
    }
    Ok(())
}

/// One configuration as `run_config` needs it.
pub(super) struct Config<'a> {
    pub(super) i: usize,
    pub(super) p: &'a Planned,
    /// The sub-bench parameters (the reuse key).
    params: &'a str,
    /// Where the tune starts (`tune-hint`).
    hint: Option<TuneHint>,
    /// Where the storage searches start (`mof-hint`), mem_frac.
    stor_hint: Option<f64>,
    /// The storage searches' known upper end (`mof-ceiling`).
    ceiling: Option<Ceiling>,
}

/// Runs configuration `c.i`, its record the last of `rec.inc_runs` while it runs.
pub(super) fn run_config(
    ctx: &mut RunCtx,
    props: &IocostQosProps,
    base: &Base,
    rec: &mut QosRecord,
    c: Config,
) -> Result<QosRun> {
    let (mut run, k) = open_run(ctx, rec, &c)?;
    let target = apply_qos(ctx, base, c.p)?;
    run.qos = target.clone();
    let sprops = storage_props(props, &c);
    run_storage(ctx, props, rec, &mut run, k, c.i, &sprops)?;
    run_protection(ctx, props, rec, &mut run, k, &c)?;
    if let Some(want) = &target {
        check_qos(ctx, base, want)?;
    }
    run.period.1 = now();
    run.done = true;
    log::info!(
        "iocost-qos[{:02}]: done in {}",
        c.i,
        format_duration((run.period.1 - run.period.0) as f64)
    );
    run.result = kept_result(ctx, c.i, &run);
    rec.inc_runs[k] = run.clone();
    ctx.checkpoint(rec)?;
    Ok(run)
}

/// The finished configuration's study, kept in its run for when its reports are gone. One that
/// fails now is left to the job's study at its end (warned: nothing is kept).
fn kept_result(ctx: &RunCtx, i: usize, run: &QosRun) -> Option<KeptResult> {
    match super::study::study_run(&ctx.reports_dir(), run).and_then(|r| KeptResult::of(&r)) {
        Ok(kept) => Some(kept),
        Err(e) => {
            log::warn!(
                "iocost-qos[{:02}]: no result kept in the record, its study failed: {:#}",
                i,
                e
            );
            None
        }
    }
}

/// A sub-bench's record to resume from: none while it is still the default.
fn to_raw_opt<T: serde::Serialize + Default + PartialEq>(v: &T) -> Result<Option<Box<RawValue>>> {
    if *v == T::default() {
        return Ok(None);
    }
    Ok(Some(serde_json::value::to_raw_value(v)?))
}
