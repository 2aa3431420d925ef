//! One hog run against hashd (benches-doc/protection.md): warm-up to stability, the baseline (the
//! first time), then the hog in `system.slice/rd-sysload-mem-hog.service`, watched once a second
//! until it ends — by the host-safety watch, the kernel's OOM killer, its timeout or the scenario's
//! own verdict — or hashd fails. The phase lengths ([`Timing`]) and what a run needs ([`Env`]).

use super::props::{speed_factor, TUNE_PROBE_DUR};
use super::record::{MemHogRun, HOG_CG};
use super::stable::{LatGate, Stabilizer, Thresholds};
use super::workload::{Sample, Workload};
use crate::logging::progress;
use crate::report::reporter::SharedReport;
use crate::system::cgroup::{CgroupFs, PressureKind};
use crate::system::HostPaths;
use crate::units::{format_duration, format_pct, format_size};
use crate::util::now;
use crate::workload::memhog::watch::{self, HogEnd, Watch};
use crate::workload::memhog::{HogOpts, HogReport, MemHog};
use anyhow::{bail, Result};
use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Phase lengths, upstream's and `--quick`'s.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub stable: Thresholds,
    /// Longest warm-up before going on unstable.
    pub warm_up_max: f64,
    pub baseline: f64,
    /// A mem-hog run's hog time limit.
    pub mem_hog: f64,
    /// A tune probe: hog time after swapping starts, and its limit.
    pub probe: f64,
    pub probe_max: f64,
}

impl Timing {
    pub const FULL: Timing = Timing {
        stable: Thresholds::FULL,
        warm_up_max: 300.0,
        baseline: 15.0,
        mem_hog: 300.0,
        probe: TUNE_PROBE_DUR,
        probe_max: 3600.0,
    };
    pub const QUICK: Timing = Timing {
        stable: Thresholds::QUICK,
        warm_up_max: 45.0,
        baseline: 5.0,
        mem_hog: 60.0,
        probe: 20.0,
        probe_max: 120.0,
    };

    pub fn new(quick: bool) -> Timing {
        if quick {
            Timing::QUICK
        } else {
            Timing::FULL
        }
    }
}

/// The hog's memory is averaged over this many newest seconds.
const MEM_AVG_SECS: usize = 5;

/// What every run needs: where things are, the hog's base rate and the reporter.
pub(super) struct Env {
    pub(super) hp: HostPaths,
    pub(super) fs: Option<CgroupFs>,
    pub(super) shared: Option<SharedReport>,
    pub(super) hog_dir: PathBuf,
    pub(super) reports_dir: PathBuf,
    pub(super) timing: Timing,
    /// The modelled write bandwidth speeds are relative to, and where it came from.
    pub(super) model_wbps: u64,
    pub(super) model_from: String,
}

impl Env {
    /// The hog's growth rate for `speed`, bytes/s.
    pub(super) fn hog_wbps(&self, speed: &str) -> u64 {
        (self.model_wbps as f64 * speed_factor(speed)).round() as u64
    }
}

/// What a scenario's verdict function sees every second of the hog.
pub struct HogTick<'a> {
    pub hashd: &'a Sample,
    /// Seconds since the hog's cgroup started swapping (`None` before).
    pub since_swap: Option<f64>,
}

/// A scenario's say in when the hog ends: `Some(why)` ends it as [`HogEnd::Done`].
pub(super) type Verdict<'a> = &'a mut dyn FnMut(&HogTick) -> Option<String>;

/// One hog run's outcome.
pub(super) struct OneRun {
    pub(super) run: MemHogRun,
    pub(super) base_period: Option<(u64, u64)>,
    /// Why the verdict ended it, when it did.
    pub(super) done_why: Option<String>,
}

/// Warm-up (and the baseline when `base_hold`), then the hog until it ends.
pub(super) fn run_one(
    env: &Env,
    wl: &mut Workload,
    load: f64,
    speed: &str,
    base_hold: bool,
    timeout: f64,
    verdict: Verdict,
) -> Result<OneRun> {
    let t = env.timing;
    wl.set_load(load)?;
    warm_up(&t, wl, load)?;
    let base_period = if base_hold {
        Some(baseline(wl, t.baseline)?)
    } else {
        None
    };
    let hog = run_hog(env, wl, speed, timeout, verdict)?;
    hog.into_run(base_period)
}

