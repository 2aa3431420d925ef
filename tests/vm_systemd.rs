//! A real test host's stack end to end: a `resctl-bench vm --init systemd` guest (Debian with
//! systemd as PID 1 and systemd-oomd running; RESCTL_BENCH_VM_TESTS=1), the release binary
//! (`scripts/test` builds it; a debug hashd under TCG is too slow to measure anything). One boot,
//! one after the other (`__vm-scenario systemd-host`, which also watches systemd meanwhile):
//!
//! * `deps --fix`, no `--force` anywhere: systemd-oomd is a miss its fix stops for the run;
//! * `--quick --mem-profile 2 -r r.json run storage:loops=1` on the `unthrottled` disk profile
//!   shows the progress lines, and `summary` prints the memory-offloading line; hashd runs in
//!   the scope `workload.slice/rd-hashd-bench.scope`; io.cost stays off, as upstream's
//!   (`passive=cpu/mem/io/fs`);
//! * re-running it as `storage:loops=1,commit` before `systest` reuses the finished entry
//!   without measuring and commits its hashd parameters again for the job after it;
//! * `run iocost-params:jobs=upstream,engine=fio`, upstream's measurement — fio's libaio engine
//!   (the guest's Debian package, `vm --guest-packages fio`) on upstream's job shapes: the steps
//!   name fio as their engine, the model is committed saying so (`fio_engine`);
//! * `run protection::scenario=mem-hog,loops=1` (on those parameters and that model, so with no
//!   nested iocost-params; the nested one is `vm_iocost_qos`'s): hashd and the hog in their
//!   scopes, `summary` has the isolation numbers;
//! * afterwards `systemctl list-units --all` lists none of our units or slices, system.slice's
//!   properties are what they were, no runtime drop-in is left, systemd-oomd runs again — and
//!   while the benches ran it did not;
//! * the guest's `systemd-hwdb update --strict` compiles the `90-iocost-tune.hwdb` that
//!   `db build` made on the host from the community files in tests/fixtures;
//! * `apply` with systemd's own iocost (Debian 13's systemd 257) on the guest's extra SCSI disk
//!   (`vm --scsi-disk`), from a community result relabelled as measured on that disk: refused
//!   onto a read-only hwdb directory, shown, `--boot` applied by systemd and re-applied after
//!   a re-trigger, `--undo` leaving nothing (`check_apply`).
//!
//! The measuring storage run is also the per-second reporter's test under load: hashd's CPU,
//! reads, writes and swap for some minutes must leave a loadable report for at least 98 % of the
//! seconds of the storage entry's period, and the reports see that load through the guest's
//! cgroup2 io controller. (The reporter's own CPU time and peak RSS are
//! `scripts/bench-reporter`'s, by hand.)
//!
//! Storage and protection in the builtin guest run nested in `vm_iocost_qos`, which also kills
//! the job right after a nested storage checkpointed and resumes it; the MOF of each disk profile
//! side by side is `scripts/storage-compare`'s, by hand (`--init systemd` or not).
//!
//! Timings and the MOF go to stderr and to `target/vm-systemd.txt`, the runs' log to
//! `target/vm-systemd-logs/runs.log`.

mod common;
#[path = "common/upstream.rs"]
mod upstream;

use common::{assert_has_all, enabled, log_of, release_bin, vm_output};
use resctl_bench::report::{load_report, report_path, Report};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// The runs as `systemd-host` commands: with `--work` at the guest's `--dir`, whose `report.d`
/// the guest binds to `r-report.d` on the host (the `-r` before `__vm-scenario` says where).
fn vm_cmd(cwd: &Path, cmds: &[String]) -> Command {
    let mut c = Command::new(release_bin());
    c.current_dir(cwd).args([
        "vm",
        "--init",
        "systemd",
        "--guest-packages",
        "fio",
        "--disk-profile",
        "unthrottled",
        "--scsi-disk",
        SCSI_DISK,
        "--timeout",
        "30min",
        "--",
        "-r",
        "r.json",
        "__vm-scenario",
        "systemd-host",
        "--work",
        "/var/lib/resctl-demo",
        "--apply",
        "apply.json",
    ]);
    for cmd in cmds {
        c.args(["--cmd", cmd]);
    }
    c
}

/// The guest's extra SCSI disk, which `apply` applies to: sysfs's model and revision.
const SCSI_DISK: &str = "RB Test HDD:2.5+";

