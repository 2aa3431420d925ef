//! The hook every host-changing write goes through. Code that changes a value on the host (a
//! knob of a cgroup we didn't create, an io.cost setting, a sysctl…) first hands the journal the
//! text that, written back to the same path, undoes the change; only then does it write.
//! `system::restore` keeps those records in `<dir>/restore.json` and replays them on exit or at
//! the next start.

use std::path::Path;

/// Receives the old value of a host file before it is changed.
pub trait ChangeJournal {
    /// `old` is what must be written to `path` to undo the coming write. It is recorded before
    /// the write happens; an error here aborts the write.
    ///
    /// A path can be recorded more than once: restoring the *first* record of a path restores
    /// the original state. Keyed files (`io.cost.model`, `io.cost.qos`) are the exception: their
    /// records start with `MAJ:MIN` and each device keeps its own first record. For
    /// `cgroup.subtree_control`, `old` is the controller list before the change (e.g.
    /// `memory pids`); restoring enables and disables controllers to match it.
    fn record(&mut self, path: &Path, old: &str) -> anyhow::Result<()>;

    /// A directory (cgroup) we created that did not exist before; undoing means removing it.
    /// Nothing needs to happen for it by default.
    fn created_dir(&mut self, _path: &Path) -> anyhow::Result<()> {
        Ok(())
    }
}

/// A journal that forgets everything: for tests and for writes into cgroups we own.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoJournal;

impl ChangeJournal for NoJournal {
    fn record(&mut self, _path: &Path, _old: &str) -> anyhow::Result<()> {
        Ok(())
    }
}

/// A journal that keeps the records in memory, in order (tests inspect it).
#[derive(Debug, Default, Clone)]
pub struct MemJournal {
    pub records: Vec<(std::path::PathBuf, String)>,
    pub created: Vec<std::path::PathBuf>,
}

impl ChangeJournal for MemJournal {
    fn record(&mut self, path: &Path, old: &str) -> anyhow::Result<()> {
        self.records.push((path.to_path_buf(), old.to_string()));
        Ok(())
    }

    fn created_dir(&mut self, path: &Path) -> anyhow::Result<()> {
        self.created.push(path.to_path_buf());
        Ok(())
    }
}
