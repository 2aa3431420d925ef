//! End-to-end tests of the system layer in one `resctl-bench vm` guest (`__vm-scenario system`,
//! see `src/testaid/vm_scenario.rs`): the fix pass of `deps`, restoring the host after a
//! SIGKILLed run, the memory-profile balloon, and a run's per-second reports, `--swappiness`,
//! hostcritical.slice and SIGTERM, one after another (each leaves the guest as it found it,
//! and checks that). They run only with RESCTL_BENCH_VM_TESTS=1.

mod common;

use common::{assert_has_all, enabled, ok_json, vm_command, vm_output};
use serde_json::Value;
use std::process::Output;
use std::time::Instant;

fn vm(cwd: &std::path::Path, mem: &str, args: &[&str]) -> Output {
    let t = Instant::now();
    let out = vm_output(|| {
        let mut c = vm_command(cwd, mem, "8min");
        c.arg("--").args(args);
        c
    });
    eprintln!(
        "vm --mem {} -- {:?}: {:?} in {:.1}s",
        mem,
        args,
        out.status.code(),
        t.elapsed().as_secs_f64()
    );
    out
}

fn knob<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_else(|| panic!("no {} in {}", k, v))
}

/// The journal record of the file named `suffix` in restore.json.
fn journal_old<'a>(journal: &'a Value, suffix: &str) -> &'a str {
    journal["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "write" && c["path"].as_str().unwrap().ends_with(suffix))
        .and_then(|c| c["old"].as_str())
        .unwrap_or_else(|| panic!("no record of {} in {}", suffix, journal))
}

