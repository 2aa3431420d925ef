//! Starting and steering hashd from a bench: the child process (`resctl-bench __hashd`), its
//! params file and its status file.
//!
//! ```no_run
//! # use resctl_bench::workload::hashd::{Hashd, HashdOpts, Params};
//! # fn f() -> anyhow::Result<()> {
//! let opts = HashdOpts::new("/scratch/hashd", 8 << 30);
//! Hashd::prepare(&opts)?;                      // testfiles, with progress on the console
//! let mut hashd = Hashd::start(&opts, None)?;   // or Some((&cgroupfs, "workload.slice/…"))
//! hashd.set_params(&Params { rps_target: 1000, ..Params::default() })?;
//! let rep = hashd.report("hashd-A.service");    // HashdReport for the reporter
//! hashd.stop()?;
//! # Ok(()) }
//! ```

use super::params::Params;
use super::stats::{HashdStatus, PHASE_RUNNING};
use crate::report::model::{HashdReport, SvcReport, SvcState, Timestamp};
use crate::report::reporter::LiveHashd;
use crate::system::cgroup::CgroupFs;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A status older than this counts as stale.
pub const STATUS_MAX_AGE: f64 = 5.0;

/// Whether a status is older than [`STATUS_MAX_AGE`].
fn is_stale(st: &HashdStatus) -> bool {
    Timestamp::now().unix_secs() - st.timestamp.unix_secs() > STATUS_MAX_AGE
}

/// How to run hashd.
#[derive(Debug, Clone)]
pub struct HashdOpts {
    /// The resctl-bench binary (`/proc/self/exe`).
    pub exe: PathBuf,
    pub testfiles: PathBuf,
    pub params: PathBuf,
    pub report: PathBuf,
    pub log: Option<PathBuf>,
    pub log_size: Option<u64>,
    /// The 100 % footprint reference.
    pub size: u64,
    pub file_max_frac: f64,
    pub compressibility: f64,
    pub keep_cache: bool,
    pub total_memory: Option<u64>,
    /// Console summary interval (0: none).
    pub interval: u64,
    /// Bytes of testfiles to read into the page cache before running (`--preload`; 0: none).
    /// [`Hashd::wait_running`] returns after it.
    pub preload: u64,
}

impl HashdOpts {
    /// Files under `dir`: `testfiles/`, `params.json`, `report.json`, `hashd.log`.
    pub fn new(dir: impl AsRef<Path>, size: u64) -> Self {
        let dir = dir.as_ref();
        HashdOpts {
            exe: PathBuf::from("/proc/self/exe"),
            testfiles: dir.join("testfiles"),
            params: dir.join("params.json"),
            report: dir.join("report.json"),
            log: Some(dir.join("hashd.log")),
            log_size: None,
            size,
            file_max_frac: 0.25,
            compressibility: 0.0,
            keep_cache: false,
            total_memory: None,
            interval: 0,
            preload: 0,
        }
    }

    fn command(&self, prepare: bool) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("__hashd")
            .arg("--testfiles")
            .arg(&self.testfiles)
            .arg("--params")
            .arg(&self.params)
            .arg("--report")
            .arg(&self.report)
            .arg("--size")
            .arg(self.size.to_string())
            .arg("--file-max-frac")
            .arg(self.file_max_frac.to_string())
            .arg("--compressibility")
            .arg(self.compressibility.to_string())
            .arg("--interval")
            .arg(self.interval.to_string());
        if let Some(l) = &self.log {
            c.arg("--log").arg(l);
        }
        if let Some(s) = self.log_size {
            c.arg("--log-size").arg(s.to_string());
        }
        if let Some(m) = self.total_memory {
            c.arg("--total-memory").arg(m.to_string());
        }
        if self.keep_cache {
            c.arg("--keep-cache");
        }
        if prepare {
            c.arg("--prepare");
        } else if self.preload > 0 {
            c.arg("--preload").arg(self.preload.to_string());
        }
        c.stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit());
        crate::util::proc::die_with_parent(&mut c, false);
        c
    }
}

/// A running hashd.
pub struct Hashd {
    child: Child,
    report: PathBuf,
    params: PathBuf,
}

impl Hashd {
    /// Lays out (or checks and reuses) the testfiles and returns when done.
    pub fn prepare(opts: &HashdOpts) -> Result<()> {
        let status = opts
            .command(true)
            .status()
            .context("running hashd --prepare")?;
        if !status.success() {
            bail!("hashd --prepare failed ({})", status);
        }
        Ok(())
    }

