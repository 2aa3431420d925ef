//! `__vm-scenario iocost-qos`: `run iocost-qos` end to end inside one boot, in quick mode —
//! the baseline and one vrate picked by an adaptive grid — stopped with SIGINT inside the baseline's tune once it has
//! checkpointed a probe and its memory hog runs (what a Ctrl-C leaves behind is checked there),
//! run again and SIGKILLed inside the second configuration once its storage has checkpointed,
//! then run to the end; what the runs logged, the summary and the record. The same boot then
//! runs protection's mem-hog scenario (see `vm_protection`): one guest instead of two, CI's
//! budget being what it is. Every run takes the io.cost model from the kernel
//! (`--iocost-from-sys`) rather than measuring one first: `vm_iocost_params` measures models,
//! and this boot saves the minute a nested `iocost-params` takes.

use super::guest::{bench_cmd, entries, procs_with_arg, KnobPaths, Knobs};
use super::probe::scratch_device;
use super::vm_protection::{mem_hog_part, sigint_part, MemHogPart, SigintPart};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The job: the baseline, then an adaptive grid (`vrate-intvs=auto`) with a budget of one
/// configuration: its coarse pass of one takes the middle of the 25 candidates from 40 to 60,
/// vrate 50 (above the minimum of the emulated SSDs' models), and then stops at the budget. The
/// baseline's storage is measured once (upstream: three times) to save time. One vrate
/// configuration covers what a second did (the hints and the ceiling from an earlier
/// configuration, the resume of a configuration after the baseline) at half the time. The
/// tunes bisect (`tune-bisect`): when no size protects, as in most runs under TCG, upstream's
/// walk probes all eleven sizes (about 8 minutes of the baseline's tune) where bisection stops
/// after two or three (the top, the bottom, the bottom again if it failed only at the study);
/// the walk is protection's default and its unit tests' (`search_tests.rs`), and
/// every probe runs the same way under either.
pub const SPEC: &str = "iocost-qos:storage-base-loops=1,vrate-min=40,vrate-max=60,\
                        vrate-intvs=auto,auto-budget=1,tune-bisect";
const TIMEOUT: Duration = Duration::from_secs(60 * 60);

#[derive(Debug, Serialize)]
struct IocostQosScenario {
    qos: QosPart,
    mem_hog: MemHogPart,
    sigint: SigintPart,
}

#[derive(Debug, Serialize)]
struct QosPart {
    /// Whether the first kill came inside the baseline's tune (else, when the baseline
    /// finished between two looks — a tune of one probe — at the start of [01]).
    tune_killed: bool,
    /// The first run's log lines on the io.cost model it took.
    first_model_log: Vec<String>,
    /// The baseline's run at the first kill.
    baseline_at_kill: Value,
    /// The second run's log lines from iocost-qos itself.
    second_log: Vec<String>,
    /// The in-progress record when the second run was killed (inside [01]).
    record_at_kill: Value,
    kill_secs: f64,
    rerun_status: Option<i32>,
    rerun_secs: f64,
    /// The last run's log lines from iocost-qos itself.
    rerun_log: Vec<String>,
    summary: String,
    /// `format iocost-qos` (every run's sub-bench reports and QoS result).
    format: String,
    record: Value,
    result: Value,
    /// `run iocost-tune` after it: its exit status and the summary it printed.
    tune_status: Option<i32>,
    tune_summary: String,
    /// The iocost-tune entry's record.
    tune_record: Value,
    /// `format iocost-tune:intervals`: the report with the solutions' intervals.
    tune_intervals: String,
}

