//! `resctl-bench __hashd` on this host: a tiny testfile set, a few seconds of load with fake
//! and real CPU, live params reload, the status file, and a clean exit on SIGTERM.

use resctl_bench::workload::hashd::{Hashd, HashdOpts, HashdStatus, Params};
use std::path::Path;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn opts(dir: &Path) -> HashdOpts {
    HashdOpts {
        exe: BIN.into(),
        // 32M footprint reference: 8M of testfiles, ~19M of anon memory.
        total_memory: Some(64 << 20),
        ..HashdOpts::new(dir, 32 << 20)
    }
}

/// Small requests so the test stays cheap: 64K file + 147K anon per request, 10 ms sleeps.
fn light_params(fake: bool) -> Params {
    Params {
        rps_target: 60,
        file_size_mean: 64 << 10,
        chunk_pages: 4,
        sleep_mean: 0.010,
        fake_cpu_load: fake,
        ..Params::default()
    }
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn check_running(hd: &mut Hashd, fake: bool) -> HashdStatus {
    hd.wait_running(Duration::from_secs(20)).unwrap();
    // Let the control loop ramp up, then look at consecutive status files.
    let first = hd.status().unwrap();
    let mut last = first.clone();
    wait_for("rps near the target", Duration::from_secs(20), || {
        last = hd.status().unwrap();
        last.stat.rps >= 30.0 && last.timestamp > first.timestamp
    });
    assert!(last.stat.nr_done > first.stat.nr_done);
    let s = &last.stat;
    assert!(s.rps < 120.0, "rps {} way over the target of 60", s.rps);
    // Every request sleeps ~10 ms, and fake CPU adds ~15 ms for a mean-sized buffer.
    let lat = &s.lat;
    assert!(lat.min > 0.0 && lat.min <= lat.p50 && lat.p50 <= lat.p95);
    assert!(lat.p95 <= lat.p99 && lat.p99 <= lat.max);
    let lo = if fake { 0.015 } else { 0.005 };
    assert!(lat.p50 > lo && lat.p50 < 0.5, "p50 {}", lat.p50);
    assert_eq!(lat.ctl, lat.p95);
    assert_eq!(last.phase, "Running");
    // Not forced: rotational mode follows the testfiles' and the swap devices.
    assert_eq!(
        last.rotational,
        last.rotational_testfiles || last.rotational_swap
    );
    assert_eq!(last.testfiles_progress, 1.0);
    assert!(s.nr_workers >= 1 && s.nr_in_flight <= s.nr_workers);
    assert_eq!(s.io_errors, 0);
    if fake {
        assert_eq!(s.bytes_hashed, 0);
    } else {
        assert!(s.bytes_hashed > 0);
    }
    let rep = hd.report("hashd-A.service");
    assert_eq!(rep.svc.name, "hashd-A.service");
    assert!(rep.rps > 0.0 && rep.lat.p95 > 0.0 && rep.nr_done > 0);
    assert_eq!(rep.lat_pct, 0.95);
    // The reporter's own reader of the status: the same entry, counting on.
    let live = hd.live_report("hashd-A.service");
    let first = (live.0)().expect("a fresh status");
    assert_eq!(first.svc.name, "hashd-A.service");
    wait_for("the live entry to count on", Duration::from_secs(5), || {
        (live.0)().is_some_and(|r| r.nr_done > first.nr_done)
    });
    last
}

#[test]
fn hashd_runs_reloads_params_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(dir.path());

    // Prepare, then prepare again: the testfiles are reused, not rewritten.
    Hashd::prepare(&o).unwrap();
    let tf = o.testfiles.join("rdh-0000/rdh-0000000");
    assert_eq!(std::fs::metadata(&tf).unwrap().len(), 8 << 20);
    let mtime = std::fs::metadata(&tf).unwrap().modified().unwrap();
    Hashd::prepare(&o).unwrap();
    assert_eq!(std::fs::metadata(&tf).unwrap().modified().unwrap(), mtime);

    for fake in [true, false] {
        // The fake-CPU run collects access histograms, the real one doesn't.
        let slots = if fake { 16 } else { 0 };
        Params {
            acc_dist_slots: slots,
            ..light_params(fake)
        }
        .save(&o.params)
        .unwrap();
        let mut hd = Hashd::start(&o, None).unwrap();
        let st = check_running(&mut hd, fake);
        assert_eq!(st.mem_probe_size, (32u64 << 20) * 4 / 5);
        for d in [&st.stat.file_dist, &st.stat.anon_dist] {
            assert_eq!(d.len(), slots, "{d:?}");
            if fake {
                // Centred on the hottest page: the first slot beats the last.
                assert!(d[0] > d[slots - 1], "{d:?}");
            }
        }

        if fake {
            // Live reload: a smaller footprint shows up as a new memory probe.
            let before = st.params_modified;
            let p = Params {
                mem_frac: 0.5,
                acc_dist_slots: 8,
                ..light_params(true)
            };
            hd.set_params(&p).unwrap();
            let mut now = st.clone();
            wait_for("params reload", Duration::from_secs(10), || {
                now = hd.status().unwrap();
                now.params_modified > before
            });
            assert_eq!(now.mem_probe_size, 16 << 20);
            // The histograms start over with the new params (and their slot count).
            assert_eq!(now.stat.file_dist.len(), 8);
            assert_eq!(now.stat.anon_dist.len(), 8);
            assert!(now.mem_probe_at > st.mem_probe_at);
        }

        let pid = hd.pid();
        let t = Instant::now();
        hd.stop().unwrap();
        assert!(t.elapsed() < Duration::from_secs(4), "slow to stop");
        // It exited by itself (no SIGKILL needed) and left a final status.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        let fin = HashdStatus::load(&o.report).unwrap();
        assert!(fin.stat.nr_done > 0);
    }
    // The hash log has one line per completion, with the digest for real hashing.
    let log = std::fs::read_to_string(o.log.as_ref().unwrap()).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() > 50);
    let real = lines.last().unwrap();
    assert!(real.ends_with("ms"), "{real}");
    assert_ne!(real.split(' ').nth(2).unwrap(), "0".repeat(40));
}

