//! Running `protection` (benches-doc/protection.md): hashd with bench.json's parameters (a nested
//! sizing first when there are none), then each scenario in order, checkpointing after every hog
//! run and every tune probe so an interrupted job resumes without redoing them. One hog run is
//! `hog_run::run_one`.

use super::early::BelowCount;
use super::hog_run::{run_one, Env, HogTick, OneRun, Timing};
use super::props::{MemHogProps, ProtectionProps, Scenario, TuneProps};
use super::record::{
    MemHogRecord, MemHogTuneRecord, ProbeOutcome, ProtectionRecord, ScenarioRecord, TuneProbe,
    HOG_CG,
};
use super::search::{self, Next};
use super::study::study_mem_hog;
use super::workload::Workload;
use crate::bench::contract::ctx::RunCtx;
use crate::bench::hashd_sizing;
use crate::logging::progress;
use crate::study::dist::label_quantile;
use crate::system::bench_json::HashdKnobs;
use crate::system::cgroup::CgroupFs;
use crate::units::{format_duration, format_pct, format_size};
use crate::util::now;
use anyhow::{Context, Result};
use std::time::Duration;
pub(super) fn run(ctx: &mut RunCtx, props: &ProtectionProps) -> Result<ProtectionRecord> {
    let mut rec: ProtectionRecord = ctx.prev_record().unwrap_or_default();
    // Scenarios recorded for another spec (changed between runs) are dropped from the first
    // one that doesn't match on.
    let keep = rec
        .scenarios
        .iter()
        .zip(&props.scenarios)
        .take_while(|(r, p)| {
            matches!(
                (r, p),
                (ScenarioRecord::MemHog(_), Scenario::MemHog(_))
                    | (ScenarioRecord::MemHogTune(_), Scenario::MemHogTune(_))
            )
        })
        .count();
    rec.scenarios.truncate(keep);
    if !rec.scenarios.is_empty() {
        log::info!(
            "protection: continuing after {} recorded scenario(s)",
            rec.scenarios.len()
        );
    }

    let knobs = ensure_hashd_knobs(ctx)?;
    let dir = ctx.dir().to_path_buf();
    let reports_dir = ctx.reports_dir();
    let quick = ctx.quick();
    let shared = ctx.reporter().map(|r| r.shared().clone());
    let (mut host, _) = ctx.host().context("protection needs the host session")?;
    let (model_wbps, model_from) = model_wbps(&mut host, &dir, quick)?;
    let fs = host.has_slices().then(|| CgroupFs::new(host.hp()));
    if fs.is_some() {
        host.create_cgroup(HOG_CG)?;
    }
    let env = Env {
        hp: host.hp().clone(),
        fs,
        shared: shared.clone(),
        hog_dir: dir.join("scratch").join("mem-hog"),
        reports_dir,
        timing: Timing::new(quick),
        model_wbps,
        model_from,
    };
    std::fs::create_dir_all(&env.hog_dir)
        .with_context(|| format!("creating {}", env.hog_dir.display()))?;
    progress::phase("starting hashd");
    let mut wl = Workload::start(&mut host, shared, &dir, &knobs)?;

    let nr = props.scenarios.len();
    for (i, scn) in props.scenarios.iter().enumerate() {
        let title = |what: &str| format!("scenario {}/{} {}", i + 1, nr, what);
        match scn {
            Scenario::MemHog(p) => {
                run_mem_hog(ctx, &env, &mut wl, p, &mut rec, i, &title("mem-hog"))?
            }
            Scenario::MemHogTune(p) => {
                run_tune(ctx, &env, &mut wl, p, &mut rec, i, &title("mem-hog-tune"))?
            }
        }
    }
    wl.stop()?;
    Ok(rec)
}

