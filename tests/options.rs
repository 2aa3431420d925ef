//! Global options and subcommands as every subcommand sees them: the same validation
//! everywhere, `--logfile` that writes, and no internal subcommand offered as a suggestion.

use assert_cmd::Command;
use std::path::PathBuf;

fn layout_2_1_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/iocost-qos-2.1-layout.json")
}

fn bin() -> Command {
    let mut c = Command::cargo_bin("resctl-bench").unwrap();
    c.timeout(std::time::Duration::from_secs(30));
    c
}

/// A run option given to a subcommand that doesn't read it is refused (before the readers
/// would have ignored it), and so are format specs with a bogus `passive=`.
#[test]
fn readers_refuse_options_they_dont_read_and_bad_specs() {
    let r = layout_2_1_file();
    let r = r.to_str().unwrap();
    for (args, want) in [
        (
            vec!["--swappiness", "500", "summary"],
            "error: --swappiness doesn't apply to summary (its options: --result, --verbose, \
             --logfile; see `resctl-bench help summary`)",
        ),
        (
            vec!["format", "--mem-profile", "8"],
            "error: --mem-profile doesn't apply to format",
        ),
        (vec!["doc"], "error: --result doesn't apply to doc"),
        (
            vec!["summary", "iocost-qos:passive=bogus"],
            "passive=\"bogus\" has unknown token \"bogus\"",
        ),
    ] {
        let out = bin().arg("-r").arg(r).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{:?}: {}", args, stderr);
        assert_eq!(stderr.lines().count(), 1, "{:?}: {}", args, stderr);
        assert!(stderr.contains(want), "{:?}: {}", args, stderr);
        assert!(out.stdout.is_empty(), "{:?}", args);
    }
    // A valid passive= is accepted (and, as upstream does, ignored for selection).
    bin()
        .args(["-r", r, "summary", "iocost-qos:id=ssd-2.1,passive=all"])
        .assert()
        .success();
}

/// `--logfile` was accepted and never written.
#[test]
fn logfile_gets_every_log_line_appended_with_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.txt");
    let res = dir.path().join("r.json");
    for _ in 0..2 {
        bin()
            .arg("-r")
            .arg(&res)
            .arg("--logfile")
            .arg(&log)
            .args(["run", "selftest:steps=1"])
            .assert()
            .success();
    }
    bin()
        .arg("-r")
        .arg(&res)
        .arg("--logfile")
        .arg(&log)
        .args(["study", "selftest:id=nope"])
        .assert()
        .code(2);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // starting, the progress line of the step, the step done; the reuse; the error.
    assert_eq!(lines.len(), 5, "{}", text);
    // `[YYYY-MM-DD HH:MM:SS.mmm LEVEL] message`
    for l in &lines {
        let b = l.as_bytes();
        assert!(
            b[0] == b'[' && b[5] == b'-' && b[11] == b' ' && b[20] == b'.',
            "{}",
            l
        );
    }
    assert!(
        lines[0].ends_with("INFO ] job[selftest:-]: starting"),
        "{}",
        text
    );
    assert!(
        lines[1].ends_with("INFO ] selftest step 1/1 | 0s"),
        "{}",
        text
    );
    assert!(lines[3].contains("already complete"), "{}", text);
    assert!(
        lines[4].contains("ERROR] "),
        "the final error too: {}",
        text
    );

    let out = bin()
        .args(["--logfile", "/no/such/dir/log", "doc"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", stderr);
    assert!(
        stderr.contains("--logfile /no/such/dir/log: can't open it"),
        "{}",
        stderr
    );
}

/// `resctl-bench hashd` suggested the internal `__hashd-bench` and `__hashd`.
#[test]
fn hidden_subcommands_are_never_suggested() {
    for (cmd, tip) in [
        ("hashd", None),
        ("selftest", None),
        ("reporter", None),
        ("summry", Some("'summary'")),
    ] {
        let out = bin().arg(cmd).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", stderr);
        assert!(
            stderr.contains(&format!("unrecognized subcommand '{}'", cmd)),
            "{}",
            stderr
        );
        assert!(!stderr.contains("__"), "{}: {}", cmd, stderr);
        match tip {
            Some(t) => assert!(stderr.contains("tip:") && stderr.contains(t), "{}", stderr),
            None => assert!(!stderr.contains("tip:"), "{}", stderr),
        }
    }
}

/// Without the `testaid` feature (the binary users install) the test aids don't exist; the
/// product's own hidden subcommands (`__hashd`, `__mem-hog`, …) do.
#[cfg(not(feature = "testaid"))]
#[test]
fn the_installed_binary_has_no_test_aids() {
    for aid in [
        "__vm-scenario",
        "__probe",
        "__save-test",
        "__journal-test",
        "__reporter",
        "__iolat",
        "__hashd-bench",
    ] {
        let out = bin().arg(aid).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {}", aid, stderr);
        assert!(
            stderr.contains(&format!("unrecognized subcommand '{}'", aid)),
            "{}: {}",
            aid,
            stderr
        );
    }
    let out = bin().args(["__mem-hog", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

/// `__probe --iocost-qos` writes raw knobs (`enable=1 ctrl=user ...`), which the global
/// `--iocost-qos` (a QoS override for runs) would refuse: the test aids take the options as
/// given. On this host the probe finds no scratch disk; what matters is that it got that far.
#[cfg(feature = "testaid")]
#[test]
fn probe_takes_raw_iocost_knobs_the_global_option_would_refuse() {
    let out = bin()
        .args(["__probe", "--iocost-qos", "enable=1 ctrl=user rpct=95"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("QoS key"), "{}", stderr);
    assert!(stderr.contains("no scratch device"), "{}", stderr);
}
