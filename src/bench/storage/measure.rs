//! Running `storage` (benches-doc/storage.md): the memory profile, the measurement loops with
//! upstream's retry logic around the memory-usage error, the record, and the studies that turn it
//! into the result.

use super::props::StorageProps;
use super::record::{LoopInfo, StorageRecord, StorageResult};
use crate::bench::contract::api::Apply;
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::bench::hashd_sizing::{self, dfl_rps_max, HashdBenchCfg};
use crate::result::sysinfo::MemProfile;
use crate::study::dist::mean_stdev;
use crate::study::iolat_study::IoLatStudy;
use crate::study::reports::{study_period, study_periods};
use crate::study::rstat_study::{ResourceStatStudy, ROOT_SLICE};
use crate::units::format_size;
use crate::util::now;
use crate::workload::hashd::sizing::mem::Prior;
use crate::workload::hashd::sizing::{Phase, Tick, Watch};
use anyhow::{Context, Result};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The memory-usage error that ends a final probe early (benches-doc/storage.md).
#[derive(Debug, thiserror::Error)]
#[error("memory usage {usage} is {:.1}% over the target", err * 100.0)]
struct OverUse {
    usage: u64,
    err: f64,
}

/// What the per-second watch keeps for the loop: the newest memory readings.
#[derive(Debug, Default)]
struct Seen {
    mem: VecDeque<u64>,
    swap: VecDeque<u64>,
}

/// Memory usage is the largest of this many newest readings (upstream's window).
const MEM_WINDOW: usize = 10;

impl Seen {
    fn usage(&self) -> u64 {
        self.mem.iter().copied().max().unwrap_or(0)
    }

    fn swap(&self) -> u64 {
        self.swap.iter().copied().max().unwrap_or(0)
    }
}

fn watch(seen: Arc<Mutex<Seen>>, target: u64, err_max: f64) -> Watch {
    Box::new(move |t: &Tick| {
        let usage = {
            let mut s = seen.lock().unwrap_or_else(|e| e.into_inner());
            s.mem.push_back(t.sample.mem_bytes);
            s.swap.push_back(t.sample.swap_bytes);
            if s.mem.len() > MEM_WINDOW {
                s.mem.pop_front();
                s.swap.pop_front();
            }
            s.usage()
        };
        let err = (usage as f64 - target as f64) / target as f64;
        t.show(&format!(
            " · memory used {} of the {} target ({:+.1}%)",
            format_size(usage as f64),
            format_size(target as f64),
            err * 100.0,
        ));
        // Only the final probes end early (ours, or upstream's refine): earlier ones may well
        // overshoot on the way.
        if matches!(
            t.phase,
            Phase::MemConfirm | Phase::MemCeiling | Phase::MemRefine
        ) && err > err_max
        {
            return Err(OverUse { usage, err }.into());
        }
        Ok(())
    })
}

/// Swap use (share of the target) from which a workload counts as short of memory.
pub const SWAP_SHORT: f64 = 0.02;

/// Retry bookkeeping across measurements (benches-doc/storage.md).
struct Retries {
    inner_left: u32,
    outer_left: u32,
    first_try: bool,
    prev: f64,
}

#[derive(Debug)]
enum Verdict {
    Success,
    Inner,
    Outer(u64),
}

impl Retries {
    /// After a measurement with memory error `err` (usage − target)/target and `swap` bytes of
    /// the workload in swap.
    ///
    /// Unlike upstream, using less than the target counts as an error of `avail` only when
    /// the workload was short of memory (more than [`SWAP_SHORT`] of the target in swap):
    /// otherwise the sustainable footprint simply fit with room to spare (a slow device, or a
    /// short probe), which says nothing about `avail`, and retrying can't change it.
    fn judge(
        &mut self,
        props: &StorageProps,
        mem: &MemProfile,
        usage: u64,
        swap: u64,
        err: f64,
    ) -> Result<Verdict> {
        let short_of_memory = swap as f64 > SWAP_SHORT * mem.target as f64;
        if err.abs() <= props.err_max || (err < 0.0 && !short_of_memory) {
            self.prev = 0.0;
            self.first_try = false;
            return Ok(Verdict::Success);
        }
        let cur = mem.avail as f64 + usage as f64 - mem.target as f64;
        let cur = cur.max(0.0);
        let consistent = (cur - self.prev).abs() < props.err_max * cur;
        let outer = self.first_try || consistent || self.inner_left == 0;
        self.prev = cur;
        self.first_try = false;
        if outer {
            if self.outer_left == 0 {
                crate::usage_bail!(
                    "storage: available memory keeps fluctuating (usage {} against target {}); keep the system idle, or give --mem-avail",
                    format_size(usage as f64),
                    format_size(mem.target as f64)
                );
            }
            self.outer_left -= 1;
            Ok(Verdict::Outer(cur as u64))
        } else {
            self.inner_left -= 1;
            Ok(Verdict::Inner)
        }
    }
}

