//! The host setup a `run` holds while benches that touch the system run: refusal on systemd
//! hosts, the restore journal (restoring leftovers of a killed run first) with its signal
//! handlers, the scratch device, the bench slices, the system requirements (fix pass and gate),
//! the memory profile and the balloon, `--swappiness`, this process in hostcritical.slice, the
//! benchmark parameters (`<dir>/bench.json` with `--iocost-from-sys` and `--iocost-qos` on top,
//! applied to io.cost at each job start). Dropping the session stops the balloon, moves this
//! process back to the cgroup it started in and restores every change; [`Session::finish`]
//! does the same and reports restore errors. The per-second reporter runs on top of it
//! (`report::reporter::start_on`), held by the runner and stopped before the session ends.

mod bench_host;
mod knobs;
mod memory;

pub use bench_host::BenchHost;

use knobs::load_bench_json;
use memory::log_mem;

use crate::result::sysinfo::{MemProfile, Sysinfo};
use crate::system::bench_json::BenchFile;
use crate::system::blockdev::{self, Scratch};
use crate::system::cgroup::{self, CgroupFs, Controller, Slice};
use crate::system::iocost::QosOverride;
use crate::system::mem::{self, AvailSource, Balloon};
use crate::system::restore::Journal;
use crate::system::sysreqs::{self, Enforce, Evaluation, Host, SysReq};
use crate::system::systemd;
use crate::system::HostPaths;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// What the session needs from the global options.
#[derive(Debug, Clone)]
pub struct SessionOpts {
    pub dir: PathBuf,
    pub dev: Option<String>,
    pub force: bool,
    /// GiB; `None` = off.
    pub mem_profile: Option<u32>,
    pub mem_avail: Option<u64>,
    pub mem_margin: f64,
    /// `--swappiness`: written after every fix pass (journaled), so it wins over the Swap fix.
    pub swappiness: Option<u32>,
    /// `--rep-retention` (seconds), `--keep-reports`, `--clear-reports`.
    pub rep_retention: u64,
    pub keep_reports: bool,
    pub clear_reports: bool,
    /// `--iocost-from-sys`: the kernel's current io.cost model and QoS instead of bench.json's.
    pub iocost_from_sys: bool,
    /// `--iocost-qos`: QoS parameters on top of the benchmarked (or kernel) ones.
    pub iocost_qos: Option<QosOverride>,
    /// `--hashd-size`, `--hashd-cpu-load`: over the benchmarked hashd parameters.
    pub hashd: crate::system::bench_json::HashdOverride,
}

/// What the jobs of one invocation need from the system, summed up.
#[derive(Debug, Clone)]
pub struct Needs {
    /// The union of the jobs' required sets (the gate before the first job).
    pub sysreqs: Vec<SysReq>,
    /// Whether any job runs under the memory profile.
    pub mem_profile: bool,
    /// `passive=` of the first job: the fix pass at start respects it.
    pub enforce: Enforce,
}

pub struct Session {
    // Dropped first: the balloon is killed before the journal restores its slice.
    memory: MemState,
    journal: Journal,
    hp: HostPaths,
    scratch: std::result::Result<Scratch, String>,
    eval: Evaluation,
    cgroups: Placement,
    swappiness: Option<u32>,
    knobs: KnobState,
}

/// The memory profile and the balloon that enforces it (see `mem.rs`).
struct MemState {
    balloon: Option<Balloon>,
    info: Option<MemProfile>,
    /// Where `info.avail` came from; `Measured` once a hashd bench measured or corrected it.
    src: Option<AvailSource>,
}

/// Where this process and the benches sit in the cgroup tree.
struct Placement {
    /// Whether the bench slices exist (balloon.slice for the balloon).
    slices: bool,
    /// The cgroup this process started in (relative to the cgroup2 root), when it was moved
    /// into hostcritical.slice.
    moved_from: Option<String>,
    /// workload.slice's memory.low under the memory profile (what jobs enforcing mem get).
    workload_low: u64,
}

/// The benchmark parameters and how they reach the kernel (see `knobs.rs`).
struct KnobState {
    /// `None` without a scratch device.
    bench: Option<BenchFile>,
    qos_ovr: Option<QosOverride>,
    /// Whether the current job enforces io (its `passive=` doesn't include io): only then are
    /// the io.cost parameters written to the kernel.
    io_enforced: bool,
}

