//! hashd as the protected workload: started with bench.json's parameters in
//! `workload.slice/rd-hashd-A.service`, steered to a load and a footprint, and sampled once a
//! second into the reports' hashd entry. The reporter reads hashd's status itself as it builds
//! each report ([`crate::report::reporter::LiveHashd`]), as upstream's agent does; this loop's
//! copy only stands in when that status is missing or stale.
//!
//! When hashd's status goes stale (hashd stalled, e.g. on reclaim), the reports keep its last
//! completion count with zero throughput rather than an empty entry: a stalled workload then
//! shows as no progress, which is what it is, instead of as a gap the study would skip.

use super::record::{HASHD_CG, HASHD_SVC};
use crate::report::model::{HashdReport, RunnerState};
use crate::report::reporter::SharedReport;
use crate::system::bench_json::HashdKnobs;
use crate::system::cgroup::CgroupFs;
use crate::system::session::BenchHost;
use crate::workload::hashd::sizing::target::WARMUP_LAT_MULT;
use crate::workload::hashd::{Hashd, HashdOpts, Params};
use anyhow::{Context, Result};
use std::path::Path;
use std::time::Duration;

/// How long preparing the testfiles and starting may take.
const START_TIMEOUT: Duration = Duration::from_secs(1800);

/// A status this much older than the tick means hashd missed at least one of its seconds.
pub const STALL_SECS: f64 = 2.0;

/// One second's look at hashd.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub rps: f64,
    /// Control-percentile latency, seconds.
    pub lat: f64,
    pub nr_done: u64,
    /// memory.current and memory.swap.current of its cgroup.
    pub mem: u64,
    pub swap: u64,
    /// Whether hashd's status was fresh (a new second of hashd's own).
    pub fresh: bool,
    /// hashd's requests in flight and the latency controller's ceiling on them.
    pub concurrency: f64,
    pub concurrency_max: f64,
    /// Not fresh, and hashd's last fresh status is [`STALL_SECS`] or more old:
    /// hashd is stalled (the reports show it as no progress).
    pub stalled: bool,
    pub alive: bool,
}

pub struct Workload {
    hashd: Option<Hashd>,
    params: Params,
    pub knobs: HashdKnobs,
    fs: Option<CgroupFs>,
    shared: Option<SharedReport>,
    last: HashdReport,
    last_ts: f64,
    /// The latency target is [`WARMUP_LAT_MULT`] times looser (see [`Workload::set_loose`]).
    loose: bool,
    /// A warm-up has finished: hashd's caches are no longer cold.
    warmed: bool,
}

impl Workload {
    /// Lays out the testfiles under `<dir>/scratch/hashd-A`, drops the page cache, starts
    /// hashd at `knobs` (no load yet: [`Workload::set_load`]) and waits for its preload.
    pub fn start(
        host: &mut BenchHost,
        shared: Option<SharedReport>,
        dir: &Path,
        knobs: &HashdKnobs,
    ) -> Result<Workload> {
        let hdir = dir.join("scratch").join("hashd-A");
        std::fs::create_dir_all(&hdir).with_context(|| format!("creating {}", hdir.display()))?;
        let mut opts = HashdOpts::new(&hdir, knobs.mem_size);
        let share = host.mem().map(|m| m.share);
        opts.total_memory = share;
        opts.keep_cache = true;
        let params = Params {
            fake_cpu_load: knobs.fake_cpu_load,
            upstream_requests: knobs.upstream_requests,
            upstream_flow: knobs.upstream_flow,
            file_size_mean: knobs.hash_size as usize,
            chunk_pages: knobs.chunk_pages.max(1) as usize,
            rps_max: knobs.rps_max as u32,
            rps_target: 1,
            mem_frac: knobs.mem_frac,
            ..Params::default()
        };
        params.save(&opts.params)?;
        crate::logging::progress::step("preparing hashd's testfiles");
        Hashd::prepare(&opts).context("preparing hashd's testfiles")?;
        host.drop_caches()?;
        // A cold page cache would keep hashd below its load long after the warm-up: read in
        // what the sizing bench reads in too (half the memory share).
        opts.preload = share.unwrap_or(knobs.mem_size) / 2;
        let fs = if host.has_slices() {
            host.create_cgroup(HASHD_CG)?;
            Some(CgroupFs::new(host.hp()))
        } else {
            None
        };
        let mut hashd = Hashd::start(&opts, fs.as_ref().map(|f| (f, HASHD_CG)))?;
        crate::logging::progress::step("starting hashd");
        hashd
            .wait_running(START_TIMEOUT)
            .context("waiting for hashd to start")?;
        if let Some(sh) = &shared {
            let mut s = sh.lock().unwrap_or_else(|e| e.into_inner());
            s.state = RunnerState::Running;
            s.hashd_live[0] = Some(hashd.live_report(HASHD_SVC));
            if !s.units.iter().any(|u| u == HASHD_CG) {
                s.units.push(HASHD_CG.to_string());
            }
        }
        Ok(Workload {
            hashd: Some(hashd),
            params,
            knobs: knobs.clone(),
            fs,
            shared,
            last: HashdReport::default(),
            last_ts: 0.0,
            loose: false,
            warmed: false,
        })
    }

