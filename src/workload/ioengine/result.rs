//! A job's result: the versioned document (`version`, the job, per direction and per worker
//! every count, rate, latency distribution with its non-empty buckets, per-second samples and
//! CPU time) and its text summary, laid out the way fio prints a job so its numbers are
//! recognised at a glance.

use super::devtime::DevTime;
use super::job::{IoJob, Stop, UringOpts};
use super::stats::{Cpu, DirOut};
use super::steady::SteadyOut;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// Bumped when a field changes meaning; readers refuse versions they don't know.
pub const RESULT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerOut {
    pub index: u32,
    pub runtime_ns: u64,
    pub read: DirOut,
    pub write: DirOut,
    pub cpu: Cpu,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoResult {
    pub version: u32,
    /// `io_uring`, or `psync` (the blocking thread pool).
    pub engine: String,
    /// Why `psync` was used; empty otherwise.
    pub engine_note: String,
    pub job: IoJob,
    pub target_size: u64,
    pub block_device: bool,
    /// The measured span (after the ramp), the longest worker's.
    pub runtime_ns: u64,
    pub read: DirOut,
    pub write: DirOut,
    /// All workers (and their IO threads).
    pub cpu: Cpu,
    pub workers: Vec<WorkerOut>,
    /// With `ss=`: whether and when the job was found steady.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyOut>,
    /// The io_uring settings the job ran with (with `fast`, those it picked).
    #[serde(default, skip_serializing_if = "is_plain")]
    pub uring: UringOpts,
    /// What `fast` left out, and why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uring_note: String,
    /// With `devtime`: the disk's own time per IO over the measured time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<DevTime>,
}

fn is_plain(o: &UringOpts) -> bool {
    !o.any()
}

impl IoResult {
    pub fn ios(&self) -> u64 {
        self.read.ios + self.write.ios
    }

    /// CPU time per IO, ns.
    pub fn cpu_per_io(&self) -> f64 {
        let n = self.ios();
        if n == 0 {
            0.0
        } else {
            (self.cpu.usr_ns + self.cpu.sys_ns) as f64 / n as f64
        }
    }
}

/// `73.0k`, `1.20M`: three significant digits with a decimal suffix, as fio prints IOPS.
pub fn si(v: f64) -> String {
    let (v, suf) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        return format!("{:.0}", v);
    };
    let prec = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{:.*}{}", prec, v, suf)
}

/// Bytes in binary and decimal units, fio's `285MiB/s (299MB/s)` style.
fn bytes_pair(b: f64) -> (String, String) {
    let bin = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    let dec = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    let b1 = bin
        .iter()
        .find(|(_, d)| b >= 10.0 * *d as f64)
        .map_or(format!("{:.0}B", b), |(u, d)| {
            format!("{:.0}{}", b / *d as f64, u)
        });
    let b2 = dec
        .iter()
        .find(|(_, d)| b >= 10.0 * d)
        .map_or(format!("{:.0}B", b), |(u, d)| format!("{:.0}{}", b / d, u));
    (b1, b2)
}

/// fio's latency unit for values up to `max` ns: nsec below 10 µs, usec below 10 ms, else msec.
pub(super) fn unit(max: u64) -> (&'static str, f64) {
    if max < 10_000 {
        ("nsec", 1.0)
    } else if max < 10_000_000 {
        ("usec", 1e3)
    } else {
        ("msec", 1e6)
    }
}

/// `4K`, `1M`, `16G` when exact, else the upstream size format (`1.5G`).
pub fn size_text(b: u64) -> String {
    for (suf, unit) in [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if b >= unit && b % unit == 0 {
            return format!("{}{}", b / unit, suf);
        }
    }
    crate::units::fmt::format_size(b as f64)
}

