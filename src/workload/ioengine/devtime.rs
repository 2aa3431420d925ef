//! The device's own time per IO (`devtime`): the block layer's dispatch-to-completion times of
//! the target's disk, from its trace events (`block_rq_issue` → `block_rq_complete`, the source
//! the IO-latency reports read), over the job's measured time. It splits an IO's mean latency
//! into the device's time and the rest (preparing, the kernel's path to the driver, the
//! completion's way back to us); the submission call is shown beside, as the device's time can
//! begin inside it. Every IO of that disk counts, ours or not. Beside it, the kernel's own count
//! for the disk over the same time (`/proc/diskstats`, timed from each request's allocation): a
//! check on the trace, what the requests waited before dispatch, and, where the disk can't be
//! traced (no tracefs, not root), the only figure: means that include that wait.

use crate::report::diskstats::{delta, parse_diskstats, DiskCounters};
use crate::report::hist::{bucket_bounds, LatHist};
use crate::report::iolat_source::IoLatSource;
use crate::report::tracefs::TraceFsSource;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// One direction's device times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DevDir {
    /// Requests the disk completed.
    pub n: u64,
    /// From the histogram's buckets (each within 1/16 of its value), ns.
    pub mean_ns: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
}

/// What the disk did during the measured time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DevTime {
    /// The whole disk traced (`MAJ:MIN`).
    pub disk: String,
    pub read: DevDir,
    pub write: DevDir,
    /// The kernel's count over the same time; absent when /proc/diskstats had no line for the
    /// disk (and in results from before it was taken).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelCount>,
    /// Why the disk wasn't traced (no tracefs, not root); empty when it was. Untraced, `read`
    /// and `write` are empty and the kernel's count is the only figure.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub untraced: String,
}

/// One direction as /proc/diskstats counts it: requests completed and their mean time from
/// allocation to completion (the device's time plus any wait in the block layer before it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelDir {
    pub n: u64,
    /// From milliseconds summed over the requests: exact to 1 ms / n.
    pub mean_ns: f64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelCount {
    pub read: KernelDir,
    pub write: KernelDir,
}

/// The disk's line of /proc/diskstats now; `None` (logged) when it can't be read.
fn counters(disk: (u32, u32)) -> Option<DiskCounters> {
    let read = std::fs::read_to_string("/proc/diskstats")
        .context("/proc/diskstats")
        .and_then(|t| parse_diskstats(&t, disk));
    match read {
        Ok(c) => c,
        Err(e) => {
            log::debug!("devtime: {:#}", e);
            None
        }
    }
}

/// What the disk completed between two readings (index 0 reads, 1 writes); nothing where a
/// counter went backwards.
fn kernel_between(a: &DiskCounters, b: &DiskCounters) -> KernelCount {
    let dir = |i: usize| match delta(a, b, i) {
        Some((n, ms)) if n > 0 => KernelDir {
            n,
            mean_ns: ms as f64 * 1e6 / n as f64,
        },
        _ => KernelDir::default(),
    };
    KernelCount {
        read: dir(0),
        write: dir(1),
    }
}

fn dir_of(h: &LatHist) -> DevDir {
    let n = h.total();
    if n == 0 {
        return DevDir::default();
    }
    let sum: f64 = h
        .sparse()
        .map(|(i, c)| {
            let (lo, hi) = bucket_bounds(i);
            (lo + hi) as f64 / 2.0 * c as f64
        })
        .sum();
    DevDir {
        n,
        mean_ns: sum / n as f64,
        p50_ns: h.quantile(0.5) * 1e9,
        p99_ns: h.quantile(0.99) * 1e9,
    }
}

/// The whole disk under `target` (a file's file system, or the device itself; a partition's
/// disk), as (major, minor).
pub fn disk_of(target: &Path) -> Result<(u32, u32)> {
    let md = std::fs::metadata(target).with_context(|| format!("{}", target.display()))?;
    let dev = if md.file_type().is_block_device() {
        md.rdev()
    } else {
        md.dev()
    };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if Path::new(&format!("/sys/dev/block/{}:{}/partition", major, minor)).exists() {
        let parent = std::fs::read_to_string(format!("/sys/dev/block/{}:{}/../dev", major, minor))
            .unwrap_or_default();
        if let Some((a, b)) = parent.trim().split_once(':') {
            if let (Ok(a), Ok(b)) = (a.parse(), b.parse()) {
                return Ok((a, b));
            }
        }
    }
    Ok((major, minor))
}