fn entry(all: &Value) -> Value {
    all.as_array()
        .and_then(|a| a.iter().find(|e| e["spec"]["kind"] == "iocost-qos"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// How a run ended.
struct Ended {
    status: std::process::ExitStatus,
    /// Its stderr lines.
    lines: Vec<String>,
    /// The entry when `stop` said to stop it, if it did.
    stopped_at: Option<Value>,
}

/// Runs `args`, stderr passed on and kept; `stop` looks at the result file twice a second and
/// says when to send the run `signal`.
fn run_logged(
    work: &Path,
    args: &[&str],
    signal: libc::c_int,
    mut stop: impl FnMut(&Value) -> bool,
) -> Result<Ended> {
    let mut child = bench_cmd(work, args)
        .stderr(Stdio::piped())
        .spawn()
        .context("starting iocost-qos")?;
    let err = child.stderr.take().context("the run's stderr")?;
    let lines = std::thread::spawn(move || {
        let mut kept = Vec::new();
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("{}", l);
            kept.push(l);
        }
        kept
    });
    let t = Instant::now();
    let mut killed_at = None;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        let e = entry(&entries(work));
        if stop(&e) {
            // SAFETY: kill(2) on the pid of our own child, not yet reaped.
            if unsafe { libc::kill(child.id() as libc::pid_t, signal) } != 0 {
                bail!("kill: {}", std::io::Error::last_os_error());
            }
            killed_at = Some(e);
            break child.wait()?;
        }
        if t.elapsed() > TIMEOUT {
            let _ = child.kill();
            bail!("iocost-qos did not end within {:?}", TIMEOUT);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let lines = lines.join().unwrap_or_default();
    Ok(Ended {
        status,
        lines,
        stopped_at: killed_at,
    })
}

fn non_empty(v: &Value) -> bool {
    v.as_array().is_some_and(|a| !a.is_empty())
}

fn tune_probes(run: &Value) -> &Value {
    &run["prot"]["scenarios"][0]["MemHogTune"]["probes"]
}

/// The first stop (SIGINT): inside the baseline's tune once it has a probe checkpointed and
/// the next probe's hog runs, or — when the baseline finished between two looks — as soon as
/// [01] has started.
fn in_baseline_hog(e: &Value) -> bool {
    let runs = &e["record"]["inc_runs"];
    (runs[0]["done"] == false
        && non_empty(tune_probes(&runs[0]))
        && !procs_with_arg("__mem-hog").is_empty())
        || !runs[1].is_null()
}

/// The second kill: inside [01] once its storage (one loop) has checkpointed.
fn in_second_storage(e: &Value) -> bool {
    let r1 = &e["record"]["inc_runs"][1];
    r1["done"] == false && non_empty(&r1["stor"]["mem_usages"])
}

pub fn iocost_qos(work: &Path) -> Result<Value> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let dev = scratch_device()?;
    // `--iocost-from-sys` reads an enabled io.cost's parameters: the kernel's defaults for the
    // device, once on (a host that uses io.cost has them on already).
    std::fs::write(
        "/sys/fs/cgroup/io.cost.qos",
        format!("{} enable=1", dev.maj_min),
    )
    .context("turning io.cost on")?;
    let paths = KnobPaths::new(&dev);
    let before = paths.read()?;
    let (qos, sigint) = qos_part(work, &paths, before)?;
    let mem_hog = mem_hog_part(work)?;
    Ok(serde_json::to_value(IocostQosScenario {
        qos,
        mem_hog,
        sigint,
    })?)
}

fn qos_part(work: &Path, paths: &KnobPaths, before: Knobs) -> Result<(QosPart, SigintPart)> {
    let args = ["--quick", "-M", "2", "--iocost-from-sys", "run", SPEC];
    let t = Instant::now();
    let first = run_logged(work, &args, libc::SIGINT, in_baseline_hog)?;
    let Some(at_sigint) = first.stopped_at else {
        bail!("the first run ended before it was stopped in the baseline's tune");
    };
    let baseline_at_kill = at_sigint["record"]["inc_runs"][0].clone();
    let tune_killed = baseline_at_kill["done"] == false;
    let sigint = sigint_part(work, paths, before, first.status, t.elapsed(), tune_killed)?;
    let t = Instant::now();
    let second = run_logged(work, &args, libc::SIGKILL, in_second_storage)?;
    let Some(at_kill) = second.stopped_at else {
        bail!("the second run ended before [01] checkpointed its storage");
    };
    let kill_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let rerun = run_logged(work, &args, libc::SIGKILL, |_| false)?;
    let rerun_secs = t.elapsed().as_secs_f64();
    let show = |what: &str| -> Result<String> {
        let out = std::process::Command::new("/proc/self/exe")
            .arg("-r")
            .arg(work.join("result.json"))
            .args([what, "iocost-qos"])
            .stdin(Stdio::null())
            .output()
            .with_context(|| what.to_string())?;
        if !out.status.success() {
            bail!("{} failed ({})", what, out.status);
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let tune = bench_cmd(work, &["run", "iocost-tune"])
        .output()
        .context("running iocost-tune")?;
    // `format` takes no --dir (bench_cmd gives one).
    let intervals = std::process::Command::new("/proc/self/exe")
        .arg("-r")
        .arg(work.join("result.json"))
        .args(["format", "iocost-tune:intervals"])
        .stdin(Stdio::null())
        .output()
        .context("format iocost-tune:intervals")?;
    let all = entries(work);
    let e = entry(&all);
    let tune_record = all
        .as_array()
        .and_then(|a| a.iter().find(|e| e["spec"]["kind"] == "iocost-tune"))
        .map(|e| e["record"].clone())
        .unwrap_or(Value::Null);
    let keep = |l: &String| l.contains("iocost-qos");
    let on_model = |l: &String| l.contains("io.cost parameters") || l.contains("iocost-params");
    let qos = QosPart {
        tune_killed,
        first_model_log: first.lines.into_iter().filter(on_model).collect(),
        baseline_at_kill,
        second_log: second.lines.into_iter().filter(keep).collect(),
        record_at_kill: at_kill["record"].clone(),
        kill_secs,
        rerun_status: rerun.status.code(),
        rerun_secs,
        rerun_log: rerun.lines.into_iter().filter(keep).collect(),
        summary: show("summary")?,
        format: show("format")?,
        record: e["record"].clone(),
        result: e["result"].clone(),
        tune_status: tune.status.code(),
        tune_summary: String::from_utf8_lossy(&tune.stdout).into_owned(),
        tune_record,
        tune_intervals: String::from_utf8_lossy(&intervals.stdout).into_owned(),
    };
    Ok((qos, sigint))
}
