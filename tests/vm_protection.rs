//! `protection` end to end in one `resctl-bench vm` guest (RESCTL_BENCH_VM_TESTS=1, sata-ssd
//! profile, `--quick`), with the release binary (`scripts/test` builds it): the guest-side
//! scenario `__vm-scenario protection` (see `src/testaid/vm_protection.rs`) sizes hashd, runs
//! a mem-hog scenario, kills and resumes a mem-hog-tune, and stops a run with SIGINT during
//! its hog; this test checks what it reports.
//!
//! * the mem-hog run completes, the hog is ended by the swap or pressure watch or its timeout
//!   (the record says which), the guest lives on, and `summary`/`format --rstat` print every
//!   section with real numbers (isolation percentiles not all equal, hog_bytes > 0,
//!   missing < 10 %);
//! * the tune reports a protected size or the "Failed to find size" line, and the re-run after
//!   the kill keeps the probes finished before it;
//! * after SIGINT no hog process is left and every knob is as before.
//!
//! The scenario's output goes to `target/vm-protection.json`, its log to
//! `target/vm-protection.log`.

mod common;

use common::{enabled, ok_json, release_bin, vm_output};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn pct(v: &Value, label: &str) -> f64 {
    v[label]
        .as_f64()
        .unwrap_or_else(|| panic!("no {} in {}", label, v))
}

#[test]
fn vm_protection_mem_hog_tune_resume_and_sigint() {
    if !enabled() {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let out = vm_output(|| {
        let mut c = Command::new(release_bin());
        c.current_dir(cwd.path()).args([
            "vm",
            "--disk-profile",
            "sata-ssd",
            "--timeout",
            "30min",
            "--",
            "__vm-scenario",
            "protection",
        ]);
        c
    });
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::write(target.join("vm-protection.log"), &out.stderr);
    let _ = std::fs::write(target.join("vm-protection.json"), &out.stdout);
    eprintln!(
        "vm -- __vm-scenario protection: {:?} in {:.0}s",
        out.status.code(),
        t.elapsed().as_secs_f64()
    );
    let j = ok_json(&out);

    // 1. mem-hog.
    let m = &j["mem_hog"];
    assert_eq!(m["status"], 0, "{}", m);
    let run = &m["record"]["scenarios"][0]["MemHog"]["runs"][0];
    let end = run["hog_end"].as_str().unwrap_or_default();
    assert!(
        ["swap-low", "pressure", "timeout", "oom-kill"].contains(&end),
        "the hog ended by {:?}: {}",
        end,
        run
    );
    assert!(run["failed"].is_null(), "{}", run);
    let res = &m["result"]["scenarios"][0]["MemHog"];
    let isol = &res["isol"];
    let labels = [
        "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "100",
    ];
    let vals: Vec<f64> = labels.iter().map(|l| pct(isol, l)).collect();
    assert!(
        vals.iter().any(|v| *v != vals[0]),
        "isolation percentiles all equal: {}",
        isol
    );
    assert!(res["hog_bytes"].as_f64().unwrap() > 0.0, "{}", res);
    let (ok, missed) = (
        res["nr_reports"][0].as_f64().unwrap(),
        res["nr_reports"][1].as_f64().unwrap(),
    );
    assert!(missed / (ok + missed) < 0.10, "missing {}/{}", missed, ok);
    assert!(m["hog_procs_after"].as_array().unwrap().is_empty());
    let summary = m["summary"].as_str().unwrap();
    for s in [
        "Memory Hog Summary",
        "Isolation and Request Latency Impact Distributions:",
        "isol%",
        "lat-imp%",
        "Result: ",
        "IO Latency: R ",
    ] {
        assert!(summary.contains(s), "summary lacks {:?}:\n{}", s, summary);
    }
    let format = m["format_rstat"].as_str().unwrap();
    for s in [
        "Scenario 1/1 - Memory Hog",
        "Params: loops=1 load=1 speed=2x",
        "Info: baseline_rps=",
        "hog_bytes=",
        "IO Latency Distribution:",
        "Slice resource stat:",
        "[ROOT]",
        "[WORKLOAD]",
        "[SYSTEM]",
        "[ROOT - memory.stat]",
        "[ROOT - vmstat]",
        "Memory Hog Summary",
    ] {
        assert!(
            format.contains(s),
            "format --rstat lacks {:?}:\n{}",
            s,
            format
        );
    }

    // 2. The tune, killed after a probe and resumed.
    let tn = &j["tune"];
    assert_eq!(tn["rerun_status"], 0, "{}", tn);
    let at_kill = tn["probes_at_kill"].as_array().unwrap();
    let rec = &tn["record"]["scenarios"][0]["MemHogTune"];
    let all = rec["probes"].as_array().unwrap();
    assert!(!at_kill.is_empty());
    assert_eq!(
        &all[..at_kill.len()],
        &at_kill[..],
        "the re-run redid finished probes: {} vs {}",
        Value::Array(at_kill.clone()),
        Value::Array(all.clone())
    );
    assert_eq!(rec["done"], true, "{}", rec);
    let summary = tn["summary"].as_str().unwrap();
    assert!(
        summary.contains("can be protected at isol-05")
            || summary.contains("Failed to find size to keep isol-05"),
        "{}",
        summary
    );
    let log = tn["rerun_stderr_tail"].to_string();
    assert!(log.contains("continuing from the checkpoint"), "{}", log);

    // 3. SIGINT during the hog.
    let si = &j["sigint"];
    assert!(
        si["hog_procs_after"].as_array().unwrap().is_empty(),
        "{}",
        si
    );
    // The kernel keeps a device line in io.cost.qos once io.cost was configured; what must
    // come back is whether it is enabled.
    for k in ["swappiness", "scheduler", "wbt_lat_usec", "iocost_enable"] {
        assert_eq!(si["knobs_after"][k], si["knobs_before"][k], "{}: {}", k, si);
    }
    assert_eq!(si["status"], 130, "{}", si);
    assert!(si["slices_after"].as_array().unwrap().is_empty(), "{}", si);
    assert_eq!(si["restore_json_after"], false, "{}", si);
    eprintln!(
        "protection: mem-hog isol mean {:.1}% p05 {:.1}% (hog ended: {}), tune probes {} \
         (killed after {}), final size {}",
        pct(isol, "mean") * 100.0,
        pct(isol, "05") * 100.0,
        end,
        all.len(),
        at_kill.len(),
        rec["final_size"]
    );
}