impl Session {
    /// Sets the host up for the jobs: see the module docs. Fails with a usage error (exit 2) on
    /// a systemd host, when the memory profile doesn't fit, or when required sysreqs are missed
    /// — each unless `--force` where that applies.
    pub fn start(hp: HostPaths, opts: &SessionOpts, needs: &Needs) -> Result<Session> {
        let hp = cgroup::managed(hp);
        if hp.systemd().is_some() {
            log::info!("systemd manages this host's cgroups: the bench slices are its units");
        }
        let journal = Journal::open_on(&opts.dir, &hp)?;
        journal.install_signal_handlers()?;
        let scratch = match blockdev::detect(&hp, &opts.dir, opts.dev.as_deref()) {
            Ok(s) => {
                for w in &s.warnings {
                    log::warn!("{}", w);
                }
                log::info!("scratch device {}: {}", s.dev.name, s.how);
                Ok(s)
            }
            Err(e) if e.downcast_ref::<crate::error::UsageError>().is_some() => return Err(e),
            Err(e) => Err(format!("{:#}", e)),
        };
        let bench = load_bench_json(&hp, opts, &scratch)?;
        let (mem, mem_src) = if needs.mem_profile {
            let (m, src) = mem::resolve(&hp, opts.mem_profile, opts.mem_avail)?;
            log_mem(&m, src);
            (Some(m), Some(src))
        } else {
            (None, None)
        };
        let mut s = Session {
            memory: MemState {
                balloon: None,
                info: mem,
                src: mem_src,
            },
            journal,
            hp,
            scratch,
            eval: Evaluation {
                checks: Vec::new(),
                fixed: Vec::new(),
                report: Default::default(),
            },
            cgroups: Placement {
                slices: false,
                moved_from: None,
                workload_low: 0,
            },
            swappiness: opts.swappiness,
            knobs: KnobState {
                bench,
                qos_ovr: opts.iocost_qos,
                io_enforced: false,
            },
        };
        s.setup_slices(opts.mem_margin)?;
        s.enter_hostcritical();
        s.evaluate(needs.enforce)?;
        s.eval.enforce_required(&needs.sysreqs, opts.force)?;
        Ok(s)
    }

    /// Enables cpu/io/memory at the root and creates the bench slices, when cgroup2 offers
    /// them (otherwise the Controllers requirement says why not).
    fn setup_slices(&mut self, mem_margin: f64) -> Result<()> {
        let cg = CgroupFs::new(&self.hp);
        let have = cg.controllers("").unwrap_or_default();
        if !cg.is_cgroup2() || !["cpu", "io", "memory"].iter().all(|c| have.contains(*c)) {
            log::warn!(
                "not setting up the bench slices: no cgroup2 with cpu, io and memory at {}",
                cg.root().display()
            );
            return Ok(());
        }
        let low = match &self.memory.info {
            Some(m) => cgroup::workload_mem_low(m.share, mem_margin),
            None => 0,
        };
        let layout = cgroup::bench_slices(low);
        if cg.under_systemd() {
            for cfg in &layout {
                self.setup_unit_slice(&cg, cfg)
                    .with_context(|| format!("setting up {} through systemd", cfg.slice.name()))?;
            }
        } else {
            cg.enable_controllers("", &Controller::ALL, false, &mut self.journal)?;
            cg.setup_slices(&layout, &mut self.journal)
                .context("setting up the bench slices")?;
        }
        self.cgroups.slices = true;
        self.cgroups.workload_low = low;
        Ok(())
    }

    /// One bench slice on a systemd host: a slice nobody defined or uses is started as a
    /// transient unit with the knobs as its properties (stopped at the end, leaving nothing);
    /// an existing one (system.slice) gets them at runtime, the old values journaled.
    fn setup_unit_slice(&mut self, cg: &CgroupFs, cfg: &cgroup::SliceConfig) -> Result<()> {
        let unit = cfg.slice.name();
        let props = cfg.unit_props();
        let sd = self.journal.systemd();
        let st = systemd::unit_state(sd.as_ref(), unit)?;
        if !st.active && !st.defined {
            let mut bus: Vec<(&str, systemd::BusValue)> = props.iter().map(|p| p.bus()).collect();
            bus.push((
                "Description",
                systemd::BusValue::Str(format!("resctl-bench: {}", unit)),
            ));
            self.journal
                .start_transient(unit, &bus, Some(cg.path(unit)))?;
            log::debug!("started transient {}", unit);
        } else {
            let changed = self.journal.set_unit_props(unit, &props)?;
            if !changed.is_empty() {
                log::info!(
                    "{}: {} (runtime, restored at the end)",
                    unit,
                    changed.join(" ")
                );
            }
        }
        Ok(())
    }

