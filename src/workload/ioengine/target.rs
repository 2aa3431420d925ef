//! The file or block device a job does IO on: opened for the job's directions, its size, and
//! the refusals that keep a job from destroying data (writes to a block device with a mounted
//! file system on it).

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

pub struct Target {
    pub file: File,
    pub size: u64,
    pub block_device: bool,
    /// Whether the device under it polls for completions (`queue/io_poll` is 1: it has poll
    /// queues), which io_uring's `hipri` needs.
    pub polls: bool,
    /// Whether a block device is under it (not tmpfs or another memory file system), so direct
    /// IO maps the buffers for the device.
    pub on_disk: bool,
}

/// Whether block device `dev` (or the disk of a partition) has polling turned on.
fn polls(dev: u64) -> bool {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    ["queue/io_poll", "../queue/io_poll"].iter().any(|f| {
        std::fs::read_to_string(format!("/sys/dev/block/{}:{}/{}", major, minor, f))
            .is_ok_and(|v| v.trim() == "1")
    })
}

/// Whether `dev` is a block device (a file system on tmpfs has an anonymous one).
fn is_block_dev(dev: u64) -> bool {
    Path::new(&format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    ))
    .exists()
}

/// Size in bytes of a regular file or a block device.
pub fn size_of(f: &File) -> Result<u64> {
    let md = f.metadata()?;
    if md.file_type().is_block_device() {
        const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
        let mut size: u64 = 0;
        if unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size) } != 0 {
            bail!("BLKGETSIZE64: {}", std::io::Error::last_os_error());
        }
        Ok(size)
    } else {
        Ok(md.len())
    }
}

/// Whether a file system on block device `rdev` (or a partition of it) is mounted.
fn mounted(rdev: u64) -> Result<Option<String>> {
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let text = std::fs::read_to_string("/proc/self/mountinfo").context("reading mountinfo")?;
    let mounts = crate::system::blockdev::parse_mountinfo(&text, "/proc/self/mountinfo")?;
    // A partition's parent is named in sysfs; compare whole disks.
    let disk_of = |maj: u32, min: u32| -> (u32, u32) {
        let link = format!("/sys/dev/block/{}:{}/partition", maj, min);
        if Path::new(&link).exists() {
            if let Ok(dev) =
                std::fs::read_to_string(format!("/sys/dev/block/{}:{}/../dev", maj, min))
            {
                if let Some((a, b)) = dev.trim().split_once(':') {
                    if let (Ok(a), Ok(b)) = (a.parse(), b.parse()) {
                        return (a, b);
                    }
                }
            }
        }
        (maj, min)
    };
    let ours = disk_of(major, minor);
    Ok(mounts
        .iter()
        .find(|m| m.devnr == (major, minor) || disk_of(m.devnr.0, m.devnr.1) == ours)
        .map(|m| m.mount_point.display().to_string()))
}

/// Opens `path` for reads and, when `write`, writes; `direct` for O_DIRECT.
pub fn open(path: &Path, write: bool, direct: bool) -> Result<Target> {
    let md = match std::fs::metadata(path) {
        Ok(md) => md,
        Err(e) => crate::usage_bail!("IO target {}: {}", path.display(), e),
    };
    let block_device = md.file_type().is_block_device();
    if !block_device && !md.is_file() {
        crate::usage_bail!(
            "IO target {} is neither a regular file nor a block device",
            path.display()
        );
    }
    if write && block_device {
        if let Some(at) = mounted(md.rdev())? {
            crate::usage_bail!(
                "IO target {}: writing would destroy the file system mounted at {} (accepted: \
                 an unmounted block device, or a file)",
                path.display(),
                at
            );
        }
    }
    let mut oo = std::fs::OpenOptions::new();
    oo.read(true).write(write);
    if direct {
        oo.custom_flags(libc::O_DIRECT);
    }
    let file = match oo.open(path) {
        Ok(f) => f,
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => crate::usage_bail!(
            "IO target {}: its file system doesn't support direct IO (use direct=false)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("opening IO target {}", path.display())),
    };
    let size = size_of(&file)?;
    Ok(Target {
        file,
        size,
        block_device,
        polls: polls(if block_device { md.rdev() } else { md.dev() }),
        on_disk: block_device || is_block_dev(md.dev()),
    })
}
