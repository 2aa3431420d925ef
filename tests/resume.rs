//! The run path end to end with the hidden `selftest` bench: completion, reuse on re-run,
//! resuming after SIGKILL from the last checkpoint, refusing to study incomplete jobs, and an
//! iocost-qos result that outlives its reports.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn cmd(result: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("-r").arg(result);
    c
}

fn load(result: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(result).unwrap();
    serde_json::from_str::<Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("{} doesn't parse: {}", result.display(), e))
}

fn steps_of(entry: &Value) -> Vec<Value> {
    entry["record"]["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn completed_run_is_reused_on_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json");
    let spec = "selftest:steps=4,step-time=50ms";
    let out = cmd(&res).args(["run", spec]).assert().success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(stdout.contains("Selftest: 4 steps"), "{}", stdout);
    assert!(stdout.contains("Resumed: never"), "{}", stdout);

    let first = load(&res);
    assert_eq!(first.len(), 1);
    assert_eq!(steps_of(&first[0]).len(), 4);
    assert_eq!(first[0]["result"]["steps"], 4);
    assert_eq!(
        first[0]["sysinfo"]["bench_version"],
        env!("CARGO_PKG_VERSION")
    );
    let (start, end) = (
        first[0]["period"][0].as_u64().unwrap(),
        first[0]["period"][1].as_u64().unwrap(),
    );
    assert!(start > 0 && start <= end);

    // Same command again: nothing runs, the record and period stay as they were.
    let out = cmd(&res).args(["run", spec]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("already complete, reusing"), "{}", stderr);
    // One consistent message, not "continuing" followed by "already complete".
    assert!(!stderr.contains("continuing"), "{}", stderr);
    assert!(!stderr.contains("step 1/4 done"), "{}", stderr);
    let second = load(&res);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0]["record"], first[0]["record"]);
    assert_eq!(second[0]["period"], first[0]["period"]);
    assert_eq!(second[0]["result"], first[0]["result"]);

    // A different id is a different job: appended, and completed first in the file.
    cmd(&res)
        .args(["run", "selftest:id=other,steps=1,step-time=10ms"])
        .assert()
        .success();
    let third = load(&res);
    assert_eq!(third.len(), 2);
    assert_eq!(third[0]["spec"]["id"], "other");
    assert_eq!(third[1]["record"], first[0]["record"]);

    // study and solve re-derive the result without running.
    for mode in ["study", "solve"] {
        let out = cmd(&res).args([mode, spec]).assert().success();
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(stdout.contains("Selftest: 4 steps"), "{}", stdout);
        let after = load(&res);
        assert_eq!(after[1]["record"], first[0]["record"]);
        assert_eq!(after[1]["result"], first[0]["result"]);
        // study/solve keep the file order.
        assert_eq!(after[0]["spec"]["id"], "other");
    }
}

