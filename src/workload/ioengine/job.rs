//! An IO job: where, what, how much at once, how fast and for how long. `check` refuses what
//! can't run (one line each, said as the option it came from); the target's size and block
//! size are checked when it is opened (`run`).

use super::pace::Arrivals;
use super::steady::SteadyRule;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Seq,
    Rand,
}

/// An open-loop rate for the whole job (split evenly over the workers).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rate {
    Iops(f64),
    /// Bytes per second.
    Bps(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// After this long past the ramp.
    Time(Duration),
    /// After this many bytes past the ramp (over all workers).
    Bytes(u64),
}

/// Which engine to use; `Auto` = io_uring, else the blocking thread pool (said in the result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineChoice {
    Auto,
    IoUring,
    Psync,
}

/// io_uring's lower-overhead settings, by fio's names for them; all off is the plain path
/// (one ring per worker, buffers and the file passed with every IO, interrupts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UringOpts {
    /// Buffers registered once (`READ_FIXED`/`WRITE_FIXED`): no page pinning per IO.
    pub fixedbufs: bool,
    /// The target registered as a fixed file: no file reference taken per IO.
    pub registerfiles: bool,
    /// A kernel thread polls the submission queue (`IORING_SETUP_SQPOLL`): no submission call.
    pub sqthread_poll: bool,
    /// Completions polled from the device (`IORING_SETUP_IOPOLL`), which needs poll queues.
    pub hipri: bool,
    /// `SINGLE_ISSUER` with `DEFER_TASKRUN` (or `COOP_TASKRUN` before 6.1): completion work
    /// runs when the worker waits, not in interrupts of it.
    pub taskrun: bool,
}

impl UringOpts {
    pub fn any(&self) -> bool {
        *self != UringOpts::default()
    }

    /// The settings that need io_uring to mean anything: all but `taskrun`, which is on by
    /// default (as in fio) and only says how a ring is set up, so an engine without rings
    /// ignores it.
    pub fn needing_uring(&self) -> UringOpts {
        UringOpts {
            taskrun: false,
            ..*self
        }
    }

