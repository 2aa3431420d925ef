//! The scratch device: the whole-disk block device backing `--dir` (or the one `--dev` names),
//! and what sysfs tells about it (model, firmware, size, scheduler, wbt, rotational).
//!
//! The path's `st_dev` leads to `/sys/dev/block/MAJ:MIN` when it is a real block device. When it
//! is an anonymous device (btrfs, device-mapper stacks seen through some filesystems), the mount
//! source from `/proc/self/mountinfo` is resolved instead (`/dev/root` through the kernel command
//! line). A partition is mapped to the disk holding it.

use crate::error::UsageError;
use crate::system::HostPaths;
use crate::util::fs::read_trim;
use anyhow::{bail, Context, Result};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// One line of /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub devnr: (u32, u32),
    /// Root of the mount within its filesystem.
    pub root: String,
    pub mount_point: PathBuf,
    /// Per-mount options (`rw,nosuid,relatime`).
    pub mount_opts: String,
    pub fstype: String,
    pub source: String,
    /// Filesystem (super block) options (`rw,nsdelegate,memory_recursiveprot`).
    pub super_opts: String,
}

impl MountEntry {
    pub fn has_super_opt(&self, opt: &str) -> bool {
        self.super_opts.split(',').any(|o| o == opt)
    }
}

/// Undoes the octal escapes (`\040` for space) mountinfo uses in paths.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses `MAJ:MIN`.
pub fn parse_devnr(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// Parses the text of /proc/self/mountinfo; `origin` names it in errors.
pub fn parse_mountinfo(text: &str, origin: &str) -> Result<Vec<MountEntry>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || anyhow::anyhow!("{}:{}: malformed mountinfo line {:?}", origin, i + 1, line);
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields.iter().position(|f| *f == "-").ok_or_else(bad)?;
        if sep < 6 || fields.len() < sep + 3 {
            return Err(bad());
        }
        out.push(MountEntry {
            devnr: parse_devnr(fields[2]).ok_or_else(bad)?,
            root: unescape(fields[3]),
            mount_point: PathBuf::from(unescape(fields[4])),
            mount_opts: fields[5].to_string(),
            fstype: fields[sep + 1].to_string(),
            source: unescape(fields[sep + 2]),
            super_opts: fields.get(sep + 3).copied().unwrap_or("").to_string(),
        });
    }
    Ok(out)
}

pub fn read_mountinfo(hp: &HostPaths) -> Result<Vec<MountEntry>> {
    let p = hp.path("proc/self/mountinfo");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    parse_mountinfo(&text, &p.to_string_lossy())
}

/// Major and minor of a `dev_t` (glibc's encoding).
pub fn split_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// `path` if it exists, else its nearest existing ancestor.
pub fn nearest_existing(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    loop {
        if p.exists() {
            return p;
        }
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent.to_path_buf(),
            _ => return PathBuf::from("."),
        }
    }
}

/// The whole disk a block device name belongs to (`nvme0n1p2` → `nvme0n1`), through
/// `/sys/class/block/NAME`.
pub fn whole_disk_of_name(hp: &HostPaths, name: &str) -> Result<String> {
    let p = hp.path("sys/class/block").join(name);
    whole_disk_of_sysdir(&p).with_context(|| format!("block device {:?}", name))
}

/// The whole disk behind `/sys/dev/block/MAJ:MIN`.
pub fn whole_disk_of_devnr(hp: &HostPaths, devnr: (u32, u32)) -> Result<String> {
    let p = hp
        .path("sys/dev/block")
        .join(format!("{}:{}", devnr.0, devnr.1));
    whole_disk_of_sysdir(&p).with_context(|| format!("block device {}:{}", devnr.0, devnr.1))
}

fn whole_disk_of_sysdir(p: &Path) -> Result<String> {
    let dir =
        std::fs::canonicalize(p).with_context(|| format!("no sysfs entry {}", p.display()))?;
    let dir = if dir.join("partition").exists() {
        dir.parent()
            .map(Path::to_path_buf)
            .with_context(|| format!("{} has no parent disk", dir.display()))?
    } else {
        dir
    };
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{} has no name", dir.display()))
}