#[test]
fn killed_run_resumes_from_last_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json.gz");
    let spec = "selftest:id=k,steps=6,step-time=250ms";
    let mut child = std::process::Command::new(BIN)
        .arg("-r")
        .arg(&res)
        .args(["run", spec])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();

    // Wait for two checkpoints; every intermediate state must be a loadable file.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no checkpoints appeared");
        if res.exists() {
            let entries = resctl_bench::result::load_entries(&res).unwrap();
            let steps = entries[0]
                .record
                .as_ref()
                .map(|r| {
                    serde_json::from_str::<Value>(r.get()).unwrap()["steps"]
                        .as_array()
                        .unwrap()
                        .len()
                })
                .unwrap_or(0);
            if steps >= 2 {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let killed = resctl_bench::result::load_entries(&res).unwrap();
    assert_eq!(killed.len(), 1);
    assert!(killed[0].result.is_none(), "a killed run has no result");
    let killed_rec: Value = serde_json::from_str(killed[0].record.as_ref().unwrap().get()).unwrap();
    let done = killed_rec["steps"].as_array().unwrap().clone();
    assert!((2..6).contains(&done.len()), "{} steps done", done.len());

    // The job isn't complete: study and solve refuse with exit 2.
    for mode in ["study", "solve"] {
        let out = cmd(&res).args([mode, spec]).assert().code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stderr.contains("job[selftest:k] isn't complete"),
            "{}",
            stderr
        );
    }

    // summary/format showed nothing for the killed job ("no matching result" with a spec);
    // they now say how far it got and how to go on.
    let want = format!(
        "Incomplete: job[selftest:k]: {} of 6 steps done; re-run the same command to resume it\n",
        done.len()
    );
    for args in [&["summary"][..], &["summary", "selftest:id=k"], &["format"]] {
        let out = cmd(&res).args(args).assert().success();
        let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(stdout.contains(&want), "{:?}: {}", args, stdout);
        assert!(
            stdout.contains("[selftest "),
            "{:?}: header: {}",
            args,
            stdout
        );
    }

    // Re-run: continues after the last checkpointed step and completes.
    let out = cmd(&res).args(["run", spec]).assert().success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let resume_at = done.len() + 1;
    assert!(
        stderr.contains(&format!("resuming at step {} of 6", resume_at)),
        "{}",
        stderr
    );
    for s in 1..resume_at {
        assert!(
            !stderr.contains(&format!("step {}/6 done", s)),
            "step {} redone: {}",
            s,
            stderr
        );
    }
    let entries = resctl_bench::result::load_entries(&res).unwrap();
    assert_eq!(entries.len(), 1);
    let rec: Value = serde_json::from_str(entries[0].record.as_ref().unwrap().get()).unwrap();
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6);
    assert_eq!(
        &steps[..done.len()],
        &done[..],
        "checkpointed steps were redone"
    );
    assert_eq!(rec["resumed_at"], serde_json::json!([resume_at]));
    let result: Value = serde_json::from_str(entries[0].result.as_ref().unwrap().get()).unwrap();
    assert_eq!(result["steps"], 6);
    assert_eq!(result["resumed_at"], serde_json::json!([resume_at]));
    // The period starts with the first, killed run.
    assert_eq!(entries[0].period.0, killed[0].period.0);
    assert!(entries[0].period.1 >= killed[0].period.1);
}

#[test]
fn failing_step_keeps_earlier_checkpoints_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json");
    let out = cmd(&res)
        .args(["run", "selftest:steps=3,step-time=10ms,fail-at=2"])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("step 2 failed as requested"), "{}", stderr);
    let e = load(&res);
    assert_eq!(steps_of(&e[0]).len(), 1);
    assert!(e[0]["result"].is_null());
    // Incremental: the same job with other props resumes it.
    cmd(&res)
        .args(["run", "selftest:steps=3,step-time=10ms"])
        .assert()
        .success();
    let e = load(&res);
    assert_eq!(e.len(), 1);
    assert_eq!(steps_of(&e[0]).len(), 3);
    assert_eq!(e[0]["record"]["resumed_at"], serde_json::json!([2]));
    // The entry now carries the spec that completed it.
    assert!(
        e[0]["spec"]["props"][0].get("fail-at").is_none(),
        "{}",
        e[0]["spec"]
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json");
    for (args, msg) in [
        (vec!["run", "selftest"], "run requires --result"),
        (vec!["study", "selftest"], "study requires --result"),
        (vec!["solve", "selftest"], "solve requires --result"),
        (vec!["pack"], "pack requires --result"),
    ] {
        let out = Command::new(BIN).args(&args).assert().code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains(msg), "{:?}: {}", args, stderr);
    }
    let out = cmd(&res).args(["run", "merge-info"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("\"merge-info\" can't run in this version yet"),
        "{}",
        stderr
    );
    // (`run iocost-tune` without an iocost-qos run runs one first: tests/non_root.rs, as a user
    // without root, so that it can't start on this host.)
    // Nothing to study: exit 2, naming the job.
    let out = cmd(&res).args(["study", "selftest"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains(
            "job[selftest:-]: the result file holds no run of \"selftest\" to study; run it first"
        ),
        "{}",
        stderr
    );
}

#[test]
fn study_of_a_spec_the_file_lacks_names_the_stored_ones() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json");
    let entry = |loops: &str| {
        serde_json::json!({
            "spec": {"kind": "storage", "id": null, "passive": null, "props": [{"loops": loops}]},
            "period": [1, 2], "sysinfo": {}, "record": {}, "result": {}
        })
    };
    std::fs::write(&res, serde_json::to_vec(&[entry("1")]).unwrap()).unwrap();
    for mode in ["study", "solve"] {
        let out = cmd(&res).args([mode, "storage"]).assert().code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        let want = format!(
            "error: job[storage:-]: the result file holds no run of \"storage\" to {m}; it holds \
             \"storage:loops=1\", whose properties differ: pass that spec ({m} storage:loops=1)\n",
            m = mode
        );
        assert_eq!(stderr, want);
    }
    std::fs::write(&res, serde_json::to_vec(&[entry("1"), entry("2")]).unwrap()).unwrap();
    let out = cmd(&res).args(["study", "storage"]).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("it holds \"storage:loops=1\", \"storage:loops=2\", whose properties differ: pass one of those specs"),
        "{}",
        stderr
    );
}

