//! `run iocost-qos` and `protection` end to end in one `resctl-bench vm` guest
//! (RESCTL_BENCH_VM_TESTS=1, sata-ssd profile, `--quick`), with the release binary
//! (`scripts/test` builds it). The guest-side scenario `__vm-scenario iocost-qos` (see
//! `src/testaid/vm_iocost_qos.rs` and `vm_protection.rs`) runs the baseline and one vrate (50,
//! picked by an adaptive grid with a budget of one), its tunes bisecting (`tune-bisect`),
//! stops the job with SIGINT inside the baseline's mem-hog-tune once it has checkpointed a probe
//! and the next probe's hog runs, runs it again and SIGKILLs it inside the second configuration
//! once its storage has checkpointed, and runs it to the end; then
//! `hashd-params:fake-cpu-load,mem-frac=30%` (given knobs: its sizing is storage's, run just
//! before) and a mem-hog scenario. Every run takes the kernel's io.cost model
//! (`--iocost-from-sys`; measuring one is `vm_iocost_params`'s).
//! This test checks what it reports:
//!
//! * iocost-qos: it plans against the kernel's model (no nested iocost-params); the second run
//!   resumes the baseline with its storage and the tune's probes
//!   before SIGINT kept; the last run lists the baseline as reused (`iocost-qos[00]: -`),
//!   resumes the second configuration without measuring its storage again or running the
//!   baseline, and ends with 0; the adaptive grid logs why it picked the vrate and why it
//!   stopped, and the record keeps both; `summary` prints the configuration list, a MOF/aMOF row with
//!   numbers (or FAIL) for both configurations and both latency tables with two rows;
//!   the record holds two finished runs with the QoS the kernel had;
//! * `run iocost-tune` on that iocost-qos run prints solutions, and `format
//!   iocost-tune:intervals` their intervals;
//! * hashd-params:fake-cpu-load,mem-frac=30% commits hashd's parameters for the mem-hog run
//!   without measuring (rps_max from the memory profile, the given mem_frac, no sizing in the
//!   record; upstream 2.2.6 can load what it wrote);
//! * mem-hog: the run completes, the hog is ended by the swap or pressure watch or its timeout
//!   (the record says which), and `summary`/`format --rstat` print every section with real
//!   numbers (isolation percentiles not all equal, hog_bytes > 0, missing < 10 %);
//! * after SIGINT (exit status 130) no hog process is left and every knob is as before.
//!
//! The scenario's output goes to `target/vm-iocost-qos.json`, its log to
//! `target/vm-iocost-qos.log`.

mod common;
#[path = "common/upstream.rs"]
mod upstream;

use common::{assert_has_all, enabled, ok_json, release_bin, vm_output};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

#[test]
fn vm_iocost_qos_and_protection() {
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
            "60min",
            "--",
            "__vm-scenario",
            "iocost-qos",
        ]);
        if common::keeping() {
            c.args(["--keep", "vm-results"]);
        }
        c
    });
    common::keep_result(&cwd.path().join("vm-results/iocost-qos.json"), "iocost-qos");
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::write(target.join("vm-iocost-qos.log"), &out.stderr);
    let _ = std::fs::write(target.join("vm-iocost-qos.json"), &out.stdout);
    eprintln!(
        "vm -- __vm-scenario iocost-qos: {:?} in {:.0}s",
        out.status.code(),
        t.elapsed().as_secs_f64()
    );
    let j = ok_json(&out);
    check_qos(&j["qos"]);
    check_mem_hog(&j["mem_hog"]);
    check_sigint(&j["sigint"]);
}

