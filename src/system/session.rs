//! The host setup a `run` holds while benches that touch the system run: refusal on systemd
//! hosts, the restore journal (restoring leftovers of a killed run first) with its signal
//! handlers, the scratch device, the bench slices, the system requirements (fix pass and gate),
//! the memory profile and the balloon, `--swappiness`, this process in hostcritical.slice, and
//! the per-second reporter. Dropping the session stops the reporter and the balloon, moves this
//! process back to the cgroup it started in and restores every change; [`Session::finish`]
//! does the same and reports restore errors.

use crate::report::reporter::{Reporter, ReporterConfig, ReporterHandle, ScratchDev};
use crate::result::sysinfo::{MemInfo, Sysinfo};
use crate::system::blockdev::{self, Scratch};
use crate::system::cgroup::{self, CgroupFs, Controller, Slice};
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
}

impl SessionOpts {
    pub fn from_config(cfg: &crate::config::Config) -> Self {
        Self {
            dir: cfg.dir.clone(),
            dev: cfg.dev.clone(),
            force: cfg.force,
            mem_profile: cfg.mem_profile,
            mem_avail: cfg.mem_avail,
            mem_margin: cfg.mem_margin,
            swappiness: cfg.swappiness,
            rep_retention: cfg.rep_retention,
            keep_reports: cfg.keep_reports,
            clear_reports: cfg.clear_reports,
        }
    }
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
    // Stopped first: its tracefs instance is journaled, and it reads the slices.
    reporter: Option<ReporterHandle>,
    // Dropped (killed) before the journal restores its slice.
    balloon: Option<Balloon>,
    journal: Journal,
    hp: HostPaths,
    scratch: std::result::Result<Scratch, String>,
    mem: Option<MemInfo>,
    eval: Evaluation,
    /// Whether the bench slices exist (balloon.slice for the balloon).
    slices: bool,
    /// The cgroup this process started in (relative to the cgroup2 root), when it was moved
    /// into hostcritical.slice.
    moved_from: Option<String>,
    swappiness: Option<u32>,
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
        let mem = if needs.mem_profile {
            let (m, src) = mem::resolve(&hp, opts.mem_profile, opts.mem_avail)?;
            log_mem(&m, src);
            Some(m)
        } else {
            None
        };
        let mut s = Session {
            reporter: None,
            balloon: None,
            journal,
            hp,
            scratch,
            mem,
            eval: Evaluation {
                checks: Vec::new(),
                fixed: Vec::new(),
                report: Default::default(),
            },
            slices: false,
            moved_from: None,
            swappiness: opts.swappiness,
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

    /// Starts the per-second reporter on the scratch device with the best IO latency source
    /// (tracefs block events in a journaled instance, else /proc/diskstats means). Reports go
    /// to `<dir>/report.d`.
    pub fn start_reporter(&mut self, opts: &SessionOpts) -> Result<()> {
        if self.reporter.is_some() {
            return Ok(());
        }
        let dev = self.scratch.as_ref().ok().map(|s| ScratchDev {
            name: s.dev.name.clone(),
            devnr: cgroup::DevNr::new(s.dev.devnr.0, s.dev.devnr.1),
        });
        let iolat = match &dev {
            Some(d) => match crate::report::diskstats::open_best_journaled(
                &self.hp,
                (d.devnr.maj, d.devnr.min),
                &mut self.journal,
            ) {
                Ok(src) => Some(src),
                Err(e) => {
                    log::warn!("reports carry no IO latencies: {:#}", e);
                    None
                }
            },
            None => None,
        };
        let mut rcfg = ReporterConfig::new(self.hp.clone(), &opts.dir);
        rcfg.dev = dev;
        rcfg.iolat = iolat;
        rcfg.retention = opts.rep_retention;
        rcfg.keep_reports = opts.keep_reports;
        rcfg.clear_reports = opts.clear_reports;
        let h = Reporter::start(rcfg)?;
        log::info!(
            "reporter: writing per-second reports to {}",
            h.reports_dir().display()
        );
        self.reporter = Some(h);
        Ok(())
    }

    /// The running reporter: its reports directory, the state and workload stats it reports.
    pub fn reporter(&self) -> Option<&ReporterHandle> {
        self.reporter.as_ref()
    }

    /// Before a job: the fix pass with the job's `passive=`, and the balloon sized for the job
    /// (`avail − share` under the memory profile, none otherwise).
    pub fn prepare_job(&mut self, enforce: Enforce, mem_profile: bool) -> Result<()> {
        self.evaluate(enforce)?;
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
        si.set_sysreqs(required, &self.eval)?;
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
        self.stop_reporter();
        let balloon = self.balloon.take().map(|b| b.stop());
        self.leave_hostcritical();
        let restored = self.journal.restore_all();
        balloon.transpose()?;
        restored
    }

    fn stop_reporter(&mut self) {
        if let Some(h) = self.reporter.take() {
            match h.stop() {
                Ok(st) => log::debug!(
                    "reporter: {} reports written, {} seconds skipped, {} write errors",
                    st.written,
                    st.skipped,
                    st.write_errors
                ),
                Err(e) => log::warn!("{:#}", e),
            }
        }
    }
}

impl Drop for Session {
    /// The error path: the fields' own drops stop the balloon and restore the journal; before
    /// that the reporter must stop and this process must leave hostcritical.slice.
    fn drop(&mut self) {
        self.stop_reporter();
        self.balloon = None;
        self.leave_hostcritical();
    }
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
            _ => "",
        },
        format_size(m.share as f64),
        format_size(m.target as f64)
    );
    if m.profile != crate::config::DFL_MEM_PROFILE {
        log::warn!(
            "memory profile {} isn't the default {}: results aren't comparable with default runs",
            m.profile,
            crate::config::DFL_MEM_PROFILE
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::blockdev::testutil::put;
    use crate::system::sysreqs::testhost::good_host;

    /// The fake host with the knob files of the root and of pre-existing bench slices (the
    /// fake tree can't create knob files like the kernel does).
    fn host() -> (tempfile::TempDir, HostPaths) {
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

    fn opts(hp: &HostPaths) -> SessionOpts {
        SessionOpts {
            dir: hp.path("work"),
            dev: Some("nvme0n1".into()),
            force: false,
            mem_profile: None,
            mem_avail: None,
            mem_margin: 0.25,
            swappiness: None,
            rep_retention: crate::report::reporter::DFL_RETENTION,
            keep_reports: false,
            clear_reports: false,
        }
    }

    fn needs() -> Needs {
        Needs {
            sysreqs: SysReq::ALL.to_vec(),
            mem_profile: true,
            enforce: Enforce::all(),
        }
    }

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