/// Follows symlinks of `dev_path` (an absolute host path like `/dev/mapper/vg-lv`) inside the
/// host root and returns the final file name.
pub fn resolve_dev_name(hp: &HostPaths, dev_path: &str) -> String {
    let mut cur = hp.path(dev_path);
    for _ in 0..16 {
        let Ok(target) = std::fs::read_link(&cur) else {
            break;
        };
        cur = if target.is_absolute() {
            hp.path(&target)
        } else {
            cur.parent().unwrap_or(Path::new("/")).join(target)
        };
    }
    // Normalize `..` lexically so the name is the last real component.
    let mut parts: Vec<std::ffi::OsString> = Vec::new();
    for c in cur.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(n) => parts.push(n.to_os_string()),
            _ => {}
        }
    }
    parts
        .last()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The block device name behind a mount source such as `/dev/nvme0n1p2`, `/dev/mapper/x`, or
/// `/dev/root` (through `root=` on the kernel command line).
fn source_dev_name(hp: &HostPaths, source: &str) -> Option<String> {
    let source = if source == "/dev/root" {
        if let Ok(t) = std::fs::read_link(hp.path("dev/root")) {
            t.to_string_lossy().into_owned()
        } else {
            let cmdline = read_trim(&hp.path("proc/cmdline"))?;
            let root = cmdline
                .split_whitespace()
                .find_map(|w| w.strip_prefix("root="))?
                .to_string();
            if let Some(u) = root.strip_prefix("PARTUUID=") {
                format!("/dev/disk/by-partuuid/{}", u)
            } else if let Some(u) = root.strip_prefix("UUID=") {
                format!("/dev/disk/by-uuid/{}", u)
            } else if let Some(l) = root.strip_prefix("LABEL=") {
                format!("/dev/disk/by-label/{}", l)
            } else {
                root
            }
        }
    } else {
        source.to_string()
    };
    let source = if source.starts_with('/') {
        source
    } else {
        format!("/dev/{}", source)
    };
    if !source.starts_with("/dev/") {
        return None;
    }
    let name = resolve_dev_name(hp, &source);
    if hp.path("sys/class/block").join(&name).exists() {
        Some(name)
    } else {
        None
    }
}

/// How the whole disk under a path was found, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathDevice {
    pub disk: String,
    /// The block device the filesystem is on (a partition, dm or md device, or the disk).
    pub part: String,
    pub mount_point: Option<PathBuf>,
}

/// The whole disk holding the filesystem of `path` (which must exist): st_dev first, the mount
/// source when st_dev is anonymous.
pub fn device_of_path(hp: &HostPaths, path: &Path) -> Result<PathDevice> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("reading metadata of {}", path.display()))?;
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    device_of_devnr(hp, split_dev(meta.dev()), &canon)
        .with_context(|| format!("finding the block device of {}", path.display()))
}

/// The whole disk behind the filesystem with device number `devnr`; `path` picks among mounts
/// sharing that number and names the path in errors.
pub fn device_of_devnr(hp: &HostPaths, devnr: (u32, u32), path: &Path) -> Result<PathDevice> {
    let sysdev = hp
        .path("sys/dev/block")
        .join(format!("{}:{}", devnr.0, devnr.1));
    let mounts = read_mountinfo(hp).unwrap_or_default();
    let mount = mounts
        .iter()
        .filter(|m| m.devnr == devnr)
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
        .or_else(|| mounts.iter().rev().find(|m| m.devnr == devnr));
    if devnr.0 != 0 && sysdev.exists() {
        let part = std::fs::canonicalize(&sysdev)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        return Ok(PathDevice {
            disk: whole_disk_of_devnr(hp, devnr)?,
            part,
            mount_point: mount.map(|m| m.mount_point.clone()),
        });
    }
    let Some(m) = mount else {
        bail!(
            "device {}:{} is neither a block device nor in {}",
            devnr.0,
            devnr.1,
            hp.path("proc/self/mountinfo").display()
        );
    };
    let Some(part) = source_dev_name(hp, &m.source) else {
        bail!(
            "{} is on a {} filesystem mounted from {:?}, which is not a block device",
            m.mount_point.display(),
            m.fstype,
            m.source
        );
    };
    Ok(PathDevice {
        disk: whole_disk_of_name(hp, &part)?,
        part,
        mount_point: Some(m.mount_point.clone()),
    })
}

