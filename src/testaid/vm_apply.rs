//! `systemd-host --apply FILE`: `apply` end to end in a `vm --init systemd --scsi-disk` guest,
//! with systemd's own udev rule and iocost tool doing the applying: refused onto a read-only
//! hwdb directory, shown, `--boot` (then `systemd-hwdb update --strict`, `iocost query`), the
//! knobs changed by hand with `--now` and the disk re-triggered (as a boot would), `--undo`.
//! What each step left (exit codes, output, udev's properties, the knobs, the files) goes into
//! the scenario's JSON for `tests/vm_systemd.rs` to check.

use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

/// The guest's SCSI disk (`vm --scsi-disk`).
const DEV: &str = "sda";
const HWDB_DIR: &str = "/etc/udev/hwdb.d";

fn run(prog: &str, args: &[&str]) -> Result<Value> {
    let out = Command::new(prog)
        .args(args)
        .output()
        .with_context(|| format!("running {} {}", prog, args.join(" ")))?;
    Ok(json!({
        "code": out.status.code(),
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
    }))
}

/// This binary's `apply` with `args`.
fn apply(result: &Path, args: &[&str]) -> Result<Value> {
    let r = result.to_string_lossy();
    let mut a = vec!["-r", &r, "apply"];
    a.extend_from_slice(args);
    run("/proc/self/exe", &a)
}

/// The disk's lines of io.cost.model and io.cost.qos.
fn knobs() -> Result<Value> {
    let devnr = std::fs::read_to_string(format!("/sys/block/{}/dev", DEV))?;
    let line = |f: &str| -> Result<String> {
        let text = std::fs::read_to_string(Path::new("/sys/fs/cgroup").join(f))?;
        Ok(text
            .lines()
            .find(|l| l.starts_with(&format!("{} ", devnr.trim())))
            .unwrap_or("")
            .to_string())
    };
    Ok(json!({ "model": line("io.cost.model")?, "qos": line("io.cost.qos")? }))
}

/// udev's IOCOST_* properties of the disk and the files in the hwdb directory.
fn udev_state() -> Result<Value> {
    let info = run(
        "udevadm",
        &["info", "--query=property", &format!("/dev/{}", DEV)],
    )?;
    let props: Vec<&str> = info["stdout"]
        .as_str()
        .unwrap_or("")
        .lines()
        .filter(|l| {
            l.starts_with("IOCOST_") || l.starts_with("ID_MODEL=") || l.starts_with("ID_REVISION=")
        })
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(HWDB_DIR)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    Ok(json!({ "props": props, "files": files, "knobs": knobs()? }))
}

pub fn apply_e2e(result: &Path) -> Result<Value> {
    let before = udev_state()?;
    // A read-only hwdb directory: refused, nothing changed.
    std::fs::create_dir_all(HWDB_DIR)?;
    run("mount", &["--bind", HWDB_DIR, HWDB_DIR])?;
    run("mount", &["-o", "remount,bind,ro", HWDB_DIR])?;
    let read_only = apply(result, &["--boot"])?;
    run("umount", &[HWDB_DIR])?;
    let after_read_only = udev_state()?;
    let shown = apply(result, &[])?;
    let boot = apply(result, &["bandwidth", "--boot"])?;
    let after_boot = udev_state()?;
    let strict = run("systemd-hwdb", &["update", "--strict"])?;
    let query = run("/usr/lib/udev/iocost", &["query", &format!("/dev/{}", DEV)])?;
    // By hand another solution's values, then what a boot does: udev looks the disk up again.
    let now = apply(result, &["naive", "--now"])?;
    let after_now = knobs()?;
    let sys = format!("/sys/class/block/{}", DEV);
    let trigger = run("udevadm", &["trigger", "--action=change", "--settle", &sys])?;
    let after_trigger = knobs()?;
    let undo = apply(result, &["--undo"])?;
    let after_undo = udev_state()?;
    Ok(json!({
        "before": before,
        "read_only": read_only,
        "after_read_only": after_read_only,
        "shown": shown,
        "boot": boot,
        "after_boot": after_boot,
        "strict": strict,
        "query": query,
        "now": now,
        "after_now": after_now,
        "trigger": trigger,
        "after_trigger": after_trigger,
        "undo": undo,
        "after_undo": after_undo,
        "state_left": Path::new("/var/lib/resctl-bench/apply.json").exists(),
    }))
}
