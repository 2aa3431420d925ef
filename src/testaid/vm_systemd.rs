//! `__vm-scenario systemd-host`, in a `vm --init systemd` guest: the `seq` commands (deps,
//! the benches) while a watcher notes which of our units systemd runs and whether
//! systemd-oomd is stopped meanwhile, then what is left: our units, system.slice's
//! properties against their values before, the runtime drop-ins, systemd-oomd's state. The
//! host-side test (`tests/vm_systemd.rs`) asserts on the JSON.

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

pub fn systemd_host(work: &Path, cmds: &[String]) -> Result<Value> {
    let before = systemctl(&["show", "-p", SLICE_PROPS, "system.slice"])?;
    let oomd_before: Vec<bool> = OOMD.iter().map(|u| active(u)).collect::<Result<_>>()?;
    let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let oomd_during: Arc<Mutex<BTreeSet<bool>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (seen, oomd_during, stop) = (seen.clone(), oomd_during.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut busy = false;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(units) = our_units() {
                    // Only while a bench holds its session (its slices exist) does oomd matter.
                    busy = units.iter().any(|u| u == "workload.slice");
                    seen.lock().unwrap().extend(units);
                }
                if busy {
                    if let Ok(a) = active(OOMD[0]) {
                        oomd_during.lock().unwrap().insert(a);
                    }
                }
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
    }))
}