fn dir_text(out: &mut String, name: &str, d: &DirOut, runtime_ns: u64) {
    let (bw_bin, bw_dec) = bytes_pair(d.bw_bytes);
    let (total, _) = bytes_pair(d.bytes as f64);
    let _ = writeln!(
        out,
        "  {}: IOPS={}, BW={}/s ({}/s)({}/{}msec)",
        name,
        si(d.iops),
        bw_bin,
        bw_dec,
        total,
        runtime_ns / 1_000_000
    );
    for (label, l) in [("slat", &d.slat), ("clat", &d.clat), (" lat", &d.lat)] {
        let (u, div) = unit(l.max_ns);
        let _ = writeln!(
            out,
            "    {} ({}): min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}",
            label,
            u,
            l.min_ns as f64 / div,
            l.max_ns as f64 / div,
            l.mean_ns / div,
            l.stdev_ns / div
        );
    }
    let top = d.clat.percentiles.iter().map(|p| p.1).max().unwrap_or(0);
    let (u, div) = unit(top);
    let _ = writeln!(out, "    clat percentiles ({}):", u);
    let cells: Vec<String> = d
        .clat
        .percentiles
        .iter()
        .map(|(k, v)| {
            let p: f64 = k.parse().unwrap_or(0.0);
            format!("{:5.2}th=[{:>5.0}]", p, *v as f64 / div)
        })
        .collect();
    let rows: Vec<String> = cells.chunks(4).map(|r| r.join(", ")).collect();
    for (i, row) in rows.iter().enumerate() {
        let more = if i + 1 < rows.len() { "," } else { "" };
        let _ = writeln!(out, "     | {}{}", row, more);
    }
    // Per-second IOPS: the spread a steady average can hide (the last second may be partial).
    let full: Vec<f64> = d
        .seconds
        .iter()
        .take((runtime_ns / 1_000_000_000) as usize)
        .map(|s| s.ios as f64)
        .collect();
    if !full.is_empty() {
        let n = full.len() as f64;
        let mean = full.iter().sum::<f64>() / n;
        let sd = (full.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
        let _ = writeln!(
            out,
            "    iops        : min={:.0}, max={:.0}, avg={:.2}, stdev={:.2}, samples={}",
            full.iter().cloned().fold(f64::INFINITY, f64::min),
            full.iter().cloned().fold(0.0, f64::max),
            mean,
            sd,
            full.len()
        );
    }
}

/// The disk's own time per direction, and the split of the mean latency it gives: the device's
/// time and the rest (preparing, the kernel's path to the driver, the completion's way back,
/// reaping), beside the submission call — which the device's time can overlap: a request is
/// often dispatched before the call returns, so `clat` less the device's time can go negative.
/// The kernel's count follows each direction's trace line when it was taken.
fn dev_text(out: &mut String, r: &IoResult, dev: &DevTime) {
    if !dev.untraced.is_empty() {
        return counted_text(out, r, dev);
    }
    let _ = writeln!(
        out,
        "  device (disk {}, block layer dispatch to completion, all of its IOs):",
        dev.disk
    );
    let kernel = dev.kernel.unwrap_or_default();
    for (name, d, ours, k) in [
        ("read", &dev.read, &r.read, &kernel.read),
        ("write", &dev.write, &r.write, &kernel.write),
    ] {
        if d.n == 0 && ours.ios == 0 {
            continue;
        }
        let (u, div) = unit(d.p99_ns.max(d.mean_ns) as u64);
        let _ = writeln!(
            out,
            "    {:<5} ({}): n={}, avg={:.2}, p50={:.2}, p99={:.2}",
            name,
            u,
            d.n,
            d.mean_ns / div,
            d.p50_ns / div,
            d.p99_ns / div
        );
        if k.n > 0 {
            // The kernel times a request from its allocation: what it adds to the trace's
            // dispatch-to-completion is the wait in the block layer (scheduler, tags, plug).
            let _ = writeln!(
                out,
                "    {:<5} kernel's count ({}): n={}, avg={:.2} from allocation, {:.2} of it before dispatch",
                name,
                u,
                k.n,
                k.mean_ns / div,
                (k.mean_ns - d.mean_ns) / div
            );
        }
        if ours.ios > 0 && d.n > 0 {
            split_line(out, name, ours, ("device", d.mean_ns));
        }
    }
}

/// One direction's mean latency split into the disk's part (`what`, its mean) and the rest,
/// with the submission call beside.
fn split_line(out: &mut String, name: &str, ours: &DirOut, (what, disk_ns): (&str, f64)) {
    let (u, div) = unit(ours.lat.mean_ns as u64);
    let _ = writeln!(
        out,
        "    {:<5} lat split ({}): total={:.2}, {}={:.2}, outside it={:.2} (the submission call: {:.2})",
        name,
        u,
        ours.lat.mean_ns / div,
        what,
        disk_ns / div,
        (ours.lat.mean_ns - disk_ns) / div,
        ours.slat.mean_ns / div,
    );
}

/// Without a trace, the kernel's count per direction and the split it gives, whose device part
/// also holds the wait in the block layer before dispatch.
fn counted_text(out: &mut String, r: &IoResult, dev: &DevTime) {
    let _ = writeln!(
        out,
        "  device (disk {}, the kernel's count: allocation to completion, all of its IOs; not traced: {}):",
        dev.disk, dev.untraced
    );
    let kernel = dev.kernel.unwrap_or_default();
    for (name, k, ours) in [
        ("read", &kernel.read, &r.read),
        ("write", &kernel.write, &r.write),
    ] {
        if k.n == 0 && ours.ios == 0 {
            continue;
        }
        let (u, div) = unit(k.mean_ns as u64);
        let _ = writeln!(
            out,
            "    {:<5} ({}): n={}, avg={:.2}",
            name,
            u,
            k.n,
            k.mean_ns / div
        );
        if ours.ios > 0 && k.n > 0 {
            split_line(out, name, ours, ("device and queue", k.mean_ns));
        }
    }
}

/// The lines under the job's: why the fallback engine ran, and the steady-state watch's end.
fn notes(out: &mut String, r: &IoResult) {
    if !r.engine_note.is_empty() {
        let _ = writeln!(out, "  engine: {} ({})", r.engine, r.engine_note);
    }
    if r.uring.any() || r.job.fast {
        let _ = writeln!(
            out,
            "  io_uring     : {}{}{}",
            r.uring.names(),
            if r.job.fast { " (fast)" } else { "" },
            if r.uring_note.is_empty() {
                String::new()
            } else {
                format!("; {}", r.uring_note)
            }
        );
    }
    if let Some(ss) = &r.steady {
        let _ = writeln!(
            out,
            "  steady state ({}): {} after {}s",
            ss.rule.name(),
            if ss.reached {
                "reached"
            } else {
                "not reached, stopped"
            },
            ss.at_s
        );
    }
}

pub fn text(r: &IoResult) -> String {
    let j = &r.job;
    let mut out = String::new();
    let mix = if j.read_pct > 0 && j.read_pct < 100 {
        format!(" rwmix={}", j.read_pct)
    } else {
        String::new()
    };
    let rate = match j.rate {
        None => String::new(),
        Some(super::job::Rate::Iops(v)) => format!(" rate={}IOPS({})", si(v), j.arrivals.name()),
        Some(super::job::Rate::Bps(v)) => {
            format!(" rate={}/s({})", bytes_pair(v).0, j.arrivals.name())
        }
    };
    let stop = match j.stop {
        Stop::Time(d) => format!("{}s", d.as_secs_f64()),
        Stop::Bytes(b) => size_text(b),
    };
    let _ = writeln!(
        out,
        "{}{}: bs={} qd={}{}{} workers={}{} {} {} on {} ({}), {} after {}s ramp",
        j.rw_name(),
        mix,
        size_text(j.bs),
        j.qd,
        match j.submit_batch() {
            1 => String::new(),
            b => format!(" batch={}", b),
        },
        match j.reap_max() {
            1 => String::new(),
            r => format!(" reap={}", r),
        },
        j.workers,
        rate,
        if j.direct { "direct" } else { "buffered" },
        r.engine,
        j.target.display(),
        size_text(r.target_size),
        stop,
        j.ramp.as_secs_f64()
    );
    notes(&mut out, r);
    if r.read.ios > 0 || j.read_pct > 0 {
        dir_text(&mut out, "read", &r.read, r.runtime_ns);
    }
    if r.write.ios > 0 || j.read_pct < 100 {
        dir_text(&mut out, "write", &r.write, r.runtime_ns);
    }
    if let Some(dev) = &r.dev {
        dev_text(&mut out, r, dev);
    }
    let secs = r.runtime_ns as f64 / 1e9;
    let pct = |ns: u64| {
        if secs > 0.0 {
            ns as f64 / 1e9 / secs * 100.0
        } else {
            0.0
        }
    };
    let _ = writeln!(
        out,
        "  cpu          : usr={:.2}%, sys={:.2}%, {:.2} usec per IO",
        pct(r.cpu.usr_ns),
        pct(r.cpu.sys_ns),
        r.cpu_per_io() / 1e3
    );
    if r.workers.len() > 1 {
        for w in &r.workers {
            let ios = w.read.ios + w.write.ios;
            let secs = w.runtime_ns as f64 / 1e9;
            let clat = if w.read.ios >= w.write.ios {
                &w.read.clat
            } else {
                &w.write.clat
            };
            let p = |k: &str| {
                clat.percentiles
                    .iter()
                    .find(|(key, _)| key == k)
                    .map_or("-".to_string(), |(_, v)| format!("{:.0}", *v as f64 / 1e3))
            };
            let _ = writeln!(
                out,
                "  worker {:>3}  : IOPS={}, BW={}/s, clat p50={} p99={} usec",
                w.index,
                si(if secs > 0.0 { ios as f64 / secs } else { 0.0 }),
                bytes_pair((w.read.bytes + w.write.bytes) as f64 / secs.max(1e-9)).0,
                p("50.000000"),
                p("99.000000")
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_fio() {
        assert_eq!(si(73049.0), "73.0k");
        assert_eq!(si(999.4), "999");
        assert_eq!(si(1_234_567.0), "1.23M");
        assert_eq!(bytes_pair(299.2e6), ("285MiB".into(), "299MB".into()));
        assert_eq!(unit(9_999), ("nsec", 1.0));
        assert_eq!(unit(52_188), ("usec", 1e3));
        assert_eq!(unit(12_000_000), ("msec", 1e6));
    }
}
