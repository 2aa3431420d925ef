//! `resctl-bench vm` option handling that needs no guest: bad values are one-line usage errors
//! (exit 2) reported before anything is built or booted.

use assert_cmd::Command;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn usage_error(args: &[&str], needle: &str) {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{:?}", args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{:?}: {}", args, err);
    assert!(err.contains(needle), "{:?}: {}", args, err);
}

#[test]
fn vm_bad_option_values_are_usage_errors() {
    usage_error(
        &["vm", "--disk-size", "huge", "--", "--version"],
        "--disk-size \"huge\" is not a size",
    );
    usage_error(&["vm", "--mem", "64M", "--", "--version"], "too small");
    usage_error(
        &["vm", "--disk-profile", "tape", "--", "--version"],
        "accepted: unthrottled, nvme, sata-ssd, slow-ssd, hdd",
    );
    usage_error(
        &["vm", "--disk-bps", "fast", "--", "--version"],
        "--disk-bps",
    );
    usage_error(
        &["vm", "--accel", "xen", "--", "--version"],
        "accepted: auto, kvm, tcg",
    );
    usage_error(&["vm"], "after `--`");
    usage_error(
        &["vm", "--with-module", ":x", "--", "--version"],
        "--with-module \"\": a module name is needed (NAME[:PARAMS])",
    );
    usage_error(
        &[
            "vm",
            "--with-program",
            "/nonexistent/fio",
            "--",
            "--version",
        ],
        "--with-program /nonexistent/fio: not a file",
    );
    usage_error(
        &["vm", "--guest-packages", "fio", "--", "--version"],
        "--guest-packages needs --init systemd",
    );
    usage_error(
        &[
            "vm",
            "--init",
            "systemd",
            "--guest-packages",
            "fio;x",
            "--",
            "--version",
        ],
        "not a Debian package name",
    );
    usage_error(
        &["vm", "--disk-latency", "0.5ms", "--", "--version"],
        "--disk-latency \"0.5ms\" is not a per-IO latency (accepted: 0 for none, or 1ms",
    );
}

#[test]
fn vm_latency_profile_without_nbdkit_names_the_package() {
    // With a PATH that has no nbdkit (nor anything else), the hdd profile stops at nbdkit
    // before anything is built; /usr/sbin and /sbin (also searched) don't hold nbdkit on Debian.
    if ["/usr/sbin/nbdkit", "/sbin/nbdkit"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
    {
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .env("PATH", empty.path())
        .args(["vm", "--disk-profile", "hdd", "--", "--version"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{}", err);
    for needle in [
        "disk profile hdd",
        "Debian package nbdkit",
        "scripts/setup-vm",
    ] {
        assert!(err.contains(needle), "{}: {}", needle, err);
    }
}

#[test]
fn vm_help_lists_the_disk_profiles() {
    let out = Command::new(BIN).args(["vm", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for p in [
        "unthrottled",
        "nvme",
        "sata-ssd",
        "slow-ssd",
        "hdd",
        "150 IOPS",
        "6 ms/IO",
        "--disk-latency",
    ] {
        assert!(help.contains(p), "{}", p);
    }
}
