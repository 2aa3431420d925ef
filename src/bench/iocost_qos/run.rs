//! Running `iocost-qos` (benches-doc/iocost-qos.md): the plan of configurations, then per
//! configuration the QoS applied, `storage` (with retries), hashd sized from it, and `protection`'s
//! mem-hog-tune from 4/5 of the memory share up to the storage size — both sub-benches
//! checkpointing into this job's record, so a killed job resumes inside a configuration and
//! a re-run skips the finished ones.

use super::plan::{self, Planned};
use super::props::{Dither, IocostQosProps};
use super::record::{QosFailure, QosRecord, QosRun};
use crate::bench::api::{Apply, Bench};
use crate::bench::protection::props::{Scenario, TuneProps};
use crate::bench::protection::search::Search;
use crate::bench::protection::{Protection, ProtectionRecord};
use crate::bench::runner::ctx::RunCtx;
use crate::bench::storage::props::StorageProps;
use crate::bench::storage::{Ceiling, Storage, StorageRecord};
use crate::logging::progress;
use crate::system::iocost::{self, IoCostKnobs, IoCostQos, QosOverride};
use crate::units::{format_duration, format_pct, format_size};
use crate::util::now;
use anyhow::{bail, Context, Result};
use serde_json::value::RawValue;

/// The hog's speed and the tune's steps, as upstream's iocost-qos runs them.
const TUNE_SPEED: &str = "2x";
const TUNE_INTVS: u64 = 10;

/// What the job measures with: the io.cost parameters and memory profile its runs are
/// compared under.
struct Base {
    knobs: IoCostKnobs,
    profile: u32,
}

impl Base {
    fn plan_base(&self) -> plan::Base {
        plan::Base {
            model: self.knobs.model.clone(),
            qos: self.knobs.qos.clone(),
            profile: self.profile,
        }
    }
}

pub(super) fn run(ctx: &mut RunCtx, props: &IocostQosProps) -> Result<QosRecord> {
    ctx.revert_knobs_at_end();
    let quick = ctx.quick();
    let base = base_of(ctx)?;
    let prev = prev_record(ctx);
    let Plan {
        dither_dist,
        planned,
        params,
        reuse,
    } = plan(props, &base, prev.as_ref(), quick)?;
    let reused = &reuse.runs;

    let mut rec = QosRecord {
        base_model: base.knobs.model.clone(),
        base_qos: base.knobs.qos.clone(),
        mem_profile: base.profile,
        runs: Vec::new(),
        dither_dist,
        inc_runs: reuse.carried.clone(),
        failed: Vec::new(),
    };
    let mut runs: Vec<Option<QosRun>> = Vec::with_capacity(planned.len());
    let nr = planned.len();
    for (i, p) in planned.iter().enumerate() {
        if p.skip {
            log::info!(
                "iocost-qos[{:02}]: skipped (below the device's minimum vrate {})",
                i,
                iocost::abs_min_vrate(&base.knobs.model)
            );
            runs.push(None);
            continue;
        }
        if let Some(r) = &reused[i] {
            runs.push(Some(r.clone()));
            continue;
        }
        let left = remaining_secs(&rec, &planned[i + 1..], &reused[i + 1..]);
        progress::context(format!("config {}/{} {}", i, nr - 1, short(&p.ovr)), left);
        log::info!(
            "iocost-qos[{:02}]: QoS: {}",
            i,
            p.ovr.describe(&base.knobs.qos)
        );
        let c = config_of(props, &planned, i, &params[i], &runs);
        match run_config(ctx, props, &base, &mut rec, c) {
            Ok(run) => runs.push(Some(run)),
            Err(e) if props.allow_fail => {
                log::warn!(
                    "iocost-qos[{:02}]: failed, going on (allow-fail): {:#}",
                    i,
                    e
                );
                rec.inc_runs.retain(|r| r.done);
                rec.failed.push(QosFailure {
                    ovr: p.ovr,
                    why: format!("{:#}", e),
                });
                ctx.checkpoint(&rec)?;
                runs.push(None);
            }
            Err(e) => return Err(e.context(format!("iocost-qos[{:02}]", i))),
        }
    }
    progress::context("", 0.0);
    rec.runs = runs;
    rec.inc_runs.clear();
    Ok(rec)
}