    /// Moves this process into hostcritical.slice (as upstream runs the bench there), keeping
    /// where it came from for [`Session::leave_hostcritical`]. Best effort: a failure is logged.
    fn enter_hostcritical(&mut self) {
        if !self.cgroups.slices {
            return;
        }
        let own = self.hp.path("proc/self/cgroup");
        let Some(from) = std::fs::read_to_string(&own)
            .ok()
            .and_then(|t| own_cgroup(&t))
        else {
            log::debug!(
                "not moving into hostcritical.slice: no cgroup2 entry in {}",
                own.display()
            );
            return;
        };
        let cg = CgroupFs::new(&self.hp);
        match cg.move_pid(Slice::HostCritical.name(), std::process::id()) {
            Ok(()) => {
                log::debug!("moved into {} from /{}", Slice::HostCritical.name(), from);
                self.cgroups.moved_from = Some(from);
            }
            Err(e) => log::warn!("can't move into {}: {}", Slice::HostCritical.name(), e),
        }
    }

    /// Moves this process back to the cgroup it started in, before the journal removes the
    /// slices (the journal would otherwise have to move it out of hostcritical.slice itself).
    fn leave_hostcritical(&mut self) {
        if let Some(from) = self.cgroups.moved_from.take() {
            let cg = CgroupFs::new(&self.hp);
            if let Err(e) = cg.move_pid(&from, std::process::id()) {
                log::warn!("can't move back to /{}: {}", from, e);
            }
        }
    }

    /// Checks every requirement, fixing what `enforce` allows through the journal; then
    /// `--swappiness`, which wins over the Swap fix (upstream applies it after the agent's).
    fn evaluate(&mut self, enforce: Enforce) -> Result<()> {
        let host = Host {
            hp: &self.hp,
            scratch: self.scratch.as_ref().map_err(|e| e.clone()),
        };
        self.eval = sysreqs::evaluate(&host, enforce, Some(&self.journal))?;
        if let Some(sw) = self.swappiness {
            let p = self.hp.path("proc/sys/vm/swappiness");
            let old = self
                .journal
                .set(&p, &sw.to_string())
                .context("applying --swappiness")?;
            if old.trim() != sw.to_string() {
                log::info!("swappiness {} -> {} (--swappiness)", old.trim(), sw);
            }
        }
        Ok(())
    }

    /// Before a job: the fix pass with the job's `passive=`, the benchmark parameters
    /// (rb-bench.json, and io.cost when the job enforces io), and the balloon sized for the job
    /// (`avail − share` under the memory profile, none otherwise).
    pub fn prepare_job(&mut self, enforce: Enforce, mem_profile: bool) -> Result<()> {
        self.evaluate(enforce)?;
        self.knobs.io_enforced = enforce.io;
        self.apply_mem_protection(enforce.mem)?;
        if let Some(b) = &mut self.knobs.bench {
            b.start_job()
                .context("writing the working parameter file")?;
        }
        self.write_iocost()
            .context("applying the io.cost parameters")?;
        let size = match (&self.memory.info, mem_profile) {
            (Some(m), true) => mem::balloon_size(m),
            _ => 0,
        };
        self.set_balloon(size)
    }

    /// workload.slice's memory.low: the profile's protection when the job enforces mem, none
    /// with `passive=mem` (upstream's agent drops it the same way).
    fn apply_mem_protection(&mut self, mem: bool) -> Result<()> {
        if !self.cgroups.slices {
            return Ok(());
        }
        let low = if mem { self.cgroups.workload_low } else { 0 };
        if self.hp.systemd().is_some() {
            let p = systemd::UnitProp::new("MemoryLow", Some(low / 4096 * 4096));
            let changed = self.journal.set_unit_props(Slice::Workload.name(), &[p])?;
            if !changed.is_empty() {
                log::info!(
                    "workload.slice {}{}",
                    changed.join(" "),
                    if mem { "" } else { " (passive=mem)" }
                );
            }
            return Ok(());
        }
        let path = CgroupFs::new(&self.hp)
            .path(Slice::Workload.name())
            .join("memory.low");
        let text = (low / 4096 * 4096).to_string();
        let old = self
            .journal
            .set(&path, &text)
            .with_context(|| format!("setting {}", path.display()))?;
        if old.trim() != text {
            log::info!(
                "workload.slice memory.low {} -> {}{}",
                old.trim(),
                text,
                if mem { "" } else { " (passive=mem)" }
            );
        }
        Ok(())
    }

    /// The host paths this session works on.
    pub fn hp(&self) -> &HostPaths {
        &self.hp
    }