/// Where a loop's memory search starts: next to the mean footprint of the loops before it
/// with `hint_loops`, else at the hint the caller gave (if any).
fn loop_hint(props: &StorageProps, loops: &[LoopInfo]) -> Option<f64> {
    if props.hint_loops && !loops.is_empty() {
        Some(loops.iter().map(|l| l.mem_frac).sum::<f64>() / loops.len() as f64)
    } else {
        props.hint
    }
}

/// Whether the last two loops' footprints differ by at most `tol` of the larger one: the
/// measurement has settled (iocost-qos's `early-stop`).
fn last_two_agree(sizes: &[f64], tol: f64) -> bool {
    // The search's neighbouring footprints are one tolerance apart up to float rounding
    // (35 % and 35 % × 0.95 = 33.249998 %); rounding must not split them.
    match sizes {
        [.., a, b] => (a - b).abs() <= tol * (1.0 + 1e-6) * a.max(*b),
        _ => false,
    }
}

pub(super) fn run(ctx: &mut RunCtx, props: &StorageProps) -> Result<StorageRecord> {
    let quick = ctx.quick();
    let dir = ctx.dir().to_path_buf();
    let (mut rec, mut mem) = resume(ctx, props)?;
    let rps_max = props.rps_max.unwrap_or_else(|| dfl_rps_max(mem.share));
    let mut retries = Retries {
        inner_left: props.inner_retries,
        outer_left: props.outer_retries,
        first_try: rec.mem_usages.is_empty(),
        prev: 0.0,
    };
    log::info!(
        "storage: {} of {} loops done; rps_max={} target={}",
        rec.mem_usages.len(),
        props.loops,
        rps_max,
        format_size(mem.target as f64)
    );

    while rec.mem_usages.len() < props.loops as usize && !settled(props, &rec) {
        let (mut session, reporter) = ctx.host().context("storage needs the host session")?;
        session.set_balloon(crate::system::mem::hashd_balloon_size(&mem))?;
        let cfg = loop_cfg(props, &mut rec, &mem, rps_max, quick);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let w = watch(seen.clone(), mem.target, props.err_max);
        show_loop(props, &rec);
        let run = hashd_sizing::run_sizing(&mut session, reporter, &dir, &cfg, Some(w));
        let (usage, swap) = {
            let s = seen.lock().unwrap_or_else(|e| e.into_inner());
            (s.usage(), s.swap())
        };
        let err = (usage as f64 - mem.target as f64) / mem.target as f64;
        let run = match run {
            Ok(r) => Some(r),
            Err(e) if e.downcast_ref::<OverUse>().is_some() => {
                log::warn!("storage: {:#}; ending the measurement", e);
                None
            }
            Err(e) => return Err(e),
        };
        let verdict = retries.judge(props, &mem, usage, swap, err)?;
        if err < -props.err_max && matches!(verdict, Verdict::Success) {
            log::info!(
                "storage: memory usage {} is {:+.1}% off the target, but the workload wasn't \
                 short of memory ({} in swap): it fit",
                format_size(usage as f64),
                err * 100.0,
                format_size(swap as f64)
            );
        }
        match (verdict, run) {
            (Verdict::Success, Some(run)) => {
                record_loop(&mut rec, run, usage, err, cfg.mem_prior.hint);
                ctx.checkpoint(&rec)?;
            }
            (Verdict::Success, None) => unreachable!("an over-use is never a success"),
            (Verdict::Inner, _) => {
                rec.retries.0 += 1;
                log::warn!(
                    "storage: memory usage {} is {:+.1}% off the target {}; measuring again",
                    format_size(usage as f64),
                    err * 100.0,
                    format_size(mem.target as f64)
                );
            }
            (Verdict::Outer(avail), _) => {
                rec.retries.1 += 1;
                log::warn!(
                    "storage: memory usage {} is {:+.1}% off the target {}; available memory \
                     corrected to {}, starting over",
                    format_size(usage as f64),
                    err * 100.0,
                    format_size(mem.target as f64),
                    format_size(avail as f64)
                );
                let mut session = ctx.session().context("storage needs the host session")?;
                mem = session.update_mem_avail(avail)?.clone();
                retries.inner_left = props.inner_retries;
                start_over(&mut rec, &mem);
                ctx.checkpoint(&rec)?;
            }
        }
    }
    rec.period.1 = now();
    Ok(rec)
}

