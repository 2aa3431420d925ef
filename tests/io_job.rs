//! `__io-job` through its handle (`workload::iojob::handle::IoChild`), as qos-study starts its
//! services: a job runs once let go and leaves its result and per-second samples; SIGTERM ends
//! a long one early with what it measured; a job that is never let go issues no IO and dies
//! with its handle; a job that can't run fails with the reason.

use resctl_bench::workload::ioengine::job::{IoJob, Stop};
use resctl_bench::workload::iojob::handle::IoChild;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn job(dir: &Path, secs: f64) -> IoJob {
    let file = dir.join("data");
    if !file.exists() {
        std::fs::write(&file, vec![7u8; 8 << 20]).unwrap();
    }
    let mut j = IoJob::new(file);
    j.qd = 2;
    j.direct = false;
    j.stop = Stop::Time(Duration::from_secs_f64(secs));
    j
}

fn wait(c: &mut IoChild, limit: Duration) {
    let t = Instant::now();
    while c.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < limit, "{} still runs", c.name());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_job_runs_once_let_go_and_leaves_its_result_and_samples() {
    let d = tempfile::tempdir().unwrap();
    let mut c = IoChild::spawn(Path::new(BIN), "t", &job(d.path(), 2.5), d.path(), None).unwrap();
    // Not let go: nothing runs, nothing is sampled.
    std::thread::sleep(Duration::from_millis(300));
    assert!(c.try_wait().unwrap().is_none());
    assert!(c.samples().is_empty());
    c.go().unwrap();
    wait(&mut c, Duration::from_secs(30));
    let r = c.result().unwrap();
    assert!(r.read.ios > 0, "{:?}", r.read.ios);
    let s = c.samples();
    assert!(s.len() >= 2, "{:?}", s);
    assert!(
        s.windows(2)
            .all(|w| w[0].ios <= w[1].ios && w[0].ms < w[1].ms),
        "{:?}",
        s
    );
    assert!(s.last().unwrap().ios <= r.read.ios);
}

#[test]
fn sigterm_ends_a_long_job_with_what_it_measured() {
    let d = tempfile::tempdir().unwrap();
    let mut c = IoChild::spawn(
        Path::new(BIN),
        "long",
        &job(d.path(), 600.0),
        d.path(),
        None,
    )
    .unwrap();
    c.go().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t = Instant::now();
    let st = c.stop(Duration::from_secs(20)).unwrap();
    assert!(st.success(), "{:?}", st);
    assert!(t.elapsed() < Duration::from_secs(10));
    let r = c.result().unwrap();
    assert!(r.read.ios > 0);
    assert!(r.runtime_ns < 10_000_000_000, "{}", r.runtime_ns);
}

#[test]
fn a_job_never_let_go_dies_with_its_handle() {
    let d = tempfile::tempdir().unwrap();
    let c = IoChild::spawn(Path::new(BIN), "idle", &job(d.path(), 5.0), d.path(), None).unwrap();
    let pid = c.pid();
    drop(c);
    let proc_dir = PathBuf::from(format!("/proc/{}", pid));
    assert!(!proc_dir.exists(), "{} is still there", proc_dir.display());
}

#[test]
fn a_job_that_cannot_run_fails_with_the_reason() {
    let d = tempfile::tempdir().unwrap();
    let mut j = job(d.path(), 1.0);
    j.target = d.path().join("missing");
    let mut c = IoChild::spawn(Path::new(BIN), "bad", &j, d.path(), None).unwrap();
    c.go().unwrap();
    wait(&mut c, Duration::from_secs(30));
    let e = format!("{:#}", c.result().unwrap_err());
    assert!(e.contains("the bad IO job exited"), "{}", e);
}
