//! The `vm` options: parsed and checked (profiles, disk latency, sizes), and the paths the
//! guest command names (result file, work directory, reports) mapped for sharing.

use crate::system::DFL_DIR;
use crate::units::parse;
use crate::vm::args::VmArgs;
use crate::vm::profiles::DiskLimits;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// Validated options.
#[derive(Debug, Clone)]
pub struct Opts {
    pub mem: u64,
    pub cpus: u32,
    pub disk_size: u64,
    pub swap_size: u64,
    pub limits: DiskLimits,
    pub accel: String,
    pub boot_timeout: Duration,
    pub timeout: Option<Duration>,
    /// Longest silence of a running guest (no heartbeat) before it counts as stalled.
    pub stall_timeout: Option<Duration>,
    /// Guest command arguments (with `--dir` added when given to `vm` itself).
    pub args: Vec<String>,
    pub scratch_dir: PathBuf,
    /// Host directory for the guest's `<--dir>/report.d` (with `-r FILE`).
    pub reports_dir: Option<PathBuf>,
    /// `--scsi-disk`: the extra SCSI disk's model and firmware revision.
    pub scsi_disk: Option<(String, String)>,
    /// `--ssh-port` and `--ssh-key`: the host port forwarded to the guest's SSH server and the
    /// keys root's logins take.
    pub ssh: Option<(u16, String)>,
}

/// `--ssh-port` and `--ssh-key`, checked: a port free on 127.0.0.1 and public keys.
fn ssh(a: &VmArgs) -> Result<Option<(u16, String)>> {
    let (port, key) = match (&a.ssh_port, &a.ssh_key) {
        (None, None) => return Ok(None),
        (Some(_), None) => crate::usage_bail!(
            "vm: --ssh-port needs --ssh-key FILE (the public key root's SSH logins take)"
        ),
        (None, Some(_)) => crate::usage_bail!("vm: --ssh-key needs --ssh-port PORT"),
        (Some(p), Some(k)) => (p, k),
    };
    if a.init != "systemd" {
        crate::usage_bail!(
            "vm: --ssh-port needs --init systemd (the SSH server is a systemd service)"
        );
    }
    let port = match port.parse::<u16>() {
        Ok(p) if p > 0 => p,
        _ => crate::usage_bail!(
            "vm: --ssh-port {:?} is not a port (accepted: 1 to 65535)",
            port
        ),
    };
    if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", port)) {
        crate::usage_bail!(
            "vm: --ssh-port {}: 127.0.0.1:{} can't be used ({})",
            port,
            port,
            e
        );
    }
    let text = std::fs::read_to_string(key)
        .map_err(|e| crate::error::UsageError(format!("vm: --ssh-key {}: {}", key.display(), e)))?;
    let keys: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let is_key = |l: &str| {
        l.split_whitespace().count() >= 2
            && ["ssh-", "ecdsa-", "sk-"].iter().any(|t| l.starts_with(t))
    };
    if keys.is_empty() || !keys.iter().all(|l| is_key(l)) {
        crate::usage_bail!(
            "vm: --ssh-key {}: not a public key file (accepted: lines such as `ssh-ed25519 AAAA… comment`, \
             as in an OpenSSH .pub file)",
            key.display()
        );
    }
    Ok(Some((port, keys.join("\n") + "\n")))
}

/// `--scsi-disk MODEL[:REV]`: what QEMU's SCSI disk can present (SCSI INQUIRY's 16-byte
/// product and 4-byte revision, printable ASCII; no comma, which QEMU's options would split).
pub(super) fn scsi_disk(s: &str) -> std::result::Result<(String, String), String> {
    let (model, rev) = s.split_once(':').unwrap_or((s, "1.0"));
    let ok = |v: &str, max: usize| {
        !v.trim().is_empty()
            && v.len() <= max
            && v.chars().all(|c| c.is_ascii_graphic() || c == ' ')
            && !v.contains(',')
    };
    if !(ok(model, 16) && ok(rev, 4)) {
        return Err(format!(
            "{:?} is not a SCSI disk's model and revision (accepted: MODEL[:REV], the model 1 to \
             16 and the revision 1 to 4 printable ASCII characters without a comma, e.g. \
             \"RB Test HDD:2.5+\")",
            s
        ));
    }
    Ok((model.to_string(), rev.to_string()))
}

use crate::error::option_error as bad;

