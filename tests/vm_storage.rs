//! `storage` end to end in `resctl-bench vm` guests (RESCTL_BENCH_VM_TESTS=1), with the
//! release binary (`scripts/test` builds it; a debug hashd under TCG is too slow to measure
//! anything):
//!
//! * `vm --disk-profile X -- --quick --mem-profile 2 -r r.json run storage:loops=1` completes
//!   for sata-ssd and hdd; `summary` prints the memory-offloading line;
//! * for unthrottled the same command with `loops=2` is SIGKILLed once its first loop is
//!   checkpointed, and re-running it finishes with that loop kept (CI time allows four loops in
//!   all, so this run also gives the unthrottled MOF);
//! * re-running it reuses the finished entry without measuring and, with `apply`, applies its
//!   parameters again for the job after it in the same invocation: `hashd-params:fake-cpu-load`,
//!   which sizes hashd and records upstream's knobs (given the avail the unthrottled run
//!   measured, which saves measuring it again);
//! * the MOFs follow the device speed: hdd (6 ms per IO, 150 IOPS) below both SSDs, and
//!   sata-ssd (1 ms per IO) not above unthrottled by more than the quick search resolves
//!   (`RESOLUTION`): the footprint it finds is within one 5 % bracket of the boundary, so
//!   two devices this close can land one bracket apart either way.
//!
//! Timings and MOFs go to stderr and to `target/vm-storage.txt`, each run's log to
//! `target/vm-storage-logs/`.

mod common;
#[path = "common/upstream.rs"]
mod upstream;

use common::{enabled, release_bin, vm_output};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How far below sata-ssd the unthrottled MOF may come out: each quick search ends within one
/// 5 % bracket below its boundary, and the two devices differ by about one bracket.
const RESOLUTION: f64 = 0.10;

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
fn vm_storage_mof_by_device_resume_and_reuse() {
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

    // unthrottled, loops=2: killed after the first loop, then resumed.
    let cwd = tmp.path().join("unthrottled");
    std::fs::create_dir_all(&cwd).unwrap();
    let args = run_args(2);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let t = Instant::now();
    let log = logs_dir().join("unthrottled-killed.log");
    let mut child = vm_cmd(&cwd, "unthrottled", &args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let result = cwd.join("r.json");
    let first = loop {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the loops=2 run ended ({}) before it was killed", st);
        }
        let e = if result.exists() {
            entries(&result)
        } else {
            Vec::new()
        };
        let done = e
            .first()
            .and_then(|e| e["record"]["mem_usages"].as_array().map(|a| a.len()))
            .unwrap_or(0);
        if done == 1 {
            break e[0]["record"].clone();
        }
        assert!(t.elapsed() < Duration::from_secs(1200), "no checkpoint");
        std::thread::sleep(Duration::from_secs(1));
    };
    // SIGKILL to vm: qemu dies with it (parent-death signal), as after a crash.
    child.kill().unwrap();
    child.wait().unwrap();
    let killed_at = t.elapsed().as_secs_f64();
    assert_eq!(entries(&result)[0]["incomplete"], true);
    let (out, secs) = run_vm(&cwd, "unthrottled", &args, "unthrottled-resumed");
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 of 2 loops done"), "{}", stderr);
    let (un, line, rec) = mof(&cwd);
    assert_eq!(rec["mem_usages"].as_array().unwrap().len(), 2);
    assert_eq!(rec["mem_usages"][0], first["mem_usages"][0]);
    assert_eq!(rec["mem_sizes"][0], first["mem_sizes"][0]);
    report += &format!(
        "unthrottled  MOF {:.3}: loops=2 killed after loop 1 at {:.0}s, resumed and finished in {:.0}s (retries {}): {}\n",
        un, killed_at, secs, rec["retries"], line
    );
    eprintln!("{}", report);
    save(&report);

    // A finished entry is reused, and with `apply` its parameters are applied again for the
    // jobs after it: here hashd-params with fake CPU load (the same sizing, its knobs as the
    // record and result), given the avail the unthrottled run measured.
    let before = entries(&result);
    let avail = rec["mem"]["avail"].as_u64().unwrap().to_string();
    let args = [
        "--quick",
        "--mem-profile",
        "2",
        "--mem-avail",
        &avail,
        "-r",
        "r.json",
        "run",
        "storage:loops=2,apply",
        "hashd-params:fake-cpu-load",
    ];
    let (out, secs) = run_vm(&cwd, "unthrottled", &args, "reused-and-hashd-params");
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reusing"), "{}", stderr);
    assert!(
        !stderr.contains("storage loop 1/"),
        "nothing measured again:\n{}",
        stderr
    );
    assert!(
        stderr.contains("applying hashd parameters of the reused record"),
        "{}",
        stderr
    );
    assert!(stderr.contains("committing hashd parameters"), "{}", stderr);
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
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Result: hash_size="))
        .unwrap_or_else(|| panic!("no Result line:\n{}", stdout))
        .to_string();
    assert!(line.ends_with(" fake_cpu_load"), "{}", line);
    let hp = by_kind(&after, "hashd-params");
    assert_eq!(upstream::problems(&hp), Vec::<String>::new());
    let res = &hp["result"];
    let frac = res["mem_frac"].as_f64().unwrap();
    assert!(frac > 0.0 && frac <= 1.0, "{}", res);
    // Fake CPU load takes rps_max from the memory profile, as storage does:
    // round(share_GiB × 166.67), and profile 2's share is 1 GiB.
    assert_eq!(res["rps_max"], 167, "{}", res);
    assert_eq!(res["fake_cpu_load"], true, "{}", res);
    report += &format!(
        "re-run reused the storage entry and ran hashd-params:fake-cpu-load in {:.0}s: {}\n",
        secs, line
    );
    save(&report);

    let mut mofs = vec![un];
    for profile in ["sata-ssd", "hdd"] {
        let cwd = tmp.path().join(profile);
        std::fs::create_dir_all(&cwd).unwrap();
        let args = run_args(1);
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (out, secs) = run_vm(&cwd, profile, &args, profile);
        assert_ok(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("Memory offloading: factor="), "{}", stdout);
        // The progress display, in plain lines: the loop, each probe with its footprint, and
        // a readable verdict per probe.
        let stderr = String::from_utf8_lossy(&out.stderr);
        for want in [
            "] storage loop 1/1 | ",
            "] storage loop 1/1 · memory search probe 1 (going up) · ",
            "] memory search probe 1 (going up) at ",
            "] host restored (",
        ] {
            assert!(stderr.contains(want), "no {:?} in:\n{}", want, stderr);
        }
        let (m, line, rec) = mof(&cwd);
        let msg = format!(
            "{:<12} MOF {:.3} in {:.0}s (retries {}): {}\n",
            profile, m, secs, rec["retries"], line
        );
        eprint!("{}", msg);
        report += &msg;
        save(&report);
        mofs.push(m);
    }
    let (un, ssd, hdd) = (mofs[0], mofs[1], mofs[2]);
    assert!(
        hdd < ssd && hdd < un,
        "hdd's MOF isn't below the SSDs':\n{}",
        report
    );
    assert!(
        un >= ssd * (1.0 - RESOLUTION),
        "unthrottled's MOF is below sata-ssd's by more than the quick search resolves:\n{}",
        report
    );
    eprintln!("{}", report);
}