/// A community result (its iocost-tune solutions) relabelled as measured on the guest's SCSI
/// disk, for `apply` to apply there.
fn relabelled_result(cwd: &Path) {
    let mut entries = common::fixture_entries("Samsung_SSD_970_PRO_512GB");
    for e in &mut entries {
        let rep = &mut e["sysinfo"]["sysreqs_report"];
        rep["scr_dev_model"] = "RB Test HDD".into();
        rep["scr_dev_fwrev"] = "2.5+".into();
        rep["scr_dev"] = "sda".into();
    }
    std::fs::write(
        cwd.join("apply.json"),
        serde_json::to_vec(&entries).unwrap(),
    )
    .unwrap();
}

/// `apply` end to end with systemd's iocost (the scenario's `apply` part): refused onto a
/// read-only hwdb directory with nothing changed; shown; `--boot` has systemd apply the
/// chosen solution, whose file `systemd-hwdb --strict` takes and `iocost query` names; a
/// re-trigger (what a boot does) brings it back over other values; `--undo` leaves nothing.
fn check_apply(a: &Value) {
    let text = |v: &Value| {
        format!(
            "{}{}",
            v["stdout"].as_str().unwrap_or(""),
            v["stderr"].as_str().unwrap_or("")
        )
    };
    let ok = |k: &str| assert_eq!(a[k]["code"], 0, "{}: {}", k, text(&a[k]));
    let props = |k: &str| a[k]["props"].to_string();
    assert_eq!(a["read_only"]["code"], 2, "{}", text(&a["read_only"]));
    assert!(
        text(&a["read_only"]).contains("nothing changed"),
        "{}",
        a["read_only"]
    );
    assert_eq!(a["before"], a["after_read_only"], "{}", a);
    assert!(
        props("before").contains("ID_MODEL=RB_Test_HDD"),
        "{}",
        a["before"]
    );
    ok("shown");
    assert_has_all(
        &text(&a["shown"]),
        &[
            "udev names it \"RB_Test_HDD\"",
            "91-iocost-tune-RB_Test_HDD.hwdb",
            "nothing changed",
        ],
        "apply",
    );
    ok("boot");
    assert!(
        text(&a["boot"]).contains("systemd's iocost applied bandwidth to sda"),
        "{}",
        text(&a["boot"])
    );
    assert!(
        props("after_boot").contains("IOCOST_SOLUTIONS=bandwidth"),
        "{}",
        a["after_boot"]
    );
    let bandwidth =
        "enable=1 ctrl=user rpct=0.00 rlat=1415 wpct=0.00 wlat=1618 min=100.00 max=100.00";
    let qos = |k: &str| a[k]["qos"].as_str().unwrap_or("").to_string();
    assert!(
        a["after_boot"]["knobs"]["qos"]
            .as_str()
            .unwrap()
            .ends_with(bandwidth),
        "{}",
        a["after_boot"]
    );
    assert!(
        a["after_boot"]["knobs"]["model"]
            .as_str()
            .unwrap()
            .contains("rbps=3235739592"),
        "{}",
        a["after_boot"]
    );
    ok("strict");
    assert!(
        !text(&a["strict"]).contains("91-iocost-tune"),
        "{}",
        text(&a["strict"])
    );
    assert!(
        text(&a["query"]).contains("Solution that would be applied: bandwidth"),
        "{}",
        text(&a["query"])
    );
    ok("now");
    assert!(
        qos("after_now").contains("rpct=99.00"),
        "{}",
        a["after_now"]
    );
    ok("trigger");
    assert!(
        qos("after_trigger").ends_with(bandwidth),
        "{}",
        a["after_trigger"]
    );
    ok("undo");
    assert!(
        !props("after_undo").contains("IOCOST_"),
        "{}",
        a["after_undo"]
    );
    assert_eq!(
        a["after_undo"]["files"], a["before"]["files"],
        "{}",
        a["after_undo"]
    );
    let k = &a["after_undo"]["knobs"];
    assert!(
        k["qos"].as_str().unwrap().contains("enable=0 ctrl=auto"),
        "{}",
        k
    );
    assert!(k["model"].as_str().unwrap().contains("ctrl=auto"), "{}", k);
    assert_eq!(a["state_left"], false);
}

