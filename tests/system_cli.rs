//! The host setup of `run` as far as it can be checked without changing this host: a memory
//! profile that doesn't fit, or a bad bench property value, stops the run with one line (exit 2)
//! before anything is changed.

use assert_cmd::Command;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

#[test]
fn too_big_a_memory_profile_stops_before_any_change() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("work");
    let out = Command::new(BIN)
        .arg("--dir")
        .arg(&dir)
        .arg("-r")
        .arg(t.path().join("r.json"))
        .args([
            "--mem-profile",
            "1024",
            "--mem-avail",
            "1G",
            "run",
            "systest",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", err);
    let last = err.lines().last().unwrap_or("");
    // A host run by systemd is refused even earlier, with its own one-line message.
    assert!(
        last.contains("use a lower --mem-profile") || last.contains("systemd"),
        "{}",
        err
    );
    assert!(last.starts_with("error: "), "{}", err);
    assert!(!dir.join("restore.json").exists());
    assert!(!t.path().join("r.json").exists());
}

/// A bad property value of a bench that touches the host is reported as itself, before the
/// host setup (whose requirements this host misses) and before any job runs.
#[test]
fn bad_bench_property_values_stop_before_the_host_setup() {
    for (spec, want) in [
        ("storage:rps-max=0", "rps-max=0 can't be used"),
        ("hashd-params:chunk-pages=0", "chunk-pages=0 can't be used"),
        (
            "hashd-params:apply=false,commit",
            "committing implies applying",
        ),
    ] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("work");
        let out = Command::new(BIN)
            .arg("--dir")
            .arg(&dir)
            .arg("-r")
            .arg(t.path().join("r.json"))
            .args(["run", "systest", spec])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {}", spec, err);
        assert_eq!(err.lines().count(), 1, "{}: {}", spec, err);
        assert!(
            err.starts_with("error: ") && err.contains(want),
            "{}: {}",
            spec,
            err
        );
        assert!(!dir.join("restore.json").exists());
        assert!(!t.path().join("r.json").exists());
    }
}