/// Warm-up until hashd is stable. A hashd that has never warmed up starts with a cold page
/// cache and an empty anon area: under its real latency target the first warm-up took
/// 22–44 s in quick TCG runs, the latency controller in charge for most of it, where later
/// ones took 4–10 s. It warms up under a loose target instead, until its latency meets the
/// real one too (as the memory search's warm-up does).
fn warm_up(t: &Timing, wl: &mut Workload, load: f64) -> Result<()> {
    let rps_max = wl.knobs.rps_max as f64;
    progress::step("warming up hashd");
    let start = Instant::now();
    let mut stab = Stabilizer::new(t.stable);
    let loose = wl.cold();
    if loose {
        wl.set_loose(true)?;
    }
    let mut lat_gate = LatGate::new(t.stable);
    // Seconds the latency controller held the requests in flight at its ceiling.
    let mut capped = 0u32;
    loop {
        sleep_tick();
        let s = wl.tick();
        if !s.alive {
            bail!("{} while warming up", wl.end_reason());
        }
        progress::status(format!(
            "{:.0} of {:.0} rps ({}) · {} · lat {}",
            s.rps,
            wl.rps_target(),
            format_pct(s.rps / rps_max.max(1.0)),
            format_size(s.mem as f64),
            format_duration(s.lat)
        ));
        capped += u32::from(
            s.fresh && s.concurrency_max > 0.0 && s.concurrency >= s.concurrency_max - 1e-6,
        );
        let lat_met = s.fresh && lat_gate.push(s.lat, wl.lat_target());
        let stable = s.fresh && stab.push(s.rps, s.mem as f64, rps_max, load);
        if stable && (!loose || lat_met) {
            let secs = start.elapsed().as_secs_f64();
            log::info!(
                "protection: hashd stable after {:.0}s at {:.0} rps{}{}",
                secs,
                s.rps,
                if loose {
                    " (cold, under a loose latency target)"
                } else {
                    ""
                },
                if secs > 3.0 * t.stable.slots as f64 {
                    format!(
                        " ({}; latency in charge {}s, over its target {}s)",
                        stab.unmet(),
                        capped,
                        lat_gate.over()
                    )
                } else {
                    String::new()
                }
            );
            break;
        }
        if start.elapsed().as_secs_f64() >= t.warm_up_max {
            log::warn!(
                "protection: hashd not stable after {:.0}s ({:.0} rps of {:.0}; {}; latency in \
                 charge {}s, over its target {}s); going on",
                t.warm_up_max,
                s.rps,
                wl.rps_target(),
                stab.unmet(),
                capped,
                lat_gate.over()
            );
            break;
        }
    }
    if loose {
        wl.set_loose(false)?;
    }
    wl.set_warmed();

    Ok(())
}

/// hashd at its load for `secs`: the period the isolation is measured against.
fn baseline(wl: &mut Workload, secs: f64) -> Result<(u64, u64)> {
    progress::step("baseline");
    let b0 = now();
    let until = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < until {
        sleep_tick();
        let s = wl.tick();
        if !s.alive {
            bail!("{} during the baseline", wl.end_reason());
        }
    }
    Ok((b0, now()))
}

/// How the hog phase went.
struct HogPhase {
    started: Instant,
    /// The hog's report when its cgroup first swapped, and when that was (also in unix seconds).
    first: Option<(HogReport, Instant, u64)>,
    last: HogReport,
    /// Unix seconds of the tick that saw the hog's end.
    ended_at: u64,
    /// The hog's memory.current over its last seconds, since it first swapped.
    mems: VecDeque<u64>,
    failed: Option<(f64, f64, String)>,
    end: Option<(HogEnd, String)>,
    done_why: Option<String>,
}

/// How the hog's end counts: the kernel's OOM killer or its own exit end the run as usual; a
/// signal from anyone else fails it (the error is why).
fn hog_ended(
    env: &Env,
    st: std::process::ExitStatus,
) -> std::result::Result<(HogEnd, String), String> {
    let oom = env.fs.as_ref().map_or(0, |f| f.oom_kills(HOG_CG));
    if oom > 0 {
        return Ok((HogEnd::OomKill, format!("{} OOM kill(s)", oom)));
    }
    if st.signal().is_some() {
        // Not the kernel's OOM killer and not us: the run can't be studied.
        let why = crate::util::proc::end_reason("the memory hog", st, 0);
        log::error!("{}", why);
        return Err(why);
    }
    Ok((HogEnd::Exited, "the hog exited on its own".to_string()))
}

