//! The memory hog process through its handle: it grows at the asked rate, reports every
//! second, and is gone once killed.

use resctl_bench::workload::memhog::{HogOpts, MemHog};
use std::time::{Duration, Instant};

#[test]
fn the_hog_grows_at_its_rate_reports_and_dies_when_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = HogOpts::new(32 << 20, dir.path().join("report.json"));
    opts.exe = assert_cmd::cargo::cargo_bin("resctl-bench");
    opts.rbps = 4 << 20;
    let mut hog = MemHog::start(&opts, None).unwrap();
    let t0 = Instant::now();
    let rep = loop {
        std::thread::sleep(Duration::from_millis(200));
        match hog.report() {
            Some(r) if r.wbytes > 0 && t0.elapsed() > Duration::from_millis(2500) => break r,
            _ if t0.elapsed() > Duration::from_secs(20) => panic!("no report from the hog"),
            _ => {}
        }
    };
    let secs = t0.elapsed().as_secs_f64();
    // 32 MiB/s for about `secs` seconds (the report is up to a second old).
    let mib = rep.wbytes as f64 / (1 << 20) as f64;
    assert!(
        mib > 20.0 && mib <= 32.0 * secs + 1.0,
        "{} MiB in {:.1}s",
        mib,
        secs
    );
    assert!(rep.rbytes > 0, "the reader touched written pages");
    assert_eq!((rep.wloss, rep.rloss), (0, 0));
    assert!(hog.try_wait().unwrap().is_none(), "runs until killed");
    let pid = hog.pid();
    let st = hog.kill().unwrap();
    assert!(!st.success());
    // Reaped by kill(): the pid is gone (and not reused this fast).
    assert!(!std::path::Path::new(&format!("/proc/{}", pid)).exists());
}
