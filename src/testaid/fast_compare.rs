//! `__vm-scenario fast-compare`: our engine's plain and `fast` io_uring paths against fio's
//! io_uring engine at its defaults and with its fastest options, 4 KiB random reads from one
//! worker at QD 1 and QD 32, one after the other on one target (a memory-backed device, or a
//! disk): per run IOPS, slat/clat/lat means, clat p50/p99, the engine's own CPU time per IO
//! and the whole system's busy CPU time per IO (which also holds what an engine doesn't count
//! of itself, like fio's submission-polling thread). Runs in a guest or on a host.

use crate::workload::ioengine::hist::LatHist;
use crate::workload::ioengine::job::{IoJob, Stop};
use crate::workload::ioengine::result::IoResult;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

const FIO: &str = "/usr/bin/fio";
const RAMP: u64 = 2;

pub struct Opts {
    /// Seconds each run is measured, after the ramp.
    pub dur: u64,
    /// The target; `None`: `/dev/nullb0` when there, else a test file in the work directory.
    pub target: Option<std::path::PathBuf>,
    /// Times each variant runs; every other round in reverse order.
    pub rounds: u32,
}

/// The ways a run is made: ours plain, fast, fast with the submission poller; fio plain, fio
/// with registered buffers and file, batches and (where the device polls) hipri, and that with
/// its submission poller too.
const VARIANTS: [&str; 6] = [
    "ours",
    "fio",
    "ours fast",
    "fio fixedbufs,registerfiles,hipri,batched",
    "ours fast+sqthread-poll",
    "fio fixedbufs,registerfiles,hipri,batched,sqthread_poll",
];

/// Busy CPU nanoseconds of the whole system so far (/proc/stat).
fn busy_ns() -> Result<f64> {
    let p = Path::new("/proc/stat");
    let text = std::fs::read_to_string(p).context("reading /proc/stat")?;
    Ok(
        crate::report::usage::parse_proc_stat(p, &text, crate::report::usage::clock_ticks())?.busy
            * 1e9,
    )
}

fn ours(target: &Path, qd: u32, dur: u64, fast: bool, sqpoll: bool) -> Result<Value> {
    let mut j = IoJob::new(target.to_path_buf());
    j.qd = qd;
    j.ramp = Duration::from_secs(RAMP);
    j.stop = Stop::Time(Duration::from_secs(dur));
    if fast {
        j.fast = true;
        j.batch = 0;
        j.reap = 0;
    }
    // The defaults otherwise (`taskrun` among them, as fio's).
    j.uring.sqthread_poll = sqpoll;
    let r: IoResult = crate::workload::ioengine::run::run(&j, &AtomicBool::new(false))?;
    let h = LatHist::from_out(&r.read.clat).map_err(anyhow::Error::msg)?;
    Ok(json!({
        "picked": r.uring.names(),
        "iops": r.read.iops,
        "ios": r.read.ios,
        "slat_mean_us": r.read.slat.mean_ns / 1e3,
        "clat_mean_us": r.read.clat.mean_ns / 1e3,
        "lat_mean_us": r.read.lat.mean_ns / 1e3,
        "clat_p50_us": h.percentile(50.0) as f64 / 1e3,
        "clat_p99_us": h.percentile(99.0) as f64 / 1e3,
        "cpu_ns_per_io": r.cpu_per_io(),
    }))
}

