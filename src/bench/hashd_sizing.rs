//! Running hashd benches inside the host session — what upstream's agent does for them: the
//! testfiles, a cold page cache, hashd in its own cgroup under workload.slice, the reports'
//! hashd entry and cgroup usages, and the memory bookkeeping.
//!
//! * [`run_sizing`] — the sizing bench (CPU saturation and/or the memory search) against a
//!   hashd in `workload.slice/rd-hashd-bench.service`; `storage` and `hashd-params` use it.
//! * [`ensure_mem_avail`] — measures how much memory a workload can really get on this host
//!   (`avail` of the memory profile) when it was only estimated.

use crate::bench::contract::api::{chose_upstream, prop, PropDesc, SpecError, ValueKind};
use crate::report::model::{HashdReport, RunnerState};
use crate::report::reporter::{ReporterHandle, SharedReport};
use crate::spec::Group;
use crate::system::bench_json::HashdKnobs;
use crate::system::cgroup::CgroupFs;
use crate::system::session::BenchHost;
use crate::units::format_size;
use crate::workload::hashd::sizing::{self, HashdTarget, MemSource, SizingOpts, SizingResult};
use crate::workload::hashd::{Hashd, HashdOpts, Params};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// hashd's cgroup during benches, and the name it goes by in the reports.
pub const BENCH_SVC: &str = "rd-hashd-bench.service";
pub const BENCH_CG: &str = "workload.slice/rd-hashd-bench.service";

/// How long preparing and preloading may take before hashd runs requests.
const START_TIMEOUT: Duration = Duration::from_secs(1800);

/// What to size and how.
#[derive(Debug, Clone)]
pub struct HashdBenchCfg {
    /// The 100 % footprint (hashd's `size`), bytes.
    pub size: u64,
    /// Given rps_max (required with fake CPU load); `None` measures it.
    pub rps_max: Option<u32>,
    pub fake_cpu: bool,
    pub hash_size: Option<u64>,
    pub chunk_pages: Option<u32>,
    pub log_bps: Option<u64>,
    /// Which of hashd's behaviours are upstream's (an upstream search takes no `mem_prior`).
    pub upstream: AsUpstream,
    /// Page cache to load before the first request, bytes.
    pub preload: u64,
    /// hashd's idea of the machine's memory (the profile's share).
    pub total_memory: Option<u64>,
    pub quick: bool,
    /// What earlier searches found (where the memory search starts, its known upper end);
    /// the default searches from the bottom.
    pub mem_prior: sizing::mem::Prior,
    /// Given mem_frac: the memory search is skipped.
    pub mem_frac: Option<f64>,
}

/// A finished sizing run.
#[derive(Debug, Clone)]
pub struct HashdBenchRun {
    pub sizing: SizingResult,
    /// What bench.json's hashd section gets.
    pub knobs: HashdKnobs,
}

/// The values of the `requests` knob: ours (the default) or upstream's way of making a request.
pub const REQUESTS: &[&str] = &["lean", "upstream"];

/// The values of the `flow` knob: ours (the default: paced, the integral banded) or upstream's
/// way of keeping requests in flight.
pub const FLOWS: &[&str] = &["ours", "upstream"];

/// The hashd knobs `storage` and `hashd-params` take.
pub const HASHD_KNOBS: [PropDesc; 6] = [
    prop("rps-max", ValueKind::Int, "maximum requests per second"),
    prop(
        "hash-size",
        ValueKind::Size,
        "mean size of the data hashed per request",
    ),
    prop("chunk-pages", ValueKind::Int, "pages per access chunk"),
    prop(
        "log-bps",
        ValueKind::Size,
        "log write bandwidth in bytes per second",
    ),
    prop(
        "requests",
        ValueKind::Enum(REQUESTS),
        "how hashd makes a request: lean (ours), or as upstream's rd-hashd",
    ),
    prop(
        "flow",
        ValueKind::Enum(FLOWS),
        "how hashd keeps requests in flight: ours (paced), or as upstream's rd-hashd",
    ),
];

/// The values of the `search` property: our memory search (the default) or upstream's.
pub const SEARCHES: &[&str] = &["ours", "upstream"];

/// How `storage` and `hashd-params` search for the footprint.
pub const SEARCH: PropDesc = prop(
    "search",
    ValueKind::Enum(SEARCHES),
    "how the memory footprint is searched: ours, or as upstream's rd-hashd (up, bisect, refine)",
);