/// The io.cost model the configurations are relative to (measured first if bench.json has
/// none) and the memory profile.
fn base_of(ctx: &mut RunCtx) -> Result<Base> {
    let (quick, dir) = (ctx.quick(), ctx.dir().to_path_buf());
    let mut host = ctx.session().context("iocost-qos needs the host session")?;
    let (knobs, _) =
        crate::bench::iocost_params::ensure_model(&mut host, &dir, quick, "iocost-qos")?;
    let profile = host
        .mem()
        .map(|m| m.profile)
        .context("iocost-qos runs under the memory profile")?;
    Ok(Base { knobs, profile })
}

/// The checkpointed record of an earlier run of this job, if it reads.
fn prev_record(ctx: &RunCtx) -> Option<QosRecord> {
    let raw = ctx.prev_record()?;
    serde_json::from_str(raw.get())
        .map_err(|e| log::warn!("iocost-qos: ignoring the unreadable earlier record ({})", e))
        .ok()
}

/// The configurations to measure and what an earlier record already has of them.
struct Plan {
    dither_dist: Option<f64>,
    planned: Vec<Planned>,
    /// Per configuration, the sub-bench parameters (the reuse key).
    params: Vec<String>,
    reuse: plan::Reuse,
}

/// Plans the configurations (dither, minimum performance, reuse) and lists them in the log.
fn plan(
    props: &IocostQosProps,
    base: &Base,
    prev: Option<&QosRecord>,
    quick: bool,
) -> Result<Plan> {
    let dither_dist = match props.dither {
        Dither::Off => None,
        Dither::By(v) => Some(v),
        Dither::Random => match prev.and_then(|p| p.dither_dist) {
            Some(d) => Some(d),
            None => Some(plan::draw_dither(props, &mut rand::thread_rng())),
        },
    };
    let cfgs = plan::configs_of(props, dither_dist);
    let planned = plan::apply_min_perf(
        &cfgs,
        &base.knobs.model,
        base.knobs.qos.min,
        props.ignore_min_perf,
    );
    let params: Vec<String> = (0..planned.len())
        .map(|i| params_text(props, i == 0, quick))
        .collect();
    let reuse = plan::reuse(prev, &base.plan_base(), &planned, &params)
        .map_err(crate::error::UsageError::new)?;
    for (i, p) in planned.iter().enumerate() {
        log::info!(
            "{}",
            plan::listing_line(
                i,
                p,
                reuse.runs[i].is_some(),
                &p.ovr.describe(&base.knobs.qos)
            )
        );
    }
    let to_run = planned
        .iter()
        .zip(&reuse.runs)
        .filter(|(p, r)| !p.skip && r.is_none())
        .count();
    if let Some(why) = &reuse.dropped {
        log::info!(
            "iocost-qos: the earlier runs were measured with {}; starting over",
            why
        );
    }
    if to_run > 0 {
        log::info!(
            "iocost-qos: {} storage and protection bench sets to run, isol-{} >= {}%",
            to_run,
            props.isol_pct(),
            format_pct(props.isol_thr)
        );
    } else {
        log::info!("iocost-qos: all results are available");
    }
    Ok(Plan {
        dither_dist,
        planned,
        params,
        reuse,
    })
}

