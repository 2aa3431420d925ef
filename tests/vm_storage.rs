//! `storage` end to end in a `resctl-bench vm` guest (RESCTL_BENCH_VM_TESTS=1), with the
//! release binary (`scripts/test` builds it; a debug hashd under TCG is too slow to measure
//! anything):
//!
//! * `vm --disk-profile unthrottled -- --quick --mem-profile 2 -r r.json run storage:loops=1`
//!   shows the progress lines, and `summary` prints the memory-offloading line;
//! * re-running it as `storage:loops=1,commit` before `systest` reuses the finished entry
//!   without measuring and commits its hashd parameters again for the job after it.
//!
//! Storage on sata-ssd runs nested twice in `vm_iocost_qos`, which also kills the job right
//! after a nested storage checkpointed and resumes it without measuring again; the MOF of each disk
//! profile side by side (hdd below the SSDs) is `scripts/storage-compare`'s, by hand: CI's
//! 45 minutes don't hold a storage run per profile beside iocost-qos.
//!
//! Timings and the MOF go to stderr and to `target/vm-storage.txt`, each run's log to
//! `target/vm-storage-logs/`.

mod common;
#[path = "common/upstream.rs"]
mod upstream;

use common::{assert_has_all, enabled, release_bin, vm_output};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

fn vm_cmd(cwd: &Path, profile: &str, args: &[&str]) -> Command {
    let mut c = Command::new(release_bin());
    c.current_dir(cwd)
        .args(["vm", "--disk-profile", profile, "--timeout", "15min", "--"])
        .args(args);
    c
}

fn logs_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vm-storage-logs");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs one VM command; its stderr (the bench's log) is kept as
/// `target/vm-storage-logs/<label>.log`, so a slow or odd run can be read afterwards.
fn run_vm(cwd: &Path, profile: &str, args: &[&str], label: &str) -> (Output, f64) {
    let t = Instant::now();
    let out = vm_output(|| vm_cmd(cwd, profile, args));
    let secs = t.elapsed().as_secs_f64();
    let _ = std::fs::write(logs_dir().join(format!("{}.log", label)), &out.stderr);
    eprintln!(
        "vm --disk-profile {} -- {:?}: {:?} in {:.0}s",
        profile,
        args,
        out.status.code(),
        secs
    );
    (out, secs)
}

fn assert_ok(out: &Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn entries(result: &Path) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(result).unwrap()).unwrap();
    v.as_array().cloned().unwrap_or_default()
}

fn summary(cwd: &Path) -> String {
    let out = Command::new(release_bin())
        .current_dir(cwd)
        .args(["-r", "r.json", "summary"])
        .output()
        .unwrap();
    assert_ok(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_args(loops: u32) -> Vec<String> {
    let mut v: Vec<String> = ["--quick", "--mem-profile", "2", "-r", "r.json", "run"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(format!("storage:loops={}", loops));
    v
}

/// The MOF of the result in `cwd`, after checking `summary` prints it; returns the line too.
fn mof(cwd: &Path) -> (f64, String, Value) {
    let sum = summary(cwd);
    let line = sum
        .lines()
        .find(|l| l.starts_with("Memory offloading: factor="))
        .unwrap_or_else(|| panic!("no MOF line in summary:\n{}", sum))
        .to_string();
    assert!(sum.contains("quick"), "quick runs are marked:\n{}", sum);
    let e = entries(&cwd.join("r.json"));
    assert_eq!(e.len(), 1);
    assert!(e[0].get("incomplete").is_none());
    // Upstream 2.2.6 can load what we wrote.
    assert_eq!(upstream::problems(&e[0]), Vec::<String>::new());
    let res = &e[0]["result"];
    let mof = res["mem_offload_factor"].as_f64().unwrap();
    assert!(mof > 0.0, "{}", res);
    let nr = res["nr_reports"].as_array().unwrap();
    assert!(
        nr[0].as_u64().unwrap() > 30,
        "per-second reports studied: {:?}",
        nr
    );
    (mof, line, e[0]["record"].clone())
}

#[test]
fn vm_storage_resume_and_reuse() {
    if !enabled() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut report = String::new();
    let save = |report: &str| {
        let _ = std::fs::write(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vm-storage.txt"),
            report,
        );
    };

    // unthrottled, one loop: progress lines, the MOF, a result upstream can load. (A kill and
    // the resume from a storage checkpoint are vm_iocost_qos's.)
    let cwd = tmp.path().join("unthrottled");
    std::fs::create_dir_all(&cwd).unwrap();
    let args = run_args(1);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let (out, secs) = run_vm(&cwd, "unthrottled", &args, "unthrottled");
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Memory offloading: factor="), "{}", stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The progress display, in plain lines: the loop, each probe with its footprint, and a
    // readable verdict per probe.
    assert_has_all(
        &stderr,
        &[
            "] storage loop 1/1 | ",
            "] storage loop 1/1 · memory search probe 1 (going up) · ",
            "] memory search probe 1 (going up) at ",
            "] host restored (",
        ],
        "the log",
    );
    let (un, line, rec) = mof(&cwd);
    assert_eq!(rec["mem_usages"].as_array().unwrap().len(), 1);
    report += &format!(
        "unthrottled  MOF {:.3}: loops=1 in {:.0}s (retries {}): {}\n",
        un, secs, rec["retries"], line
    );
    eprintln!("{}", report);
    save(&report);

    // A finished entry is reused, and with `commit` its parameters are committed again for
    // the jobs after it: here `systest`, which runs on the host setup.
    let result = cwd.join("r.json");
    let before = entries(&result);
    let args = [
        "--quick",
        "--mem-profile",
        "2",
        "-r",
        "r.json",
        "run",
        "storage:loops=1,commit",
        "systest",
    ];
    let (out, secs) = run_vm(&cwd, "unthrottled", &args, "reused-and-committed");
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reusing"), "{}", stderr);
    assert!(
        !stderr.contains("storage loop 1/"),
        "nothing measured again:\n{}",
        stderr
    );
    assert!(
        stderr.contains("committing hashd parameters of the reused record"),
        "{}",
        stderr
    );
    let after = entries(&result);
    let by_kind = |e: &[Value], kind: &str| -> Value {
        e.iter()
            .find(|e| e["spec"]["kind"] == kind)
            .unwrap_or_else(|| panic!("no {} entry: {:?}", kind, e))
            .clone()
    };
    let (b, a) = (by_kind(&before, "storage"), by_kind(&after, "storage"));
    assert_eq!(b["record"], a["record"]);
    assert_eq!(b["result"], a["result"]);
    assert!(by_kind(&after, "systest")["incomplete"].is_null());
    report += &format!(
        "re-run reused the storage entry and committed its hashd parameters for systest in {:.0}s\n",
        secs
    );
    eprintln!("{}", report);
    save(&report);
    common::keep_result(&result, "storage");
}