/// bench.json's hashd parameters; without them, a nested hashd-params sizing (with its
/// defaults) finds them and commits them, as upstream does.
fn ensure_hashd_knobs(ctx: &mut RunCtx) -> Result<HashdKnobs> {
    if let Some(k) = ctx.bench_knobs().filter(|k| k.hashd_seq > 0) {
        return Ok(k.hashd.clone());
    }
    let quick = ctx.quick();
    let dir = ctx.dir().to_path_buf();
    let (mut host, reporter) = ctx.host().context("protection needs the host session")?;
    log::info!("protection: bench.json has no hashd parameters; running hashd-params first");
    progress::phase("hashd-params (nested)");
    hashd_sizing::ensure_mem_avail(&mut host)?;
    let mem = host
        .mem()
        .cloned()
        .context("protection runs under the memory profile")?;
    // `--hashd-cpu-load fake` is on the working copy even before any sizing: size for it.
    let fake_cpu_load = host.bench_knobs().is_some_and(|k| k.hashd.fake_cpu_load);
    let props = crate::bench::hashd_params::HashdParamsProps {
        apply: true,
        commit: true,
        fake_cpu_load,
        rps_max: None,
        mem_frac: None,
        hash_size: None,
        chunk_pages: None,
        log_bps: None,
        upstream: Default::default(),
    };
    let cfg = props.bench_cfg(mem.share, quick);
    let balloon = crate::system::mem::balloon_size(&mem);
    host.set_balloon(crate::system::mem::hashd_balloon_size(&mem))?;
    let run = hashd_sizing::run_sizing(&mut host, reporter, &dir, &cfg, None)?;
    host.set_balloon(balloon)?;
    log::info!(
        "protection: hashd-params: {}",
        crate::bench::hashd_params::result_line(&run.knobs)
    );
    host.apply_hashd(run.knobs.clone(), true)?;
    // The working copy: what was measured, under any `--hashd-*` override.
    Ok(host.bench_knobs().map_or(run.knobs, |k| k.hashd.clone()))
}

/// The write bandwidth hog speeds are relative to: bench.json's io.cost model; without one, a
/// nested `iocost-params` measures it and commits it, as upstream does.
fn model_wbps(
    host: &mut crate::system::session::BenchHost,
    dir: &std::path::Path,
    quick: bool,
) -> Result<(u64, String)> {
    let (knobs, from) = crate::bench::iocost_params::ensure_model(host, dir, quick, "protection")?;
    Ok((knobs.model.wbps, from.to_string()))
}

fn scenario_slot(rec: &mut ProtectionRecord, i: usize, new: ScenarioRecord) -> &mut ScenarioRecord {
    if rec.scenarios.len() <= i {
        rec.scenarios.push(new);
    }
    &mut rec.scenarios[i]
}

fn run_mem_hog(
    ctx: &mut RunCtx,
    env: &Env,
    wl: &mut Workload,
    p: &MemHogProps,
    rec: &mut ProtectionRecord,
    i: usize,
    title: &str,
) -> Result<()> {
    let base_rps = (wl.knobs.rps_max as f64 * p.load).round();
    let ScenarioRecord::MemHog(r) =
        scenario_slot(rec, i, ScenarioRecord::MemHog(MemHogRecord::default()))
    else {
        unreachable!("matched against the props");
    };
    if r.runs.len() >= p.loops as usize {
        log::info!("protection: {} already done", title);
        return Ok(());
    }
    if r.period.0 == 0 {
        r.period.0 = now();
    }
    r.base_rps = base_rps;
    r.speed = p.speed.clone();
    r.hog_wbps = env.hog_wbps(&p.speed);
    r.model_from = env.model_from.clone();
    // Warm-up is usually cut short, the hog by the safety watch: half of each.
    let per_run = (env.timing.warm_up_max + env.timing.mem_hog) / 2.0 + env.timing.baseline;
    while rec_runs(rec, i) < p.loops as usize {
        let k = rec_runs(rec, i);
        progress::phase(format!("{} · run {}/{}", title, k + 1, p.loops));
        progress::eta(Some(per_run * (p.loops as usize - k) as f64));
        let base_hold =
            matches!(&rec.scenarios[i], ScenarioRecord::MemHog(r) if r.base_period.0 == 0);
        let one = run_one(
            env,
            wl,
            p.load,
            &p.speed,
            base_hold,
            env.timing.mem_hog,
            &mut |_| None,
        )?;
        let ScenarioRecord::MemHog(r) = &mut rec.scenarios[i] else {
            unreachable!()
        };
        if let Some(bp) = one.base_period {
            r.base_period = bp;
        }
        r.runs.push(one.run);
        r.period.1 = now();
        ctx.checkpoint(rec)?;
    }
    // Reports of the last second land half a second into the next.
    std::thread::sleep(Duration::from_millis(1500));
    let ScenarioRecord::MemHog(r) = &rec.scenarios[i] else {
        unreachable!()
    };
    match study_mem_hog(&env.reports_dir, r) {
        Ok(out) => log::info!(
            "protection: {}: isol={}:{}% lat_imp={}%:{} work_csv={}%",
            title,
            format_pct(out.isol_at("mean")),
            format_pct(out.isol_at("stdev")),
            format_pct(out.lat_imp.mean),
            format_pct(out.lat_imp.stdev),
            format_pct(out.work_csv)
        ),
        Err(e) => log::warn!("protection: {}: can't study it yet: {:#}", title, e),
    }
    Ok(())
}