/// Configuration `i` with what the runs before it hand on: where its tune and storage
/// searches start (`tune-hint`, `mof-hint`) and the baseline's ceiling (`mof-ceiling`).
fn config_of<'a>(
    props: &IocostQosProps,
    planned: &'a [Planned],
    i: usize,
    params: &'a str,
    runs: &[Option<QosRun>],
) -> Config<'a> {
    // Time-saver: the tune starts where the previous configuration's ended.
    let hint = if props.tune_hint {
        runs.iter().rev().flatten().find_map(tune_hint)
    } else {
        None
    };
    let stor_hint = if props.mof_hint {
        runs.iter().rev().flatten().find_map(storage_frac)
    } else {
        None
    };
    // Time-saver: a configuration with io.cost on can't sustain a footprint the
    // baseline, with io.cost off, failed.
    let ceiling = match runs.first() {
        Some(Some(base)) if props.mof_ceiling && i > 0 && planned[0].ovr.off => base.stor.ceiling(),
        _ => None,
    };
    Config {
        i,
        p: &planned[i],
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
struct TuneHint {
    size: f64,
    /// Whether that tune protected `size` (else it is the smallest size it failed).
    protected: bool,
}

/// Where a run's mem-hog-tune leaves the next one's start: the size it found protected or,
/// when it walked to the bottom and protected none, the smallest size it probed. On a slow
/// device whole runs of configurations protect nothing (hdd: upstream's walk failed all eleven
/// sizes in most); the next tune then starts near the bottom instead of walking down from the
/// top again, and still climbs if its start passes.
fn tune_hint(r: &QosRun) -> Option<TuneHint> {
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

/// `off`, `vrate=60`, or the overridden keys.
fn short(o: &QosOverride) -> String {
    if o.off {
        return "iocost=off".into();
    }
    if let (Some(a), Some(b)) = (o.min, o.max) {
        if a == b && o.rpct.is_none() && o.rlat.is_none() && o.wpct.is_none() && o.wlat.is_none() {
            return format!("vrate={}", a);
        }
    }
    let mut v = Vec::new();
    for (k, x) in [
        ("rpct", o.rpct),
        ("wpct", o.wpct),
        ("min", o.min),
        ("max", o.max),
    ] {
        if let Some(x) = x {
            v.push(format!("{}={}", k, x));
        }
    }
    for (k, x) in [("rlat", o.rlat), ("wlat", o.wlat)] {
        if let Some(x) = x {
            v.push(format!("{}={}", k, x));
        }
    }
    v.join(",")
}

/// The sub-bench parameters a configuration is measured with: a finished run is only reused
/// when they are the same.
fn params_text(p: &IocostQosProps, baseline: bool, quick: bool) -> String {
    let s = &p.storage;
    format!(
        "storage loops={} rps-max={} hash-size={} chunk-pages={} log-bps={} err-max={} \
         retries={}/{} · protection mem-hog-tune speed={} intvs={} isol-{}>={}{}{}{}{}{}",
        if baseline {
            p.storage_base_loops
        } else {
            p.storage_loops
        },
        s.rps_max.map_or("auto".to_string(), |v| v.to_string()),
        s.hash_size,
        s.chunk_pages,
        s.log_bps,
        s.err_max,
        s.inner_retries,
        s.outer_retries,
        TUNE_SPEED,
        TUNE_INTVS,
        p.isol_pct(),
        p.isol_thr,
        match (p.mof_hint, p.tune_hint) {
            (true, true) => " · hints",
            (true, false) => " · mof-hint",
            (false, true) => " · tune-hint",
            (false, false) => "",
        },
        // The baseline sets the ceiling, it is never bounded by one.
        if p.mof_ceiling && !baseline {
            " · mof-ceiling"
        } else {
            ""
        },
        if p.tune_bisect { " · tune-bisect" } else { "" },
        match p.early_stop {
            Some(t) => format!(" · early-stop={}%", (t * 1e4).round() / 100.0),
            None => String::new(),
        },
        if quick { " · quick" } else { "" }
    )
}

/// The mem-hog-tune a configuration runs over hashd sizes `size_min`..`size_max`, starting
/// above `hint` (tune-hint) and bisecting with tune-bisect (from the top without a hint,
/// below the hint when the walk down to it fails).
fn tune_props(
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

/// Seconds the configurations after the current one will take, from the runs finished so
/// far (0 when none has finished yet).
fn remaining_secs(rec: &QosRecord, after: &[Planned], reused: &[Option<QosRun>]) -> f64 {
    let done: Vec<f64> = rec
        .inc_runs
        .iter()
        .filter(|r| r.done && r.period.1 > r.period.0)
        .map(|r| (r.period.1 - r.period.0) as f64)
        .collect();
    if done.is_empty() {
        return 0.0;
    }
    let per = done.iter().sum::<f64>() / done.len() as f64;
    let n = after
        .iter()
        .zip(reused)
        .filter(|(p, r)| !p.skip && r.is_none())
        .count();
    per * n as f64
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
struct Config<'a> {
    i: usize,
    p: &'a Planned,
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
fn run_config(
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
    rec.inc_runs[k] = run.clone();
    ctx.checkpoint(rec)?;
    Ok(run)
}

/// A sub-bench's record to resume from: none while it is still the default.
fn to_raw_opt<T: serde::Serialize + Default + PartialEq>(v: &T) -> Result<Option<Box<RawValue>>> {
    if *v == T::default() {
        return Ok(None);
    }
    Ok(Some(serde_json::value::to_raw_value(v)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    fn props(s: &str) -> IocostQosProps {
        super::super::props::check(&JobSpec::parse(s).unwrap()).unwrap()
    }

    #[test]
    fn time_savers_default_on_and_are_part_of_the_reuse_key() {
        let on = props("iocost-qos");
        assert!(on.mof_hint && on.mof_ceiling && on.tune_hint && !on.tune_bisect);
        assert_eq!(on.early_stop, Some(0.10));
        let text = params_text(&on, false, false);
        assert!(
            text.ends_with(" · hints · mof-ceiling · early-stop=10%"),
            "{}",
            text
        );
        // The baseline is measured the same either way: a run with mof-ceiling=false reuses it.
        let text = params_text(&on, true, false);
        assert!(text.ends_with(" · hints · early-stop=10%"), "{}", text);
        let bisect = props("iocost-qos:tune-bisect,mof-ceiling=false,early-stop=5%");
        let text = params_text(&bisect, true, false);
        assert!(
            text.ends_with(" · hints · tune-bisect · early-stop=5%"),
            "{}",
            text
        );
        let off = props(
            "iocost-qos:mof-hint=false,mof-ceiling=false,tune-hint=false,tune-bisect=false,\
             early-stop=false",
        );
        assert!(
            !off.mof_hint
                && !off.mof_ceiling
                && !off.tune_hint
                && !off.tune_bisect
                && off.early_stop.is_none()
        );
        // Upstream's behaviour: no saver named, so a faithful run never reuses a saver's.
        let text = params_text(&off, true, true);
        assert!(text.ends_with("isol-05>=0.9 · quick"), "{}", text);
        let stop =
            props("iocost-qos:mof-hint=false,mof-ceiling=false,tune-hint=false,tune-bisect=false");
        assert!(params_text(&stop, false, false).ends_with(">=0.9 · early-stop=10%"));
        for (text, want) in [
            ("", Some(0.10)),
            ("=true", Some(0.10)),
            ("=0.07", Some(0.07)),
        ] {
            let p = props(&format!("iocost-qos:early-stop{}", text));
            assert_eq!(p.early_stop, want, "early-stop{}", text);
        }
        for bad in ["0%", "150%", "often"] {
            let spec = JobSpec::parse(&format!("iocost-qos:early-stop={}", bad)).unwrap();
            let e = format!("{:?}", super::super::props::check(&spec).unwrap_err());
            assert!(e.contains("early-stop=") && e.contains(bad), "{}", e);
        }
        // What the tunes get: upstream's linear walk down unless bisect is asked for.
        assert_eq!(tune_props(&bisect, 1.0, 2.0, None).search, Search::Bisect);
        assert_eq!(tune_props(&on, 1.0, 2.0, None).search, Search::Linear);
        assert_eq!(tune_props(&off, 1.0, 2.0, None).search, Search::Linear);
    }

    #[test]
    fn the_tune_hint_is_the_size_protected_else_the_smallest_failed() {
        use crate::bench::protection::record::{ProbeOutcome, TuneProbe};
        use crate::bench::protection::{MemHogTuneRecord, ScenarioRecord};
        let probe = |size: f64, outcome| TuneProbe {
            size,
            outcome,
            isol: 0.0,
            period: (0, 0),
            why: String::new(),
        };
        let run = |t: MemHogTuneRecord| {
            let mut r = QosRun::default();
            r.prot.scenarios.push(ScenarioRecord::MemHogTune(t));
            r
        };
        let walked = MemHogTuneRecord {
            probes: vec![
                probe(3e9, ProbeOutcome::EarlyFail),
                probe(1e9, ProbeOutcome::Fail),
                probe(2e9, ProbeOutcome::EarlyFail),
            ],
            done: true,
            ..Default::default()
        };
        let none = TuneHint {
            size: 1e9,
            protected: false,
        };
        assert_eq!(tune_hint(&run(walked.clone())), Some(none));
        let mut passed = walked.clone();
        passed.probes.push(probe(1.5e9, ProbeOutcome::Pass));
        passed.final_size = Some(1.5e9);
        let found = TuneHint {
            size: 1.5e9,
            protected: true,
        };
        assert_eq!(tune_hint(&run(passed)), Some(found));
        // A tune that did not end says nothing about the sizes it did not reach.
        let cut = MemHogTuneRecord {
            done: false,
            ..walked
        };
        assert_eq!(tune_hint(&run(cut)), None);
        assert_eq!(tune_hint(&QosRun::default()), None);
    }
}
