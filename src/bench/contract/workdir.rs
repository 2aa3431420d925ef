//! The work directory (`--dir`) a run writes its test files, bench.json, restore journal and
//! reports in: checked and claimed before the first job uses it. Two runs sharing one would
//! rewrite each other's test files under them (an `io` job measured twice its real IOPS when a
//! second run rewrote its file), so the second is refused while the first holds the claim.

use crate::util::lockfile::{Busy, LockFile};
use anyhow::Result;
use std::path::Path;

/// The lock file inside the work directory.
const LOCK: &str = ".resctl-bench.lock";

/// Makes sure `dir` is a directory (creating it when only its last component is missing) and
/// claims it for this run until the returned lock drops; a usage error otherwise.
pub fn claim(dir: &Path) -> Result<LockFile> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => crate::usage_bail!(
            "--dir {}: exists and is not a directory; give a directory for the run's files",
            dir.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            if !parent.is_dir() {
                crate::usage_bail!(
                    "--dir {}: {} isn't a directory; create it or give another --dir",
                    dir.display(),
                    parent.display()
                );
            }
            std::fs::create_dir(dir).map_err(|e| {
                crate::error::UsageError::new(format!(
                    "--dir {}: can't create it ({}); give a writable directory",
                    dir.display(),
                    e
                ))
            })?;
        }
        Err(e) => crate::usage_bail!("--dir {}: can't use it ({})", dir.display(), e),
    }
    match LockFile::acquire(&dir.join(LOCK), &format!("--dir {}", dir.display()))? {
        Ok(held) => Ok(held),
        Err(Busy::CantCreate(e)) => crate::usage_bail!(
            "--dir {}: can't create files in it ({}); give a writable directory",
            dir.display(),
            e
        ),
        Err(Busy::HeldBy(holder)) => crate::usage_bail!(
            "--dir {} is in use by {}: a second run there would rewrite its test files; wait \
             for it to finish or give this run its own --dir",
            dir.display(),
            holder
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_per_directory_and_only_directories() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("work");
        let held = claim(&dir).unwrap();
        assert!(dir.is_dir());
        let err = format!("{:#}", claim(&dir).unwrap_err());
        assert!(err.contains("is in use by pid"), "{}", err);
        drop(held);
        let _again = claim(&dir).unwrap();

        let deep = t.path().join("missing/work");
        let err = format!("{:#}", claim(&deep).unwrap_err());
        assert!(err.contains("missing isn't a directory"), "{}", err);
        assert!(!t.path().join("missing").exists());

        let file = t.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = claim(&file).unwrap_err();
        assert!(format!("{:#}", err).contains("exists and is not a directory"));
        assert_eq!(crate::error::exit_code(&err), 2);
    }
}
