//! Starting an `__io-job` from a bench and ending it: the child dies with us, is moved into
//! its cgroup before it issues any IO, and is ended by SIGTERM (it then writes what it measured)
//! or, if it doesn't stop, SIGKILL.

use super::Sample;
use crate::system::cgroup::CgroupFs;
use crate::workload::ioengine::job::IoJob;
use crate::workload::ioengine::result::IoResult;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running job. Dropping it kills it.
pub struct IoChild {
    name: String,
    child: Child,
    samples: PathBuf,
    result: PathBuf,
    status: Option<ExitStatus>,
}

impl IoChild {
    /// Starts `job` as `name` with its files in `dir`, in cgroup `cg` (relative to the
    /// cgroupfs root) when given; `exe` is this binary. It issues no IO before [`IoChild::go`].
    pub fn spawn(
        exe: &Path,
        name: &str,
        job: &IoJob,
        dir: &Path,
        cg: Option<(&CgroupFs, &str)>,
    ) -> Result<IoChild> {
        let file = |what: &str| dir.join(format!("{}-{}", name, what));
        let (job_file, samples, result) = (file("job.json"), file("samples"), file("result.json"));
        for f in [&samples, &result] {
            let _ = std::fs::remove_file(f);
        }
        std::fs::write(&job_file, serde_json::to_vec(job)?)
            .with_context(|| format!("writing {}", job_file.display()))?;
        let mut c = Command::new(exe);
        c.arg("__io-job")
            .arg("--job")
            .arg(&job_file)
            .arg("--samples")
            .arg(&samples)
            .arg("--result")
            .arg(&result)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        crate::util::proc::die_with_parent(&mut c, false);
        let mut child = c
            .spawn()
            .with_context(|| format!("starting the {} IO job", name))?;
        let placed = match cg {
            Some((fs, cgname)) => fs
                .move_pid(cgname, child.id())
                .with_context(|| format!("moving the {} IO job into {}", name, cgname)),
            None => Ok(()),
        };
        if let Err(e) = placed {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(IoChild {
            name: name.to_string(),
            child,
            samples,
            result,
            status: None,
        })
    }

    /// Lets the job start its IO.
    pub fn go(&mut self) -> Result<()> {
        let mut stdin = self.child.stdin.take().context("the IO job's stdin")?;
        stdin
            .write_all(b"go\n")
            .with_context(|| format!("starting the {} IO job", self.name))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status once the job has ended.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .with_context(|| format!("checking on the {} IO job", self.name))?;
        }
        Ok(self.status)
    }

    /// Asks the job to stop (SIGTERM: it writes what it measured) and waits up to `grace` for
    /// it, then kills it.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus> {
        if let Some(st) = self.try_wait()? {
            return Ok(st);
        }
        // SAFETY: kill(2) on our own child's pid, which we haven't reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(st) = self.try_wait()? {
                return Ok(st);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let st = self.child.wait().context("waiting for an IO job")?;
        self.status = Some(st);
        Ok(st)
    }

    /// The running totals it wrote, one a second (lines cut short by an end are skipped).
    pub fn samples(&self) -> Vec<Sample> {
        std::fs::read_to_string(&self.samples)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Its result, once it ended well.
    pub fn result(&mut self) -> Result<IoResult> {
        match self.try_wait()? {
            Some(st) if st.success() => {}
            Some(st) => bail!(
                "{}",
                crate::util::proc::end_reason(&format!("the {} IO job", self.name), st, 0)
            ),
            None => bail!("the {} IO job is still running", self.name),
        }
        let text = std::fs::read_to_string(&self.result)
            .with_context(|| format!("reading {}", self.result.display()))?;
        serde_json::from_str(&text).with_context(|| format!("reading {}", self.result.display()))
    }
}

impl Drop for IoChild {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
