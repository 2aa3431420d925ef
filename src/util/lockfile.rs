//! An exclusive `flock` on a lock file, held for as long as the value lives: one writer per
//! result file (`result::lock`), one run per work directory (`WorkDirLock` in the runner). The
//! kernel drops a flock when its holder dies, so a SIGKILLed run leaves no stale lock: the file
//! may stay behind, but the next one locks it at once.
//!
//! The lock file holds the holder's PID and command line so that the next one can say who has
//! it. The holder removes it on a normal exit; one that locked a file another has just removed
//! (its inode is no longer the path's) retries.

use anyhow::{Context, Result};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// A held lock file; released (and removed) on drop.
#[derive(Debug)]
pub struct LockFile {
    path: PathBuf,
    _file: File,
}

/// Why a lock wasn't taken.
pub enum Busy {
    /// Another process holds it: its description (`pid 123 (resctl-bench … run storage)`).
    HeldBy(String),
    /// The lock file can't be created (the reason).
    CantCreate(std::io::Error),
}

impl LockFile {
    /// Takes the lock `path` at once or says why not (`Err(Busy)`). A filesystem without
    /// flock is run unguarded, with a warning naming `what`.
    pub fn acquire(path: &Path, what: &str) -> Result<std::result::Result<Self, Busy>> {
        loop {
            // Not through a link, not into a file with other names: we may run as root in a
            // directory others can write to.
            let mut file = match super::create::open_lock(path) {
                Ok(f) => f,
                Err(e) => return Ok(Err(Busy::CantCreate(e))),
            };
            // SAFETY: plain syscall on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let err = std::io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::EWOULDBLOCK) => {}
                    // Some network and VM-shared filesystems have no flock: run unguarded
                    // rather than not at all, and say so.
                    Some(libc::ENOLCK | libc::EOPNOTSUPP | libc::ENOSYS) => {
                        log::warn!(
                            "{}: this filesystem can't lock files ({}); make sure no other run uses it",
                            what,
                            err
                        );
                        return Ok(Ok(Self {
                            path: path.to_path_buf(),
                            _file: file,
                        }));
                    }
                    _ => return Err(err).with_context(|| format!("locking {}", path.display())),
                }
                return Ok(Err(Busy::HeldBy(describe_holder(&read_holder(&mut file)))));
            }
            // The previous holder may have removed the file between our open and our lock.
            let same = match (file.metadata(), std::fs::metadata(path)) {
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
            return Ok(Ok(Self {
                path: path.to_path_buf(),
                _file: file,
            }));
        }
    }
}

impl Drop for LockFile {
    fn drop(&mut self) {
        // Removed while still locked: a waiting one that opened it sees another inode and
        // retries (see `acquire`).
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The holder's line of a lock file someone else holds. A holder writes it right after taking
/// the lock; one that has only just taken it gets a moment to, so the message can name it.
fn read_holder(file: &mut File) -> String {
    let mut holder = String::new();
    for _ in 0..20 {
        holder.clear();
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.read_to_string(&mut holder);
        if holder.ends_with('\n') {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    holder
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
pub fn describe_holder(content: &str) -> String {
    let line = content.lines().next().unwrap_or("").trim();
    match line.split_once(' ') {
        Some((pid, cmd)) if pid.parse::<u32>().is_ok() => format!("pid {} ({})", pid, cmd),
        _ if line.parse::<u32>().is_ok() => format!("pid {}", line),
        _ => "another resctl-bench".into(),
    }
}