/// Which of hashd's behaviours are upstream's rd-hashd's rather than ours: how it makes a request
/// (`requests`), keeps requests in flight (`flow`) and searches the footprint (`search`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsUpstream {
    pub requests: bool,
    pub flow: bool,
    pub search: bool,
}

impl AsUpstream {
    /// The three properties, each key behind `prefix` (`storage-` as iocost-qos forwards them).
    pub fn read(g: &Group, prefix: &str) -> Result<AsUpstream, SpecError> {
        let key = |k: &str| format!("{}{}", prefix, k);
        Ok(AsUpstream {
            requests: chose_upstream(g, &key("requests"), REQUESTS)?,
            flow: chose_upstream(g, &key("flow"), FLOWS)?,
            search: chose_upstream(g, &key("search"), SEARCHES)?,
        })
    }
}

/// A hashd knob (`rps-max`, `hash-size`, `chunk-pages`) must be positive when given: 0 is an
/// error naming what is accepted and what leaving it out does (`otherwise`).
pub fn positive_knob(
    g: &Group,
    key: &str,
    kind: ValueKind,
    otherwise: &str,
) -> Result<Option<u64>, SpecError> {
    // Also as forwarded by a parent bench (`storage-rps-max`).
    let accepted = if key.ends_with("rps-max") {
        "a positive request rate"
    } else if key.ends_with("chunk-pages") {
        "1 or more pages"
    } else {
        "a positive size"
    };
    match g.u64(key, kind)? {
        Some(0) => Err(g.err(format!(
            "{}=0 can't be used; give {}, or leave it out to {}",
            key, accepted, otherwise
        ))),
        v => Ok(v),
    }
}

/// Where hashd bench files live: `<dir>/scratch/hashd-bench` (testfiles, params, status, log).
pub fn bench_dir(dir: &Path) -> PathBuf {
    dir.join("scratch").join("hashd-bench")
}

/// The params a bench starts from: the defaults with the bench's overrides.
fn base_params(cfg: &HashdBenchCfg) -> Params {
    let mut p = Params {
        fake_cpu_load: cfg.fake_cpu,
        ..Params::default()
    };
    if let Some(h) = cfg.hash_size {
        p.file_size_mean = h as usize;
    }
    if let Some(c) = cfg.chunk_pages {
        p.chunk_pages = c as usize;
    }
    if let Some(l) = cfg.log_bps {
        p.log_bps = l;
    }
    p.upstream_requests = cfg.upstream.requests;
    p.upstream_flow = cfg.upstream.flow;
    p
}

/// Clears the reports' hashd entry and unit when the bench ends, however it ends.
struct ReportGuard(Option<SharedReport>);

impl ReportGuard {
    fn new(reporter: Option<&ReporterHandle>) -> Self {
        let shared = reporter.map(|r| r.shared().clone());
        if let Some(sh) = &shared {
            if let Ok(mut s) = sh.lock() {
                s.state = RunnerState::BenchHashd;
                if !s.units.iter().any(|u| u == BENCH_CG) {
                    s.units.push(BENCH_CG.to_string());
                }
            }
        }
        ReportGuard(shared)
    }
}

impl Drop for ReportGuard {
    fn drop(&mut self) {
        if let Some(sh) = &self.0 {
            if let Ok(mut s) = sh.lock() {
                s.state = RunnerState::Idle;
                s.hashd[0] = HashdReport::default();
                s.units.retain(|u| u != BENCH_CG);
            }
        }
    }
}

/// A hashd started for a bench: testfiles prepared, page cache dropped, running in
/// [`BENCH_CG`] (when the slices exist) past its preload.
struct Started {
    hashd: Hashd,
    mem: MemSource,
    base: Params,
    rotational: bool,
}