    /// Starts hashd, moved into cgroup `cg` (relative to the cgroupfs root) when given. The
    /// params file is created with the defaults if missing. Stale status files are removed so
    /// [`Hashd::status`] never returns a previous run's numbers.
    pub fn start(opts: &HashdOpts, cg: Option<(&CgroupFs, &str)>) -> Result<Hashd> {
        let _ = std::fs::remove_file(&opts.report);
        let child = crate::workload::spawn_placed(&mut opts.command(false), cg, "hashd")?;
        Ok(Hashd {
            child,
            report: opts.report.clone(),
            params: opts.params.clone(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Why hashd ended, once it has (see [`crate::util::proc::end_reason`]); `oom_kills`: the
    /// kernel's OOM kills in its cgroup.
    pub fn ended(&mut self, oom_kills: u64) -> Option<String> {
        let st = self.child.try_wait().ok().flatten()?;
        Some(crate::util::proc::end_reason("hashd", st, oom_kills))
    }

    /// hashd's status file as last written.
    pub fn status(&self) -> Result<HashdStatus> {
        HashdStatus::load(&self.report)
    }

    /// Waits until hashd runs requests (past testfile preparation) or `timeout` passes.
    pub fn wait_running(&mut self, timeout: Duration) -> Result<HashdStatus> {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().context("checking on hashd")? {
                bail!("hashd exited ({})", st);
            }
            if let Ok(st) = self.status() {
                if st.phase == PHASE_RUNNING {
                    return Ok(st);
                }
            }
            if start.elapsed() >= timeout {
                bail!("hashd didn't start running within {:?}", timeout);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The [`HashdReport`] for a per-second report: from the status file when it is fresh,
    /// otherwise an empty one whose service state says why.
    pub fn report(&mut self, svc_name: &str) -> HashdReport {
        let alive = matches!(self.child.try_wait(), Ok(None));
        match self.status() {
            Ok(st) if alive && !is_stale(&st) => st.to_report(svc_name),
            _ => HashdReport {
                svc: SvcReport {
                    name: svc_name.to_string(),
                    state: if alive {
                        SvcState::Running
                    } else {
                        SvcState::Exited
                    },
                },
                ..HashdReport::default()
            },
        }
    }

    /// A reader of this hashd's status for the reporter, which calls it as each report is
    /// built ([`LiveHashd`]): the status as `svc_name`'s report entry while it is fresh.
    pub fn live_report(&self, svc_name: &str) -> LiveHashd {
        let (path, svc) = (self.report.clone(), svc_name.to_string());
        LiveHashd(Arc::new(move || {
            HashdStatus::load(&path)
                .ok()
                .filter(|st| !is_stale(st))
                .map(|st| st.to_report(&svc))
        }))
    }

    /// Replaces the params file atomically; hashd picks it up within about a second.
    pub fn set_params(&self, p: &Params) -> Result<()> {
        p.save(&self.params)
    }

    /// SIGTERM, then SIGKILL if hashd hasn't exited within 5 s.
    pub fn stop(mut self) -> Result<()> {
        self.terminate()
    }

    fn terminate(&mut self) -> Result<()> {
        if self.child.try_wait().ok().flatten().is_some() {
            return Ok(());
        }
        // SAFETY: signalling our own child by pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self
                .child
                .try_wait()
                .context("waiting for hashd")?
                .is_some()
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        log::warn!(
            "hashd (pid {}) ignored SIGTERM; killing it",
            self.child.id()
        );
        self.child.kill().context("killing hashd")?;
        self.child.wait().context("waiting for hashd")?;
        Ok(())
    }
}

impl Drop for Hashd {
    fn drop(&mut self) {
        if let Err(e) = self.terminate() {
            log::warn!("{:#}", e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn preload_is_passed_on_when_running_only() {
        let opts = HashdOpts {
            preload: 64 << 20,
            ..HashdOpts::new("/x", 1 << 30)
        };
        let run = args(&opts.command(false));
        let at = run.iter().position(|a| a == "--preload").unwrap();
        assert_eq!(run[at + 1], (64u64 << 20).to_string());
        assert!(!args(&opts.command(true)).contains(&"--preload".to_string()));
        let none = args(&HashdOpts::new("/x", 1 << 30).command(false));
        assert!(!none.contains(&"--preload".to_string()));
    }
}