fn rec_runs(rec: &ProtectionRecord, i: usize) -> usize {
    match &rec.scenarios[i] {
        ScenarioRecord::MemHog(r) => r.runs.len(),
        ScenarioRecord::MemHogTune(r) => r.probes.len(),
    }
}

fn run_tune(
    ctx: &mut RunCtx,
    env: &Env,
    wl: &mut Workload,
    p: &TuneProps,
    rec: &mut ProtectionRecord,
    i: usize,
    title: &str,
) -> Result<()> {
    let new = MemHogTuneRecord {
        isol_pct: p.isol_pct.clone(),
        isol_thr: p.isol_thr,
        search: p.search.name().to_string(),
        hint: p.hint,
        ..Default::default()
    };
    let ScenarioRecord::MemHogTune(r) = scenario_slot(rec, i, ScenarioRecord::MemHogTune(new))
    else {
        unreachable!("matched against the props");
    };
    if r.done {
        log::info!("protection: {} already done", title);
        return Ok(());
    }
    if r.period.0 == 0 {
        r.period.0 = now();
    }
    let grid = search::grid(p.size_min, p.size_max, p.intvs);
    let orig_size = wl.size();
    let base_rps = (wl.knobs.rps_max as f64 * p.load).round();
    let thr_rps = base_rps * p.isol_thr;
    let t = env.timing;
    // Seconds below the threshold that already doom a probe: the share of the probe the
    // isolation percentile may fall below it.
    let early_max = label_quantile(&p.isol_pct).map(|q| (t.probe * q).ceil() as u64);
    loop {
        let ScenarioRecord::MemHogTune(r) = &mut rec.scenarios[i] else {
            unreachable!()
        };
        let Some((size, last)) = next_probe(p, &grid, r, title) else {
            break;
        };
        let k = r.probes.len();
        let base_hold = r.base_period.0 == 0;
        show_probe(p, &grid, r, title, size, last, &t);
        wl.set_size(size)?;
        let p0 = now();
        let early = if last { None } else { early_max };
        let (one, doomed) = probe_run(env, wl, p, BelowCount::new(thr_rps, early), base_hold);
        let ScenarioRecord::MemHogTune(r) = &mut rec.scenarios[i] else {
            unreachable!()
        };
        let judged = Judged {
            size,
            p0,
            base_rps,
            doomed,
        };
        let probe = judge_probe(env, p, r, judged, one, title);
        log::info!(
            "protection: {}: probe {} at {}: {:?} isol-{}={}%{}",
            title,
            k + 1,
            format_size(size),
            probe.outcome,
            p.isol_pct,
            format_pct(probe.isol),
            if probe.why.is_empty() {
                String::new()
            } else {
                format!(" ({})", probe.why)
            }
        );
        r.probes.push(probe);
        r.period.1 = now();
        ctx.checkpoint(rec)?;
    }
    // Put hashd's size back for what follows (upstream left the last probe's).
    wl.set_size(orig_size)?;
    let ScenarioRecord::MemHogTune(r) = &mut rec.scenarios[i] else {
        unreachable!()
    };
    r.period.1 = now();
    ctx.checkpoint(rec)?;
    Ok(())
}

/// The search's next probe, `(size, whether it is the last candidate)`; `None` when the
/// search has ended, which is logged and recorded in `r`.
fn next_probe(
    p: &TuneProps,
    grid: &[f64],
    r: &mut MemHogTuneRecord,
    title: &str,
) -> Option<(f64, bool)> {
    let done: Vec<(f64, ProbeOutcome)> = r.probes.iter().map(|q| (q.size, q.outcome)).collect();
    match search::next_from(p.search, p.hint, grid, &done) {
        Next::Found(s) => {
            r.final_size = Some(s);
            r.done = true;
            log::info!(
                "protection: {}: hashd size {} is protected at isol-{} >= {}% ({} probes)",
                title,
                format_size(s),
                p.isol_pct,
                format_pct(p.isol_thr),
                r.probes.len()
            );
            None
        }
        Next::NotFound => {
            r.done = true;
            log::info!(
                "protection: {}: no size in [{}, {}] keeps isol-{} above {}%",
                title,
                format_size(p.size_min),
                format_size(p.size_max),
                p.isol_pct,
                format_pct(p.isol_thr)
            );
            None
        }
        Next::Probe { size, last } => Some((size, last)),
    }
}