    fn hashd(&mut self) -> Result<&mut Hashd> {
        self.hashd.as_mut().context("hashd has stopped")
    }

    /// Hands hashd the parameters in effect.
    fn apply(&mut self) -> Result<()> {
        let mut p = self.params.clone();
        if self.loose {
            p.lat_target *= WARMUP_LAT_MULT;
        }
        self.hashd()?.set_params(&p)
    }

    /// Runs hashd at `load` of its `rps_max`.
    pub fn set_load(&mut self, load: f64) -> Result<()> {
        self.params.rps_target = ((self.knobs.rps_max as f64 * load).round() as u32).max(1);
        self.apply()
    }

    /// Loosens hashd's latency target [`WARMUP_LAT_MULT`] times, or restores it: a cold
    /// hashd misses the real target, and its latency controller then holds the requests in
    /// flight, and with them the refilling of its caches, down for tens of seconds.
    pub fn set_loose(&mut self, loose: bool) -> Result<()> {
        self.loose = loose;
        self.apply()
    }

    /// The real latency target (seconds), loosened or not.
    pub fn lat_target(&self) -> f64 {
        self.params.lat_target
    }

    /// No warm-up has finished yet: hashd's page cache and anon area are cold.
    pub fn cold(&self) -> bool {
        !self.warmed
    }

    /// A warm-up has finished.
    pub fn set_warmed(&mut self) {
        self.warmed = true;
    }

    /// Sets hashd's footprint to `size` bytes (a share of its `mem_size`).
    pub fn set_size(&mut self, size: f64) -> Result<()> {
        let frac = if self.knobs.mem_size > 0 {
            (size / self.knobs.mem_size as f64).clamp(0.0, 1.0)
        } else {
            self.knobs.mem_frac
        };
        self.params.mem_frac = frac;
        self.apply()
    }

    /// The footprint in effect, bytes.
    pub fn size(&self) -> f64 {
        self.knobs.mem_size as f64 * self.params.mem_frac
    }

    /// The target rate in effect.
    pub fn rps_target(&self) -> f64 {
        self.params.rps_target as f64
    }

    /// Reads hashd's status and cgroup, and puts hashd into the reports.
    pub fn tick(&mut self) -> Sample {
        let Some(h) = self.hashd.as_mut() else {
            return Sample::default();
        };
        let mut rep = h.report(HASHD_SVC);
        let alive = rep.svc.state == crate::report::model::SvcState::Running;
        // A report built from a status file carries its phase; a stale one is empty.
        let from_status = !rep.phase.is_empty();
        let status = h.status().ok();
        let ts = status.as_ref().map_or(0.0, |s| s.timestamp.unix_secs());
        let (concurrency, concurrency_max) = status
            .as_ref()
            .map_or((0.0, 0.0), |s| (s.stat.concurrency, s.stat.concurrency_max));
        let fresh = alive && from_status && ts > self.last_ts;
        let age = crate::report::model::Timestamp::now().unix_secs() - self.last_ts;
        let stalled = alive && !fresh && self.last_ts > 0.0 && age >= STALL_SECS;
        if fresh {
            self.last = rep.clone();
            self.last_ts = ts;
        } else if alive && !from_status {
            // Stale: no progress since the last fresh status.
            rep = HashdReport {
                rps: 0.0,
                ..self.last.clone()
            };
        }
        if let Some(sh) = &self.shared {
            if let Ok(mut s) = sh.lock() {
                s.hashd[0] = rep.clone();
            }
        }
        let (mem, swap) = match &self.fs {
            Some(fs) => (
                fs.read_memory_current(HASHD_CG).unwrap_or(0),
                fs.read_swap_current(HASHD_CG).unwrap_or(0),
            ),
            None => (0, 0),
        };
        Sample {
            rps: rep.rps,
            lat: rep.lat.ctl,
            nr_done: rep.nr_done,
            mem,
            swap,
            fresh,
            concurrency,
            concurrency_max,
            stalled,
            alive,
        }
    }

    /// Why hashd is gone (it was alive at the last tick but isn't now).
    pub fn end_reason(&mut self) -> String {
        let oom = self.fs.as_ref().map_or(0, |f| f.oom_kills(HASHD_CG));
        self.hashd
            .as_mut()
            .and_then(|h| h.ended(oom))
            .unwrap_or_else(|| "hashd stopped reporting".to_string())
    }

    /// Stops hashd and takes it out of the reports.
    pub fn stop(&mut self) -> Result<()> {
        self.clear_report();
        match self.hashd.take() {
            Some(h) => h.stop(),
            None => Ok(()),
        }
    }

    fn clear_report(&mut self) {
        if let Some(sh) = &self.shared {
            if let Ok(mut s) = sh.lock() {
                s.state = RunnerState::Idle;
                s.hashd[0] = HashdReport::default();
                s.hashd_live[0] = None;
                s.units.retain(|u| u != HASHD_CG);
            }
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
