//! `__vm-scenario systemd-host`, in a `vm --init systemd` guest: the `seq` commands (deps,
//! the benches) while a watcher notes which of our units' cgroups exist and whether
//! systemd-oomd runs while one of our workloads does, then what is left: our units, system.slice's
//! properties against their values before, the runtime drop-ins, systemd-oomd's state. The
//! host-side test (`tests/vm_systemd.rs`) asserts on the JSON. With `--apply`, `apply` end to end
//! after the commands (`vm_apply`).

use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SLICE_PROPS: &str = "CPUWeight,IOWeight,MemoryMin,MemoryLow,MemoryHigh,MemorySwapMax";
const OOMD: &[&str] = &["systemd-oomd.service", "systemd-oomd.socket"];

fn systemctl(args: &[&str]) -> Result<String> {
    let out = Command::new("systemctl")
        .args(args)
        .output()
        .with_context(|| format!("running systemctl {}", args.join(" ")))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Units of ours or the bench slices, as `list-units --all` shows them (loaded ones).
fn our_units() -> Result<Vec<String>> {
    let text = systemctl(&[
        "list-units",
        "--all",
        "--plain",
        "--no-legend",
        "--no-pager",
    ])?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|u| {
            u.starts_with("rd-")
                || (u.starts_with("resctl-bench-") && u.ends_with(".scope"))
                || matches!(
                    *u,
                    "hostcritical.slice" | "workload.slice" | "balloon.slice"
                )
        })
        .map(str::to_string)
        .collect())
}

/// Our units and the bench slices as cgroups: `SLICE` and `SLICE/UNIT` below /sys/fs/cgroup.
fn cgroup_units() -> Vec<String> {
    let mut v = Vec::new();
    let root = Path::new("/sys/fs/cgroup");
    for slice in [
        "hostcritical.slice",
        "workload.slice",
        "balloon.slice",
        "system.slice",
    ] {
        let Ok(rd) = std::fs::read_dir(root.join(slice)) else {
            continue;
        };
        if slice != "system.slice" {
            v.push(slice.to_string());
        }
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            let ours =
                n.starts_with("rd-") || (n.starts_with("resctl-bench-") && n.ends_with(".scope"));
            if ours && e.path().is_dir() {
                v.push(n);
            }
        }
    }
    v
}

/// Whether a systemd-oomd process runs.
fn oomd_running() -> bool {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "systemd-oomd")
        })
}

fn active(unit: &str) -> Result<bool> {
    Ok(systemctl(&["is-active", unit])?.trim() == "active")
}

/// Every runtime drop-in file below /run/systemd/system.control.
fn control_dropins() -> Vec<String> {
    let mut v = Vec::new();
    let dir = Path::new("/run/systemd/system.control");
    if let Ok(rd) = std::fs::read_dir(dir) {
        for d in rd.flatten() {
            if let Ok(files) = std::fs::read_dir(d.path()) {
                for f in files.flatten() {
                    v.push(f.path().display().to_string());
                }
            }
        }
    }
    v.sort();
    v
}

pub fn systemd_host(work: &Path, cmds: &[String], apply: Option<&Path>) -> Result<Value> {
    let before = systemctl(&["show", "-p", SLICE_PROPS, "system.slice"])?;
    let oomd_before: Vec<bool> = OOMD.iter().map(|u| active(u)).collect::<Result<_>>()?;
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let oomd_during: Arc<Mutex<BTreeSet<bool>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    // Reads the cgroup tree and /proc, not systemctl: a process every few seconds would take
    // CPU from the benches in a TCG guest.
    let watcher = {
        let (seen, oomd_during, stop) = (seen.clone(), oomd_during.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let units = cgroup_units();
                // While a workload of ours runs, no other OOM killer may.
                if units.iter().any(|u| u.starts_with("rd-")) {
                    oomd_during.lock().unwrap().insert(oomd_running());
                }
                seen.lock().unwrap().extend(units);
                std::thread::sleep(Duration::from_secs(2));
            }
        })
    };
    let ran = super::seq::seq(work, cmds);
    stop.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    let ran = ran?;
    let after = systemctl(&["show", "-p", SLICE_PROPS, "system.slice"])?;
    let oomd_after: Vec<bool> = OOMD.iter().map(|u| active(u)).collect::<Result<_>>()?;
    let apply = apply.map(super::vm_apply::apply_e2e).transpose()?;
    let seen: Vec<String> = seen.lock().unwrap().iter().cloned().collect();
    let oomd_during: Vec<bool> = oomd_during.lock().unwrap().iter().copied().collect();
    Ok(json!({
        "cmds": ran,
        "system_slice_before": before,
        "system_slice_after": after,
        "oomd_before": oomd_before,
        "oomd_during": oomd_during,
        "oomd_after": oomd_after,
        "units_seen": seen,
        "units_left": our_units()?,
        "control_dropins_left": control_dropins(),
        "journal_left": work.join("restore.json").exists(),
        "apply": apply,
    }))
}