/// One probe's hog run at the current size: it ends after `probe` seconds of swapping, or
/// early once `below` has seen enough seconds under the threshold to doom it (returned).
fn probe_run(
    env: &Env,
    wl: &mut Workload,
    p: &TuneProps,
    mut below: BelowCount,
    base_hold: bool,
) -> (Result<OneRun>, bool) {
    let t = env.timing;
    let mut verdict = |tick: &HogTick| -> Option<String> {
        let since = tick.since_swap?;
        if since >= t.probe {
            return Some(format!("{} of swapping", format_duration(t.probe)));
        }
        // Counted once per tick while the hog swaps (upstream counted every callback,
        // including before any swapping).
        below.push(tick.hashd)
    };
    let one = run_one(
        env,
        wl,
        p.load,
        &p.speed,
        base_hold,
        t.probe_max,
        &mut verdict,
    );
    (one, below.doomed())
}

/// The progress display and log line of the probe about to run.
fn show_probe(
    p: &TuneProps,
    grid: &[f64],
    r: &MemHogTuneRecord,
    title: &str,
    size: f64,
    last: bool,
    t: &Timing,
) {
    let k = r.probes.len();
    let most = if p.hint.is_some() {
        // Every point once, a start reached by climbing twice, and bisect's bottom twice.
        grid.len() + 1 + usize::from(p.search == search::Search::Bisect)
    } else {
        let done: Vec<(f64, ProbeOutcome)> = r.probes.iter().map(|q| (q.size, q.outcome)).collect();
        search::most_probes(p.search, grid, &done)
    };
    progress::phase(format!(
        "{} · probe {} of at most {} · hashd {}",
        title,
        k + 1,
        most,
        format_size(size)
    ));
    let per_probe = t.warm_up_max / 2.0 + t.probe + 30.0;
    progress::eta(Some(per_probe * most.saturating_sub(k) as f64));
    log::info!(
        "protection: {}: probe {} at hashd size {}{}",
        title,
        k + 1,
        format_size(size),
        if last { " (the last candidate)" } else { "" }
    );
}

/// What a probe's verdict needs beside its run: its size and start, the target rate and
/// whether the live count already doomed it.
struct Judged {
    size: f64,
    p0: u64,
    base_rps: f64,
    doomed: bool,
}

/// A probe's verdict from its run: an error, a failed run, an early fail, or the isolation
/// its study found against the threshold. A passing run (or, without a pass at another size,
/// the last one studied) becomes the tune's `final_run`.
fn judge_probe(
    env: &Env,
    p: &TuneProps,
    r: &mut MemHogTuneRecord,
    j: Judged,
    one: Result<OneRun>,
    title: &str,
) -> TuneProbe {
    let mut probe = TuneProbe {
        size: j.size,
        outcome: ProbeOutcome::Error,
        isol: 0.0,
        period: (j.p0, now()),
        why: String::new(),
    };
    let one = match one {
        Err(e) => {
            log::warn!("protection: {}: probe failed: {:#}", title, e);
            probe.why = format!("{:#}", e);
            return probe;
        }
        Ok(one) => one,
    };
    if let Some(bp) = one.base_period {
        r.base_period = bp;
    }
    if let Some((_, _, msg)) = &one.run.failed {
        probe.why = msg.clone();
        return probe;
    }
    if j.doomed {
        probe.outcome = ProbeOutcome::EarlyFail;
        probe.why = one.done_why.unwrap_or_default();
        return probe;
    }
    std::thread::sleep(Duration::from_millis(1500));
    let hr = MemHogRecord {
        period: (j.p0, now()),
        base_period: r.base_period,
        base_rps: j.base_rps,
        runs: vec![one.run],
        hog_wbps: env.hog_wbps(&p.speed),
        speed: p.speed.clone(),
        model_from: env.model_from.clone(),
    };
    match study_mem_hog(&env.reports_dir, &hr) {
        Ok(out) => {
            probe.isol = out.isol_at(&p.isol_pct);
            let passed = probe.isol >= p.isol_thr;
            probe.outcome = if passed {
                ProbeOutcome::Pass
            } else {
                ProbeOutcome::Fail
            };
            // The result shows the passing run (each pass of a search is larger than the ones
            // before), else the last one studied. A repeat at a size overrules the pass there.
            let any_pass = r
                .probes
                .iter()
                .any(|q| q.outcome.passed() && (q.size - j.size).abs() >= 0.5);
            if passed || !any_pass {
                r.final_run = Some(hr);
            }
        }
        Err(e) => probe.why = format!("study: {:#}", e),
    }
    probe
}