/// `--disk-latency`: whole milliseconds, 0 for none (nbdkit's delay filter counts in ms).
pub(super) fn disk_latency_ms(s: &str) -> std::result::Result<u32, String> {
    let secs = parse::parse_duration(s)?;
    let ms = (secs * 1000.0).round();
    if secs == 0.0 || (1.0..=10_000.0).contains(&ms) && (secs * 1000.0 - ms).abs() < 1e-6 {
        Ok(ms as u32)
    } else {
        Err(format!(
            "{:?} is not a per-IO latency (accepted: 0 for none, or 1ms to 10s in whole milliseconds)",
            s
        ))
    }
}

/// The value of the option `-<short>`/`--<long>` in resctl-bench arguments, if any.
pub(super) fn opt_arg(args: &[String], short: &str, long: &str) -> Option<String> {
    let (short, long) = (format!("-{}", short), format!("--{}", long));
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if *a == short || *a == long {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix(&format!("{}=", long)) {
            return Some(v.to_string());
        }
        if let Some(v) = a
            .strip_prefix(&short)
            .filter(|v| !v.is_empty() && !a.starts_with("--"))
        {
            return Some(v.to_string());
        }
    }
    None
}

/// The `-d/--dir` value in resctl-bench arguments, if any.
pub fn dir_arg(args: &[String]) -> Option<String> {
    opt_arg(args, "d", "dir")
}

/// The `-r/--result` value in resctl-bench arguments, if any.
pub fn result_arg(args: &[String]) -> Option<String> {
    opt_arg(args, "r", "result")
}

/// `p` with `.` and `..` resolved lexically.
pub(super) fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Where the guest's per-second reports go on the host: the result file's default report
/// directory (`<dir of FILE>/<stem>-report.d`, where `study` looks), when the guest command has
/// `-r FILE` and FILE lands on the host (inside the shared directory, not on the scratch disk).
pub(super) fn host_reports_dir(args: &[String], cwd: &Path, scratch_dir: &Path) -> Option<PathBuf> {
    let result = result_arg(args).filter(|r| !r.is_empty())?;
    let result = normalize(&cwd.join(result));
    let dir = crate::result::pack::default_reports_dir(&result);
    if dir.starts_with(cwd) && !dir.starts_with(scratch_dir) {
        Some(dir)
    } else {
        log::warn!(
            "vm: {} is not in the shared directory {}: it and its per-second reports stay in the guest",
            result.display(),
            cwd.display()
        );
        None
    }
}

impl Opts {
    /// `dir` is the `--dir` given to `vm` itself (passed on to the command).
    pub fn new(dir: Option<&str>, a: &VmArgs, cwd: &Path) -> Result<Self> {
        let (mem, cpus, disk_size, swap_size) = machine(a)?;
        let limits = disk_limits(a)?;
        if !["auto", "kvm", "tcg"].contains(&a.accel.as_str()) {
            crate::usage_bail!(
                "--accel {:?} is not an accelerator (accepted: auto, kvm, tcg)",
                a.accel
            );
        }
        let (boot_timeout, timeout, stall_timeout) = timeouts(a)?;
        let (args, scratch_dir, reports_dir) = placement(dir, a, cwd)?;
        let scsi_disk = a
            .scsi_disk
            .as_deref()
            .map(scsi_disk)
            .transpose()
            .map_err(|e| bad("scsi-disk", e))?;
        let ssh = ssh(a)?;
        Ok(Self {
            mem,
            cpus,
            disk_size,
            swap_size,
            limits,
            accel: a.accel.clone(),
            boot_timeout,
            timeout,
            stall_timeout,
            args,
            scratch_dir,
            reports_dir,
            scsi_disk,
            ssh,
        })
    }
}

/// Memory, CPUs, scratch disk and swap file sizes (whole MiB).
fn machine(a: &VmArgs) -> Result<(u64, u32, u64, u64)> {
    let mem = parse::parse_size(&a.mem).map_err(|e| bad("mem", e))? / MIB * MIB;
    if mem < 256 * MIB {
        crate::usage_bail!("--mem {:?} is too small (at least 256M)", a.mem);
    }
    let cpus = match &a.cpus {
        Some(s) => match s.trim().parse::<u32>() {
            Ok(n) if (1..=256).contains(&n) => n,
            _ => crate::usage_bail!("--cpus {:?} is not a CPU count (accepted: 1-256)", s),
        },
        None => std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
    };
    let disk_size = parse::parse_size(&a.disk_size).map_err(|e| bad("disk-size", e))? / MIB * MIB;
    let swap_size = match &a.swap_size {
        Some(s) => parse::parse_size(s).map_err(|e| bad("swap-size", e))? / MIB * MIB,
        None => mem / 2 / MIB * MIB,
    };
    if swap_size > 0 && swap_size < MIB {
        crate::usage_bail!("--swap-size is too small (0 for none, or at least 1M)");
    }
    if disk_size < swap_size + 256 * MIB {
        crate::usage_bail!(
            "--disk-size {:?} is too small: it must hold the {} MiB swap file plus at least 256M",
            a.disk_size,
            swap_size / MIB
        );
    }
    Ok((mem, cpus, disk_size, swap_size))
}