    /// The scratch device, when it was found.
    pub fn scratch_dev(&self) -> Option<&blockdev::DevInfo> {
        self.scratch.as_ref().ok().map(|s| &s.dev)
    }

    /// Whether the bench slices (workload.slice, balloon.slice, …) are set up.
    pub fn has_slices(&self) -> bool {
        self.cgroups.slices
    }

    /// Creates cgroup `cg` (relative to the cgroup2 root) through the journal, so it goes away
    /// at the end even after a crash.
    /// Its parent gets the cpu, io and memory controllers for it.
    /// On a systemd host the cgroup is a transient scope systemd creates when the process is
    /// placed into it ([`CgroupFs::move_pid`]); here it is journaled, so that it is stopped at
    /// the end even after a crash.
    pub fn create_cgroup(&mut self, cg: &str) -> Result<()> {
        if self.hp.systemd().is_some() {
            let Some((_, scope)) = systemd::scope_for(cg, 0).filter(|_| cg.contains('/')) else {
                anyhow::bail!(
                    "{} is not a unit of the bench layout (SLICE/rd-NAME.service)",
                    cg
                );
            };
            return self.journal.record_transient(&scope);
        }
        let fs = CgroupFs::new(&self.hp);
        if let Some((parent, _)) = cg.rsplit_once('/') {
            fs.enable_controllers(parent, &Controller::ALL, false, &mut self.journal)
                .with_context(|| format!("enabling controllers in {}", parent))?;
        }
        fs.create(cg, &mut self.journal)
            .with_context(|| format!("creating cgroup {}", cg))?;
        Ok(())
    }

    /// Drops the clean page cache (`vm/drop_caches` = 3), so a bench starts from a cold cache.
    pub fn drop_caches(&self) -> Result<()> {
        // drop_caches only drops clean pages: freshly written testfiles would stay cached,
        // charged to the cgroup that wrote them (ours, protected).
        // SAFETY: sync(2) takes no arguments and cannot fail.
        unsafe { libc::sync() };
        let p = self.hp.path("proc/sys/vm/drop_caches");
        cgroup::write_file(&p, "3").with_context(|| format!("writing 3 to {}", p.display()))?;
        Ok(())
    }

    pub fn evaluation(&self) -> &Evaluation {
        &self.eval
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// For journaled changes made on the session's behalf (the reporter's tracefs instance).
    pub fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }

    /// `base` (the job's own part) with what the host says of a job that requires `required`
    /// (and runs under the memory profile when `mem_profile`): requirements and their report
    /// from the last fix pass, host swappiness and zswap now, the memory profile and the
    /// scratch device's io.cost state.
    pub fn sysinfo(
        &self,
        base: Sysinfo,
        required: &[SysReq],
        mem_profile: bool,
    ) -> Result<Sysinfo> {
        let mut si = base;
        sysreqs::record_in(&mut si, required, &self.eval)?;
        si.swappiness = crate::system::sysinfo::swappiness(&self.hp).unwrap_or(si.swappiness);
        si.zswap_enabled = crate::system::sysinfo::zswap_enabled(&self.hp);
        if let (true, Some(m)) = (mem_profile, &self.memory.info) {
            si.mem = m.clone();
        }
        if let Ok(s) = &self.scratch {
            let devnr = cgroup::DevNr::new(s.dev.devnr.0, s.dev.devnr.1);
            match crate::system::iocost::read_state(&self.hp, devnr) {
                Ok(st) => si.iocost = Some(serde_json::to_value(st)?),
                Err(e) => log::debug!("no io.cost state for {}: {}", devnr, e),
            }
        }
        Ok(si)
    }

    /// Stops the reporter and the balloon, moves this process back, and restores every host
    /// change; errors name what stayed changed.
    pub fn finish(mut self) -> Result<()> {
        let balloon = self.memory.balloon.take().map(|b| b.stop());
        self.leave_hostcritical();
        let restored = self.journal.restore_all();
        balloon.transpose()?;
        restored
    }
}

impl Drop for Session {
    /// The error path: the fields' own drops stop the balloon and restore the journal; before
    /// that this process must leave hostcritical.slice. (The reporter, which the runner holds,
    /// is stopped before the session goes.)
    fn drop(&mut self) {
        self.memory.balloon = None;
        self.leave_hostcritical();
    }
}

/// The cgroup2 path of this process (`0::/a/b` → `a/b`) from /proc/self/cgroup.
fn own_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().trim_start_matches('/').to_string())
}

#[cfg(test)]
pub(crate) mod testhost;

#[cfg(test)]
mod tests;