fn check_qos(v: &Value) {
    eprintln!(
        "killed after {:.0}s, re-run {:.0}s; re-run log:\n{}",
        v["kill_secs"].as_f64().unwrap_or(0.0),
        v["rerun_secs"].as_f64().unwrap_or(0.0),
        v["rerun_log"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(v["rerun_status"], 0, "{}", v);

    let lines = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    };
    let has = |log: &[String], s: &str| log.iter().any(|l| l.contains(s));
    let probes = |run: &Value| -> Vec<Value> {
        run["prot"]["scenarios"][0]["MemHogTune"]["probes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let runs = v["record"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{}", v["record"]);

    // The model came from the kernel: no iocost-params ran first.
    let model_log = lines("first_model_log");
    assert!(
        has(&model_log, "io.cost parameters (--iocost-from-sys)"),
        "{:#?}",
        model_log
    );
    assert!(
        !has(&model_log, "running iocost-params first"),
        "{:#?}",
        model_log
    );
    assert!(v["record"]["base_model"]["rbps"].as_u64().unwrap_or(0) > 0);

    // The first stop (SIGINT), inside the baseline's tune: the second run resumed the baseline
    // with its storage and the probes before it kept.
    let base = &v["baseline_at_kill"];
    let second = lines("second_log");
    if v["tune_killed"] == true {
        assert!(!probes(base).is_empty(), "{}", base);
        assert!(
            has(&second, "iocost-qos[00]: resuming from its checkpoints"),
            "{:#?}",
            second
        );
        let (before, after) = (probes(base), probes(&runs[0]));
        assert!(
            after.len() >= before.len() && after[..before.len()] == before[..],
            "the re-run redid finished probes: {:?} vs {:?}",
            before,
            after
        );
        assert_eq!(runs[0]["stor"]["loops"], base["stor"]["loops"]);
    } else {
        // Seen in none of the runs so far: the baseline's tune passed its first probe.
        eprintln!("the baseline finished between two looks; SIGINT came in [01]");
    }

    // The second kill, inside [01] once its storage had checkpointed: the last run lists the
    // baseline as reused and resumes [01] without measuring its storage again.
    let at_kill = &v["record_at_kill"]["inc_runs"];
    assert_eq!(at_kill[0]["done"], true, "{}", at_kill);
    assert_eq!(at_kill[1]["done"], false, "{}", at_kill);
    // The baseline kept its study in its run when it finished (for a study whose reports are
    // gone); both runs were begun by an earlier job than the last, so they keep it after it.
    let kept_mof = &at_kill[0]["result"]["stor"]["mem_offload_factor"];
    assert!(kept_mof.is_f64(), "no kept result: {}", at_kill[0]);
    let studied = &v["result"]["runs"][0]["stor"]["mem_offload_factor"];
    assert_eq!(studied, kept_mof);
    assert!(
        runs.iter().all(|r| r["result"].is_object()),
        "{}",
        v["record"]
    );
    let log = lines("rerun_log");
    assert!(has(&log, "iocost-qos[00]: -  iocost=off"), "{:#?}", log);
    // The adaptive grid: its candidates in one line, then each pick with why, then the stop.
    for want in [
        "iocost-qos: adaptive grid: at most 1 of 25 vrates (40-60), until every solution's \
         interval is at most 1.7 wide",
        "iocost-qos: adaptive grid, vrate 50 next (1 of at most 1): coarse pass",
        "iocost-qos: adaptive grid done after 1 vrate: budget of 1 configurations reached \
         (too few configurations for an interval)",
    ] {
        assert!(has(&log, want), "{}: {:#?}", want, log);
    }
    let adaptive = &v["record"]["adaptive"];
    assert_eq!(adaptive["steps"][0]["vrate"], 50.0, "{}", adaptive);
    assert_eq!(adaptive["steps"][0]["why"], "coarse pass", "{}", adaptive);
    assert_eq!(adaptive["steps"].as_array().map(Vec::len), Some(1));
    assert!(
        adaptive["stop"]
            .as_str()
            .is_some_and(|s| s.starts_with("budget of 1 configurations reached")),
        "{}",
        adaptive
    );
    assert!(
        has(&log, "iocost-qos[01]: resuming from its checkpoints"),
        "{:#?}",
        log
    );
    assert!(
        !has(&log, "iocost-qos[00]: QoS:"),
        "the baseline ran again: {:#?}",
        log
    );
    // (Its period may end a checkpoint later than the one read at the kill.)
    for k in ["loops", "mem_usages", "mem_sizes"] {
        assert_eq!(
            runs[1]["stor"][k], at_kill[1]["stor"][k],
            "storage measured again"
        );
    }

    // mof-ceiling: the vrate configurations' storage searches took the lowest footprint the
    // baseline's (one) loop found failing above its answer as their upper end, and answered
    // below it.
    let base_loop = &runs[0]["stor"]["loops"][0];
    let answer = base_loop["mem_frac"].as_f64().unwrap();
    let base_probes = base_loop["mem_probes"].as_array().unwrap();
    let verdict_at = |f: f64| {
        base_probes
            .iter()
            .rev()
            .find(|p| p["mem_frac"].as_f64() == Some(f))
            .map(|p| p["pass"] == true)
    };
    let ceiling = base_probes
        .iter()
        .filter_map(|p| p["mem_frac"].as_f64())
        .filter(|f| *f > answer && verdict_at(*f) == Some(false))
        .fold(None, |m: Option<f64>, f| Some(m.map_or(f, |m| m.min(f))));
    for r in &runs[1..] {
        // Only with the memory the baseline measured with: a resumed run measures the
        // available memory again, and 0.1G more or less leaves the ceiling unused.
        let mem = |r: &Value| r["stor"]["mem"].clone();
        let ceiling = if mem(r) == mem(&runs[0]) {
            ceiling
        } else {
            eprintln!("[01] measured with other memory than the baseline: no ceiling");
            None
        };
        assert_eq!(r["stor"]["ceiling"].as_f64(), ceiling, "{}", r["stor"]);
        if let Some(c) = ceiling {
            let f = r["stor"]["loops"][0]["mem_frac"].as_f64().unwrap();
            assert!(f < c, "answered {} at or above the ceiling {}", f, c);
        }
    }

    let sum = v["summary"].as_str().unwrap();
    assert!(
        sum.contains("[00] QoS: iocost=off mem_profile=2"),
        "{}",
        sum
    );
    assert!(sum.contains("[01] QoS: rpct="), "{}", sum);
    assert_has_all(
        sum,
        &[
            "Adaptive grid, the vrates in the order picked:",
            "[01]  50.00  coarse pass",
            "Stopped: budget of 1 configurations reached",
        ],
        "summary",
    );
    assert!(
        sum.contains("[min=50.00]") && sum.contains("[max=50.00]"),
        "{}",
        sum
    );
    for row in ["[00] ", "[01] "] {
        // The MOF table's row: a MOF number, then aMOF (a number or FAIL).
        let line = sum
            .lines()
            .skip_while(|l| !l.contains("MOF     aMOF"))
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("no MOF row {} in\n{}", row, sum));
        let mut f = line[5..].split_whitespace();
        let mof: f64 = f.next().unwrap().parse().unwrap();
        assert!(mof > 0.0, "{}", line);
        let amof = f.next().unwrap();
        assert!(amof == "FAIL" || amof.parse::<f64>().is_ok(), "{}", line);
    }
    for table in ["RLAT", "WLAT"] {
        let rows = sum
            .lines()
            .skip_while(|l| !l.starts_with(table))
            .skip(1)
            .take_while(|l| l.starts_with('['))
            .count();
        assert_eq!(rows, 2, "{} table in\n{}", table, sum);
    }

    // format: every run's sections, and the QoS result of the vrate.
    let fmt = v["format"].as_str().unwrap();
    assert_has_all(
        fmt,
        &["RUN 00", "RUN 01", "RUN 01 - Storage", "RUN 01 - Result"],
        "format",
    );
    assert_eq!(fmt.matches("QoS result: MOF=").count(), 1, "{}", fmt);
    assert!(fmt.contains("Memory Hog Tuning"), "{}", fmt);

    assert!(runs.iter().all(|r| r["done"] == true), "{}", v["record"]);
    assert!(runs[0]["qos"].is_null());
    assert_eq!(runs[1]["qos"]["min"], 50.0);
    assert_eq!(runs[1]["qos"]["max"], 50.0);
    assert_eq!(v["record"]["inc_runs"].as_array().map(|a| a.len()), Some(0));
    let res = v["result"]["runs"].as_array().unwrap();
    assert_eq!(res.len(), 2);
    assert!(
        res[1]["vrate"]["mean"].as_f64().unwrap() > 0.0,
        "{}",
        res[1]
    );

    // iocost-tune on that run: one configuration pinned to a vrate (50), so its series have
    // one point each, and the rules still solve.
    assert_eq!(v["tune_status"], 0, "{}", v["tune_summary"]);
    assert_has_all(
        v["tune_summary"].as_str().unwrap(),
        &[
            "[iocost-tune ",
            "Solutions",
            "[naive] vrate=75-100, rpct=99, wpct=99",
            "  info: scale=",
            "  model: rbps=",
            "  qos: rpct=",
        ],
        "iocost-tune summary",
    );
    // The solutions' intervals print (one configuration: nothing to resample, zero width).
    assert_has_all(
        v["tune_intervals"].as_str().unwrap(),
        &[
            "How sure the solutions are",
            "90% intervals from 200 resamples of 1 configuration ",
            "75.0 (75.0-75.0) 100.0 (100.0-100.0)",
        ],
        "format iocost-tune:intervals",
    );
    // Measured with the default time-savers and tune-bisect: the record says so, for merges.
    assert_eq!(
        v["tune_record"]["time_savers"],
        serde_json::json!([
            "mof-hint",
            "mof-ceiling",
            "tune-hint",
            "early-stop",
            "tune-bisect"
        ]),
        "{}",
        v["tune_record"]
    );
}

fn pct(v: &Value, label: &str) -> f64 {
    v[label]
        .as_f64()
        .unwrap_or_else(|| panic!("no {} in {}", label, v))
}

fn check_mem_hog(m: &Value) {
    assert_eq!(m["status"], 0, "{}", m);
    // hashd-params with a fake CPU load, before it: upstream's knobs as record and result.
    let line = m["hashd_params_line"].as_str().unwrap();
    assert!(line.ends_with(" fake_cpu_load"), "{}", line);
    let hp = &m["hashd_params"];
    assert_eq!(upstream::problems(hp), Vec::<String>::new());
    let res = &hp["result"];
    assert_eq!(res["mem_frac"].as_f64(), Some(0.3), "{}", res);
    assert!(hp["record"]["sizing"].is_null(), "{}", hp["record"]);
    // Fake CPU load takes rps_max from the memory profile, as storage does:
    // round(share_GiB × 166.67), and profile 2's share is 1 GiB.
    assert_eq!(res["rps_max"], 167, "{}", res);
    assert_eq!(res["fake_cpu_load"], true, "{}", res);

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
    assert_has_all(
        summary,
        &[
            "Memory Hog Summary",
            "Isolation and Request Latency Impact Distributions:",
            "isol%",
            "lat-imp%",
            "Result: ",
            "IO Latency: R ",
        ],
        "summary",
    );
    let format = m["format_rstat"].as_str().unwrap();
    assert_has_all(
        format,
        &[
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
        ],
        "format --rstat",
    );
    eprintln!(
        "mem-hog: isol mean {:.1}% p05 {:.1}% (hog ended: {}) in {:.0}s",
        pct(isol, "mean") * 100.0,
        pct(isol, "05") * 100.0,
        end,
        m["secs"].as_f64().unwrap_or(0.0)
    );
}

fn check_sigint(si: &Value) {
    eprintln!(
        "SIGINT {:.0}s into the first run, {}",
        si["secs"].as_f64().unwrap_or(-1.0),
        if si["in_hog"] == true {
            "with the baseline tune's hog running"
        } else {
            "at the start of [01] (the baseline's tune was one probe)"
        }
    );
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
}
