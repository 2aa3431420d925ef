//! Children a bench moves into a cgroup start `--held`: they touch nothing until their stdin
//! closes, so that their memory is charged to the cgroup they were moved into, not to ours.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn held(args: &[&str]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("resctl-bench"))
        .args(args)
        .arg("--held")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Holds `child` for a while (writing to its stdin changes nothing), checks that it did
/// nothing `idle` can see, then releases it and waits for it to exit successfully.
fn hold_then_release(mut child: Child, idle: impl Fn() -> bool) {
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    stdin.write_all(b"x").unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert!(idle(), "the held child worked before its release");
    assert!(child.try_wait().unwrap().is_none(), "the held child exited");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_held_memory_hog_writes_nothing_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("hog.json");
    let r = report.to_str().unwrap();
    let child = held(&[
        "__mem-hog",
        "--wbps",
        "1M",
        "--report",
        r,
        "--duration",
        "1",
    ]);
    hold_then_release(child, || !report.exists());
    assert!(report.exists(), "the released hog wrote no report");
}

#[test]
fn a_held_hashd_lays_out_no_testfile_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("testfiles");
    let f = files.to_str().unwrap();
    let child = held(&["__hashd", "--testfiles", f, "--size", "64M", "--prepare"]);
    let empty = |p: &Path| std::fs::read_dir(p).map_or(true, |mut d| d.next().is_none());
    hold_then_release(child, || empty(&files));
    assert!(!empty(&files), "the released hashd laid out no testfile");
}
