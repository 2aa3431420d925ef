//! Starting the hog from a bench and ending it: the child process (`resctl-bench __mem-hog`)
//! dies with us, sits in its own cgroup when given one, and is ended through that cgroup's
//! `cgroup.kill` (everything in it, at once) or, without one, by SIGKILL.

use super::report::HogReport;
use crate::system::cgroup::{write_file, CgroupFs};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How to run the hog.
#[derive(Debug, Clone)]
pub struct HogOpts {
    /// The resctl-bench binary (`/proc/self/exe`).
    pub exe: PathBuf,
    /// Growth rate, bytes/s.
    pub wbps: u64,
    /// Read rate, bytes/s (0: no readers).
    pub rbps: u64,
    pub comp: f64,
    /// Its report file.
    pub report: PathBuf,
}

impl HogOpts {
    pub fn new(wbps: u64, report: impl Into<PathBuf>) -> Self {
        HogOpts {
            exe: PathBuf::from("/proc/self/exe"),
            wbps,
            rbps: 0,
            comp: 0.0,
            report: report.into(),
        }
    }
}

/// A running hog. Dropping it kills it.
pub struct MemHog {
    child: Child,
    cg: Option<(CgroupFs, String)>,
    report: PathBuf,
    status: Option<ExitStatus>,
}

impl MemHog {
    /// Starts the hog, moved into cgroup `cg` (relative to the cgroupfs root) when given.
    /// A stale report file is removed first.
    pub fn start(opts: &HogOpts, cg: Option<(&CgroupFs, &str)>) -> Result<MemHog> {
        let _ = std::fs::remove_file(&opts.report);
        let mut c = Command::new(&opts.exe);
        c.arg("__mem-hog")
            .arg("--wbps")
            .arg(opts.wbps.to_string())
            .arg("--rbps")
            .arg(opts.rbps.to_string())
            .arg("--comp")
            .arg(opts.comp.to_string())
            .arg("--report")
            .arg(&opts.report)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        crate::util::proc::die_with_parent(&mut c, false);
        let mut child = crate::workload::spawn_placed(&mut c, cg, "the memory hog")?;
        if let Some((fs, name)) = cg {
            // A kernel OOM kill takes the whole hog, never a part of it.
            let path = fs.path(name).join("memory.oom.group");
            if let Err(e) = write_file(&path, "1") {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e).context("setting memory.oom.group");
            }
        }
        Ok(MemHog {
            child,
            cg: cg.map(|(fs, n)| (fs.clone(), n.to_string())),
            report: opts.report.clone(),
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The hog's newest report, if it wrote one.
    pub fn report(&self) -> Option<HogReport> {
        HogReport::load(&self.report).ok()
    }

    /// The exit status once the hog is gone (killed by us, the kernel, or on its own).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .context("checking on the memory hog")?;
        }
        Ok(self.status)
    }

    /// Kills the hog (its whole cgroup when it has one) and waits for it.
    pub fn kill(&mut self) -> Result<ExitStatus> {
        if let Some(st) = self.try_wait()? {
            return Ok(st);
        }
        let via_cgroup = self.cg.as_ref().is_some_and(|(fs, name)| {
            let kill = fs.path(name).join("cgroup.kill");
            kill.exists() && write_file(&kill, "1").is_ok()
        });
        if !via_cgroup {
            let _ = self.child.kill();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.try_wait()? {
                return Ok(st);
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let st = self.child.wait().context("waiting for the memory hog")?;
                self.status = Some(st);
                return Ok(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for MemHog {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}