fn start(session: &mut BenchHost, dir: &Path, cfg: &HashdBenchCfg) -> Result<Started> {
    let hdir = bench_dir(dir);
    std::fs::create_dir_all(&hdir).with_context(|| format!("creating {}", hdir.display()))?;
    let mut opts = HashdOpts::new(&hdir, cfg.size);
    opts.keep_cache = true;
    opts.total_memory = cfg.total_memory;
    let base = base_params(cfg);
    base.save(&opts.params)?;
    let t = Instant::now();
    Hashd::prepare(&opts).context("preparing the testfiles")?;
    log::debug!("hashd testfiles ready in {:.1}s", t.elapsed().as_secs_f64());
    session.drop_caches()?;
    opts.preload = cfg.preload;
    let (cg, mem) = if session.has_slices() {
        session.create_cgroup(BENCH_CG)?;
        let fs = CgroupFs::new(session.hp());
        let mem = MemSource::Cgroup {
            fs: fs.clone(),
            cg: BENCH_CG.to_string(),
        };
        (Some(fs), mem)
    } else {
        (None, MemSource::Rss)
    };
    let mut hashd = Hashd::start(&opts, cg.as_ref().map(|fs| (fs, BENCH_CG)))?;
    hashd
        .wait_running(START_TIMEOUT)
        .context("waiting for hashd to start")?;
    // As upstream: the testfiles' device or the swap device (benches-doc/hashd.md).
    let rotational = session.scratch_dev().is_some_and(|d| d.rotational)
        || crate::system::sysreqs::swap_rotational(session.hp());
    Ok(Started {
        hashd,
        mem,
        base,
        rotational,
    })
}

/// Runs the sizing bench against a hashd in [`BENCH_CG`]. `watch` sees every sample (an error
/// from it aborts the bench).
pub fn run_sizing(
    session: &mut BenchHost,
    reporter: Option<&ReporterHandle>,
    dir: &Path,
    cfg: &HashdBenchCfg,
    watch: Option<sizing::Watch>,
) -> Result<HashdBenchRun> {
    let _report = ReportGuard::new(reporter);
    let st = start(session, dir, cfg)?;
    let mut target = HashdTarget::new(st.hashd, st.base.clone(), cfg.size, st.rotational);
    target.mem = st.mem;
    target.report = reporter.map(|r| (r.shared().clone(), BENCH_SVC.to_string()));
    target.watch = watch;
    let opts = SizingOpts {
        mem_prior: cfg.mem_prior,
        mem_frac: cfg.mem_frac,
        upstream_search: cfg.upstream.search,
        ..SizingOpts::new(cfg.rps_max, cfg.fake_cpu, cfg.quick)
    };
    let res = sizing::run(&mut target, &opts);
    target.hashd.stop()?;
    let sizing = res?;
    let knobs = knobs_of(&st.base, sizing.rps_max, sizing.size, sizing.mem_frac);
    Ok(HashdBenchRun { sizing, knobs })
}

/// The knobs when nothing is left to measure (rps_max and mem_frac both given): the sizing
/// run would only start hashd to read back what it was told.
pub fn given_knobs(cfg: &HashdBenchCfg) -> Option<HashdKnobs> {
    let (rps_max, mem_frac) = (cfg.rps_max?, cfg.mem_frac?);
    Some(knobs_of(&base_params(cfg), rps_max, cfg.size, mem_frac))
}

/// What bench.json keeps of a hashd started from `base` and sized to these figures.
fn knobs_of(base: &Params, rps_max: u32, size: u64, mem_frac: f64) -> HashdKnobs {
    HashdKnobs {
        hash_size: base.file_size_mean as u64,
        rps_max: rps_max as u64,
        mem_size: size,
        mem_frac,
        chunk_pages: base.chunk_pages as u64,
        fake_cpu_load: base.fake_cpu_load,
        upstream_requests: base.upstream_requests,
        upstream_flow: base.upstream_flow,
    }
}

/// How the available memory is measured: a hog grows in `step`s until the kernel starts
/// pushing its own pages out to swap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HogSteps {
    pub step: u64,
    /// Never more than this in all (the machine's memory plus half its swap).
    pub cap: u64,
}

impl HogSteps {
    pub fn new(total: u64, swap: u64) -> Self {
        HogSteps {
            step: (total / 64).max(16 << 20),
            cap: total + swap / 2,
        }
    }

    /// Whether to stop after a step: the hog's cgroup swaps more than a step (its pages no
    /// longer all fit), or the cap is reached.
    pub fn done(&self, held: u64, swapped: u64) -> bool {
        swapped > self.step || held + self.step > self.cap
    }
}