/// The record to go on from (the checkpoint's, when it was measured with this memory) and the
/// memory profile, with available memory measured.
fn resume(ctx: &mut RunCtx, props: &StorageProps) -> Result<(StorageRecord, MemProfile)> {
    let mut rec: StorageRecord = ctx.prev_record().unwrap_or_default();
    let mut session = ctx.session().context("storage needs the host session")?;
    // A resumed run keeps the avail its finished loops were measured with.
    let profile = session.mem().map(|m| m.profile);
    if session.mem_avail_unmeasured() && rec.mem.avail > 0 && Some(rec.mem.profile) == profile {
        session.update_mem_avail(rec.mem.avail)?;
    }
    hashd_sizing::ensure_mem_avail(&mut session)?;
    let mem = session
        .mem()
        .cloned()
        .context("storage runs under the memory profile")?;
    if rec.mem.profile != mem.profile || rec.mem.avail != mem.avail {
        start_over(&mut rec, &mem);
    } else if rec.period.0 == 0 || rec.mem_usages.is_empty() {
        rec.period.0 = now();
    }
    rec.mem = mem.clone();
    rec.hint = props.hint;
    rec.stop_agree = props.stop_agree;
    Ok((rec, mem))
}

/// Forgets the loops measured with other memory.
fn start_over(rec: &mut StorageRecord, mem: &MemProfile) {
    rec.mem = mem.clone();
    rec.mem_usages.clear();
    rec.mem_sizes.clear();
    rec.final_mem_probe_periods.clear();
    rec.loops.clear();
    rec.period.0 = now();
}

/// Whether `early-stop` ends the loops here: the last two agree.
fn settled(props: &StorageProps, rec: &StorageRecord) -> bool {
    let Some(tol) = props
        .stop_agree
        .filter(|t| last_two_agree(&rec.mem_sizes, *t))
    else {
        return false;
    };
    log::info!(
        "storage: loops {} and {} found footprints within {:.1}% of each other; \
         stopping after {} of {} loops (early-stop)",
        rec.mem_sizes.len() - 1,
        rec.mem_sizes.len(),
        tol * 100.0,
        rec.mem_sizes.len(),
        props.loops
    );
    true
}

/// The next loop's sizing run: where its memory search starts (`mof-hint`) and what bounds it
/// (`mof-ceiling`, recorded in `rec`).
fn loop_cfg(
    props: &StorageProps,
    rec: &mut StorageRecord,
    mem: &MemProfile,
    rps_max: u32,
    quick: bool,
) -> HashdBenchCfg {
    let hint = loop_hint(props, &rec.loops);
    // A ceiling bounds the search only on footprints of the same size.
    let ceiling = props.ceiling.as_ref().filter(|c| {
        let same = c.mem == *mem;
        if !same {
            log::info!(
                "storage: not using the ceiling {:.1}% (mof-ceiling): it was measured with \
                 other memory (avail {} against {})",
                c.mem_frac * 100.0,
                format_size(c.mem.avail as f64),
                format_size(mem.avail as f64)
            );
        }
        same
    });
    rec.ceiling = ceiling.map(|c| c.mem_frac);
    if let Some(h) = hint.filter(|_| hint != props.hint) {
        log::info!(
            "storage: loop {}'s memory search starts next to {:.1}%, where the \
             loops before it ended (mof-hint)",
            rec.loops.len() + 1,
            h * 100.0
        );
    }
    HashdBenchCfg {
        size: 4 * mem.share,
        rps_max: Some(rps_max),
        fake_cpu: true,
        hash_size: Some(props.hash_size),
        chunk_pages: Some(props.chunk_pages),
        log_bps: Some(props.log_bps),
        upstream: props.upstream,
        preload: mem.share / 2,
        total_memory: Some(mem.share),
        quick,
        mem_prior: Prior {
            hint,
            ceiling: ceiling.map(|c| (c.mem_frac, c.ratio)),
        },
        mem_frac: None,
    }
}