#[test]
fn vm_sysreqs_fix_restore_after_kill_balloon_and_reports() {
    if !enabled() {
        return;
    }
    let group = Instant::now();
    let cwd = tempfile::tempdir().unwrap();
    // With `-r sys.json` in the guest command, the guest's `<--dir>/report.d` is the host's
    // `sys-report.d` (the reports scenario's first run writes that result, its work dir is
    // --dir). The balloon scenario needs 2G.
    let all = ok_json(&vm(
        cwd.path(),
        "2G",
        &[
            "-d",
            "/var/lib/resctl-demo/scenario",
            "-r",
            "sys.json",
            "__vm-scenario",
            "system",
            "--run-result",
            "sys.json",
        ],
    ));

    // First, on a default guest the fix pass of `deps --fix` satisfies every requirement
    // (io.cost and wbt are what it has to fix), and says so.
    let text = all["deps"]["stdout"].as_str().unwrap();
    assert_eq!(all["deps"]["status"], 0, "{}", text);
    assert_eq!(text.matches("[ ok ]").count(), 14, "{}", text);
    assert!(!text.contains("[MISS]"), "{}", text);
    assert!(text.contains("14 of 14 requirements satisfied"), "{}", text);
    assert!(
        text.contains("Fixed (restored when deps exits):"),
        "{}",
        text
    );
    for fixed in ["    IoCost: ", "    NoWbt: "] {
        assert!(text.contains(fixed), "{} not fixed:\n{}", fixed, text);
    }

    // Then a run SIGKILLed after its fix pass changed swappiness, the scheduler, wbt and
    // io.cost leaves restore.json with the old values; the next start restores each one.
    let j = &all["restore_after_kill"];
    let (before, during, after) = (&j["before"], &j["during"], &j["after_next_start"]);
    assert_eq!(knob(before, "swappiness"), "10");
    assert_ne!(knob(before, "scheduler"), "none");
    assert_ne!(knob(before, "wbt_lat_usec"), "0");
    assert_eq!(knob(before, "iocost_enable"), "0");
    assert_eq!(knob(during, "swappiness"), "60");
    assert_eq!(knob(during, "scheduler"), "none");
    assert_eq!(knob(during, "wbt_lat_usec"), "0");
    assert_eq!(knob(during, "iocost_enable"), "1");
    let journal = &j["journal_after_kill"];
    assert!(journal.is_object(), "no restore.json after the kill: {}", j);
    assert_eq!(
        journal_old(journal, "vm/swappiness"),
        knob(before, "swappiness")
    );
    assert_eq!(
        journal_old(journal, "queue/scheduler"),
        knob(before, "scheduler")
    );
    assert_eq!(
        journal_old(journal, "queue/wbt_lat_usec"),
        knob(before, "wbt_lat_usec")
    );
    assert!(
        journal_old(journal, "io.cost.qos").contains(" enable=0"),
        "{}",
        journal
    );
    for k in [
        "swappiness",
        "scheduler",
        "wbt_lat_usec",
        "iocost_enable",
        "iocost_qos",
    ] {
        assert_eq!(
            knob(after, k),
            knob(before, k),
            "{} not restored at the next start",
            k
        );
        assert_eq!(
            knob(&j["after_rerun"], k),
            knob(before, k),
            "{} not restored after a complete run",
            k
        );
    }
    assert_eq!(j["journal_exists_after_next_start"], false);
    assert_eq!(j["slices_after_next_start"], serde_json::json!([]));
    // The complete run recorded the host in its header, with nothing missed.
    assert_eq!(j["rerun_status"], 0, "{}", j);
    let summary = j["rerun_stdout"].as_str().unwrap();
    assert_has_all(
        summary,
        &[
            "System info: kernel=",
            "swappiness=60",
            "IO info: dev=vda(",
            "iosched=none wbt=off iocost=on other=off",
            "iocost QoS: ",
        ],
        "summary",
    );
    assert!(!summary.contains("Missed sysreqs"), "{}", summary);

    // Then under --mem-profile 1 in the 2G guest the balloon leaves about the profile's share
    // available, holds its memory without swapping, and is gone after the run.
    let j = &all["balloon"];
    assert_eq!(j["run_status"], 0, "{}", j);
    let num = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("not a number: {}", v)) as f64;
    let (avail, share) = (num(&j["mem"]["avail"]), num(&j["mem"]["share"]));
    assert_eq!(j["mem"]["profile"], 1);
    assert_eq!(share, (512u64 << 20) as f64);
    assert_eq!(num(&j["mem"]["target"]), (448u64 << 20) as f64);
    let during = num(&j["record"]["mem_available"]);
    eprintln!(
        "balloon: avail {:.0}M share {:.0}M, MemAvailable with the balloon {:.0}M, balloon.slice {:.0}M",
        avail / 1048576.0,
        share / 1048576.0,
        during / 1048576.0,
        num(&j["record"]["balloon_current"]) / 1048576.0
    );
    assert!(
        (during - share).abs() <= share / 8.0,
        "MemAvailable {} with the balloon, share {}",
        during,
        share
    );
    let held = num(&j["record"]["balloon_current"]);
    assert!(
        held >= avail - share && held <= avail - share + (32u64 << 20) as f64,
        "balloon.slice holds {}, wanted {}",
        held,
        avail - share
    );
    assert_eq!(j["record"]["balloon_swap"], 0);
    assert_eq!(j["balloon_procs_after"], serde_json::json!([]));
    assert_eq!(j["balloon_slice_after"], false);
    assert!(
        num(&j["mem_available_after"]) >= num(&j["mem_available_before"]) - share / 4.0,
        "memory not given back: {}",
        j
    );
    assert!(
        j["run_stdout"]
            .as_str()
            .unwrap()
            .contains("mem_profile=1 (avail="),
        "{}",
        j
    );

    // Last, a run writes a report for (nearly) every second of its entry's period from
    // inside hostcritical.slice, under --swappiness 70 and tracefs latencies; its header shows
    // the host with io.cost on; nothing is left behind, after a normal end or a SIGTERM.
    let j = &all["reports"];
    assert_eq!(j["run_status"], 0, "{}", j);
    let before = j["swappiness_before"].as_str().unwrap();
    for h in [&j["holding"], &j["term_holding"]] {
        assert_eq!(h["cgroup"], "0::/hostcritical.slice", "{}", j);
        assert_eq!(
            h["tracefs_instances"].as_array().map(|a| a.len()),
            Some(1),
            "{}",
            j
        );
    }
    assert_eq!(j["holding"]["swappiness"], "70");
    let (p0, p1) = (
        j["period"][0].as_u64().unwrap(),
        j["period"][1].as_u64().unwrap(),
    );
    let secs = p1 - p0 + 1;
    let present = j["reports_in_period"].as_u64().unwrap();
    eprintln!(
        "reports: {}/{} seconds of the period [{}, {}]; first report {:.2}s after start",
        present,
        secs,
        p0,
        p1,
        j["holding"]["first_report_after"].as_f64().unwrap_or(-1.0)
    );
    // hold=6: the period spans at least 6 s; the report of the period's last second may be
    // written after the entry's end is stamped, and the first second may precede the reporter.
    assert!(secs >= 6, "{}", j);
    assert!(
        present + 2 >= secs,
        "{} of {} seconds: {}",
        present,
        secs,
        j
    );
    // The host sees the same reports next to the result file, where `study` looks.
    let result: Value =
        serde_json::from_slice(&std::fs::read(cwd.path().join("sys.json")).unwrap()).unwrap();
    let (h0, h1) = (
        result[0]["period"][0].as_u64().unwrap(),
        result[0]["period"][1].as_u64().unwrap(),
    );
    assert_eq!((h0, h1), (p0, p1), "{}", result);
    let host_rdir = cwd.path().join("sys-report.d");
    let on_host = (h0..=h1)
        .filter(|t| host_rdir.join(format!("{}.json", t)).is_file())
        .count() as u64;
    eprintln!(
        "reports on the host in {}: {}/{}",
        host_rdir.display(),
        on_host,
        secs
    );
    assert!(
        on_host + 2 >= secs && on_host >= present,
        "{} of {}",
        on_host,
        secs
    );
    let mid_on_host: Value = serde_json::from_slice(
        &std::fs::read(host_rdir.join(format!("{}.json", h0 + (h1 - h0) / 2))).unwrap(),
    )
    .unwrap();
    assert_eq!(mid_on_host["swappiness"], 70);
    let mid = &j["mid_report"];
    assert_eq!(mid["swappiness"], 70, "{}", j);
    assert_eq!(mid["iolat_unavailable"], false, "{}", j);
    assert!(mid["iolat_read_p50"].is_number(), "{}", j);
    let units: Vec<&str> = mid["units"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    for u in ["-.slice", "hostcritical.slice", "workload.slice"] {
        assert!(units.contains(&u), "{} not in {:?}", u, units);
    }
    let summary = j["run_stdout"].as_str().unwrap();
    assert_has_all(
        summary,
        &[
            "System info: kernel=",
            "swappiness=70",
            "IO info: dev=vda(",
            "iosched=none wbt=off iocost=on other=off",
            "iocost model: ",
            "iocost QoS: ",
        ],
        "summary",
    );
    for (what, after) in [("normal end", &j["after"]), ("SIGTERM", &j["after_term"])] {
        assert_eq!(after["swappiness"], before, "{}: {}", what, j);
        assert_eq!(after["slices"], serde_json::json!([]), "{}: {}", what, j);
        assert_eq!(after["restore_json"], false, "{}: {}", what, j);
        assert_eq!(
            after["tracefs_instances"],
            serde_json::json!([]),
            "{}: {}",
            what,
            j
        );
    }
    // The signal handler restores and exits 128+SIGTERM; it is not killed by its own cgroup.
    assert_eq!(j["term_status"], 143, "{}", j);

    eprintln!(
        "VM system test group: {:.1}s",
        group.elapsed().as_secs_f64()
    );
}
