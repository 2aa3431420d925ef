//! The restore journal in real processes: a change made through it is undone when the process
//! gets SIGTERM/SIGINT/SIGHUP (even while its main thread is busy) or exits normally, and — after
//! SIGKILL — by the next `Journal::open` of the same directory. Also `deps` on this host, which
//! only reads.

use resctl_bench::system::restore::{Journal, JOURNAL_FILE};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resctl-bench"))
}

/// Starts `__journal-test` changing `knob` to `value`, waits for it to report the change.
fn start(dir: &Path, knob: &Path, value: &str, extra: &[&str]) -> Child {
    let mut child = bin()
        .args(["__journal-test", "--dir"])
        .arg(dir)
        .arg("--path")
        .arg(knob)
        .args(["--value", value])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "changed", "child didn't report the change");
    child
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("child didn't exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

fn signal_restores(sig: i32, spin: bool) {
    let t = tempfile::tempdir().unwrap();
    let knob = t.path().join("swappiness");
    std::fs::write(&knob, "30\n").unwrap();
    let dir = t.path().join("work");
    let extra: &[&str] = if spin { &["--spin"] } else { &[] };
    let mut child = start(&dir, &knob, "60", extra);
    assert_eq!(read(&knob), "60");
    assert!(read(&dir.join(JOURNAL_FILE)).contains("\"old\": \"30\""));
    // SAFETY: sending a signal to our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let st = wait(&mut child);
    assert_eq!(st.code(), Some(128 + sig), "{:?}", st);
    assert_eq!(read(&knob), "30");
    assert!(!dir.join(JOURNAL_FILE).exists());
}

#[test]
fn sigterm_restores_while_main_thread_is_busy() {
    signal_restores(libc::SIGTERM, true);
}

#[test]
fn sigint_restores() {
    signal_restores(libc::SIGINT, false);
}

#[test]
fn sighup_restores() {
    signal_restores(libc::SIGHUP, true);
}

#[test]
fn normal_exit_restores() {
    let t = tempfile::tempdir().unwrap();
    let knob = t.path().join("scheduler");
    std::fs::write(&knob, "[mq-deadline] kyber none\n").unwrap();
    let dir = t.path().join("work");
    let mut child = start(&dir, &knob, "none", &["--exit-after", "0.2"]);
    let st = wait(&mut child);
    assert!(st.success(), "{:?}", st);
    assert_eq!(read(&knob), "mq-deadline");
    assert!(!dir.join(JOURNAL_FILE).exists());
}

#[test]
fn sigkill_leaves_the_journal_and_next_open_restores() {
    let t = tempfile::tempdir().unwrap();
    let knob = t.path().join("wbt_lat_usec");
    std::fs::write(&knob, "2000\n").unwrap();
    let dir = t.path().join("work");
    let mut child = start(&dir, &knob, "0", &["--spin"]);
    child.kill().unwrap();
    let st = wait(&mut child);
    assert_eq!(st.code(), None);
    assert_eq!(read(&knob), "0");
    assert!(dir.join(JOURNAL_FILE).exists());

    let j = Journal::open(&dir).unwrap();
    assert_eq!(read(&knob), "2000");
    assert!(j.changes().is_empty());
    assert!(!dir.join(JOURNAL_FILE).exists());
}

#[test]
fn next_run_restores_before_changing_again() {
    // A killed run, then another run of the test process over the same dir: the leftover is
    // restored first, so the second run records the original value, not the killed run's.
    let t = tempfile::tempdir().unwrap();
    let knob = t.path().join("knob");
    std::fs::write(&knob, "orig").unwrap();
    let dir = t.path().join("work");
    let mut child = start(&dir, &knob, "first", &[]);
    child.kill().unwrap();
    wait(&mut child);
    assert_eq!(read(&knob), "first");
    let mut child = start(&dir, &knob, "second", &[]);
    assert!(read(&dir.join(JOURNAL_FILE)).contains("\"old\": \"orig\""));
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait(&mut child);
    assert_eq!(read(&knob), "orig");
}

#[test]
fn deps_lists_every_requirement_on_this_host() {
    let t = tempfile::tempdir().unwrap();
    let out = bin()
        .arg("deps")
        .arg("--dir")
        .arg(t.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for name in [
        "Controllers",
        "MemCgRecursiveProt",
        "IoCost",
        "IoCostVer",
        "NoOtherIoControllers",
        "AnonBalance",
        "NoCompositeStorage",
        "IoSched",
        "NoWbt",
        "SwapOnScratch",
        "Swap",
        "NoZswap",
        "Psi",
    ] {
        assert!(stdout.contains(name), "{} missing from:\n{}", name, stdout);
    }
    assert!(stdout.contains("requirements satisfied"), "{}", stdout);
    let code = out.status.code();
    assert!(code == Some(0) || code == Some(1), "{:?}", out.status);
    if code == Some(1) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("system requirements missed"), "{}", stderr);
    }
    // deps never writes a journal without --fix.
    assert!(!t.path().join(JOURNAL_FILE).exists());
}

#[test]
fn deps_with_unknown_dev_is_a_usage_error() {
    let out = bin()
        .args(["deps", "--dev", "nosuchdisk0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--dev \"nosuchdisk0\": no such block device"));
}