fn logs_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vm-systemd-logs");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the commands in one guest; its stderr (the benches' logs) is kept as
/// `target/vm-systemd-logs/runs.log`, so a slow or odd run can be read afterwards.
fn run_vm(cwd: &Path, cmds: &[String]) -> (Output, f64) {
    let t = Instant::now();
    let out = vm_output(|| vm_cmd(cwd, cmds));
    let secs = t.elapsed().as_secs_f64();
    let _ = std::fs::write(logs_dir().join("runs.log"), &out.stderr);
    eprintln!(
        "vm --init systemd --disk-profile unthrottled -- systemd-host {:?}: {:?} in {:.0}s",
        cmds,
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

/// The runs' command lines: `seq` splits them at spaces.
fn run_cmd(specs: &str) -> String {
    format!("--quick --mem-profile 2 -r r.json run {}", specs)
}

/// The per-second reports of the storage entry's `period` in the guest's `report.d`, which is
/// `dir` on the host: returns a line saying how many there are.
fn check_reports(dir: &Path, period: &Value) -> String {
    let (from, to) = (period[0].as_u64().unwrap(), period[1].as_u64().unwrap());
    let secs = to - from + 1;
    let reports: Vec<Report> = (from..=to)
        .map(|t| report_path(dir, t))
        .filter(|p| p.is_file())
        .map(|p| load_report(&p).unwrap_or_else(|e| panic!("{:#}", e)))
        .collect();
    let present = reports.len() as u64;
    let line = format!(
        "reports: {}/{} seconds of the storage period [{}, {}]",
        present, secs, from, to
    );
    eprintln!("{}", line);
    assert!(secs >= 60, "{}", line);
    assert!(present * 100 >= secs * 98, "{}", line);
    // The load shows: CPU, reads and writes of the whole guest, with cgroup2 io stats.
    let root = |r: &Report| r.usages.get("-.slice").cloned().unwrap_or_default();
    let (first, last) = (root(&reports[0]), root(&reports[reports.len() - 1]));
    let busiest = reports.iter().map(|r| root(r).cpu_util).fold(0.0, f64::max);
    assert!(busiest > 0.3, "highest CPU use {}: {}", busiest, line);
    assert!(last.io_rbytes > first.io_rbytes, "{:?} {:?}", first, last);
    assert!(last.io_wbytes > first.io_wbytes, "{:?} {:?}", first, last);
    let mid = &reports[reports.len() / 2];
    assert!(mid.io_stat.contains_key("-.slice"), "{:?}", mid.io_stat);
    assert!(mid.vmstat.len() > 50, "{:?}", mid.vmstat);
    line
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
    let all = entries(&cwd.join("r.json"));
    let e = all
        .iter()
        .find(|e| e["spec"]["kind"] == "storage")
        .unwrap_or_else(|| panic!("no storage entry: {:?}", all));
    assert!(e.get("incomplete").is_none());
    // Upstream 2.2.6 can load what we wrote.
    assert_eq!(upstream::problems(e), Vec::<String>::new());
    // As upstream's, storage measures under the host's own IO setup: io.cost stays off, and the
    // header says what was left alone.
    assert!(sum.contains("passive=cpu/mem/io/fs"), "{}", sum);
    assert_eq!(
        e["sysinfo"]["iocost"]["qos"]["enable"], 0,
        "{}",
        e["sysinfo"]
    );
    let res = &e["result"];
    let mof = res["mem_offload_factor"].as_f64().unwrap();
    assert!(mof > 0.0, "{}", res);
    let nr = res["nr_reports"].as_array().unwrap();
    assert!(
        nr[0].as_u64().unwrap() > 30,
        "per-second reports studied: {:?}",
        nr
    );
    let reports = check_reports(&cwd.join("r-report.d"), &e["period"]);
    (mof, format!("{}; {}", line, reports), e["record"].clone())
}

#[test]
fn vm_systemd_host_runs_the_benches_and_leaves_nothing() {
    if !enabled() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut report = String::new();
    let save = |report: &str| {
        let _ = std::fs::write(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vm-systemd.txt"),
            report,
        );
    };

    // unthrottled, one loop: progress lines, the MOF, a result upstream can load; then the
    // finished entry reused and, with `commit`, its hashd parameters committed again for the
    // jobs after it: here `systest`, which runs on the host setup. (A kill and the resume from
    // a storage checkpoint are vm_iocost_qos's.)
    let cwd = tmp.path().join("unthrottled");
    std::fs::create_dir_all(&cwd).unwrap();
    relabelled_result(&cwd);
    let deps = "deps --fix".to_string();
    let (measure, reuse, fio, protect) = (
        run_cmd("storage:loops=1"),
        run_cmd("storage:loops=1,commit systest"),
        run_cmd("iocost-params:jobs=upstream,engine=fio"),
        run_cmd("protection::scenario=mem-hog,loops=1"),
    );
    // The hwdb file `db build` writes, compiled by the guest's own systemd-hwdb, strictly.
    let hwdb_root = cwd.join("hwdb-root");
    let hwdb = hwdb_build(&cwd, &hwdb_root.join("etc/udev/hwdb.d"));
    let strict = format!(
        "@systemd-hwdb --root {} update --strict",
        hwdb_root.display()
    );
    let cmds = [
        deps,
        measure.clone(),
        reuse.clone(),
        fio.clone(),
        protect.clone(),
        strict,
    ];
    let (out, secs) = run_vm(&cwd, &cmds);
    assert_ok(&out);
    assert!(
        hwdb_root.join("etc/udev/hwdb.bin").is_file(),
        "systemd-hwdb compiled nothing from {}",
        hwdb.display()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // No --force: deps' fix pass stops systemd-oomd for its check, as a run's does.
    assert_has_all(
        &stdout,
        &[
            "NoSysOomd",
            "stopped systemd-oomd.socket systemd-oomd.service (started again at the end)",
        ],
        "deps --fix",
    );
    let sd = systemd_state(&stdout);
    check_systemd(&sd);
    check_apply(&sd["apply"]);
    report += "apply: shown, --boot applied by systemd's iocost (strict hwdb, query), \
               re-applied on a re-trigger, undone; a read-only hwdb directory refused\n";
    assert!(stdout.contains("Memory offloading: factor="), "{}", stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains('\x1b'),
        "terminal sequences off a terminal"
    );
    // systemd 252's --strict still exits 0 on a line it ignores: it says so on stderr, naming
    // the file and line.
    assert!(
        !log_of(&stderr, &cmds[5]).contains("90-iocost-tune.hwdb:"),
        "systemd-hwdb found fault with {}:\n{}",
        hwdb.display(),
        log_of(&stderr, &cmds[5])
    );
    // The progress display, in plain lines: the loop, each probe with its footprint, and a
    // readable verdict per probe.
    assert_has_all(
        log_of(&stderr, &measure),
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
        "unthrottled  MOF {:.3}: loops=1, both runs in {:.0}s (retries {}): {}\n",
        un, secs, rec["retries"], line
    );
    eprintln!("{}", report);
    save(&report);

    let log = log_of(&stderr, &reuse);
    assert!(log.contains("reusing"), "{}", log);
    assert!(
        !log.contains("storage loop 1/"),
        "nothing measured again:\n{}",
        log
    );
    assert!(
        log.contains("committing hashd parameters of the reused record"),
        "{}",
        log
    );
    let after = entries(&cwd.join("r.json"));
    let by_kind = |kind: &str| -> Value {
        after
            .iter()
            .find(|e| e["spec"]["kind"] == kind)
            .unwrap_or_else(|| panic!("no {} entry: {:?}", kind, after))
            .clone()
    };
    let (stor, sys) = (by_kind("storage"), by_kind("systest"));
    assert!(
        stor["period"][1].as_u64() <= sys["period"][0].as_u64(),
        "the storage entry was measured again: {} {}",
        stor["period"],
        sys["period"]
    );
    assert!(sys["incomplete"].is_null());
    report +=
        "the re-run reused the storage entry and committed its hashd parameters for systest\n";
    eprintln!("{}", report);
    save(&report);
    report += &check_fio_params(&by_kind("iocost-params"), log_of(&stderr, &fio));
    eprintln!("{}", report);
    save(&report);
    // Protection on the committed parameters and model: the isolation numbers.
    let sum = summary(&cwd);
    let prot = sum
        .split("[protection ")
        .nth(1)
        .unwrap_or_else(|| panic!("no protection entry in summary:\n{}", sum));
    assert!(
        prot.contains("Isolation and Request Latency Impact"),
        "{}",
        prot
    );
    assert!(prot.contains("isol%"), "{}", prot);
    let plog = log_of(&stderr, &protect);
    assert!(!plog.contains("from outside"));
    assert!(!plog.contains("running iocost-params first"), "{}", plog);
    report += &format!(
        "protection mem-hog: {}s; systemd ran {:?}\n",
        sd["cmds"][4]["secs"], sd["units_seen"]
    );
    eprintln!("{}", report);
    save(&report);
    common::keep_result(&cwd.join("r.json"), "systemd-host");
}

/// `iocost-params:jobs=upstream,engine=fio`'s entry: every step run by fio's libaio engine on
/// upstream's shapes (8 jobs, 128 MiB blocks for bandwidth, 256 deep for IOPS), a model and
/// latency targets, and the record and the committed model saying how they were measured.
fn check_fio_params(e: &Value, log: &str) -> String {
    let rec = &e["record"];
    assert_eq!(
        (&rec["upstream_jobs"], &rec["fio_engine"]),
        (&Value::Bool(true), &Value::Bool(true)),
        "{}",
        rec
    );
    let steps = rec["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 8, "{}", rec);
    for s in steps {
        let engine = s["engine"].as_str().unwrap_or("");
        assert!(
            engine.starts_with("fio-") && engine.ends_with(" libaio"),
            "{}",
            s
        );
        assert!(s["iops"].as_f64().unwrap() > 0.0, "{}", s);
        assert_eq!(s["workers"], 8, "{}", s);
    }
    assert_eq!(
        (steps[0]["bs"].as_u64(), steps[0]["qd"].as_u64()),
        (Some(128 << 20), Some(1))
    );
    assert_eq!(steps[4]["qd"], 256, "{}", steps[4]);
    // Upstream's order: each write before its read, the latency runs last.
    let order: Vec<&str> = steps
        .iter()
        .map(|s| s["step"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        order,
        [
            "wbps",
            "rbps",
            "wseqiops",
            "rseqiops",
            "wrandiops",
            "rrandiops",
            "rlat",
            "wlat"
        ],
        "{}",
        rec
    );
    let m = &rec["model"];
    for k in [
        "rbps",
        "wbps",
        "rseqiops",
        "wseqiops",
        "rrandiops",
        "wrandiops",
    ] {
        assert!(m[k].as_u64().unwrap_or(0) > 0, "{}: {}", k, m);
    }
    assert!(
        rec["qos"]["rlat"].as_u64().unwrap_or(0) > 0,
        "{}",
        rec["qos"]
    );
    assert!(log.contains("run by /usr/bin/fio"), "{}", log);
    assert!(log.contains("committing io.cost parameters"), "{}", log);
    format!(
        "iocost-params on fio ({}): {} / {}\n",
        steps[0]["engine"].as_str().unwrap_or(""),
        m,
        rec["qos"]
    )
}

/// A database of the community files in tests/fixtures (`db import`) built (`db build`) into
/// `out`; returns its final hwdb file.
fn hwdb_build(cwd: &Path, out: &Path) -> PathBuf {
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut srcs: Vec<PathBuf> = Vec::new();
    for dir in ["merge/KINGSTON_SA2000M8250G", "results"] {
        for e in std::fs::read_dir(fx.join(dir)).unwrap().flatten() {
            if e.path().to_string_lossy().ends_with(".json.gz") {
                srcs.push(e.path());
            }
        }
    }
    let db = cwd.join("db");
    let imp = Command::new(release_bin())
        .args(["db", "import"])
        .arg(&db)
        .args(&srcs)
        .output()
        .unwrap();
    assert_ok(&imp);
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let build = Command::new(release_bin())
        .args(["db", "build"])
        .arg(&db)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert_ok(&build);
    out.join("90-iocost-tune.hwdb")
}

/// The scenario's JSON: the last object on stdout (the commands' own output comes first).
fn systemd_state(stdout: &str) -> Value {
    let at = stdout
        .rfind("\n{\n")
        .unwrap_or_else(|| panic!("no scenario JSON on stdout:\n{}", stdout));
    serde_json::from_str(&stdout[at + 1..]).unwrap()
}

/// Our units ran while the benches did and are all gone after; system.slice's properties are
/// back; systemd-oomd was stopped during the runs and runs again.
fn check_systemd(sd: &Value) {
    let strs = |k: &str| -> Vec<String> {
        sd[k]
            .as_array()
            .unwrap_or_else(|| panic!("{}: {}", k, sd))
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let seen = strs("units_seen");
    for u in [
        "hostcritical.slice",
        "workload.slice",
        "balloon.slice",
        "rd-hashd-bench.scope",
        "rd-hashd-A.scope",
        "rd-sysload-mem-hog.scope",
    ] {
        assert!(seen.iter().any(|s| s == u), "{} never seen: {:?}", u, seen);
    }
    assert!(
        seen.iter().any(|s| s.starts_with("resctl-bench-")),
        "resctl-bench's own scope never seen: {:?}",
        seen
    );
    assert_eq!(strs("units_left"), Vec::<String>::new(), "{}", sd);
    assert_eq!(strs("control_dropins_left"), Vec::<String>::new(), "{}", sd);
    assert_eq!(
        sd["system_slice_before"], sd["system_slice_after"],
        "{}",
        sd
    );
    assert_eq!(sd["oomd_before"], serde_json::json!([true, true]), "{}", sd);
    assert_eq!(sd["oomd_during"], serde_json::json!([false]), "{}", sd);
    assert_eq!(sd["oomd_after"], serde_json::json!([true, true]), "{}", sd);
    assert_eq!(sd["journal_left"], false, "{}", sd);
}
