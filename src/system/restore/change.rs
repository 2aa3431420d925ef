//! What the restore journal records: one [`Change`] per host change, with the value that undoes
//! it, and the key that makes the first record of a thing win.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A remount to undo: `target` is remounted with `old` as its filesystem options and its
/// per-mount flags (`mount_opts`) kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remount {
    pub target: PathBuf,
    pub source: String,
    pub fstype: String,
    /// Per-mount options (mountinfo field 6, e.g. `rw,nosuid,nodev,relatime`).
    pub mount_opts: String,
    /// Filesystem options before our change (mountinfo super options).
    pub old: String,
}

/// One journaled change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// Writing `old` to `path` undoes the change.
    Write { path: PathBuf, old: String },
    /// We created this directory (a cgroup); removing it undoes the change.
    CreatedDir { path: PathBuf },
    /// A filesystem we remounted with other options.
    Remount(Remount),
    /// A unit property set at runtime through systemd: `restore` is the assignment that puts
    /// the old value back; `dropin` whether a runtime drop-in for it was there before (if not,
    /// ours is removed too).
    UnitProp {
        unit: String,
        prop: String,
        restore: String,
        dropin: bool,
    },
    /// A transient unit we started (a slice, a scope): stopped, which ends what runs in it,
    /// and its runtime drop-ins removed. `cgroup`: its directory, which this process leaves
    /// first when it is inside.
    TransientUnit {
        unit: String,
        #[serde(default)]
        cgroup: Option<PathBuf>,
    },
    /// A unit we stopped for the run (another OOM killer): started again.
    StoppedUnit { unit: String },
}

impl Change {
    /// What decides that two records are about the same thing (the first one wins).
    pub(super) fn key(&self) -> (u8, PathBuf, String) {
        match self {
            Change::Write { path, old } => (0, path.clone(), keyed_prefix(path, old)),
            Change::CreatedDir { path } => (1, path.clone(), String::new()),
            Change::Remount(r) => (2, r.target.clone(), String::new()),
            Change::UnitProp { unit, prop, .. } => (3, PathBuf::from(unit), prop.clone()),
            Change::TransientUnit { unit, .. } => (4, PathBuf::from(unit), String::new()),
            Change::StoppedUnit { unit } => (5, PathBuf::from(unit), String::new()),
        }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Change::Write { path, old } => write!(f, "{} = {:?}", path.display(), old),
            Change::CreatedDir { path } => write!(f, "created directory {}", path.display()),
            Change::Remount(r) => write!(f, "mount {} options {:?}", r.target.display(), r.old),
            Change::UnitProp { unit, restore, .. } => write!(f, "{} {}", unit, restore),
            Change::TransientUnit { unit, .. } => write!(f, "transient unit {}", unit),
            Change::StoppedUnit { unit } => write!(f, "stopped unit {}", unit),
        }
    }
}

/// Files whose records are per device: the key is the leading `MAJ:MIN`.
pub(super) fn is_keyed(path: &Path) -> bool {
    matches!(
        path.file_name().and_then(|n| n.to_str()),
        Some("io.cost.model" | "io.cost.qos" | "io.max" | "io.latency" | "io.weight")
    )
}

fn keyed_prefix(path: &Path, text: &str) -> String {
    if is_keyed(path) {
        text.split_whitespace().next().unwrap_or("").to_string()
    } else {
        String::new()
    }
}
