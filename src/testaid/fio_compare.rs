//! `__vm-scenario fio-compare`: the same jobs through our engine and through fio's io_uring
//! engine (fio put into the guest with `vm --with-program`), one after the other on the same
//! test file, and — when `/dev/ram0` exists (`vm --with-module brd:…`) — the peak rate on that
//! RAM disk. Prints per job both sides' IOPS, completion latency p50/p99 and CPU time per IO,
//! and at QD > 1 also fio's with batched submission (`iodepth_batch_submit` = the depth).

use crate::workload::ioengine::hist::LatHist;
use crate::workload::ioengine::job::{IoJob, Pattern, Stop};
use crate::workload::ioengine::result::IoResult;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const FIO: &str = "/usr/bin/fio";
const RAMP: u64 = 2;

struct Spec {
    name: &'static str,
    write: bool,
    seq: bool,
    bs: u64,
    qd: u32,
}

const JOBS: &[Spec] = &[
    Spec {
        name: "randread 4K QD1",
        write: false,
        seq: false,
        bs: 4096,
        qd: 1,
    },
    Spec {
        name: "randread 4K QD32",
        write: false,
        seq: false,
        bs: 4096,
        qd: 32,
    },
    Spec {
        name: "randwrite 4K QD32",
        write: true,
        seq: false,
        bs: 4096,
        qd: 32,
    },
    Spec {
        name: "read 1M QD4",
        write: false,
        seq: true,
        bs: 1 << 20,
        qd: 4,
    },
];

fn ours(s: &Spec, target: &Path, dur: u64) -> Result<Value> {
    let mut j = IoJob::new(target.to_path_buf());
    j.read_pct = if s.write { 0 } else { 100 };
    j.pattern = if s.seq { Pattern::Seq } else { Pattern::Rand };
    j.bs = s.bs;
    j.qd = s.qd;
    j.ramp = Duration::from_secs(RAMP);
    j.stop = Stop::Time(Duration::from_secs(dur));
    let r: IoResult = crate::workload::ioengine::run::run(&j, &AtomicBool::new(false))?;
    let d = if s.write { &r.write } else { &r.read };
    let h = LatHist::from_out(&d.clat).map_err(anyhow::Error::msg)?;
    Ok(json!({
        "engine": r.engine,
        "iops": d.iops,
        "clat_p50_us": h.percentile(50.0) as f64 / 1e3,
        "clat_p99_us": h.percentile(99.0) as f64 / 1e3,
        "cpu_ns_per_io": r.cpu_per_io(),
    }))
}

/// fio with its defaults, or (`batched`) submitting and reaping up to the queue depth per
/// call, as our engine does.
fn fio(s: &Spec, target: &Path, size: u64, dur: u64, batched: bool, extra: &str) -> Result<Value> {
    let rw = match (s.write, s.seq) {
        (false, false) => "randread",
        (true, false) => "randwrite",
        (false, true) => "read",
        (true, true) => "write",
    };
    let mut cmd = Command::new(FIO);
    cmd.args(extra.split_whitespace());
    if batched {
        cmd.args([
            format!("--iodepth_batch_submit={}", s.qd),
            format!("--iodepth_batch_complete_max={}", s.qd),
        ]);
    }
    let out = cmd
        .args([
            "--name=cmp",
            &format!("--filename={}", target.display()),
            &format!("--rw={}", rw),
            &format!("--bs={}", s.bs),
            &format!("--iodepth={}", s.qd),
            "--ioengine=io_uring",
            "--direct=1",
            "--time_based",
            &format!("--runtime={}", dur),
            &format!("--ramp_time={}", RAMP),
            &format!("--size={}", size),
            "--randrepeat=0",
            "--output-format=json",
        ])
        .output()
        .with_context(|| format!("running {}", FIO))?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before its JSON.
    let v: Value = serde_json::from_str(&text[text.find('{').unwrap_or(0)..])
        .with_context(|| format!("fio's output: {}", text))?;
    let j = &v["jobs"][0];
    let d = &j[if s.write { "write" } else { "read" }];
    let pct = |k: &str| d["clat_ns"]["percentile"][k].as_f64().unwrap_or(0.0) / 1e3;
    let ios = d["total_ios"].as_f64().unwrap_or(0.0);
    let runtime_ms = j["job_runtime"].as_f64().unwrap_or(0.0);
    let cpu = (j["usr_cpu"].as_f64().unwrap_or(0.0) + j["sys_cpu"].as_f64().unwrap_or(0.0)) / 100.0
        * runtime_ms
        * 1e6;
    Ok(json!({
        "engine": if batched { "fio io_uring, batched" } else { "fio io_uring" },
        "iops": d["iops"].as_f64().unwrap_or(0.0),
        "clat_p50_us": pct("50.000000"),
        "clat_p99_us": pct("99.000000"),
        "cpu_ns_per_io": if ios > 0.0 { cpu / ios } else { 0.0 },
    }))
}