/// Measures `avail` when the memory profile only has the `MemAvailable` estimate. Upstream
/// runs a fake-CPU hashd far beyond memory for it and takes its cgroup's `memory.current`
/// once saturated (benches-doc/hashd.md): what a workload can get once the kernel has pushed out
/// everything else it can. We measure the same thing more directly and in seconds: with no
/// balloon, a memory hog in [`BENCH_CG`] (which may swap) grows step by step until the kernel
/// starts swapping the hog itself out; the highest `memory.current` of that cgroup is the
/// figure. The storage bench corrects it further with its retries.
pub fn ensure_mem_avail(session: &mut BenchHost) -> Result<()> {
    if !session.mem_avail_unmeasured() || !session.has_slices() {
        return Ok(());
    }
    let mi = crate::system::sysinfo::read_meminfo(session.hp())?;
    let total = mi.get("MemTotal").copied().unwrap_or(0);
    let swap = mi.get("SwapTotal").copied().unwrap_or(0);
    if total == 0 {
        anyhow::bail!("can't measure the available memory: no MemTotal");
    }
    session.set_balloon(0)?;
    session.create_cgroup(BENCH_CG)?;
    let fs = CgroupFs::new(session.hp());
    let steps = HogSteps::new(total, swap);
    log::info!(
        "measuring the memory a workload can get (a hog grows by {} up to {})",
        format_size(steps.step as f64),
        format_size(steps.cap as f64)
    );
    crate::logging::progress::step("measuring the memory a workload can get");
    let t = Instant::now();
    let exe = Path::new("/proc/self/exe");
    let mut hog = crate::system::mem::Balloon::start_exe(exe, Some((&fs, BENCH_CG)), 0)?;
    let mut high = 0u64;
    loop {
        hog.resize(hog.size() + steps.step)?;
        let cur = fs.read_memory_current(BENCH_CG).unwrap_or(0);
        let swapped = fs.read_swap_current(BENCH_CG).unwrap_or(0);
        high = high.max(cur);
        log::debug!(
            "mem_avail: hog {} memory.current {} swap {}",
            format_size(hog.size() as f64),
            format_size(cur as f64),
            format_size(swapped as f64)
        );
        if steps.done(hog.size(), swapped) {
            break;
        }
    }
    hog.stop()?;
    if high == 0 {
        anyhow::bail!(
            "can't measure the available memory: no memory.current readings of {}",
            BENCH_CG
        );
    }
    log::info!(
        "a workload can get {} of memory here ({:.1}s)",
        format_size(high as f64),
        t.elapsed().as_secs_f64()
    );
    session.update_mem_avail(high)?;
    Ok(())
}

/// The fake-CPU RPS for a memory share: round(share_GiB × 166.67) (2000 at profile 16).
pub fn dfl_rps_max(share: u64) -> u32 {
    ((share as f64 / (1u64 << 30) as f64 * 166.67).round() as u32).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hog_stops_when_it_swaps_or_at_the_cap() {
        let g = 1u64 << 30;
        let s = HogSteps::new(4 * g, 2 * g);
        assert_eq!((s.step, s.cap), (64 << 20, 5 * g));
        assert!(!s.done(g, 0));
        assert!(!s.done(g, s.step), "a step's worth of swap is noise");
        assert!(s.done(g, s.step + 1));
        assert!(s.done(5 * g - s.step / 2, 0));
        assert_eq!(HogSteps::new(256 << 20, 0).step, 16 << 20);
    }

    #[test]
    fn base_params_take_the_overrides() {
        let cfg = HashdBenchCfg {
            size: 1 << 30,
            rps_max: Some(100),
            fake_cpu: true,
            hash_size: Some(4096),
            chunk_pages: Some(8),
            log_bps: Some(1000),
            upstream: AsUpstream {
                requests: true,
                flow: true,
                search: false,
            },
            preload: 0,
            total_memory: None,
            quick: true,
            mem_prior: Default::default(),
            mem_frac: Some(0.25),
        };
        let p = base_params(&cfg);
        assert_eq!(
            (p.file_size_mean, p.chunk_pages, p.log_bps, p.fake_cpu_load),
            (4096, 8, 1000, true)
        );
        assert!(p.upstream_requests && p.upstream_flow);
        let k = given_knobs(&cfg).unwrap();
        assert_eq!(
            (k.hash_size, k.rps_max, k.mem_size, k.mem_frac),
            (4096, 100, 1 << 30, 0.25)
        );
        assert_eq!(
            (
                k.chunk_pages,
                k.fake_cpu_load,
                k.upstream_requests,
                k.upstream_flow
            ),
            (8, true, true, true)
        );
        let measure_rps = HashdBenchCfg {
            rps_max: None,
            fake_cpu: false,
            ..cfg.clone()
        };
        assert!(given_knobs(&measure_rps).is_none());
        let search = HashdBenchCfg {
            mem_frac: None,
            ..cfg
        };
        assert!(given_knobs(&search).is_none());
    }
}