#[test]
fn summary_after_each_job_has_the_header_block_of_format() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json");
    let out = cmd(&res)
        .args([
            "run",
            "selftest:steps=1,step-time=10ms",
            "selftest:id=b,steps=1,step-time=10ms",
        ])
        .assert()
        .success();
    let printed = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    // What `run` printed after the jobs is exactly what `summary` prints for them: separator,
    // `[selftest <version> result] <period>` header block and body, for each.
    let out = cmd(&res).args(["summary"]).assert().success();
    let summary = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(printed, summary);
    let header = format!("[selftest {} result] ", env!("CARGO_PKG_VERSION"));
    assert_eq!(printed.matches(&header).count(), 2, "{}", printed);
    assert_eq!(printed.matches(&"=".repeat(90)).count(), 2, "{}", printed);
    // `format` prints the same header block.
    let out = cmd(&res).args(["format"]).assert().success();
    let format = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let headers = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with('['))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(headers(&printed), headers(&format));
}

/// A finished iocost-qos configuration keeps its study in its run: with the reports gone,
/// `study` gives the same result from those (and `format` the same text), where without them
/// it fails as upstream's does.
#[test]
fn iocost_qos_results_kept_in_the_runs_outlive_their_reports() {
    use std::io::Read;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/Samsung_SSD_970_PRO_512GB.json.gz");
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&fixture).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let orig: Vec<Value> = serde_json::from_str(&text).unwrap();
    let qos = orig
        .iter()
        .position(|e| e["spec"]["kind"] == "iocost-qos")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, keep: bool| {
        let mut all = orig.clone();
        let e = all[qos].as_object_mut().unwrap();
        let results = e.remove("result").unwrap()["runs"].clone();
        let runs = e["record"]["runs"].as_array_mut().unwrap();
        for (run, res) in runs.iter_mut().zip(results.as_array().unwrap()) {
            if keep && !run.is_null() {
                run["result"] = res.clone();
            }
        }
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_vec(&all).unwrap()).unwrap();
        path
    };
    let no_reports = dir.path().join("no-reports");
    let format = |res: &Path| {
        let out = cmd(res)
            .env("TZ", "UTC")
            .args(["format", "iocost-qos"])
            .assert()
            .success();
        String::from_utf8_lossy(&out.get_output().stdout).into_owned()
    };
    let study = |res: &Path| {
        cmd(res)
            .arg("-d")
            .arg(&no_reports)
            .args(["study", "iocost-qos"])
            .assert()
    };
    let kept = write("kept.json", true);
    let out = study(&kept).success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("no loadable report")
            && stderr.contains("using the result kept when it finished"),
        "{}",
        stderr
    );
    let orig_path = dir.path().join("orig.json");
    std::fs::write(&orig_path, serde_json::to_vec(&orig).unwrap()).unwrap();
    assert_eq!(format(&kept), format(&orig_path));

    let lost = write("lost.json", false);
    let out = study(&lost).failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("no loadable report"), "{}", stderr);
    assert!(load(&lost)[qos].get("result").is_none());
}