/// What sysfs tells about a whole disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevInfo {
    pub name: String,
    pub devnr: (u32, u32),
    pub model: String,
    pub fwrev: String,
    /// Bytes.
    pub size: u64,
    /// The selected IO scheduler (`none`, `mq-deadline`, …).
    pub scheduler: String,
    /// `queue/wbt_lat_usec`; `None` when the kernel has no wbt.
    pub wbt_lat_usec: Option<u64>,
    pub rotational: bool,
}

impl DevInfo {
    /// Reads `/sys/block/NAME`.
    pub fn read(hp: &HostPaths, name: &str) -> Result<Self> {
        let d = hp.path("sys/block").join(name);
        if !d.exists() {
            bail!("{} does not exist", d.display());
        }
        let devnr_path = d.join("dev");
        let devnr = read_trim(&devnr_path)
            .and_then(|s| parse_devnr(&s))
            .with_context(|| format!("reading MAJ:MIN from {}", devnr_path.display()))?;
        let nonempty = |p: PathBuf| read_trim(&p).filter(|s| !s.is_empty());
        let model = nonempty(d.join("device/model"))
            .or_else(|| nonempty(d.join("serial")))
            .unwrap_or_else(|| "<unknown>".into());
        let fwrev = nonempty(d.join("device/firmware_rev"))
            .or_else(|| nonempty(d.join("device/rev")))
            .unwrap_or_else(|| "<UNKNOWN>".into());
        let size_path = d.join("size");
        let size = read_trim(&size_path)
            .and_then(|s| s.parse::<u64>().ok())
            .with_context(|| format!("reading sectors from {}", size_path.display()))?
            .saturating_mul(512);
        let scheduler = read_trim(&d.join("queue/scheduler"))
            .map(|s| crate::system::restore::bracketed(&s).unwrap_or(s))
            .unwrap_or_else(|| "none".into());
        let wbt_lat_usec = read_trim(&d.join("queue/wbt_lat_usec")).and_then(|s| s.parse().ok());
        let rotational = read_trim(&d.join("queue/rotational")).as_deref() == Some("1");
        Ok(Self {
            name: name.to_string(),
            devnr,
            model,
            fwrev,
            size,
            scheduler,
            wbt_lat_usec,
            rotational,
        })
    }

    /// md RAID or device-mapper: IO control acts on the devices underneath.
    pub fn is_composite(&self) -> bool {
        is_composite_name(&self.name)
    }

    pub fn sys_dir(&self, hp: &HostPaths) -> PathBuf {
        hp.path("sys/block").join(&self.name)
    }
}

pub fn is_composite_name(name: &str) -> bool {
    name.starts_with("md") || name.starts_with("dm-")
}

/// The scratch device and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scratch {
    pub dev: DevInfo,
    /// True when `--dev` named it.
    pub given: bool,
    /// One line on how it was found.
    pub how: String,
    pub warnings: Vec<String>,
}

