//! Protection's parts of the `__vm-scenario iocost-qos` boot (see `vm_iocost_qos`), run after
//! iocost-qos with the kernel's io.cost model (`--iocost-from-sys`), in quick mode (a tune
//! stopped and resumed is iocost-qos's part: it is stopped inside its baseline's tune):
//!
//! 1. `run hashd-params:fake-cpu-load,mem-frac=30% protection::scenario=mem-hog,loops=1`
//!    (hashd-params with nothing left to measure gives bench.json the hashd parameters the later
//!    run reuses; its sizing is storage's, which iocost-qos has just run in this guest), then
//!    `summary` and `format protection --rstat`; what the records and results say.
//! 2. What a run stopped with SIGINT while a hog runs leaves behind (the first iocost-qos run,
//!    stopped inside its baseline's tune): hog processes, the kernel knobs and the slices.

use super::guest::{bench_cmd, entries, exists, procs_with_arg, KnobPaths, Knobs, SLICES};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The protection entry without an id.
fn entry(all: &Value) -> &Value {
    static NULL: Value = Value::Null;
    all.as_array()
        .and_then(|a| {
            a.iter()
                .find(|e| e["spec"]["kind"] == "protection" && e["spec"]["id"].is_null())
        })
        .unwrap_or(&NULL)
}

/// `resctl-bench -r WORK/result.json ARGS…` for `summary`/`format`, which take no `--dir`.
fn show(work: &Path, args: &[&str]) -> Result<String> {
    let out = std::process::Command::new("/proc/self/exe")
        .arg("-r")
        .arg(work.join("result.json"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {:?}", args))?;
    if !out.status.success() {
        bail!("{:?} failed ({})", args, out.status);
    }
    Ok(text(&out))
}

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[derive(Debug, Serialize)]
pub(super) struct MemHogPart {
    status: Option<i32>,
    /// The hashd-params entry, and its `Result:` line from the run's output.
    hashd_params: Value,
    hashd_params_line: String,
    summary: String,
    format_rstat: String,
    /// The protection entry's record and result.
    record: Value,
    result: Value,
    hog_procs_after: Vec<u32>,
    secs: f64,
}

#[derive(Debug, Serialize)]
pub(super) struct SigintPart {
    /// Seconds from the run's start to SIGINT.
    secs: f64,
    /// Whether SIGINT came inside the baseline's tune with its hog running (else at the start
    /// of [01], when the baseline's tune was one probe).
    in_hog: bool,
    status: Option<i32>,
    signal: Option<i32>,
    hog_procs_after: Vec<u32>,
    knobs_before: Knobs,
    knobs_after: Knobs,
    slices_after: Vec<String>,
    restore_json_after: bool,
}

pub(super) fn mem_hog_part(work: &Path) -> Result<MemHogPart> {
    let t = Instant::now();
    let out = bench_cmd(
        work,
        &[
            "--quick",
            "-M",
            "2",
            "--iocost-from-sys",
            "run",
            // The sata-ssd profile's memory searches find 31-37 %: hashd mostly in memory.
            "hashd-params:fake-cpu-load,mem-frac=30%",
            "protection::scenario=mem-hog,loops=1",
        ],
    )
    .output()
    .context("running protection")?;
    let secs = t.elapsed().as_secs_f64();
    let summary = show(work, &["summary", "protection"])?;
    let format_rstat = show(work, &["format", "protection", "--rstat"])?;
    let all = entries(work);
    let e = entry(&all);
    let hashd_params = all
        .as_array()
        .and_then(|a| a.iter().find(|e| e["spec"]["kind"] == "hashd-params"))
        .cloned()
        .unwrap_or(Value::Null);
    let hashd_params_line = text(&out)
        .lines()
        .find(|l| l.starts_with("Result: hash_size="))
        .unwrap_or("")
        .to_string();
    Ok(MemHogPart {
        status: out.status.code(),
        hashd_params,
        hashd_params_line,
        summary,
        format_rstat,
        record: e["record"].clone(),
        result: e["result"].clone(),
        hog_procs_after: procs_with_arg("__mem-hog"),
        secs,
    })
}

/// What the run stopped with SIGINT left: its exit status (`st`), hog processes, the knobs
/// against `before`, the slices and the restore journal.
pub(super) fn sigint_part(
    work: &Path,
    paths: &KnobPaths,
    before: Knobs,
    st: std::process::ExitStatus,
    secs: Duration,
    in_hog: bool,
) -> Result<SigintPart> {
    use std::os::unix::process::ExitStatusExt;
    // The hog's own exit after the run's may take a moment.
    std::thread::sleep(Duration::from_millis(500));
    Ok(SigintPart {
        secs: secs.as_secs_f64(),
        in_hog,
        status: st.code(),
        signal: st.signal(),
        hog_procs_after: procs_with_arg("__mem-hog"),
        knobs_before: before,
        knobs_after: paths.read()?,
        slices_after: SLICES
            .iter()
            .filter(|s| exists(s))
            .map(|s| s.to_string())
            .collect(),
        restore_json_after: work.join(crate::system::restore::JOURNAL_FILE).exists(),
    })
}