fn fio(target: &Path, size: u64, qd: u32, dur: u64, opts: &[String]) -> Result<Value> {
    let out = Command::new(FIO)
        .args([
            "--name=fast",
            &format!("--filename={}", target.display()),
            "--rw=randread",
            "--bs=4096",
            &format!("--iodepth={}", qd),
            "--ioengine=io_uring",
            "--direct=1",
            "--time_based",
            &format!("--runtime={}", dur),
            &format!("--ramp_time={}", RAMP),
            &format!("--size={}", size),
            "--randrepeat=0",
            "--percentile_list=50:99",
            "--output-format=json",
        ])
        // The engine's own options only after `--ioengine`.
        .args(opts)
        .output();
    let v = super::fio_compare::fio_json(out)?;
    let j = &v["jobs"][0];
    let d = &j["read"];
    let mean = |h: &str| d[h]["mean"].as_f64().unwrap_or(0.0) / 1e3;
    let ios = d["total_ios"].as_f64().unwrap_or(0.0);
    let cpu = super::fio_compare::fio_cpu_ns(j);
    let pct = |k: &str| d["clat_ns"]["percentile"][k].as_f64().unwrap_or(0.0) / 1e3;
    Ok(json!({
        "picked": opts.join(" "),
        "iops": d["iops"].as_f64().unwrap_or(0.0),
        "ios": ios,
        "slat_mean_us": mean("slat_ns"),
        "clat_mean_us": mean("clat_ns"),
        "lat_mean_us": mean("lat_ns"),
        "clat_p50_us": pct("50.000000"),
        "clat_p99_us": pct("99.000000"),
        "cpu_ns_per_io": if ios > 0.0 { cpu / ios } else { 0.0 },
    }))
}

/// fio's options for a variant: `hipri` only where the device polls.
fn fio_opts(variant: &str, qd: u32, polls: bool) -> Vec<String> {
    let mut o = Vec::new();
    let Some(set) = variant.strip_prefix("fio ") else {
        return o;
    };
    for opt in set.split(',') {
        match opt {
            "batched" => o.extend([
                format!("--iodepth_batch_submit={}", qd),
                format!("--iodepth_batch_complete_max={}", qd),
            ]),
            "hipri" if !polls => {}
            other => o.push(format!("--{}", other)),
        }
    }
    o
}

/// One run of `variant`, with the system's busy CPU time per IO beside the engine's own.
fn one(variant: &str, target: &Path, size: u64, qd: u32, dur: u64, polls: bool) -> Result<Value> {
    eprintln!(
        "fast-compare: {} at QD{} on {}",
        variant,
        qd,
        target.display()
    );
    let (b0, t0) = (busy_ns()?, Instant::now());
    let mut v = match variant {
        "ours" => ours(target, qd, dur, false, false)?,
        "ours fast" => ours(target, qd, dur, true, false)?,
        "ours fast+sqthread-poll" => ours(target, qd, dur, true, true)?,
        _ => fio(target, size, qd, dur, &fio_opts(variant, qd, polls))?,
    };
    let busy = busy_ns()? - b0;
    let secs = t0.elapsed().as_secs_f64();
    // The busy time covers the ramp as well: per IO over the IOs of the whole run, estimated
    // from the measured rate.
    let ios_all = v["iops"].as_f64().unwrap_or(0.0) * secs;
    v["busy_cpus"] = json!(busy / 1e9 / secs);
    v["busy_ns_per_io"] = json!(if ios_all > 0.0 { busy / ios_all } else { 0.0 });
    v["variant"] = json!(variant);
    v["qd"] = json!(qd);
    Ok(v)
}

pub fn fast_compare(work: &Path, opts: &Opts) -> Result<Value> {
    if !Path::new(FIO).exists() {
        bail!(
            "{} is not here: install fio (in a guest: vm --with-program $(command -v fio))",
            FIO
        );
    }
    let target = match &opts.target {
        Some(t) => t.clone(),
        None if Path::new("/dev/nullb0").exists() => "/dev/nullb0".into(),
        None => {
            let f = work.join("fio-testfile");
            std::fs::create_dir_all(work)?;
            crate::workload::ioengine::testfile::ensure(&f, 1 << 30, true)?;
            f
        }
    };
    let t = crate::workload::ioengine::target::open(&target, false, true)?;
    let mut rows = Vec::new();
    for round in 0..opts.rounds {
        for qd in [1, 32] {
            let mut order = VARIANTS.to_vec();
            if round % 2 == 1 {
                order.reverse();
            }
            for v in order {
                let mut row = one(v, &target, t.size, qd, opts.dur, t.polls)?;
                row["round"] = json!(round);
                rows.push(row);
            }
        }
    }
    Ok(json!({
        "target": target.display().to_string(),
        "polls": t.polls,
        "size": t.size,
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
        "rows": rows,
    }))
}
