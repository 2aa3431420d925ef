//! Undoing the journal's systemd records (see `units.rs` for making them).

use crate::system::systemd::Manager;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// A runtime property back to its old value; our drop-in removed when there was none before.
pub(super) fn prop(
    sd: &dyn Manager,
    unit: &str,
    prop: &str,
    restore: &str,
    dropin: bool,
) -> Result<()> {
    sd.set_runtime(unit, &[restore.to_string()])?;
    if !dropin {
        sd.remove_runtime_dropins(unit, &[prop])?;
    }
    Ok(())
}

/// A transient unit of ours stopped (this process leaving its cgroup `dir` first) and the
/// runtime drop-ins made on it removed (it wasn't defined before).
pub(super) fn transient(sd: &dyn Manager, unit: &str, dir: Option<&Path>) -> Result<()> {
    if let Some(dir) = dir {
        leave(dir)?;
    }
    sd.stop(unit)?;
    sd.remove_runtime_dropins(unit, &[])
}

/// Moves this process to the cgroup root when it is somewhere below `dir` (a slice about to be
/// stopped, which would end it too). The normal exit moves back to where the run started
/// before restoring; this covers the signal path.
fn leave(dir: &Path) -> Result<()> {
    let Some(root) = dir.parent() else {
        return Ok(());
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(rel) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
        return Ok(());
    };
    if !root
        .join(rel.trim().trim_start_matches('/'))
        .starts_with(dir)
    {
        return Ok(());
    }
    let procs = root.join("cgroup.procs");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&procs)
        .and_then(|mut f| f.write_all(std::process::id().to_string().as_bytes()))
        .with_context(|| format!("moving this process out of {}", dir.display()))
}