    /// The settings on, by name (`fixedbufs,registerfiles`), or `none`.
    pub fn names(&self) -> String {
        let on: Vec<&str> = [
            (self.fixedbufs, "fixedbufs"),
            (self.registerfiles, "registerfiles"),
            (self.sqthread_poll, "sqthread_poll"),
            (self.hipri, "hipri"),
            (self.taskrun, "taskrun"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, n)| *n)
        .collect();
        if on.is_empty() {
            "none".into()
        } else {
            on.join(",")
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoJob {
    /// A regular file or a block device.
    pub target: PathBuf,
    /// Share of reads, 0–100.
    pub read_pct: u32,
    pub pattern: Pattern,
    /// Bytes per IO.
    pub bs: u64,
    /// Offsets are multiples of this (bytes).
    pub align: u64,
    /// The byte range IOs fall in; `end` 0 = the target's size.
    pub start: u64,
    pub end: u64,
    /// IOs in flight per worker.
    pub qd: u32,
    /// IOs handed to the kernel per submission call (fio's `iodepth_batch_submit`): 1 submits
    /// each IO as soon as it is prepared, 0 means `qd`. Results from before this option
    /// batched up to the queue depth.
    #[serde(default)]
    pub batch: u32,
    /// Completions taken per wait (fio's `iodepth_batch_complete_max`): 1 takes the oldest
    /// and refills its slot before looking at the next, 0 means all there are (up to `qd`).
    /// Results from before this option took them all.
    #[serde(default)]
    pub reap: u32,
    pub workers: u32,
    pub stop: Stop,
    /// Run this long before measuring.
    pub ramp: Duration,
    pub rate: Option<Rate>,
    pub arrivals: Arrivals,
    /// O_DIRECT (bypass the page cache).
    pub direct: bool,
    pub engine: EngineChoice,
    /// Percentiles the result lists (the histograms hold them all).
    pub percentiles: Vec<f64>,
    /// Seed of the offsets, the read/write choices and the Poisson gaps.
    pub seed: u64,
    /// Stop before the duration once this rule finds the job steady.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ss: Option<SteadyRule>,
    /// io_uring settings asked for one by one.
    #[serde(default, skip_serializing_if = "is_plain")]
    pub uring: UringOpts,
    /// Every io_uring setting the kernel and the target support (on top of `uring`), and
    /// batched submission unless `batch` was given; the result says what was picked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fast: bool,
    /// Trace the disk's own time per IO (`devtime`) over the measured time.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub devtime: bool,
}

fn is_plain(o: &UringOpts) -> bool {
    !o.any()
}

impl IoJob {
    /// A 30-second 4 KiB random read at QD 1 on `target`, fio's defaults otherwise.
    pub fn new(target: PathBuf) -> IoJob {
        IoJob {
            target,
            read_pct: 100,
            pattern: Pattern::Rand,
            bs: 4096,
            align: 0,
            start: 0,
            end: 0,
            qd: 1,
            batch: 1,
            reap: 1,
            workers: 1,
            stop: Stop::Time(Duration::from_secs(30)),
            ramp: Duration::ZERO,
            rate: None,
            arrivals: Arrivals::Linear,
            direct: true,
            engine: EngineChoice::Auto,
            percentiles: super::hist::DFL_PERCENTILES.to_vec(),
            seed: 0x5eed,
            ss: None,
            // fio's io_uring engine sets up its rings so by default (3.33 on).
            uring: UringOpts {
                taskrun: true,
                ..UringOpts::default()
            },
            fast: false,
            devtime: false,
        }
    }

    /// `align`, or the block size when it is 0.
    pub fn alignment(&self) -> u64 {
        if self.align == 0 {
            self.bs
        } else {
            self.align
        }
    }

    /// fio's name for the mix: `read`, `randwrite`, `randrw` (with `rwmix`), …
    pub fn rw_name(&self) -> String {
        let base = match self.read_pct {
            100 => "read",
            0 => "write",
            _ => "rw",
        };
        match self.pattern {
            Pattern::Seq => base.to_string(),
            Pattern::Rand => format!("rand{}", base),
        }
    }

    /// The job's rules that don't need the target; the message names the option.
    pub fn check(&self) -> Result<(), String> {
        if self.read_pct > 100 {
            return Err(format!(
                "rwmix={} is above 100 (accepted: 0 to 100)",
                self.read_pct
            ));
        }
        // Up to the 128 MiB blocks of upstream's bandwidth runs (`iocost-params:jobs=upstream`).
        if self.bs == 0 || self.bs > 128 << 20 {
            return Err(format!("bs={} is not from 1 byte to 128M", self.bs));
        }
        let align = self.alignment();
        if self.direct && (self.bs % 512 != 0 || align % 512 != 0) {
            return Err(format!(
                "bs={} align={}: direct IO needs multiples of 512 bytes (or direct=false)",
                self.bs, align
            ));
        }
        if !(1..=4096).contains(&self.qd) {
            return Err(format!("qd={} is not from 1 to 4096", self.qd));
        }
        if self.batch > self.qd {
            return Err(format!(
                "batch={} is above qd={} (accepted: 0 = qd, or 1 to qd)",
                self.batch, self.qd
            ));
        }
        if self.reap > self.qd {
            return Err(format!(
                "reap={} is above qd={} (accepted: 0 = qd, or 1 to qd)",
                self.reap, self.qd
            ));
        }
        if !(1..=1024).contains(&self.workers) {
            return Err(format!("workers={} is not from 1 to 1024", self.workers));
        }
        if self.end != 0 && self.end < self.start + self.bs {
            return Err(format!(
                "the range {}..{} is smaller than one IO of {} bytes",
                self.start, self.end, self.bs
            ));
        }
        match self.stop {
            Stop::Time(d) if d.is_zero() => return Err("dur=0: nothing to run".into()),
            Stop::Bytes(0) => return Err("size=0: nothing to run".into()),
            _ => {}
        }
        if let (Some(ss), Stop::Time(d)) = (&self.ss, self.stop) {
            if ss.window_s as f64 > d.as_secs_f64() {
                return Err(format!(
                    "ss-dur={}s is longer than dur={}s: the job would never be judged steady",
                    ss.window_s,
                    d.as_secs_f64()
                ));
            }
        }
        match self.rate {
            Some(Rate::Iops(r)) | Some(Rate::Bps(r)) if !(r > 0.0 && r.is_finite()) => {
                return Err(format!("rate {} is not a positive number", r))
            }
            _ => {}
        }
        let uring = self.uring.needing_uring();
        if (uring.any() || self.fast) && self.engine == EngineChoice::Psync {
            return Err(format!(
                "{} needs engine=io_uring (or auto), not psync",
                if self.fast {
                    "fast".to_string()
                } else {
                    uring.names()
                }
            ));
        }
        if self.uring.hipri && !self.direct {
            return Err("hipri polls for direct IO only: it needs direct=true".into());
        }
        if let Some(p) = self
            .percentiles
            .iter()
            .find(|p| !(**p > 0.0 && **p <= 100.0))
        {
            return Err(format!("percentile {} is not above 0 and at most 100", p));
        }
        Ok(())
    }

    /// IOs per submission call, 0 resolved to the queue depth.
    pub fn submit_batch(&self) -> u32 {
        if self.batch == 0 {
            self.qd
        } else {
            self.batch.min(self.qd)
        }
    }

    /// Completions taken per wait, 1 to `qd`.
    pub fn reap_max(&self) -> u32 {
        if self.reap == 0 {
            self.qd
        } else {
            self.reap.min(self.qd)
        }
    }

    /// Each worker's open-loop rate in IOs per second.
    pub fn worker_iops(&self) -> Option<f64> {
        let per_job = match self.rate? {
            Rate::Iops(r) => r,
            Rate::Bps(b) => b / self.bs as f64,
        };
        Some(per_job / self.workers as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_rules() {
        let mut j = IoJob::new("/dev/null".into());
        assert_eq!(j.rw_name(), "randread");
        assert!(j.check().is_ok());
        j.read_pct = 70;
        j.pattern = Pattern::Seq;
        assert_eq!(j.rw_name(), "rw");
        j.bs = 1000;
        assert!(j.check().unwrap_err().contains("multiples of 512"));
        j.direct = false;
        assert!(j.check().is_ok());
        j.qd = 0;
        assert!(j.check().unwrap_err().starts_with("qd=0"));
        j.qd = 1;
        j.batch = 2;
        assert!(j.check().unwrap_err().starts_with("batch=2 is above qd=1"));
        j.qd = 8;
        j.batch = 0;
        assert_eq!(j.submit_batch(), 8);
        j.qd = 1;
        j.batch = 1;
        j.reap = 2;
        assert!(j.check().unwrap_err().starts_with("reap=2 is above qd=1"));
        j.qd = 8;
        j.reap = 0;
        assert_eq!(j.reap_max(), 8);
        j.qd = 1;
        j.reap = 1;
        j.rate = Some(Rate::Bps(4e6));
        j.workers = 4;
        assert_eq!(j.worker_iops(), Some(4e6 / 1000.0 / 4.0));
        j.percentiles.push(0.0);
        assert!(j.check().unwrap_err().starts_with("percentile 0"));
    }
}