/// The scratch disk's limits: a profile, or explicit IOPS, bandwidth and latency.
fn disk_limits(a: &VmArgs) -> Result<DiskLimits> {
    let iops = a
        .disk_iops
        .as_deref()
        .map(|s| parse::parse_int(s).map_err(|e| bad("disk-iops", e)))
        .transpose()?;
    let bps = a
        .disk_bps
        .as_deref()
        .map(|s| parse::parse_size(s).map_err(|e| bad("disk-bps", e)))
        .transpose()?;
    let latency_ms = a
        .disk_latency
        .as_deref()
        .map(|s| disk_latency_ms(s).map_err(|e| bad("disk-latency", e)))
        .transpose()?;
    DiskLimits::resolve(a.disk_profile.as_deref(), iops, bps, latency_ms)
}

/// The boot timeout, the command's timeout and the heartbeat's stall timeout.
fn timeouts(a: &VmArgs) -> Result<(Duration, Option<Duration>, Option<Duration>)> {
    let dur = |opt: &str, s: &str| -> Result<Duration> {
        let secs = parse::parse_duration(s).map_err(|e| bad(opt, e))?;
        // No guest boots or runs a command in under a second: a shorter value is a slip, most
        // often a lone `m`, which is milliseconds (`28m` for `28min`).
        if secs < 1.0 {
            let hint = match s.trim().strip_suffix('m') {
                Some(n) => format!("; a lone `m` is milliseconds, `{}min` is minutes", n),
                None => String::new(),
            };
            return Err(bad(
                opt,
                format!("{:?} is under a second{} (accepted: 1s or more)", s, hint),
            ));
        }
        Ok(Duration::from_secs_f64(secs.min(1e9)))
    };
    let boot_timeout = dur("boot-timeout", &a.boot_timeout)?;
    let timeout = a
        .timeout
        .as_deref()
        .map(|s| dur("timeout", s))
        .transpose()?;
    let stall_timeout = match parse::parse_duration(&a.stall_timeout) {
        Ok(0.0) => None,
        Ok(secs) if secs >= 2.0 * crate::vm::protocol::HEARTBEAT_EVERY.as_secs_f64() && secs < 1e9 => {
            Some(Duration::from_secs_f64(secs))
        }
        Ok(_) => {
            return Err(bad(
                "stall-timeout",
                format!(
                    "{:?} is too short: the guest sends a heartbeat every {}s (accepted: 10s or more, or 0 for off)",
                    a.stall_timeout,
                    crate::vm::protocol::HEARTBEAT_EVERY.as_secs()
                ),
            ))
        }
        Err(e) => return Err(bad("stall-timeout", e)),
    };
    Ok((boot_timeout, timeout, stall_timeout))
}

/// The guest command's arguments (with `--dir` where the scratch disk goes), the scratch
/// directory and where the per-second reports land on the host.
fn placement(
    dir: Option<&str>,
    a: &VmArgs,
    cwd: &Path,
) -> Result<(Vec<String>, PathBuf, Option<PathBuf>)> {
    // The scratch disk goes where the guest command's --dir points.
    let mut args = a.args.clone();
    let dir = match (dir_arg(&args), dir) {
        (Some(d), _) => d,
        (None, Some(d)) => {
            // No command (`--ssh-port` alone): the scratch disk still goes there.
            if !args.is_empty() {
                args.splice(0..0, ["--dir".to_string(), d.to_string()]);
            }
            d.to_string()
        }
        (None, None) => String::new(),
    };
    let scratch_dir = if dir.is_empty() {
        PathBuf::from(DFL_DIR)
    } else {
        cwd.join(dir)
    };
    if scratch_dir == Path::new("/") || scratch_dir == cwd {
        crate::usage_bail!(
            "--dir {}: the scratch disk can't be mounted over / or the shared working directory",
            scratch_dir.display()
        );
    }
    let reports_dir = host_reports_dir(&args, cwd, &scratch_dir);
    Ok((args, scratch_dir, reports_dir))
}