/// A trace of the target's disk while a job runs.
pub struct DevTrace {
    /// `None` where the disk can't be traced: the kernel's count stands alone.
    src: Option<TraceFsSource>,
    /// Why there is no trace.
    untraced: String,
    disk: (u32, u32),
    /// The kernel's counters when the measured time began.
    since: Option<DiskCounters>,
}

impl DevTrace {
    /// Starts tracing the disk under `target`; without tracefs (or root) it goes on with the
    /// kernel's count alone, and only a disk that neither knows is one line on why.
    pub fn start(target: &Path) -> Result<DevTrace> {
        let disk = disk_of(target)?;
        let hp = crate::system::HostPaths::real();
        let since = counters(disk);
        let (src, untraced) = match (TraceFsSource::open(&hp, disk), since) {
            (Ok(src), _) => (Some(src), String::new()),
            (Err(e), Some(_)) => {
                let why = format!("{:#}", e);
                log::info!(
                    "devtime: no trace of disk {}:{} ({}): the kernel's count alone, means \
                     from each request's allocation (tracing needs root and tracefs)",
                    disk.0,
                    disk.1,
                    why
                );
                (None, why)
            }
            (Err(e), None) => {
                return Err(crate::error::UsageError::new(format!(
                    "devtime: can't trace the block events of disk {}:{} ({:#}; it needs root \
                     and tracefs), and /proc/diskstats has no line for it (is the target on a \
                     block device?)",
                    disk.0, disk.1, e
                ))
                .into())
            }
        };
        Ok(DevTrace {
            src,
            untraced,
            disk,
            since,
        })
    }

    /// Drops what was measured so far (the ramp's IOs).
    pub fn reset(&mut self) -> Result<()> {
        self.since = counters(self.disk);
        match &mut self.src {
            Some(src) => src.sample().map(|_| ()),
            None => Ok(()),
        }
    }

    /// What the disk did since the start or the last reset.
    pub fn finish(mut self) -> Result<DevTime> {
        let (read, write) = match &mut self.src {
            Some(src) => {
                // The reader thread gets the last completions' events a moment after they
                // happen.
                std::thread::sleep(std::time::Duration::from_millis(250));
                match src.sample()?.hists {
                    Some(h) => (dir_of(&h.read), dir_of(&h.write)),
                    None => Default::default(),
                }
            }
            None => Default::default(),
        };
        let kernel = match (&self.since, counters(self.disk)) {
            (Some(a), Some(b)) => Some(kernel_between(a, &b)),
            _ => None,
        };
        Ok(DevTime {
            disk: format!("{}:{}", self.disk.0, self.disk.1),
            read,
            write,
            kernel,
            untraced: self.untraced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_times_come_from_the_buckets() {
        let mut h = LatHist::new();
        for _ in 0..99 {
            h.record_ns(100_000);
        }
        h.record_ns(10_000_000);
        let d = dir_of(&h);
        assert_eq!(d.n, 100);
        // 99 × 100 µs + 10 ms: 199 µs, each bucket within 1/16.
        assert!(
            (d.mean_ns - 199_000.0).abs() < 199_000.0 / 16.0,
            "{}",
            d.mean_ns
        );
        assert!(
            (d.p50_ns - 100_000.0).abs() < 100_000.0 / 16.0,
            "{}",
            d.p50_ns
        );
        assert_eq!(dir_of(&LatHist::new()), DevDir::default());
    }

    #[test]
    fn the_kernels_count_is_the_difference_of_two_readings() {
        let a = DiskCounters {
            ios: [100, 10, 0, 0],
            ms: [500, 40, 0, 0],
        };
        let b = DiskCounters {
            ios: [3811, 10, 0, 0],
            ms: [8716, 40, 0, 0],
        };
        let k = kernel_between(&a, &b);
        assert_eq!(k.read.n, 3711);
        // 8216 ms over 3711 reads.
        assert!(
            (k.read.mean_ns - 2_213_958.5).abs() < 1.0,
            "{}",
            k.read.mean_ns
        );
        assert_eq!(k.write, KernelDir::default());
        // Counters that went backwards (a disk removed and added again) give nothing, not junk.
        assert_eq!(kernel_between(&b, &a), KernelCount::default());
    }
}
