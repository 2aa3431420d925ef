//! What the guest-side scenarios share: the host knobs they watch, running this binary on a
//! work directory as a user would, and looking at processes, slices and the result file.

use super::probe::Device;
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The four knobs the kill scenario watches, as the kernel shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Knobs {
    pub swappiness: String,
    /// The selected scheduler.
    pub scheduler: String,
    pub wbt_lat_usec: String,
    /// `enable=` of the device's io.cost.qos line (`0` without a line).
    pub iocost_enable: String,
    /// The device's whole io.cost.qos line (`ctrl=` and parameters), empty without one.
    pub iocost_qos: String,
}

pub(super) struct KnobPaths {
    swappiness: PathBuf,
    pub(super) scheduler: PathBuf,
    wbt: PathBuf,
    qos: PathBuf,
    maj_min: String,
}

impl KnobPaths {
    pub(super) fn new(dev: &Device) -> Self {
        let q = Path::new("/sys/block").join(&dev.name).join("queue");
        Self {
            swappiness: "/proc/sys/vm/swappiness".into(),
            scheduler: q.join("scheduler"),
            wbt: q.join("wbt_lat_usec"),
            qos: "/sys/fs/cgroup/io.cost.qos".into(),
            maj_min: dev.maj_min.clone(),
        }
    }

    pub(super) fn read(&self) -> Result<Knobs> {
        let sched = read(&self.scheduler)?;
        let qos = read(&self.qos)?;
        let line = qos
            .lines()
            .find(|l| l.split_whitespace().next() == Some(self.maj_min.as_str()));
        let enable = line
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|kv| kv.strip_prefix("enable="))
            })
            .unwrap_or("0")
            .to_string();
        Ok(Knobs {
            swappiness: read(&self.swappiness)?,
            scheduler: crate::system::restore::bracketed(&sched).unwrap_or(sched),
            wbt_lat_usec: read(&self.wbt)?,
            iocost_enable: enable,
            iocost_qos: line.unwrap_or("").trim().to_string(),
        })
    }

    /// Writes the knobs directly (no journal).
    pub(super) fn write(&self, k: &Knobs) -> Result<()> {
        write(&self.swappiness, &k.swappiness)?;
        write(&self.scheduler, &k.scheduler)?;
        write(&self.wbt, &k.wbt_lat_usec)?;
        write(
            &self.qos,
            &format!("{} enable={}", self.maj_min, k.iocost_enable),
        )
    }
}

pub(super) fn read(p: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(p)
        .with_context(|| format!("reading {}", p.display()))?
        .trim()
        .to_string())
}

pub(super) fn write(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).with_context(|| format!("writing {:?} to {}", v, p.display()))
}

/// `resctl-bench --dir WORK -r WORK/result.json ARGS…`, stdout captured, stderr passed on.
pub(super) fn bench_cmd(work: &Path, args: &[&str]) -> Command {
    bench_cmd_to(work, &work.join("result.json"), args)
}

/// `resctl-bench --dir WORK -r RESULT ARGS…`, stdout captured, stderr passed on.
pub(super) fn bench_cmd_to(work: &Path, result: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("/proc/self/exe");
    c.arg("--dir")
        .arg(work)
        .arg("-r")
        .arg(result)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}

pub(super) fn exists(p: &str) -> bool {
    Path::new(p).exists()
}

/// The slices a run creates (and must remove).
pub(super) const SLICES: [&str; 4] = [
    "/sys/fs/cgroup/hostcritical.slice",
    "/sys/fs/cgroup/workload.slice",
    "/sys/fs/cgroup/system.slice",
    "/sys/fs/cgroup/balloon.slice",
];

/// Processes whose command line has `arg` as an argument.
pub(super) fn procs_with_arg(arg: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{}/cmdline", pid))
                .map(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// The result file's entries (null while it doesn't parse: a run may be writing it).
pub(super) fn entries(work: &Path) -> Value {
    std::fs::read_to_string(work.join("result.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}
