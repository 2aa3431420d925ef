//! One writer per result file. `run`, `study`, `solve` and `pack` hold an exclusive lock
//! (`util::lockfile`) on `.<name>.lock` beside the result file (the file itself can't carry the
//! lock: every save renames a new inode over it) for as long as they run; readers (`summary`,
//! `format`) never take it.

use crate::util::lockfile::{Busy, LockFile};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// An exclusive hold on a result file; released (and the lock file removed) on drop.
#[derive(Debug)]
pub struct ResultLock {
    _held: LockFile,
}

/// The lock file of the result file `target` (the final target, symlinks resolved).
pub fn lock_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{}.lock", name))
}

impl ResultLock {
    /// Takes the lock of `result` (resolved through symlinks, so two links to one file share
    /// it) or fails at once with a usage error naming the holder.
    pub fn acquire(result: &Path) -> Result<Self> {
        super::save::check_dir_writable(result, "result file")?;
        let target = super::save::resolve_trusted(result)?;
        let path = lock_path(&target);
        match LockFile::acquire(&path, &result.display().to_string())? {
            Ok(held) => Ok(Self { _held: held }),
            Err(Busy::CantCreate(e)) => crate::usage_bail!(
                "{}: can't create the lock file {} ({}); the result file's directory must be writable",
                result.display(),
                path.display(),
                e
            ),
            Err(Busy::HeldBy(holder)) => crate::usage_bail!(
                "{} is in use by {}; wait for it to finish or stop it (one writer per result file)",
                result.display(),
                holder
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::lockfile::describe_holder;

    #[test]
    fn second_lock_fails_naming_the_holder_and_release_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("r.json");
        let held = ResultLock::acquire(&r).unwrap();
        let lock = dir.path().join(".r.json.lock");
        let content = std::fs::read_to_string(&lock).unwrap();
        assert!(content.starts_with(&format!("{} ", std::process::id())));
        // flock is per open file description: a second open in the same process conflicts too.
        let err = ResultLock::acquire(&r).unwrap_err();
        let msg = format!("{:#}", err);
        assert!(msg.contains(&format!("in use by pid {} (", std::process::id())));
        assert_eq!(crate::error::exit_code(&err), 2);
        drop(held);
        assert!(!lock.exists());
        let _again = ResultLock::acquire(&r).unwrap();
    }

    #[test]
    fn a_symlink_and_its_target_share_one_lock() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("r.json");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let link = dir.path().join("sub/link.json");
        std::os::unix::fs::symlink("../r.json", &link).unwrap();
        let _held = ResultLock::acquire(&r).unwrap();
        assert!(ResultLock::acquire(&link).is_err());
    }

    #[test]
    fn holder_descriptions() {
        assert_eq!(
            describe_holder("12 resctl-bench -r r.json run storage\n"),
            "pid 12 (resctl-bench -r r.json run storage)"
        );
        assert_eq!(describe_holder("12"), "pid 12");
        assert_eq!(describe_holder(""), "another resctl-bench");
    }
}
