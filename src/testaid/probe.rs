//! `__probe`: guest-side checks the VM tests run in one boot — io.cost knobs of the scratch
//! device, the root io.stat, active swap, 4 KiB random-read IOPS — printed as one JSON object.
//! The pieces (`scratch_device`, `crate::workload::randread`) are plain functions for later
//! reuse.

use crate::cli::testaid::ProbeArgs;
use crate::workload::randread::{randread, RandRead};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;

/// The scratch block device of a `resctl-bench vm` guest (serial `resctl-*`).
#[derive(Debug, Clone, Serialize)]
pub struct Device {
    pub name: String,
    pub maj_min: String,
    pub serial: String,
    pub rotational: bool,
    pub size: u64,
}

fn read_trim(p: impl AsRef<Path>) -> Result<String> {
    let p = p.as_ref();
    crate::util::fs::read_trim(p).with_context(|| format!("reading {}", p.display()))
}

pub fn scratch_device() -> Result<Device> {
    for ent in std::fs::read_dir("/sys/block").context("reading /sys/block")? {
        let dir = ent?.path();
        let serial = std::fs::read_to_string(dir.join("serial")).unwrap_or_default();
        if !serial.trim().starts_with("resctl-") {
            continue;
        }
        return Ok(Device {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            maj_min: read_trim(dir.join("dev"))?,
            serial: serial.trim().to_string(),
            rotational: read_trim(dir.join("queue/rotational"))? == "1",
            size: read_trim(dir.join("size"))?.parse::<u64>().unwrap_or(0) * 512,
        });
    }
    bail!("no scratch device (a block device with serial resctl-*) found")
}

/// Writes `MAJ:MIN knobs` to a root io.cost file and returns the device's line read back.
pub fn write_iocost(file: &str, dev: &Device, knobs: &str) -> Result<String> {
    let path = Path::new("/sys/fs/cgroup").join(file);
    let line = format!("{} {}", dev.maj_min, knobs);
    std::fs::write(&path, &line)
        .with_context(|| format!("writing {:?} to {}", line, path.display()))?;
    let back = read_trim(&path)?;
    back.lines()
        .find(|l| l.starts_with(&format!("{} ", dev.maj_min)))
        .map(str::to_string)
        .with_context(|| format!("{} has no line for {}", path.display(), dev.maj_min))
}

#[derive(Debug, Default, Serialize)]
struct Report {
    #[serde(skip_serializing_if = "Option::is_none")]
    device: Option<Device>,
    #[serde(skip_serializing_if = "Option::is_none")]
    iocost_qos: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    iocost_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    io_stat: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    swaps: Option<String>,
    /// Active swap areas with the MAJ:MIN of the device holding each (for a swap file, the
    /// device of its filesystem).
    #[serde(skip_serializing_if = "Option::is_none")]
    swap_devices: Option<Vec<(String, String)>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    randread: Option<RandRead>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroup_controllers: Option<String>,
}

pub fn run(a: &ProbeArgs) -> Result<()> {
    if let Some(script) = &a.sh {
        let st = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .status()
            .context("running /bin/sh")?;
        std::process::exit(st.code().unwrap_or(128 + st.signal().unwrap_or(0)));
    }
    if let Some(p) = &a.write_file {
        std::fs::write(p, &a.content).with_context(|| format!("writing {}", p.display()))?;
    }
    let raw = a.stdout.is_some() || a.stderr.is_some();
    if let Some(s) = &a.stdout {
        let mut o = std::io::stdout().lock();
        o.write_all(s.as_bytes())?;
        o.flush()?;
    }
    if let Some(s) = &a.stderr {
        let mut e = std::io::stderr().lock();
        e.write_all(s.as_bytes())?;
        e.flush()?;
    }
    if !raw {
        let mut r = Report::default();
        let dev = scratch_device();
        if let Some(k) = &a.iocost_model {
            r.iocost_model = Some(write_iocost(
                "io.cost.model",
                dev.as_ref().map_err(clone_err)?,
                k,
            )?);
        }
        if let Some(k) = &a.iocost_qos {
            r.iocost_qos = Some(write_iocost(
                "io.cost.qos",
                dev.as_ref().map_err(clone_err)?,
                k,
            )?);
        }
        if let Some(secs) = a.randread {
            let target = match &a.randread_target {
                Some(t) => t.clone(),
                None => Path::new("/dev").join(&dev.as_ref().map_err(clone_err)?.name),
            };
            r.randread = Some(randread(&target, Duration::from_secs_f64(secs), a.jobs)?);
        }
        if a.io_stat {
            r.io_stat = Some(read_trim("/sys/fs/cgroup/io.stat")?);
        }
        if a.swaps {
            let swaps = read_trim("/proc/swaps")?;
            r.swap_devices = Some(swap_devices(&swaps));
            r.swaps = Some(swaps);
        }
        r.cgroup_controllers = std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
            .ok()
            .map(|s| s.trim().to_string());
        r.device = dev.ok();
        println!("{}", serde_json::to_string_pretty(&r)?);
    }
    if let Some(code) = a.exit {
        std::process::exit(code);
    }
    Ok(())
}

/// (path, MAJ:MIN of the backing device) of each /proc/swaps entry.
pub fn swap_devices(proc_swaps: &str) -> Vec<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    proc_swaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(|path| {
            let dev = match std::fs::metadata(path) {
                Ok(m) if m.file_type().is_file() => {
                    format!("{}:{}", libc::major(m.dev()), libc::minor(m.dev()))
                }
                Ok(m) => format!("{}:{}", libc::major(m.rdev()), libc::minor(m.rdev())),
                Err(_) => "?".into(),
            };
            (path.to_string(), dev)
        })
        .collect()
}

fn clone_err(e: &anyhow::Error) -> anyhow::Error {
    anyhow::anyhow!("{:#}", e)
}