/// The progress display of the next loop: its number, and an ETA from the finished loops'
/// measured seconds; once its memory search has probed, the search's own estimate for this
/// loop plus the loops after it.
fn show_loop(props: &StorageProps, rec: &StorageRecord) {
    use crate::logging::progress;
    let done = rec.loops.len();
    let per_loop =
        (done > 0).then(|| rec.loops.iter().map(|l| l.secs as f64).sum::<f64>() / done as f64);
    let left = (props.loops as usize).saturating_sub(rec.mem_usages.len());
    progress::eta(per_loop.map(|each| each * left as f64));
    progress::phase(format!("loop {}/{}", rec.mem_usages.len() + 1, props.loops));
    progress::repeats(left.saturating_sub(1) as u32, per_loop);
}

/// A loop that measured the footprint: its numbers into the record.
fn record_loop(
    rec: &mut StorageRecord,
    run: hashd_sizing::HashdBenchRun,
    usage: u64,
    err: f64,
    hint: Option<f64>,
) {
    let last = run.sizing.mem_history.last();
    let start = last.map_or(rec.period.0, |p| p.start);
    rec.final_mem_probe_periods.push((start, now()));
    rec.mem_usages.push(usage as f64);
    let size = run.knobs.mem_size as f64 * run.knobs.mem_frac;
    rec.mem_sizes.push(size);
    rec.loops.push(LoopInfo {
        mem_frac: run.knobs.mem_frac,
        probes: (run.sizing.cpu_history.len() + run.sizing.mem_history.len()) as u32,
        secs: run.sizing.measured_secs,
        quick: run.sizing.quick,
        size: run.sizing.size,
        mem_probes: run.sizing.mem_history.clone(),
        hint,
    });
    rec.base_hashd_knobs = run.knobs;
    log::info!(
        "storage: loop {} done: size {} usage {} ({:+.1}%) MOF {:.3}",
        rec.mem_usages.len(),
        format_size(size),
        format_size(usage as f64),
        err * 100.0,
        size / usage.max(1) as f64
    );
}

/// hashd's knobs from the last loop's sizing, with the footprint of the loops' mean size
/// (benches-doc/storage.md).
pub(super) fn applies(props: &StorageProps, rec: &StorageRecord) -> Result<Option<Apply>> {
    if !props.apply {
        return Ok(None);
    }
    let mut knobs = rec.base_hashd_knobs.clone();
    if knobs.mem_size == 0 || rec.mem_sizes.is_empty() {
        anyhow::bail!("the storage record holds no hashd parameters to apply");
    }
    knobs.mem_frac = mean_stdev(&rec.mem_sizes).0 / knobs.mem_size as f64;
    Ok(Some(Apply::Hashd {
        knobs,
        commit: props.commit,
    }))
}

