//! One writer per result file. `run`, `study`, `solve` and `pack` hold an exclusive `flock` on
//! `.<name>.lock` beside the result file (the file itself can't carry the lock: every save
//! renames a new inode over it) for as long as they run; readers (`summary`, `format`) never
//! take it. The kernel drops a flock when its holder dies, so a SIGKILLed run leaves no stale
//! lock: the file may stay behind, but the next writer locks it at once.
//!
//! The lock file holds the holder's PID and command line so a second writer can say who has
//! the file. The holder removes it on a normal exit; a writer that locked a file another one
//! has just removed (its inode is no longer the path's) retries.

use crate::error::UsageError;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive hold on a result file; released (and the lock file removed) on drop.
#[derive(Debug)]
pub struct ResultLock {
    path: PathBuf,
    _file: File,
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
        let target = super::save::resolve_symlinks(result)?;
        let path = lock_path(&target);
        loop {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| {
                    UsageError::new(format!(
                        "{}: can't create the lock file {} ({}); the result file's directory must be writable",
                        result.display(),
                        path.display(),
                        e
                    ))
                })?;
            // SAFETY: plain syscall on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let err = std::io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EWOULDBLOCK) => {}
                    // Some network and VM-shared filesystems have no flock: run unguarded
                    // rather than not at all, and say so.
                    Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS) => {
                        log::warn!(
                            "{}: this filesystem can't lock files ({}); make sure no other run writes this result file",
                            result.display(),
                            err
                        );
                        return Ok(Self { path, _file: file });
                    }
                    _ => return Err(err).with_context(|| format!("locking {}", path.display())),
                }
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                crate::usage_bail!(
                    "{} is in use by {}; wait for it to finish or stop it (one writer per result file)",
                    result.display(),
                    describe_holder(&holder)
                );
            }
            // The previous holder may have removed the file between our open and our lock.
            let same = match (file.metadata(), std::fs::metadata(&path)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                _ => false,
            };
            if !same {
                continue;
            }
            file.set_len(0)
                .and_then(|_| file.write_all(holder_line().as_bytes()))
                .and_then(|_| file.flush())
                .with_context(|| format!("writing {}", path.display()))?;
            return Ok(Self { path, _file: file });
        }
    }
}

impl Drop for ResultLock {
    fn drop(&mut self) {
        // Removed while still locked: a waiting writer that opened it sees another inode and
        // retries (see `acquire`).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `<pid> <command line>` of this process.
fn holder_line() -> String {
    let cmdline = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    format!("{} {}\n", std::process::id(), cmdline)
}

/// "pid 123 (resctl-bench -r r.json run storage)" from a lock file's content.
fn describe_holder(content: &str) -> String {
    let line = content.lines().next().unwrap_or("").trim();
    match line.split_once(' ') {
        Some((pid, cmd)) if pid.parse::<u32>().is_ok() => format!("pid {} ({})", pid, cmd),
        _ if line.parse::<u32>().is_ok() => format!("pid {}", line),
        _ => "another resctl-bench".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