/// The hog at `speed` beside hashd until hashd dies, the hog ends, the safety watch or the
/// timeout stops it, or the scenario's verdict does.
fn run_hog(
    env: &Env,
    wl: &mut Workload,
    speed: &str,
    timeout: f64,
    verdict: Verdict,
) -> Result<HogPhase> {
    let wbps = env.hog_wbps(speed);
    progress::step(format!("memory hog at {}/s", format_size(wbps as f64)));
    let opts = HogOpts::new(wbps, env.hog_dir.join("report.json"));
    let mut hog = MemHog::start(&opts, env.fs.as_ref().map(|f| (f, HOG_CG)))?;
    let _units = UnitGuard::add(env.shared.as_ref(), HOG_CG);
    let started = Instant::now();
    let mut safety = Watch::new();
    let mut first: Option<(HogReport, Instant, u64)> = None;
    let mut last = HogReport::default();
    let mut mems: VecDeque<u64> = VecDeque::new();
    let (mut failed, mut end, mut done_why) = (None, None, None);
    loop {
        sleep_tick();
        let elapsed = started.elapsed().as_secs_f64();
        let s = wl.tick();
        if !s.alive {
            failed = Some((timeout, elapsed.min(timeout), wl.end_reason()));
            break;
        }
        if let Some(st) = hog.try_wait()? {
            match hog_ended(env, st) {
                Ok(e) => end = Some(e),
                Err(why) => failed = Some((timeout, elapsed.min(timeout), why)),
            }
            break;
        }
        let (hog_mem, hog_swap) = match &env.fs {
            Some(f) => (
                f.read_memory_current(HOG_CG).unwrap_or(0),
                f.read_swap_current(HOG_CG).unwrap_or(0),
            ),
            None => (0, 0),
        };
        if let Some(r) = hog.report() {
            if first.is_none() && hog_swap > 0 {
                first = Some((r.clone(), Instant::now(), now()));
            }
            if first.is_some() {
                mems.push_back(hog_mem);
                if mems.len() > MEM_AVG_SECS {
                    mems.pop_front();
                }
            }
            last = r;
        }
        let sample = host_sample(env);
        status_line(env, &s, wl, hog_mem, hog_swap, &sample);
        if let Some(e) = safety.check(&sample) {
            end = Some(e);
            break;
        }
        if elapsed >= timeout {
            end = Some((
                HogEnd::Timeout,
                format!("{} limit", format_duration(timeout)),
            ));
            break;
        }
        let tick = HogTick {
            hashd: &s,
            since_swap: first.as_ref().map(|f| f.1.elapsed().as_secs_f64()),
        };
        if let Some(why) = verdict(&tick) {
            end = Some((HogEnd::Done, why.clone()));
            done_why = Some(why);
            break;
        }
    }
    let ended_at = now();
    hog.kill()?;
    if let Some(r) = hog.report() {
        last = r;
    }
    Ok(HogPhase {
        started,
        first,
        last,
        ended_at,
        mems,
        failed,
        end,
        done_why,
    })
}

impl HogPhase {
    /// The run's record (`base_period` from the phase before it).
    fn into_run(self, base_period: Option<(u64, u64)>) -> Result<OneRun> {
        let HogPhase {
            started,
            first,
            last,
            ended_at,
            mems,
            failed,
            end,
            done_why,
        } = self;
        let (hog_end, hog_end_why) = match end {
            Some((e, why)) => (Some(e), why),
            None => (None, String::new()),
        };
        if let Some(e) = hog_end {
            log::info!(
                "protection: the hog ended after {:.0}s: {} ({}); {} written, {} lost",
                started.elapsed().as_secs_f64(),
                e.describe(),
                hog_end_why,
                format_size(last.wbytes as f64),
                format_size(last.wloss as f64)
            );
        }
        let Some((first_rep, _, swap_at)) = first else {
            if failed.is_none() {
                bail!(
                    "the memory hog never used swap ({} written before it ended: {}); protection \
                     needs the hog to push memory out to swap",
                    format_size(last.wbytes as f64),
                    hog_end.map_or("?", |e| e.describe())
                );
            }
            return Ok(OneRun {
                run: MemHogRun {
                    failed,
                    hog_end,
                    hog_end_why,
                    ..Default::default()
                },
                base_period,
                done_why,
            });
        };
        let last_hog_mem = if mems.is_empty() {
            0.0
        } else {
            mems.iter().sum::<u64>() as f64 / mems.len() as f64
        };
        Ok(OneRun {
            run: MemHogRun {
                failed,
                first_hog_rep: first_rep,
                last_hog_rep: last,
                last_hog_mem,
                hog_end,
                hog_end_why,
                hog_period: Some((swap_at, ended_at)),
            },
            base_period,
            done_why,
        })
    }
}

