//! `__vm-scenario curve-fio`: a curve of our engine, then fio's own rate sweep on the same
//! test file — fio's io_uring engine at each point's target (`rate_iops`, the same queue
//! depth) — and per point both sides' achieved IOPS, total-latency p50/p99 (ours from when an
//! IO was due, fio's from when it issued it) and completion-latency p50/p99, with ours/fio.
//! fio comes into a guest with `vm --with-program`; on a host it is the installed one.

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};

const FIO: &str = "/usr/bin/fio";
const QD: u32 = 32;

pub struct Opts {
    /// Seconds each point is measured, after its ramp.
    pub dur: u64,
    /// The curve's points (`10/50/…`); empty for its default.
    pub points: String,
    /// The curve's arrivals: `linear` (fio's `rate_process=linear`), `poisson` or
    /// `stratified` (both against fio's `rate_process=poisson`).
    pub arrivals: String,
}

/// Our curve on `file` into `work/result.json`; its headline records.
fn ours(work: &Path, file: &Path, opts: &Opts) -> Result<Vec<Value>> {
    // `result.json`, which `--keep` copies out of a guest.
    let result = work.join("result.json");
    let _ = std::fs::remove_file(&result);
    let mut spec = format!(
        "curve:target={},qd={},dur={}s,ramp=2s,arrivals={}",
        file.display(),
        QD,
        opts.dur,
        opts.arrivals
    );
    if !opts.points.is_empty() {
        spec += &format!(",points={}", opts.points);
    }
    let bin = std::env::current_exe()?;
    let st = Command::new(&bin)
        .arg("-d")
        .arg(work)
        .arg("-r")
        .arg(&result)
        .args(["run", &spec])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .context("running the curve")?;
    if !st.success() {
        bail!("the curve failed: {}", st);
    }
    let out = Command::new(&bin)
        .arg("-r")
        .arg(&result)
        .args(["summary", "-o", "json", "curve"])
        .output()?;
    let v: Value = serde_json::from_slice(&out.stdout).context("the curve's summary")?;
    Ok(v["records"].as_array().cloned().unwrap_or_default())
}

/// fio at `rate` IOPS (`process`: linear or poisson), 4 KiB random reads at the same depth.
fn fio(file: &Path, rate: f64, dur: u64, process: &str) -> Result<Value> {
    let out = Command::new(FIO)
        .args([
            "--name=curve",
            &format!("--filename={}", file.display()),
            "--rw=randread",
            "--bs=4096",
            &format!("--iodepth={}", QD),
            "--ioengine=io_uring",
            "--direct=1",
            "--time_based",
            &format!("--runtime={}", dur),
            "--ramp_time=2",
            &format!("--rate_iops={}", rate.round() as u64),
            &format!("--rate_process={}", process),
            "--randrepeat=0",
            "--lat_percentiles=1",
            "--percentile_list=50:99",
            "--output-format=json",
        ])
        .output();
    let v = super::fio_compare::fio_json(out)?;
    let d = &v["jobs"][0]["read"];
    let pct = |h: &str, k: &str| d[h]["percentile"][k].as_f64().unwrap_or(0.0) / 1e3;
    Ok(json!({
        "iops": d["iops"].as_f64().unwrap_or(0.0),
        "lat_p50_us": pct("lat_ns", "50.000000"),
        "lat_p99_us": pct("lat_ns", "99.000000"),
        "clat_p50_us": pct("clat_ns", "50.000000"),
        "clat_p99_us": pct("clat_ns", "99.000000"),
        "lat_mean_us": d["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1e3,
    }))
}

pub fn curve_fio(work: &Path, opts: &Opts) -> Result<Value> {
    if !Path::new(FIO).exists() {
        bail!(
            "{} is missing: in a guest run vm with --with-program $(command -v fio)",
            FIO
        );
    }
    std::fs::create_dir_all(work)?;
    let file = work.join("curve-testfile");
    if crate::workload::ioengine::testfile::ensure(&file, 1 << 30, true)? {
        // Let the writes behind the new file settle before anything is measured.
        unsafe { libc::sync() };
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    let recs = ours(work, &file, opts)?;
    let mut rows = Vec::new();
    for r in recs.iter().filter(|r| r["target_iops"].is_number()) {
        let target = r["target_iops"].as_f64().unwrap_or(0.0);
        eprintln!("curve-fio: fio at {} IOPS", target);
        let process = if opts.arrivals == "linear" {
            "linear"
        } else {
            "poisson"
        };
        let f = fio(&file, target, opts.dur, process)?;
        let ratio = |a: &str, b: &str| {
            let (x, y) = (r[a].as_f64().unwrap_or(0.0), f[b].as_f64().unwrap_or(0.0));
            if y > 0.0 {
                json!(x / y)
            } else {
                Value::Null
            }
        };
        rows.push(json!({
            "point": r["point"],
            "target_iops": target,
            "ours": {
                "iops": r["iops"],
                "lat_p50_us": r["pt_lat_p50_us"],
                "lat_p99_us": r["pt_lat_p99_us"],
                "lat_mean_us": r["pt_lat_mean_us"],
                "clat_p50_us": r["pt_clat_p50_us"],
                "clat_p99_us": r["pt_clat_p99_us"],
            },
            "fio": f,
            "iops_ratio": ratio("iops", "iops"),
            "p50_ratio": ratio("pt_lat_p50_us", "lat_p50_us"),
            "p99_ratio": ratio("pt_lat_p99_us", "lat_p99_us"),
            "clat_p50_ratio": ratio("pt_clat_p50_us", "clat_p50_us"),
            "clat_p99_ratio": ratio("pt_clat_p99_us", "clat_p99_us"),
        }));
    }
    Ok(json!({
        "profile": std::env::var("RESCTL_BENCH_VM").unwrap_or_default(),
        "arrivals": opts.arrivals,
        "curve": recs,
        "rows": rows,
    }))
}