pub(super) fn study(ctx: &StudyCtx, rec: &StorageRecord) -> Result<StorageResult> {
    let mut all = ResourceStatStudy::new(ROOT_SLICE);
    let mut iolat = IoLatStudy::new();
    let nr = study_period(&ctx.reports_dir, rec.period, &mut [&mut all, &mut iolat])?;
    let mut fin = ResourceStatStudy::new(ROOT_SLICE);
    study_periods(
        &ctx.reports_dir,
        &rec.final_mem_probe_periods,
        &mut [&mut fin],
    )?;
    let (usage, usage_sd) = mean_stdev(&rec.mem_usages);
    let (size, size_sd) = mean_stdev(&rec.mem_sizes);
    let res = StorageResult {
        mem_offload_factor: if usage > 0.0 { size / usage } else { 0.0 },
        mem_usage: usage.round(),
        mem_usage_stdev: usage_sd.round(),
        mem_size: size.round(),
        mem_size_stdev: size_sd.round(),
        all_rstat: Some(all.result().to_raw()?),
        final_rstat: Some(fin.result().to_raw()?),
        iolat: Some(iolat.result().to_raw()?),
        nr_reports: nr.pair(),
    };
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::super::tests::mem;
    use super::super::Storage;
    use super::*;
    use crate::spec::JobSpec;
    use crate::system::bench_json::HashdKnobs;

    #[test]
    fn later_loops_start_where_the_earlier_ones_ended_with_hint_loops() {
        let at = |f: f64| LoopInfo {
            mem_frac: f,
            ..Default::default()
        };
        let mut p = props();
        // Upstream: every loop climbs from the bottom.
        assert_eq!(loop_hint(&p, &[]), None);
        assert_eq!(loop_hint(&p, &[at(0.35)]), None);
        // A caller's hint alone holds for every loop.
        p.hint = Some(0.3);
        assert_eq!(loop_hint(&p, &[at(0.35)]), Some(0.3));
        // With hint_loops the first loop takes the caller's hint (or none), later ones the
        // mean of the loops before them.
        p.hint_loops = true;
        assert_eq!(loop_hint(&p, &[]), Some(0.3));
        p.hint = None;
        assert_eq!(loop_hint(&p, &[]), None);
        assert_eq!(loop_hint(&p, &[at(0.35)]), Some(0.35));
        let h = loop_hint(&p, &[at(0.35), at(0.30)]).unwrap();
        assert!((h - 0.325).abs() < 1e-12, "{}", h);
    }

    #[test]
    fn early_stop_needs_two_loops_within_the_tolerance() {
        let g = (1u64 << 30) as f64;
        assert!(!last_two_agree(&[], 0.05));
        assert!(!last_two_agree(&[1.2 * g], 0.05));
        // 1.2G and 1.25G: 4 % apart.
        assert!(last_two_agree(&[1.2 * g, 1.25 * g], 0.05));
        assert!(last_two_agree(&[1.25 * g, 1.2 * g], 0.05));
        // 1.2G and 1.4G (seen in one quick baseline): 14 % apart, a third loop is measured.
        assert!(!last_two_agree(&[1.2 * g, 1.4 * g], 0.05));
        // Neighbours of the quick search (5 % resolution) as the sata-ssd compare's baseline
        // found them: one step apart agree.
        assert!(last_two_agree(
            &[1428076554.5161688, 1503238553.6000001],
            0.05
        ));
        assert!(!last_two_agree(&[1.42 * g, 1.5 * g], 0.05));
        // Only the last two count.
        assert!(last_two_agree(&[2.0 * g, 1.2 * g, 1.2 * g], 0.05));
        assert!(!last_two_agree(&[1.2 * g, 1.2 * g, 1.4 * g], 0.05));
    }

    #[test]
    fn progress_counts_finished_loops_against_the_spec() {
        let rec = StorageRecord {
            mem_usages: vec![1.0],
            mem_sizes: vec![2.0],
            ..Default::default()
        };
        let raw = crate::result::to_raw(&rec).unwrap();
        for (spec, want) in [
            ("storage", "1 of 3 loops done"),
            ("storage:loops=2", "1 of 2 loops done"),
        ] {
            let spec = JobSpec::parse(spec).unwrap();
            assert_eq!(
                crate::bench::contract::api::AnyBench::progress(&Storage, &spec, &raw).as_deref(),
                Some(want)
            );
        }
    }

    #[test]
    fn apply_hands_on_the_knobs_with_the_mean_size() {
        let base = HashdKnobs {
            hash_size: 1258291,
            rps_max: 167,
            mem_size: 4 << 30,
            mem_frac: 0.375,
            chunk_pages: 25,
            fake_cpu_load: true,
            upstream_requests: false,
            upstream_flow: false,
        };
        let rec = StorageRecord {
            base_hashd_knobs: base.clone(),
            mem_sizes: vec![1.0 * (1 << 30) as f64, 2.0 * (1 << 30) as f64],
            mem_usages: vec![1e9, 1e9],
            ..StorageRecord::default()
        };
        let raw = serde_json::value::to_raw_value(&rec).unwrap();
        let applies = |spec: &str| {
            crate::bench::contract::api::AnyBench::job(&Storage, &JobSpec::parse(spec).unwrap())
                .unwrap()
                .stored(&raw)
                .and_then(|r| r.applies())
        };
        // storage applies nothing unless asked (upstream's defaults).
        assert_eq!(applies("storage").unwrap(), None);
        let want = HashdKnobs {
            mem_frac: 1.5 / 4.0,
            ..base
        };
        assert_eq!(
            applies("storage:apply").unwrap(),
            Some(Apply::Hashd {
                knobs: want.clone(),
                commit: false
            })
        );
        assert_eq!(
            applies("storage:commit").unwrap(),
            Some(Apply::Hashd {
                knobs: want,
                commit: true
            })
        );
        let empty = serde_json::value::to_raw_value(&StorageRecord::default()).unwrap();
        let spec = JobSpec::parse("storage:apply").unwrap();
        let job = crate::bench::contract::api::AnyBench::job(&Storage, &spec).unwrap();
        assert!(job.stored(&empty).and_then(|r| r.applies()).is_err());
    }

    fn props() -> StorageProps {
        StorageProps::check(&crate::spec::JobSpec::parse("storage").unwrap()).unwrap()
    }

    #[test]
    fn props_defaults_and_overrides() {
        let p = props();
        assert_eq!(
            (p.loops, p.rps_max, p.apply, p.commit),
            (3, None, false, false)
        );
        assert_eq!((p.err_max, p.inner_retries, p.outer_retries), (0.1, 2, 2));
        let s =
            crate::spec::JobSpec::parse("storage:loops=1,commit,rps-max=300,hash-size=2M").unwrap();
        let p = StorageProps::check(&s).unwrap();
        assert_eq!(
            (p.loops, p.rps_max, p.apply, p.commit),
            (1, Some(300), true, true)
        );
        assert_eq!(p.hash_size, 2 << 20);
        assert_eq!(p.upstream, hashd_sizing::AsUpstream::default());
        // (search, requests, flow) as upstream's.
        for (spec, want) in [
            ("storage:search=upstream", (true, false, false)),
            ("storage:search=ours,flow=ours", (false, false, false)),
            ("storage:requests=upstream", (false, true, false)),
            ("storage:flow=upstream", (false, false, true)),
        ] {
            let s = crate::spec::JobSpec::parse(spec).unwrap();
            let u = StorageProps::check(&s).unwrap().upstream;
            assert_eq!((u.search, u.requests, u.flow), want, "{}", spec);
        }
        for bad in ["search=fast", "flow=fast"] {
            let s = crate::spec::JobSpec::parse(&format!("storage:{}", bad)).unwrap();
            let e = s.error(StorageProps::check(&s).unwrap_err()).to_string();
            assert!(e.contains("ours") && e.contains("upstream"), "{}", e);
        }
        assert!(
            StorageProps::check(&crate::spec::JobSpec::parse("storage:loops=0").unwrap()).is_err()
        );
        // A zero hashd knob is refused, as in hashd-params, not silently replaced.
        for bad in ["rps-max=0", "chunk-pages=0", "hash-size=0"] {
            let s = crate::spec::JobSpec::parse(&format!("storage:{}", bad)).unwrap();
            let e = s.error(StorageProps::check(&s).unwrap_err());
            assert!(e.to_string().contains("=0 can't be used"), "{}", e);
        }
    }

    #[test]
    fn rps_max_scales_with_the_share() {
        assert_eq!(dfl_rps_max(12 << 30), 2000);
        assert_eq!(dfl_rps_max(1 << 30), 167);
    }

    #[test]
    fn mean_and_sample_stdev() {
        assert_eq!(mean_stdev(&[]), (0.0, 0.0));
        assert_eq!(mean_stdev(&[4.0]), (4.0, 0.0));
        let (m, s) = mean_stdev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((s - 2.138).abs() < 0.001, "{}", s);
    }

    #[test]
    fn retries_follow_upstream() {
        let p = props();
        let m = mem();
        let mut r = Retries {
            inner_left: 2,
            outer_left: 2,
            first_try: true,
            prev: 0.0,
        };
        // Within 10 %: success, either way.
        assert!(matches!(
            r.judge(&p, &m, m.target + m.target / 20, 0, 0.05).unwrap(),
            Verdict::Success
        ));
        // Well under the target without swapping: the footprint fit, nothing to retry.
        assert!(matches!(
            r.judge(&p, &m, m.target / 2, 0, -0.5).unwrap(),
            Verdict::Success
        ));
        // Short of memory (swapping): the usage says avail is off.
        let swap = m.target / 10;
        // Not the first try, nothing consistent before: an inner retry keeping avail.
        let usage = m.target / 2;
        assert!(matches!(
            r.judge(&p, &m, usage, swap, -0.5).unwrap(),
            Verdict::Inner
        ));
        // The same correction again is consistent: outer retry with avail + usage − target.
        match r.judge(&p, &m, usage, swap, -0.5).unwrap() {
            Verdict::Outer(a) => assert_eq!(a, m.avail - (m.target - usage)),
            _ => panic!("expected an outer retry"),
        }
        // The first try goes straight to an outer retry.
        let mut r = Retries {
            inner_left: 2,
            outer_left: 0,
            first_try: true,
            prev: 0.0,
        };
        let e = r.judge(&p, &m, usage, swap, -0.5).unwrap_err();
        assert!(e.to_string().contains("keeps fluctuating"), "{}", e);
    }
}
