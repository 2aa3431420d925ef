//! `__vm-scenario iocost-qos`: `run iocost-qos` end to end inside one boot, in quick mode —
//! the baseline and two vrates — SIGKILLed once the second configuration has checkpointed its
//! storage, then the same command again to the end; what the re-run logged, the summary and
//! the record.

use super::vm_scenario::bench_cmd;
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
        std::thread::sleep(Duration::from_secs(1));
    };
    let lines = lines.join().unwrap_or_default();
    Ok((status.code(), lines, killed_at))
}

pub fn iocost_qos(work: &Path) -> Result<Value> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let args = ["--quick", "-M", "2", "run", SPEC];
    let t = Instant::now();
    // Killed once the second configuration ([01]) has a storage loop checkpointed.
    let (_, first_log, at_kill) = run_logged(work, &args, |e| {
        e["record"]["inc_runs"][1]["stor"]["mem_usages"]
            .as_array()
            .is_some_and(|u| !u.is_empty())
    })?;
    let Some(at_kill) = at_kill else {
        bail!("the first run ended before the second configuration checkpointed its storage");
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
    Ok(serde_json::to_value(IocostQosScenario {
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
    })?)
}
