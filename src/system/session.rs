//! The host setup a `run` holds while benches that touch the system run: refusal on systemd
//! hosts, the restore journal (restoring leftovers of a killed run first) with its signal
//! handlers, the scratch device, the bench slices, the system requirements (fix pass and gate),
//! the memory profile and the balloon, `--swappiness`, this process in hostcritical.slice, the
//! benchmark parameters (`<dir>/bench.json` with `--iocost-from-sys` and `--iocost-qos` on top,
//! applied to io.cost at each job start). Dropping the session stops the balloon, moves this
//! process back to the cgroup it started in and restores every change; [`Session::finish`]
//! does the same and reports restore errors. The per-second reporter runs on top of it
//! (`report::reporter::start_on`), held by the runner and stopped before the session ends.

use crate::result::sysinfo::{MemInfo, Sysinfo};
use crate::system::bench_file::{BenchFile, BenchKnobs, DevIdent, HashdKnobs};
use crate::system::blockdev::{self, Scratch};
use crate::system::cgroup::{self, CgroupFs, Controller, DevNr, Slice};
use crate::system::iocost::{self, IoCostKnobs, QosOverride};
use crate::system::mem::{self, AvailSource, Balloon};
use crate::system::restore::Journal;
use crate::system::sysreqs::{self, Enforce, Evaluation, Host, SysReq};
use crate::system::HostPaths;
use crate::units::format_size;
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
    // Dropped (killed) before the journal restores its slice.
    balloon: Option<Balloon>,
    journal: Journal,
    hp: HostPaths,
    scratch: std::result::Result<Scratch, String>,
    mem: Option<MemInfo>,
    /// Where `mem.avail` came from; `Measured` once a hashd bench measured or corrected it.
    mem_src: Option<AvailSource>,
    eval: Evaluation,
    /// Whether the bench slices exist (balloon.slice for the balloon).
    slices: bool,
    /// The cgroup this process started in (relative to the cgroup2 root), when it was moved
    /// into hostcritical.slice.
    moved_from: Option<String>,
    swappiness: Option<u32>,
    /// The benchmark parameters (`None` without a scratch device).
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
        cgroup::check_no_systemd(&hp, opts.force)?;
        let journal = Journal::open(&opts.dir)?;
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
        let bench = load_bench_file(&hp, opts, &scratch)?;
        let (mem, mem_src) = if needs.mem_profile {
            let (m, src) = mem::resolve(&hp, opts.mem_profile, opts.mem_avail)?;
            log_mem(&m, src);
            (Some(m), Some(src))
        } else {
            (None, None)
        };
        let mut s = Session {
            balloon: None,
            journal,
            hp,
            scratch,
            mem,
            mem_src,
            eval: Evaluation {
                checks: Vec::new(),
                fixed: Vec::new(),
                report: Default::default(),
            },
            slices: false,
            moved_from: None,
            swappiness: opts.swappiness,
            bench,
            qos_ovr: opts.iocost_qos,
            io_enforced: false,
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
        cg.enable_controllers("", &Controller::ALL, false, &mut self.journal)?;
        let low = match &self.mem {
            Some(m) => cgroup::workload_mem_low(m.share, mem_margin),
            None => 0,
        };
        cg.setup_slices(&cgroup::bench_slices(low), &mut self.journal)
            .context("setting up the bench slices")?;
        self.slices = true;
        Ok(())
    }

    /// Moves this process into hostcritical.slice (as upstream runs the bench there), keeping
    /// where it came from for [`Session::leave_hostcritical`]. Best effort: a failure is logged.
    fn enter_hostcritical(&mut self) {
        if !self.slices {
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
                self.moved_from = Some(from);
            }
            Err(e) => log::warn!("can't move into {}: {}", Slice::HostCritical.name(), e),
        }
    }

    /// Moves this process back to the cgroup it started in, before the journal removes the
    /// slices (the journal would otherwise have to move it out of hostcritical.slice itself).
    fn leave_hostcritical(&mut self) {
        if let Some(from) = self.moved_from.take() {
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
        self.io_enforced = enforce.io;
        if let Some(b) = &mut self.bench {
            b.start_job()
                .context("writing the working parameter file")?;
        }
        self.write_iocost()
            .context("applying the io.cost parameters")?;
        let size = match (&self.mem, mem_profile) {
            (Some(m), true) => mem::balloon_size(m),
            _ => 0,
        };
        self.set_balloon(size)
    }

    /// Starts, resizes or stops the balloon.
    pub fn set_balloon(&mut self, size: u64) -> Result<()> {
        match (&mut self.balloon, size) {
            (None, 0) => Ok(()),
            (Some(_), 0) => {
                if let Some(b) = self.balloon.take() {
                    b.stop()?;
                }
                log::info!("balloon stopped");
                Ok(())
            }
            (Some(b), size) => b.resize(size),
            (None, size) => {
                let cg = CgroupFs::new(&self.hp);
                let b = Balloon::start(self.slices.then_some(&cg), size)?;
                log::info!(
                    "balloon (pid {}) holds {} in {}",
                    b.pid(),
                    format_size(b.size() as f64),
                    Slice::Balloon.name()
                );
                self.balloon = Some(b);
                Ok(())
            }
        }
    }

    /// The scratch device's `MAJ:MIN`, when it was found.
    fn scratch_devnr(&self) -> Option<DevNr> {
        self.scratch
            .as_ref()
            .ok()
            .map(|s| DevNr::new(s.dev.devnr.0, s.dev.devnr.1))
    }

    /// Writes the io.cost parameters of the working copy for the scratch device, through the
    /// journal, when the current job enforces io (spec §5.2): benchmarked parameters
    /// (`iocost_seq > 0`) give the model and QoS lines; without them a `--iocost-qos` goes on
    /// top of the kernel's current QoS; otherwise iocost is only enabled with the kernel's
    /// defaults. Without io.cost in the kernel (the IoCost requirement says so) nothing happens.
    fn write_iocost(&mut self) -> Result<()> {
        let (true, Some(bench), Some(devnr)) =
            (self.io_enforced, &self.bench, self.scratch_devnr())
        else {
            return Ok(());
        };
        if !self.hp.cgroup().join("io.cost.qos").exists() {
            log::warn!("not applying io.cost parameters: the kernel lacks io.cost");
            return Ok(());
        }
        let knobs = bench.knobs.clone();
        let hp = &self.hp;
        let j = &mut self.journal;
        let ovr = self.qos_ovr.filter(|o| !o.is_empty());
        if ovr.is_some_and(|o| o.off) {
            iocost::set_enable(hp, devnr, false, j)?;
            log::info!("io.cost off on {} (--iocost-qos)", devnr);
            return Ok(());
        }
        iocost::set_enable(hp, devnr, true, j)?;
        if knobs.iocost_seq > 0 {
            let m = iocost::write_model(hp, devnr, &knobs.iocost.model, j)?;
            let q = iocost::write_qos(hp, devnr, &knobs.iocost.qos, j)?;
            if m || q {
                log::info!(
                    "io.cost on {}: {} / {}",
                    devnr,
                    iocost::model_line(devnr, &knobs.iocost.model),
                    knobs.iocost.qos.rounded().line()
                );
            }
        } else if let Some(o) = ovr {
            let qos = o.apply(&iocost::read_qos(hp, devnr)?);
            if iocost::write_qos(hp, devnr, &qos, j)? {
                log::info!("io.cost QoS on {}: {} (--iocost-qos)", devnr, qos.line());
            }
        }
        Ok(())
    }

    /// The benchmark parameters the jobs use (`None` without a scratch device).
    pub fn bench_knobs(&self) -> Option<&BenchKnobs> {
        self.bench.as_ref().map(|b| &b.knobs)
    }

    /// The bench file, or an error naming what can't be done without it.
    fn bench_mut(&mut self, what: &str) -> Result<&mut BenchFile> {
        match &mut self.bench {
            Some(b) => Ok(b),
            None => anyhow::bail!(
                "can't {}: no scratch device ({})",
                what,
                self.scratch.as_ref().err().map_or("", |e| e.as_str())
            ),
        }
    }

    /// New io.cost parameters from a bench: into the working copy and rb-bench.json (and
    /// bench.json when `commit`), then into the kernel when the job enforces io.
    pub fn apply_iocost(&mut self, knobs: IoCostKnobs, commit: bool) -> Result<()> {
        self.bench_mut("apply io.cost parameters")?
            .apply_iocost(knobs, commit)?;
        self.write_iocost()
    }

    /// New hashd parameters from a bench, like [`Session::apply_iocost`].
    pub fn apply_hashd(&mut self, knobs: HashdKnobs, commit: bool) -> Result<()> {
        self.bench_mut("apply hashd parameters")?
            .apply_hashd(knobs, commit)
    }

    /// Back to the parameters of the current job's start (rb-bench.json and io.cost too).
    pub fn revert_knobs(&mut self) -> Result<()> {
        if let Some(b) = &mut self.bench {
            b.revert()?;
        }
        self.write_iocost()
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
        self.slices
    }

    /// Whether the memory profile's `avail` is only the quick estimate from `MemAvailable`,
    /// not yet measured by a hashd bench (nor given).
    pub fn mem_avail_unmeasured(&self) -> bool {
        self.mem_src == Some(AvailSource::Estimated)
    }

    /// A new `avail` for the memory profile, measured by a hashd bench or corrected by the
    /// storage bench: the profile is checked against it again (a usage error when its share no
    /// longer fits). The balloon is left to the caller.
    pub fn update_mem_avail(&mut self, avail: u64) -> Result<&MemInfo> {
        let Some(m) = &self.mem else {
            anyhow::bail!("no memory profile in this session");
        };
        let m = mem::with_avail(m, avail)?;
        log_mem(&m, AvailSource::Measured);
        self.mem_src = Some(AvailSource::Measured);
        Ok(self.mem.insert(m))
    }

    /// Creates cgroup `cg` (relative to the cgroup2 root) through the journal, so it goes away
    /// at the end even after a crash.
    /// Its parent gets the cpu, io and memory controllers for it.
    pub fn create_cgroup(&mut self, cg: &str) -> Result<()> {
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
        let p = self.hp.path("proc/sys/vm/drop_caches");
        cgroup::write_file(&p, "3").with_context(|| format!("writing 3 to {}", p.display()))?;
        Ok(())
    }

    pub fn balloon(&self) -> Option<&Balloon> {
        self.balloon.as_ref()
    }

    pub fn mem(&self) -> Option<&MemInfo> {
        self.mem.as_ref()
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

    /// The sysinfo of a job that requires `required` (and runs under the memory profile when
    /// `mem_profile`): requirements and their report from the last fix pass, host swappiness
    /// and zswap now, the memory profile and the scratch device's io.cost state.
    pub fn sysinfo(
        &self,
        bench_args: Option<serde_json::Value>,
        required: &[SysReq],
        mem_profile: bool,
    ) -> Result<Sysinfo> {
        let mut si = Sysinfo::current(bench_args);
        sysreqs::record_in(&mut si, required, &self.eval)?;
        si.swappiness = crate::system::sysinfo::swappiness(&self.hp).unwrap_or(si.swappiness);
        si.zswap_enabled = crate::system::sysinfo::zswap_enabled(&self.hp);
        if let (true, Some(m)) = (mem_profile, &self.mem) {
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
        let balloon = self.balloon.take().map(|b| b.stop());
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
        self.balloon = None;
        self.leave_hostcritical();
    }
}

/// `<dir>/bench.json` for the scratch device (a file for another device is a usage error),
/// with `--iocost-from-sys` and `--iocost-qos` on top. Without a scratch device there are no
/// parameters (and `--iocost-from-sys` is an error).
fn load_bench_file(
    hp: &HostPaths,
    opts: &SessionOpts,
    scratch: &std::result::Result<Scratch, String>,
) -> Result<Option<BenchFile>> {
    let s = match scratch {
        Ok(s) => s,
        Err(e) if opts.iocost_from_sys => {
            crate::usage_bail!("--iocost-from-sys needs the scratch device: {}", e)
        }
        Err(_) => return Ok(None),
    };
    let dev = DevIdent {
        model: s.dev.model.clone(),
        fwrev: s.dev.fwrev.clone(),
        size: s.dev.size,
    };
    let mut b = BenchFile::load(&opts.dir, dev)?;
    let devnr = DevNr::new(s.dev.devnr.0, s.dev.devnr.1);
    b.apply_overrides(hp, devnr, opts.iocost_from_sys, opts.iocost_qos.as_ref())?;
    if b.knobs.iocost_seq > 0 {
        log::info!(
            "io.cost parameters{}: {} / {}",
            if opts.iocost_from_sys {
                " (--iocost-from-sys)"
            } else {
                ""
            },
            iocost::model_line(devnr, &b.knobs.iocost.model),
            b.knobs.iocost.qos.rounded().line()
        );
    } else {
        log::debug!(
            "no benchmarked io.cost parameters in {}",
            BenchFile::bench_path(&opts.dir).display()
        );
    }
    Ok(Some(b))
}

/// The cgroup2 path of this process (`0::/a/b` → `a/b`) from /proc/self/cgroup.
fn own_cgroup(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().trim_start_matches('/').to_string())
}

fn log_mem(m: &MemInfo, src: AvailSource) {
    if m.profile == 0 {
        log::info!(
            "memory profile off: running at the machine's size ({})",
            format_size(m.share as f64)
        );
        return;
    }
    log::info!(
        "memory profile {}: avail={}{} share={} target={}",
        m.profile,
        format_size(m.avail as f64),
        match src {
            AvailSource::Estimated => " (estimated)",
            AvailSource::Measured => " (measured)",
            _ => "",
        },
        format_size(m.share as f64),
        format_size(m.target as f64)
    );
    if m.profile != crate::system::mem::DFL_MEM_PROFILE {
        log::warn!(
            "memory profile {} isn't the default {}: results aren't comparable with default runs",
            m.profile,
            crate::system::mem::DFL_MEM_PROFILE
        );
    }
}

/// A fake host for tests of code that needs a [`Session`]: a good host tree with the bench
/// slices' knob files, session options working in `<root>/work`, and every requirement.
#[cfg(test)]
pub(crate) mod testhost {
    use super::*;
    use crate::system::blockdev::testutil::put;
    use crate::system::sysreqs::testhost::good_host;

    /// The fake host with the knob files of the root and of pre-existing bench slices (the
    /// fake tree can't create knob files like the kernel does).
    pub(crate) fn host() -> (tempfile::TempDir, HostPaths) {
        let (t, hp) = good_host();
        let cg = hp.cgroup();
        put(&cg.join("cgroup.subtree_control"), "memory\n");
        for s in [
            "hostcritical.slice",
            "workload.slice",
            "system.slice",
            "balloon.slice",
        ] {
            for (k, v) in [
                ("cpu.weight", "100"),
                ("io.weight", "default 100"),
                ("memory.min", "0"),
                ("memory.low", "0"),
                ("memory.high", "max"),
                ("memory.swap.max", "max"),
            ] {
                put(&cg.join(s).join(k), &format!("{}\n", v));
            }
        }
        (t, hp)
    }

    pub(crate) fn opts(hp: &HostPaths) -> SessionOpts {
        SessionOpts {
            dir: hp.path("work"),
            dev: Some("nvme0n1".into()),
            force: false,
            mem_profile: None,
            mem_avail: None,
            mem_margin: 0.25,
            swappiness: None,
            rep_retention: 7 * 24 * 3600,
            keep_reports: false,
            clear_reports: false,
            iocost_from_sys: false,
            iocost_qos: None,
        }
    }

    pub(crate) fn needs() -> Needs {
        Needs {
            sysreqs: SysReq::ALL.to_vec(),
            mem_profile: true,
            enforce: Enforce::all(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testhost::{host, needs, opts};
    use super::*;
    use crate::system::blockdev::testutil::put;

    fn get(p: &std::path::Path) -> String {
        std::fs::read_to_string(p).unwrap().trim().to_string()
    }

    #[test]
    fn start_fixes_records_and_finish_restores() {
        let (_t, hp) = host();
        let sw = hp.path("proc/sys/vm/swappiness");
        let sched = hp.path("sys/block/nvme0n1/queue/scheduler");
        put(&sw, "10\n");
        put(&sched, "[mq-deadline] none\n");
        let s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
        assert_eq!(get(&sw), "60");
        assert_eq!(get(&sched), "none");
        assert!(hp.path("work/restore.json").exists());
        let si = s
            .sysinfo(None, &[SysReq::Swap, SysReq::IoSched], true)
            .unwrap();
        assert_eq!(si.sysreqs, vec!["Swap", "IoSched"]);
        assert!(si.sysreqs_missed.is_empty());
        let rep = si.sysreqs_report.as_ref().unwrap();
        assert_eq!(rep["scr_dev"], "nvme0n1");
        assert_eq!(rep["kernel_version"], "6.1.0-fake");
        // Upstream 2.2.6 needs both versions and only knows its own requirement names: ours
        // (`NoZswap`, `Psi`) are stored beside them.
        assert_eq!(rep["agent_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(rep["hashd_version"], env!("CARGO_PKG_VERSION"));
        let names = |v: &serde_json::Value| -> Vec<String> {
            match v {
                serde_json::Value::Array(a) => {
                    a.iter().map(|n| n.as_str().unwrap().to_string()).collect()
                }
                serde_json::Value::Object(m) => m.keys().cloned().collect(),
                _ => Vec::new(),
            }
        };
        let stored: Vec<String> = [&rep["satisfied"], &rep["missed"]]
            .into_iter()
            .flat_map(names)
            .collect();
        assert!(
            stored.iter().all(|n| sysreqs::upstream_knows(n)),
            "{:?}",
            stored
        );
        let ext: Vec<String> = [&rep["ext_satisfied"], &rep["ext_missed"]]
            .into_iter()
            .flat_map(names)
            .collect();
        assert!(ext.contains(&"Psi".to_string()), "{:?}", ext);
        let all = s.sysinfo(None, SysReq::ALL, true).unwrap();
        assert!(all.sysreqs.iter().all(|n| sysreqs::upstream_knows(n)));
        assert_eq!(all.ext_sysreqs, vec!["NoZswap", "Psi"]);
        assert_eq!(si.swappiness, 60);
        // The pre-existing slices got upstream's knobs, journaled.
        let sys_cpu = hp.cgroup().join("system.slice/cpu.weight");
        let bal_swap = hp.cgroup().join("balloon.slice/memory.swap.max");
        assert_eq!(get(&sys_cpu), "10");
        assert_eq!(get(&bal_swap), "0");
        // Profile off: the machine's size.
        assert_eq!(si.mem.profile, 0);
        assert_eq!(si.mem.share, 32 << 30);
        s.finish().unwrap();
        assert_eq!(get(&sw), "10");
        assert_eq!(get(&sched), "mq-deadline");
        assert_eq!(get(&sys_cpu), "100");
        assert_eq!(get(&bal_swap), "max");
        assert!(!hp.path("work/restore.json").exists());
    }

    #[test]
    fn missed_requirements_abort_unless_forced_and_restore() {
        let (_t, hp) = host();
        let sw = hp.path("proc/sys/vm/swappiness");
        put(&sw, "10\n");
        // Unfixable: no pgscan_anon.
        put(&hp.path("proc/vmstat"), "pgscan_file 1\n");
        let err = Session::start(hp.clone(), &opts(&hp), &needs())
            .err()
            .unwrap();
        assert!(err.downcast_ref::<crate::error::UsageError>().is_some());
        let msg = err.to_string();
        assert!(msg.contains("AnonBalance"), "{}", msg);
        assert_eq!(msg.lines().count(), 1);
        // The fix made before the gate was restored when the session was dropped.
        assert_eq!(get(&sw), "10");
        let mut o = opts(&hp);
        o.force = true;
        let s = Session::start(hp.clone(), &o, &needs()).unwrap();
        let si = s.sysinfo(None, &[SysReq::AnonBalance], false).unwrap();
        assert!(si.sysreqs_missed.contains_key("AnonBalance"));
        drop(s);
        assert_eq!(get(&sw), "10");
    }

    #[test]
    fn passive_jobs_get_no_fixes() {
        let (_t, hp) = host();
        let sw = hp.path("proc/sys/vm/swappiness");
        put(&sw, "10\n");
        let n = Needs {
            enforce: Enforce::from_passive(Some("mem")),
            ..needs()
        };
        let mut o = opts(&hp);
        o.force = true;
        let mut s = Session::start(hp.clone(), &o, &n).unwrap();
        assert_eq!(get(&sw), "10");
        assert!(s.evaluation().report.missed.contains("Swap"));
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!(get(&sw), "60");
        s.finish().unwrap();
        assert_eq!(get(&sw), "10");
    }

    #[test]
    fn swappiness_option_wins_over_the_fix_and_is_restored() {
        let (_t, hp) = host();
        let sw = hp.path("proc/sys/vm/swappiness");
        put(&sw, "10\n");
        let mut o = opts(&hp);
        o.swappiness = Some(30);
        let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
        assert_eq!(get(&sw), "30");
        // Every job's fix pass writes 60 again; the option is applied after it.
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!(get(&sw), "30");
        assert_eq!(s.sysinfo(None, &[], false).unwrap().swappiness, 30);
        s.finish().unwrap();
        assert_eq!(get(&sw), "10");
    }

    /// A bench.json for the fake scratch device (nvme0n1, 259:0).
    const BENCH_JSON: &str = r#"// written by resctl-demo
{
  "hashd_seq": 1,
  "iocost_seq": 2,
  "hashd": {"rps_max": 1005, "mem_size": 1000000, "mem_frac": 0.5},
  "iocost": {
    "devnr": "259:0",
    "model": {"rbps": 3235739592, "rseqiops": 343800, "rrandiops": 376893,
              "wbps": 2219232034, "wseqiops": 239923, "wrandiops": 241421},
    "qos": {"rpct": 95.0, "rlat": 12042, "wpct": 95.0, "wlat": 13664,
            "min": 60.004, "max": 100.0}
  },
  "iocost_dev_model": "Fake SSD 970",
  "iocost_dev_fwrev": "1B2QEXP7",
  "iocost_dev_size": 512110190592
}
"#;

    const MODEL_LINE: &str = "259:0 model=linear rbps=3235739592 rseqiops=343800 \
                              rrandiops=376893 wbps=2219232034 wseqiops=239923 wrandiops=241421";
    const KERNEL_MODEL: &str = "259:0 ctrl=auto model=linear rbps=1000 rseqiops=2000 \
                                rrandiops=3000 wbps=4000 wseqiops=5000 wrandiops=6000\n";

    /// The fake host with an io.cost.model and, when given, a bench.json in the work dir.
    fn iocost_host(bench_json: Option<&str>) -> (tempfile::TempDir, HostPaths) {
        let (t, hp) = host();
        put(&hp.cgroup().join("io.cost.model"), KERNEL_MODEL);
        if let Some(b) = bench_json {
            put(&hp.path("work/bench.json"), b);
        }
        (t, hp)
    }

    fn qos_file(hp: &HostPaths) -> String {
        get(&hp.cgroup().join("io.cost.qos"))
    }

    fn model_file(hp: &HostPaths) -> String {
        get(&hp.cgroup().join("io.cost.model"))
    }

    fn rb_bench(hp: &HostPaths) -> BenchKnobs {
        crate::system::bench_file::read_knobs(&hp.path("work/rb-bench.json"))
            .unwrap()
            .unwrap()
    }

    #[test]
    fn benchmarked_iocost_params_are_written_and_restored() {
        let (_t, hp) = iocost_host(Some(BENCH_JSON));
        let (model0, qos0) = (model_file(&hp), qos_file(&hp));
        let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
        // Nothing is written before a job starts.
        assert_eq!(model_file(&hp), model0);
        assert!(!hp.path("work/rb-bench.json").exists());
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!(model_file(&hp), MODEL_LINE);
        assert_eq!(
            qos_file(&hp),
            "259:0 rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 min=60.00 max=100.00"
        );
        let rb = rb_bench(&hp);
        assert_eq!((rb.iocost_seq, rb.hashd.rps_max), (2, 1005));
        assert_eq!(s.bench_knobs().unwrap().iocost.qos.min, 60.0);
        s.finish().unwrap();
        // The kernel had auto control: restoring says so (the real kernel then shows the
        // original lines again).
        assert_eq!(model_file(&hp), "259:0 ctrl=auto");
        assert_eq!(qos_file(&hp), "259:0 enable=1 ctrl=auto");
        assert_ne!(qos_file(&hp), qos0);
        // bench.json is never rewritten by a run that commits nothing.
        assert_eq!(
            std::fs::read_to_string(hp.path("work/bench.json")).unwrap(),
            BENCH_JSON
        );
    }

    #[test]
    fn without_bench_json_iocost_is_only_enabled() {
        let (_t, hp) = iocost_host(None);
        let qos = hp.cgroup().join("io.cost.qos");
        put(
            &qos,
            "259:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n",
        );
        // A passive=io start fixes nothing; the job then enforces io.
        let n = Needs {
            enforce: Enforce::from_passive(Some("io")),
            ..needs()
        };
        let mut o = opts(&hp);
        o.force = true;
        let mut s = Session::start(hp.clone(), &o, &n).unwrap();
        s.io_enforced = true;
        s.write_iocost().unwrap();
        assert_eq!(qos_file(&hp), "259:0 enable=1");
        assert_eq!(model_file(&hp), KERNEL_MODEL.trim());
        s.finish().unwrap();
        assert_eq!(qos_file(&hp), "259:0 enable=0 ctrl=auto");

        // Through prepare_job on a host where iocost is already on: nothing to write, and
        // rb-bench.json holds the defaults.
        let (_t, hp) = iocost_host(None);
        let (model0, qos0) = (model_file(&hp), qos_file(&hp));
        let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!((model_file(&hp), qos_file(&hp)), (model0, qos0));
        assert_eq!(rb_bench(&hp).iocost_seq, 0);
        s.finish().unwrap();
    }

    #[test]
    fn passive_io_jobs_leave_iocost_alone() {
        let (_t, hp) = iocost_host(Some(BENCH_JSON));
        let (model0, qos0) = (model_file(&hp), qos_file(&hp));
        let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
        s.prepare_job(Enforce::from_passive(Some("io")), false)
            .unwrap();
        assert_eq!((model_file(&hp), qos_file(&hp)), (model0, qos0));
        // The working copy is still handed over.
        assert_eq!(rb_bench(&hp).iocost_seq, 2);
        s.finish().unwrap();
    }

    #[test]
    fn iocost_qos_override_goes_on_top() {
        let (_t, hp) = iocost_host(Some(BENCH_JSON));
        let mut o = opts(&hp);
        o.iocost_qos = Some(QosOverride::parse("min=50,max=50").unwrap());
        let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!(model_file(&hp), MODEL_LINE);
        assert_eq!(
            qos_file(&hp),
            "259:0 rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 min=50.00 max=50.00"
        );
        assert_eq!(rb_bench(&hp).iocost.qos.max, 50.0);
        s.finish().unwrap();
        // The override never reaches bench.json.
        assert_eq!(
            std::fs::read_to_string(hp.path("work/bench.json")).unwrap(),
            BENCH_JSON
        );

        // Without benchmarked parameters it goes on top of the kernel's QoS.
        let (_t, hp) = iocost_host(None);
        let mut o = opts(&hp);
        o.iocost_qos = Some(QosOverride::parse("rpct=90,vrate=75").unwrap());
        let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!(
            qos_file(&hp),
            "259:0 rpct=90.00 rlat=250000 wpct=0.00 wlat=250000 min=75.00 max=75.00"
        );
        assert_eq!(model_file(&hp), KERNEL_MODEL.trim());
        s.finish().unwrap();
        assert_eq!(qos_file(&hp), "259:0 enable=1 ctrl=auto");
    }

    #[test]
    fn iocost_from_sys_uses_the_kernels_lines() {
        // bench.json's parameters are replaced by the kernel's.
        let (_t, hp) = iocost_host(Some(BENCH_JSON));
        let mut o = opts(&hp);
        o.iocost_from_sys = true;
        let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!(
            model_file(&hp),
            "259:0 model=linear rbps=1000 rseqiops=2000 rrandiops=3000 wbps=4000 \
             wseqiops=5000 wrandiops=6000"
        );
        assert_eq!(
            qos_file(&hp),
            "259:0 rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00"
        );
        let rb = rb_bench(&hp);
        assert_eq!((rb.iocost_seq, rb.iocost.model.rbps), (2, 1000));
        s.finish().unwrap();

        // No bench.json: from-sys counts as benchmarked (seq 1).
        let (_t, hp) = iocost_host(None);
        let mut o = opts(&hp);
        o.iocost_from_sys = true;
        let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
        s.prepare_job(Enforce::all(), false).unwrap();
        assert_eq!(rb_bench(&hp).iocost_seq, 1);
        assert!(model_file(&hp).starts_with("259:0 model=linear rbps=1000 "));
        s.finish().unwrap();
    }

    #[test]
    fn bench_json_for_another_device_is_a_usage_error() {
        let (_t, hp) = iocost_host(Some(&BENCH_JSON.replace("Fake SSD 970", "Other SSD")));
        let sw = hp.path("proc/sys/vm/swappiness");
        put(&sw, "10\n");
        let err = Session::start(hp.clone(), &opts(&hp), &needs())
            .err()
            .unwrap();
        assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_USAGE);
        let msg = err.to_string();
        assert_eq!(msg.lines().count(), 1, "{}", msg);
        assert!(
            msg.contains("try removing") && msg.contains("bench.json"),
            "{}",
            msg
        );
        // Refused before any change.
        assert_eq!(get(&sw), "10");
        assert!(!hp.path("work/rb-bench.json").exists());
    }

    #[test]
    fn applied_params_reach_the_kernel_and_revert_to_the_job_start() {
        let (_t, hp) = iocost_host(Some(BENCH_JSON));
        let qos = hp.cgroup().join("io.cost.qos");
        let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
        s.prepare_job(Enforce::all(), false).unwrap();
        // What the kernel shows after the writes (the fake tree keeps the written lines).
        let kernelize = || {
            put(
                &qos,
                &format!(
                    "259:0 enable=1 ctrl=user {}\n",
                    qos_file(&hp).split_once(' ').unwrap().1
                ),
            );
            let model = hp.cgroup().join("io.cost.model");
            put(
                &model,
                &format!(
                    "259:0 ctrl=user {}\n",
                    model_file(&hp).split_once(' ').unwrap().1
                ),
            );
        };
        kernelize();
        let mut new = s.bench_knobs().unwrap().iocost.clone();
        new.qos.rpct = 99.0;
        s.apply_iocost(new, false).unwrap();
        assert!(qos_file(&hp).contains("rpct=99.00"), "{}", qos_file(&hp));
        assert_eq!(rb_bench(&hp).iocost_seq, 3);
        kernelize();
        s.apply_hashd(HashdKnobs::default(), false).unwrap();
        assert_eq!(rb_bench(&hp).hashd_seq, 2);
        s.revert_knobs().unwrap();
        assert!(qos_file(&hp).contains("rpct=95.00"), "{}", qos_file(&hp));
        let rb = rb_bench(&hp);
        assert_eq!((rb.iocost_seq, rb.hashd_seq), (2, 1));
        s.finish().unwrap();
        assert_eq!(qos_file(&hp), "259:0 enable=1 ctrl=auto");
    }

    #[test]
    fn own_cgroup_from_proc_self_cgroup() {
        assert_eq!(own_cgroup("0::/\n").as_deref(), Some(""));
        assert_eq!(
            own_cgroup("1:name=systemd:/x\n0::/user.slice/a.scope\n").as_deref(),
            Some("user.slice/a.scope")
        );
        assert_eq!(own_cgroup("1:cpu:/\n"), None);
    }

    #[test]
    fn systemd_hosts_are_refused_without_force() {
        let (_t, hp) = host();
        std::fs::create_dir_all(hp.path("run/systemd/system")).unwrap();
        let err = Session::start(hp.clone(), &opts(&hp), &needs())
            .err()
            .unwrap();
        assert!(err.to_string().contains("systemd"), "{}", err);
        assert!(!hp.path("work/restore.json").exists());
    }

    #[test]
    fn too_big_a_profile_fails_before_any_change() {
        let (_t, hp) = host();
        let sw = hp.path("proc/sys/vm/swappiness");
        put(&sw, "10\n");
        let mut o = opts(&hp);
        o.mem_profile = Some(64);
        o.mem_avail = Some(30 << 30);
        let err = Session::start(hp.clone(), &o, &needs()).err().unwrap();
        assert!(err.to_string().contains("lower --mem-profile"), "{}", err);
        assert_eq!(get(&sw), "10");
    }
}