fn ratio(o: &Value, f: &Value, k: &str) -> Value {
    let (a, b) = (o[k].as_f64().unwrap_or(0.0), f[k].as_f64().unwrap_or(0.0));
    if b > 0.0 {
        json!(a / b)
    } else {
        Value::Null
    }
}

/// Job `i` on `target`: fio and ours, the order alternating from job to job so neither always
/// runs first; at QD > 1 also fio with batched submission.
fn compare(i: usize, s: &Spec, target: &Path, size: u64, dur: u64, extra: &str) -> Result<Value> {
    eprintln!("fio-compare: {} on {}", s.name, target.display());
    let (o, f) = if i % 2 == 0 {
        let f = fio(s, target, size, dur, false, extra)?;
        (ours(s, target, dur)?, f)
    } else {
        let o = ours(s, target, dur)?;
        (o, fio(s, target, size, dur, false, extra)?)
    };
    let fb = if s.qd > 1 {
        Some(fio(s, target, size, dur, true, extra)?)
    } else {
        None
    };
    Ok(json!({
        "job": s.name,
        "target": target.display().to_string(),
        "ours": o,
        "fio": f,
        "fio_batched": fb,
        "iops_ratio": ratio(&o, &f, "iops"),
        "p50_ratio": ratio(&o, &f, "clat_p50_us"),
        "p99_ratio": ratio(&o, &f, "clat_p99_us"),
        "cpu_ratio": ratio(&o, &f, "cpu_ns_per_io"),
        "cpu_ratio_batched": fb.as_ref().map_or(Value::Null, |fb| ratio(&o, fb, "cpu_ns_per_io")),
        "iops_ratio_batched": fb.as_ref().map_or(Value::Null, |fb| ratio(&o, fb, "iops")),
    }))
}

pub fn fio_compare(work: &Path, dur: u64, extra: &str) -> Result<Value> {
    if !Path::new(FIO).exists() {
        bail!(
            "{} is not in the guest: run vm with --with-program $(command -v fio)",
            FIO
        );
    }
    let file = work.join("fio-testfile");
    let size = 1u64 << 30;
    if crate::workload::ioengine::testfile::ensure(&file, size, true)? {
        // Let the writes behind the new file settle before anything is measured.
        unsafe { libc::sync() };
        std::thread::sleep(Duration::from_secs(5));
    }
    let mut rows = Vec::new();
    for (i, s) in JOBS.iter().enumerate() {
        rows.push(compare(i, s, &file, size, dur, extra)?);
    }
    let ram = Path::new("/dev/ram0");
    if ram.exists() {
        let size = crate::workload::ioengine::target::size_of(&std::fs::File::open(ram)?)?;
        rows.push(compare(0, &JOBS[1], ram, size, dur, extra)?);
    }
    Ok(json!({ "profile": std::env::var("RESCTL_BENCH_VM").unwrap_or_default(), "rows": rows }))
}
