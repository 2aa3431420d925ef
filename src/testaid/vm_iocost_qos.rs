//! `__vm-scenario iocost-qos`: `run iocost-qos` end to end inside one boot, in quick mode —
//! the baseline and two vrates — SIGKILLed inside the second configuration once its tune has
//! checkpointed a probe, then the same command again to the end; what the re-run logged, the
//! summary and the record. The same boot then runs protection's own scenarios with the io.cost
//! model iocost-qos left in bench.json (see `vm_protection`): one guest instead of two, CI's
//! budget being what it is.

use super::probe::scratch_device;
use super::vm_protection::{mem_hog_part, sigint_part, MemHogPart, SigintPart};
use super::vm_scenario::{bench_cmd, KnobPaths};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The job: vrates 100 and 50 beside the baseline (both above the minimum of the emulated
/// SSDs' models), the baseline's storage measured once (upstream: three times) to save time.
pub const SPEC: &str = "iocost-qos:vrate-min=50,vrate-max=100,vrate-intvs=2,storage-base-loops=1";
const TIMEOUT: Duration = Duration::from_secs(60 * 60);

#[derive(Debug, Serialize)]
struct IocostQosScenario {
    qos: QosPart,
    mem_hog: MemHogPart,
    sigint: SigintPart,
}

#[derive(Debug, Serialize)]
struct QosPart {
    /// The configuration the kill came in: 1, or 2 when the second one finished between two
    /// looks at the result file (a tune of one probe).
    killed_in: usize,
    /// The in-progress record when the first run was killed.
    record_at_kill: Value,
    kill_secs: f64,
    first_log: Vec<String>,
    rerun_status: Option<i32>,
    rerun_secs: f64,
    /// The re-run's log lines from iocost-qos itself.
    rerun_log: Vec<String>,
    summary: String,
    /// `format iocost-qos` (every run's sub-bench reports and QoS result).
    format: String,
    record: Value,
    result: Value,
}

fn entries(work: &Path) -> Value {
    std::fs::read_to_string(work.join("result.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

fn entry(all: &Value) -> Value {
    all.as_array()
        .and_then(|a| a.iter().find(|e| e["spec"]["kind"] == "iocost-qos"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Runs `args`, stderr passed on and kept; `stop` looks at the result file every second and
/// says when to SIGKILL the run.
fn run_logged(
    work: &Path,
    args: &[&str],
    mut stop: impl FnMut(&Value) -> bool,
) -> Result<(Option<i32>, Vec<String>, Option<Value>)> {
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
            child.kill().context("killing the run")?;
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
    Ok((status.code(), lines, killed_at))
}

fn non_empty(v: &Value) -> bool {
    v.as_array().is_some_and(|a| !a.is_empty())
}

/// Where the first run is SIGKILLed: inside [01] once its tune has checkpointed a probe (its
/// storage is finished then), else — when [01] finished between two looks — inside [02] once
/// its storage has checkpointed a loop.
fn kill_now(e: &Value) -> bool {
    let runs = &e["record"]["inc_runs"];
    let r1 = &runs[1];
    (r1["done"] == false && non_empty(&r1["prot"]["scenarios"][0]["MemHogTune"]["probes"]))
        || non_empty(&runs[2]["stor"]["mem_usages"])
}

pub fn iocost_qos(work: &Path) -> Result<Value> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let paths = KnobPaths::new(&scratch_device()?);
    let before = paths.read()?;
    let qos = qos_part(work)?;
    let mem_hog = mem_hog_part(work)?;
    let sigint = sigint_part(work, &paths, before)?;
    Ok(serde_json::to_value(IocostQosScenario {
        qos,
        mem_hog,
        sigint,
    })?)
}

fn qos_part(work: &Path) -> Result<QosPart> {
    let args = ["--quick", "-M", "2", "run", SPEC];
    let t = Instant::now();
    let (_, first_log, at_kill) = run_logged(work, &args, kill_now)?;
    let Some(at_kill) = at_kill else {
        bail!("the first run ended before the kill point (a probe of [01]'s tune)");
    };
    let killed_in = if at_kill["record"]["inc_runs"][1]["done"] == false {
        1
    } else {
        2
    };
    let kill_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (rerun_status, rerun, _) = run_logged(work, &args, |_| false)?;
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
    let e = entry(&entries(work));
    let keep = |l: &String| l.contains("iocost-qos");
    Ok(QosPart {
        killed_in,
        record_at_kill: at_kill["record"].clone(),
        kill_secs,
        first_log: first_log.into_iter().filter(keep).collect(),
        rerun_status,
        rerun_secs,
        rerun_log: rerun.into_iter().filter(keep).collect(),
        summary: show("summary")?,
        format: show("format")?,
        record: e["record"].clone(),
        result: e["result"].clone(),
    })
}