/// A target below one request in flight: requests of ~10 ms at a target of 8 RPS. hashd paces
/// them with idle gaps instead of keeping one in flight (which ran ~70 RPS here).
#[test]
fn hashd_holds_a_rate_below_one_request_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(dir.path());
    Hashd::prepare(&o).unwrap();
    Params {
        rps_target: 8,
        ..light_params(false)
    }
    .save(&o.params)
    .unwrap();
    let mut hd = Hashd::start(&o, None).unwrap();
    hd.wait_running(Duration::from_secs(20)).unwrap();
    let mut st = hd.status().unwrap();
    wait_for("the concurrency below one", Duration::from_secs(30), || {
        st = hd.status().unwrap();
        st.stat.concurrency < 0.9 && st.stat.nr_done > 0
    });
    // The rate controller climbs back from the floor it first cut to (~8 % a second): let it
    // settle, then count completions over a few seconds.
    std::thread::sleep(Duration::from_secs(8));
    let (a, t) = (hd.status().unwrap().stat.nr_done, Instant::now());
    std::thread::sleep(Duration::from_secs(6));
    let b = hd.status().unwrap().stat.nr_done;
    let rate = (b - a) as f64 / t.elapsed().as_secs_f64();
    hd.stop().unwrap();
    eprintln!("{rate:.1} RPS at a target of 8");
    assert!(
        (4.0..=14.0).contains(&rate),
        "{rate:.1} RPS at a target of 8 (concurrency {:.2}, p50 {:.1} ms)",
        st.stat.concurrency,
        st.stat.lat.p50 * 1000.0
    );
}

#[test]
fn hashd_exit_status_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    // An invalid params file is one clear error, not a panic.
    let params = dir.path().join("params.json");
    std::fs::write(&params, "{\"lat_target_pct\": 7}").unwrap();
    let out = std::process::Command::new(BIN)
        .args([
            "__hashd",
            "--size",
            "8M",
            "--total-memory",
            "64M",
            "--testfiles",
        ])
        .arg(dir.path().join("tf"))
        .arg("--params")
        .arg(&params)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lat_target_pct") && err.contains("params.json"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    // A testfiles dir whose parent is missing is refused.
    let out = std::process::Command::new(BIN)
        .args(["__hashd", "--size", "8M", "--prepare", "--testfiles"])
        .arg(dir.path().join("no/such/tf"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("doesn't exist"));

    // A bad size names the option.
    let out = std::process::Command::new(BIN)
        .args(["__hashd", "--size", "4Q", "--testfiles", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--size"));
}

#[test]
fn hashd_status_reports_rotational_mode_and_its_override() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let prepare = |force: Option<&str>| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(["__hashd", "--size", "8M", "--prepare", "--testfiles"])
            .arg(dir.path().join("tf"))
            .arg("--report")
            .arg(&report);
        if let Some(f) = force {
            cmd.args(["--rotational", f]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{:?}", out);
        HashdStatus::load(&report).unwrap()
    };
    // Detected: either device; forced: whatever the option says, the detection still shown.
    let st = prepare(None);
    assert_eq!(st.rotational, st.rotational_testfiles || st.rotational_swap);
    for (force, want) in [("true", true), ("false", false)] {
        let forced = prepare(Some(force));
        assert_eq!(forced.rotational, want);
        assert_eq!(forced.rotational_testfiles, st.rotational_testfiles);
        assert_eq!(forced.rotational_swap, st.rotational_swap);
    }
}
