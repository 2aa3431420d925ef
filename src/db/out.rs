//! Where `db build` writes: the `--out` folder is only ever a complete build. The build is made
//! in a hidden folder beside it (`.NAME.building-PID`) and swapped in whole at the end (an
//! atomic exchange when a build was there), under a lock beside it that keeps a second build
//! out; a build killed midway leaves the hidden folder, which the next one removes, and the
//! previous build in place. A folder that holds anything but a build is never replaced.

use crate::util::lockfile::{Busy, LockFile};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// The file that marks a folder as a `db build`'s.
pub const MARK: &str = ".resctl-bench-db-build";

/// A build in the making: its staging folder, the final one and the lock.
pub struct Staging {
    pub dir: PathBuf,
    target: PathBuf,
    _lock: LockFile,
}

fn hidden(target: &Path, what: &str) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{}.{}", name, what))
}

/// Checks `out` (missing, empty or an earlier build's), takes the lock and makes the staging
/// folder; usage errors name `out`.
pub fn stage(out: &Path) -> Result<Staging> {
    let bad = |why: String| -> anyhow::Error {
        crate::error::UsageError::new(format!("--out {}: {}", out.display(), why)).into()
    };
    let target = crate::util::create::resolve_trusted(out)?;
    if target.file_name().is_none() {
        return Err(bad("names no folder; give a folder for the build".into()));
    }
    let parent = crate::util::create::parent_dir(&target).to_path_buf();
    if !parent.is_dir() {
        return Err(bad(format!("its parent {} is no folder", parent.display())));
    }
    let lock_path = hidden(&target, "db-build.lock");
    let lock = match LockFile::acquire(&lock_path, &out.display().to_string())? {
        Ok(l) => l,
        Err(Busy::HeldBy(who)) => {
            return Err(bad(format!(
                "another db build is writing it ({}); wait for it",
                who
            )))
        }
        Err(Busy::CantCreate(e)) => {
            return Err(bad(format!(
                "can't create {} ({}); its parent must be writable",
                lock_path.display(),
                e
            )))
        }
    };
    match std::fs::symlink_metadata(&target) {
        Err(_) => {}
        Ok(m) if !m.is_dir() => return Err(bad("is not a folder".into())),
        Ok(_) => {
            let empty = std::fs::read_dir(&target)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
            if !empty && !target.join(MARK).is_file() {
                return Err(bad(
                    "holds files that aren't a db build's; give a new folder, an empty one or \
                     an earlier build's (each build replaces it whole)"
                        .into(),
                ));
            }
        }
    }
    remove_stale(&target);
    let dir = hidden(&target, &format!("building-{}", std::process::id()));
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(MARK), "resctl-bench db build\n")
        .with_context(|| format!("writing {}", dir.join(MARK).display()))?;
    Ok(Staging {
        dir,
        target,
        _lock: lock,
    })
}

/// Staging folders of builds that were killed (we hold the lock: none is alive); only our own
/// (by owner), never one someone else put there.
fn remove_stale(target: &Path) {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let prefix = hidden(target, "building-");
    let prefix = prefix
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = crate::util::create::parent_dir(target);
    for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if name.starts_with(&prefix) && ours {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Staging {
    /// Puts the finished build in place: exchanged with the folder there (then removed), or
    /// renamed to it.
    pub fn finish(self) -> Result<PathBuf> {
        let (a, b) = (cstr(&self.dir)?, cstr(&self.target)?);
        // SAFETY: NUL-terminated paths; renameat2 only renames.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if rc == 0 {
            // The staging path now holds the previous build.
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::ENOENT) {
                return Err(err)
                    .with_context(|| format!("putting the build in {}", self.target.display()));
            }
            std::fs::rename(&self.dir, &self.target)
                .with_context(|| format!("putting the build in {}", self.target.display()))?;
        }
        Ok(self.target.clone())
    }
}

fn cstr(p: &Path) -> Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
        .with_context(|| format!("{}: a NUL byte in the path", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_replaces_only_a_build_and_a_second_waits() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let s = stage(&out).unwrap();
        let second = stage(&out)
            .err()
            .expect("a second build while the first holds the lock");
        assert!(format!("{:#}", second).contains("another db build is writing it"));
        std::fs::write(s.dir.join("a"), "1").unwrap();
        s.finish().unwrap();
        assert_eq!(std::fs::read_to_string(out.join("a")).unwrap(), "1");
        // An earlier build is replaced whole; nothing is left beside it.
        let s = stage(&out).unwrap();
        std::fs::write(s.dir.join("b"), "2").unwrap();
        s.finish().unwrap();
        assert!(!out.join("a").exists() && out.join("b").exists());
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("building"))
            .collect();
        assert!(left.is_empty(), "{:?}", left);
        // A folder of other files is refused.
        let other = tmp.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("mine.txt"), "x").unwrap();
        let e = stage(&other).err().expect("a folder of other files");
        assert!(format!("{:#}", e).contains("aren't a db build's"));
        assert!(other.join("mine.txt").exists());
    }
}