/// Where in a wall-clock second the loop reads hashd: after hashd's status write (+0 ms),
/// halfway to the reporter's sample.
const TICK_AT: Duration =
    Duration::from_millis(crate::report::reporter::SAMPLE_AT.as_millis() as u64 / 2);

/// Sleeps to the next second's tick. A plain one-second sleep made each pass last a second
/// plus the pass's work and drift against the reporter. (The reports' hashd entry no longer
/// depends on this loop's phase: the reporter reads hashd's status itself, see
/// `report::reporter::LiveHashd`; under TCG with the hog swapping this loop woke up to 750 ms
/// late.)
fn sleep_tick() {
    std::thread::sleep(crate::util::until_next_mark(TICK_AT));
}

/// Keeps a cgroup in the reports' usages while it exists.
struct UnitGuard(Option<SharedReport>, &'static str);

impl UnitGuard {
    fn add(shared: Option<&SharedReport>, cg: &'static str) -> UnitGuard {
        if let Some(sh) = shared {
            if let Ok(mut s) = sh.lock() {
                if !s.units.iter().any(|u| u == cg) {
                    s.units.push(cg.to_string());
                }
            }
        }
        UnitGuard(shared.cloned(), cg)
    }
}

impl Drop for UnitGuard {
    fn drop(&mut self) {
        if let Some(sh) = &self.0 {
            if let Ok(mut s) = sh.lock() {
                s.units.retain(|u| u != self.1);
            }
        }
    }
}

/// Swap and system.slice's memory stalls, for the safety watch.
fn host_sample(env: &Env) -> watch::Sample {
    let mi = crate::system::sysinfo::read_meminfo(&env.hp).unwrap_or_default();
    let full = env
        .fs
        .as_ref()
        .and_then(|f| f.read_pressure("system.slice", PressureKind::Memory).ok())
        .and_then(|p| p.full)
        .map_or(0, |l| l.total);
    watch::Sample {
        now: crate::report::model::Timestamp::now().unix_secs(),
        swap_free: mi.get("SwapFree").copied().unwrap_or(0),
        swap_total: mi.get("SwapTotal").copied().unwrap_or(0),
        sys_mem_full_us: full,
    }
}

/// The once-a-second status (benches-doc/protection.md): load, latency, swap use, the hog's memory
/// and swap, workload/system memory and swap, and their full memory pressure.
fn status_line(
    env: &Env,
    s: &Sample,
    wl: &Workload,
    hog_mem: u64,
    hog_swap: u64,
    h: &watch::Sample,
) {
    let swap_pct = if h.swap_total > 0 {
        (h.swap_total - h.swap_free.min(h.swap_total)) as f64 / h.swap_total as f64
    } else {
        0.0
    };
    let slice = |cg: &str| {
        env.fs.as_ref().map_or((0, 0, 0.0), |f| {
            (
                f.read_memory_current(cg).unwrap_or(0),
                f.read_swap_current(cg).unwrap_or(0),
                f.read_pressure(cg, PressureKind::Memory)
                    .ok()
                    .and_then(|p| p.full)
                    .map_or(0.0, |l| l.avg10 / 100.0),
            )
        })
    };
    let (wm, ws, wp) = slice("workload.slice");
    let (sm, ss, sp) = slice("system.slice");
    let load = s.rps / wl.knobs.rps_max.max(1) as f64;
    let line = format!(
        "load:{}% lat:{} swap:{}% hog:{}/{} mem:{}/{} swap:{}/{} memp:{}%/{}%",
        format_pct(load),
        format_duration(s.lat),
        format_pct(swap_pct),
        format_size(hog_mem as f64),
        format_size(hog_swap as f64),
        format_size(wm as f64),
        format_size(sm as f64),
        format_size(ws as f64),
        format_size(ss as f64),
        format_pct(wp),
        format_pct(sp)
    );
    log::debug!("protection: {}", line);
    progress::status(line);
}