/// The scratch device for work directory `dir`: `dev` when given (a partition is mapped to its
/// disk with a warning), else the disk backing the nearest existing ancestor of `dir/scratch`.
pub fn detect(hp: &HostPaths, dir: &Path, dev: Option<&str>) -> Result<Scratch> {
    let mut warnings = Vec::new();
    if let Some(name) = dev {
        let name = name.strip_prefix("/dev/").unwrap_or(name);
        let disk = if hp.path("sys/block").join(name).exists() {
            name.to_string()
        } else if hp.path("sys/class/block").join(name).exists() {
            let disk = whole_disk_of_name(hp, name)?;
            warnings.push(format!(
                "--dev {} is a partition; using its disk {}",
                name, disk
            ));
            disk
        } else {
            let mut known: Vec<String> = std::fs::read_dir(hp.path("sys/block"))
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| !n.starts_with("loop") && !n.starts_with("ram"))
                        .collect()
                })
                .unwrap_or_default();
            known.sort();
            return Err(UsageError::new(format!(
                "--dev {:?}: no such block device (known: {})",
                name,
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ))
            .into());
        };
        let info = DevInfo::read(hp, &disk)?;
        if info.is_composite() {
            warnings.push(format!(
                "scratch device {} is a {} device; IO control applies to the disks beneath it",
                disk,
                if disk.starts_with("md") {
                    "md RAID"
                } else {
                    "device-mapper"
                }
            ));
        }
        return Ok(Scratch {
            dev: info,
            given: true,
            how: format!("named by --dev {}", name),
            warnings,
        });
    }

    let target = dir.join("scratch");
    let at = nearest_existing(&target);
    let pd = device_of_path(hp, &at).with_context(|| {
        format!(
            "can't find the scratch device backing {} (use --dev to name it)",
            target.display()
        )
    })?;
    if is_composite_name(&pd.disk) {
        warnings.push(format!(
            "{} is on {}, a {} device; IO control applies to the disks beneath it, pass --dev \
             to pick one",
            at.display(),
            pd.disk,
            if pd.disk.starts_with("md") {
                "md RAID"
            } else {
                "device-mapper"
            }
        ));
    }
    let info = DevInfo::read(hp, &pd.disk)?;
    let how = format!(
        "{}{} is on {}{}",
        at.display(),
        match &pd.mount_point {
            Some(m) => format!(" (mount {})", m.display()),
            None => String::new(),
        },
        pd.part,
        if pd.part != pd.disk {
            format!(", disk {}", pd.disk)
        } else {
            String::new()
        }
    );
    Ok(Scratch {
        dev: info,
        given: false,
        how,
        warnings,
    })
}

#[cfg(test)]
pub mod testutil {
    //! Builders for fake /sys and /proc trees.
    use super::*;

    pub fn put(p: &Path, s: &str) {
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, s).expect("write");
    }

    pub fn symlink(target: &str, link: &Path) {
        std::fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, link).expect("symlink");
    }

    /// A disk `name` (devnr `maj:min`) under a fake PCI path, with optional partitions
    /// `(name, minor)`, linked from /sys/block, /sys/class/block and /sys/dev/block.
    pub fn add_disk(hp: &HostPaths, name: &str, maj: u32, min: u32, parts: &[(&str, u32)]) {
        let dev = hp.path(format!("sys/devices/pci0000:00/block/{}", name));
        put(&dev.join("dev"), &format!("{}:{}\n", maj, min));
        put(&dev.join("size"), "1000215216\n");
        put(&dev.join("device/model"), "Fake SSD 970\n");
        put(&dev.join("device/firmware_rev"), "1B2QEXP7\n");
        put(&dev.join("queue/scheduler"), "[mq-deadline] kyber none\n");
        put(&dev.join("queue/wbt_lat_usec"), "2000\n");
        put(&dev.join("queue/rotational"), "0\n");
        // /sys/block/X is one level below /sys, /sys/class/block/X and /sys/dev/block/X two.
        let rel = format!("../../devices/pci0000:00/block/{}", name);
        symlink(&rel[3..], &hp.path(format!("sys/block/{}", name)));
        symlink(&rel, &hp.path(format!("sys/class/block/{}", name)));
        symlink(&rel, &hp.path(format!("sys/dev/block/{}:{}", maj, min)));
        for (p, pmin) in parts {
            put(&dev.join(p).join("partition"), "1\n");
            put(&dev.join(p).join("dev"), &format!("{}:{}\n", maj, pmin));
            let prel = format!("{}/{}", rel, p);
            symlink(&prel, &hp.path(format!("sys/class/block/{}", p)));
            symlink(&prel, &hp.path(format!("sys/dev/block/{}:{}", maj, pmin)));
        }
    }
}

#[cfg(test)]
mod tests;
