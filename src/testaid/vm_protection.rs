//! `__vm-scenario protection`: the protection bench end to end inside one boot, in quick mode.
//!
//! 1. `run hashd-params:fake-cpu-load protection::scenario=mem-hog,loops=1` (the sizing gives
//!    bench.json the hashd parameters the later runs reuse), then `summary` and
//!    `format protection --rstat`; what the record and result say.
//! 2. A two-point `mem-hog-tune` (hashd's size and half of it) SIGKILLed once a probe is
//!    checkpointed, then run again to the end: the probes at the kill and at the end.
//! 3. A mem-hog run stopped with SIGINT while its hog runs: hog processes, the kernel knobs
//!    and the slices afterwards.

use super::probe::scratch_device;
use super::vm_scenario::{bench_cmd, exists, KnobPaths, Knobs, SLICES};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// Processes whose command line has `arg` as an argument.
pub fn procs_with_arg(arg: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{}/cmdline", pid))
                .map(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

fn entries(work: &Path) -> Value {
    std::fs::read_to_string(work.join("result.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

fn entry<'a>(all: &'a Value, id: Option<&str>) -> &'a Value {
    static NULL: Value = Value::Null;
    all.as_array()
        .and_then(|a| {
            a.iter()
                .find(|e| e["spec"]["kind"] == "protection" && e["spec"]["id"].as_str() == id)
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
struct MemHogPart {
    status: Option<i32>,
    summary: String,
    format_rstat: String,
    /// The protection entry's record and result.
    record: Value,
    result: Value,
    hog_procs_after: Vec<u32>,
    secs: f64,
}

#[derive(Debug, Serialize)]
struct TunePart {
    spec: String,
    /// The probes checkpointed when the run was killed, and all of them at the end.
    probes_at_kill: Value,
    kill_status: Option<i32>,
    rerun_status: Option<i32>,
    rerun_stderr_tail: Vec<String>,
    record: Value,
    summary: String,
    secs: f64,
}

#[derive(Debug, Serialize)]
struct SigintPart {
    /// Seconds the hog ran before SIGINT.
    hog_seen_after: f64,
    status: Option<i32>,
    signal: Option<i32>,
    hog_procs_after: Vec<u32>,
    knobs_before: Knobs,
    knobs_after: Knobs,
    slices_after: Vec<String>,
    restore_json_after: bool,
}

#[derive(Debug, Serialize)]
struct ProtectionScenario {
    mem_hog: MemHogPart,
    tune: TunePart,
    sigint: SigintPart,
}

const TIMEOUT: Duration = Duration::from_secs(20 * 60);

fn mem_hog_part(work: &Path) -> Result<MemHogPart> {
    let t = Instant::now();
    let out = bench_cmd(
        work,
        &[
            "--quick",
            "-M",
            "2",
            "run",
            "hashd-params:fake-cpu-load",
            "protection::scenario=mem-hog,loops=1",
        ],
    )
    .output()
    .context("running protection")?;
    let secs = t.elapsed().as_secs_f64();
    let summary = show(work, &["summary"])?;
    let format_rstat = show(work, &["format", "protection", "--rstat"])?;
    let all = entries(work);
    let e = entry(&all, None);
    Ok(MemHogPart {
        status: out.status.code(),
        summary,
        format_rstat,
        record: e["record"].clone(),
        result: e["result"].clone(),
        hog_procs_after: procs_with_arg("__mem-hog"),
        secs,
    })
}

/// hashd's footprint from bench.json (`mem_size × mem_frac`), bytes.
fn hashd_size(work: &Path) -> Result<u64> {
    let p = work.join("bench.json");
    let k = crate::system::bench_json::read_knobs(&p)?
        .with_context(|| format!("no {}", p.display()))?;
    Ok((k.hashd.mem_size as f64 * k.hashd.mem_frac) as u64)
}

fn tune_part(work: &Path) -> Result<TunePart> {
    let t = Instant::now();
    let size = hashd_size(work)?;
    let spec = format!(
        "protection:id=tune:scenario=mem-hog-tune,size-min={},size-max={},intvs=1",
        size / 2,
        size
    );
    let args = ["--quick", "-M", "2", "run", spec.as_str()];
    let mut child = bench_cmd(work, &args)
        .spawn()
        .context("starting the tune")?;
    let probes_at_kill = loop {
        std::thread::sleep(Duration::from_millis(500));
        let all = entries(work);
        let probes = &entry(&all, Some("tune"))["record"]["scenarios"][0]["MemHogTune"]["probes"];
        if probes.as_array().is_some_and(|p| !p.is_empty()) {
            break probes.clone();
        }
        if let Some(st) = child.try_wait()? {
            bail!("the tune ended ({}) before checkpointing a probe", st);
        }
        if t.elapsed() > TIMEOUT {
            let _ = child.kill();
            bail!("no probe checkpointed within {:?}", TIMEOUT);
        }
    };
    child.kill().context("killing the tune")?;
    let kill = child.wait()?;
    let rerun = bench_cmd(work, &args)
        .stderr(std::process::Stdio::piped())
        .output()
        .context("re-running the tune")?;
    let stderr = String::from_utf8_lossy(&rerun.stderr);
    // Passed on, as every run's log is.
    eprint!("{}", stderr);
    let all = entries(work);
    let summary = show(work, &["summary", "protection:id=tune"])?;
    Ok(TunePart {
        spec,
        probes_at_kill,
        kill_status: kill.code(),
        rerun_status: rerun.status.code(),
        rerun_stderr_tail: stderr.lines().rev().take(40).map(str::to_string).collect(),
        record: entry(&all, Some("tune"))["record"].clone(),
        summary,
        secs: t.elapsed().as_secs_f64(),
    })
}

fn sigint_part(work: &Path, paths: &KnobPaths, before: Knobs) -> Result<SigintPart> {
    use std::os::unix::process::ExitStatusExt;
    let args = [
        "--quick",
        "-M",
        "2",
        "run",
        "protection:id=int:scenario=mem-hog,loops=1",
    ];
    let t = Instant::now();
    let mut child = bench_cmd(work, &args).spawn().context("starting the run")?;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if !procs_with_arg("__mem-hog").is_empty() {
            break;
        }
        if let Some(st) = child.try_wait()? {
            bail!("the run ended ({}) before its hog started", st);
        }
        if t.elapsed() > TIMEOUT {
            let _ = child.kill();
            bail!("no hog within {:?}", TIMEOUT);
        }
    }
    let hog_seen_after = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) on the pid of our own child.
    if unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) } != 0 {
        bail!("kill: {}", std::io::Error::last_os_error());
    }
    let st = child.wait()?;
    std::thread::sleep(Duration::from_millis(500));
    Ok(SigintPart {
        hog_seen_after,
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

pub fn protection(work: &Path) -> Result<Value> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let paths = KnobPaths::new(&scratch_device()?);
    let before = paths.read()?;
    let mem_hog = mem_hog_part(work)?;
    let tune = tune_part(work)?;
    let sigint = sigint_part(work, &paths, before)?;
    Ok(serde_json::to_value(ProtectionScenario {
        mem_hog,
        tune,
        sigint,
    })?)
}
