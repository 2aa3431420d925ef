//! A private directory in memory (tmpfs) for the status files our children rewrite every
//! second and we read back as often: hashd's status and the memory hog's report. On the
//! scratch disk each rewrite (a new file renamed over the old) waits for that file system's
//! journal, and while the memory hog swaps onto the same disk that wait took seconds: the
//! reader saw one status twice, then two or three seconds' progress at once (per-second
//! isolation 0, then capped at 1, though hashd's own rate never left its target).

use anyhow::Result;
use std::path::{Path, PathBuf};

/// Where the directories go: systemd's (and most distributions') tmpfs for runtime state.
pub const RUN: &str = "/run";

/// `statfs`'s type of a tmpfs.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Whether `path` is on a tmpfs.
pub fn is_tmpfs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct from a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    rc == 0 && st.f_type as i64 == TMPFS_MAGIC
}

/// A private directory removed with everything in it when dropped.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// A new directory `PREFIX.PID.RAND` in `parent` if `parent` is a tmpfs; `None` (and
    /// why, in the debug log) otherwise, for the caller to keep its files where they were.
    pub fn new_in(parent: &Path, prefix: &str) -> Option<RunDir> {
        if !is_tmpfs(parent) {
            log::debug!(
                "{} is not a tmpfs: status files stay on disk",
                parent.display()
            );
            return None;
        }
        match Self::create(parent, prefix) {
            Ok(d) => Some(d),
            Err(e) => {
                log::debug!("status files stay on disk: {:#}", e);
                None
            }
        }
    }

    /// [`RunDir::new_in`] in [`RUN`].
    pub fn new(prefix: &str) -> Option<RunDir> {
        Self::new_in(Path::new(RUN), prefix)
    }

    fn create(parent: &Path, prefix: &str) -> Result<RunDir> {
        let path = super::create::create_private_dir(parent, prefix)?;
        Ok(RunDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            log::warn!("removing {}: {}", self.path.display(), e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tmpfs_is_told_from_a_disk_and_the_directory_goes_with_its_owner() {
        // /dev/shm is a tmpfs wherever these tests run (Debian, containers); / of a build
        // host or container isn't.
        let shm = Path::new("/dev/shm");
        if !is_tmpfs(shm) {
            eprintln!("skipped: /dev/shm is not a tmpfs here");
            return;
        }
        assert!(!is_tmpfs(Path::new("/proc")));
        assert!(!is_tmpfs(Path::new("/nonexistent-dir")));
        let d = RunDir::new_in(shm, "rb-test").expect("a directory on /dev/shm");
        let path = d.path().to_path_buf();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{path:?}");
        std::fs::write(path.join("report.json"), "{}").unwrap();
        drop(d);
        assert!(!path.exists(), "{path:?} left behind");
    }

    #[test]
    fn not_on_a_tmpfs_there_is_no_directory() {
        let t = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        if is_tmpfs(t.path()) {
            eprintln!("skipped: the checkout is on a tmpfs");
            return;
        }
        assert!(RunDir::new_in(t.path(), "rb-test").is_none());
        assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 0);
    }
}
