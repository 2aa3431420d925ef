//! The one way files and directories are created next to what a user names: the result file,
//! its lock and temporary files, a result kept after a failed save, report and plot
//! directories, CSV and job files, tarballs. We run as root, so a name someone else could have
//! planted is never followed and nothing already there is written into:
//!
//! * a symlink at a name the user gave is followed only when it belongs to us or to root
//!   ([`resolve_trusted`]); a link another user owns is refused (it may be planted);
//! * names the tool makes up (temporary files, kept results) are always created new
//!   (`O_EXCL`, which never follows a link), under a random part so a planted name is skipped;
//! * files reopened by name (locks, appended CSV and log files) are opened without following a
//!   link (`O_NOFOLLOW`) and refused unless they are a regular file with one name (a hard link
//!   planted to another file would have us write into that file);
//! * every derived name fits the file system ([`check_names_fit`], before the run).
//!
//! [`FileId`] tells whether the file a command read is still the one it replaces.

use anyhow::{Context, Result};
use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What makes a file the same file: device, inode, size and modification time. A save that
/// renamed a new file into place, or a write in place, changes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

impl FileId {
    pub fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        }
    }

    /// Whether both are the same file (whatever its size and times).
    pub fn same_inode(&self, other: &Self) -> bool {
        self.dev == other.dev && self.ino == other.ino
    }

    /// The identity of the file at `path` now (symlinks followed); `None` if nothing is there.
    pub fn at(path: &Path) -> std::io::Result<Option<Self>> {
        match std::fs::metadata(path) {
            Ok(m) => Ok(Some(Self::of(&m))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The directory holding `path` (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Most symlinks followed to one path, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// Whether a symlink owned by `uid` may be followed: ours or root's.
fn trusted_owner(uid: u32) -> bool {
    // SAFETY: geteuid has no preconditions and can't fail.
    uid == 0 || uid == unsafe { libc::geteuid() }
}

/// The file `path` finally names: symlinks (also dangling ones, whose target a save creates)
/// followed to a path that isn't one, each only if it belongs to us or to root. A loop or a
/// link of another user's is a usage error.
pub fn resolve_trusted(path: &Path) -> Result<PathBuf> {
    let mut cur = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                if !trusted_owner(m.uid()) {
                    crate::usage_bail!(
                        "{}: {} is a symbolic link of uid {}, neither yours nor root's; not \
                         following it (it may have been planted): remove it or give another path",
                        path.display(),
                        cur.display(),
                        m.uid()
                    );
                }
                let to = std::fs::read_link(&cur)
                    .with_context(|| format!("reading the symlink {}", cur.display()))?;
                cur = parent_dir(&cur).join(to);
            }
            _ => return Ok(cur),
        }
    }
    crate::usage_bail!(
        "{}: too many levels of symbolic links (a loop?); give a regular file",
        path.display()
    )
}

/// The temporary name of a save of `name` with a given random part: `.NAME.tmp.PID.RAND`.
fn temp_name(name: &str, pid: u32, rand: &str) -> String {
    format!(".{}.tmp.{}.{}", name, pid, rand)
}

const RAND_LEN: usize = 6;

/// How much longer than a file's own name the longest name derived from it is (the temporary
/// file of a save, with the largest PID Linux gives: 4194304).
pub const DERIVED_NAME_EXTRA: usize = ".".len() + ".tmp.".len() + 7 + ".".len() + RAND_LEN;

/// The prefix every temporary file of saves of `path` starts with: `.NAME.tmp.`.
pub fn temp_prefix(path: &Path) -> String {
    format!(".{}.tmp.", file_name(path))
}

/// The PID in a temporary file's name made by [`create_temp`] for a file with `prefix`.
pub fn temp_pid(fname: &str, prefix: &str) -> Option<u32> {
    let rest = fname.strip_prefix(prefix)?;
    let pid = rest.split_once('.').map_or(rest, |(p, _)| p);
    pid.parse().ok()
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn random_part() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::thread_rng();
    (0..RAND_LEN)
        .map(|_| CHARS[rng.gen_range(0..CHARS.len())] as char)
        .collect()
}

/// Creates `path` new for writing: never follows a link, never opens what is already there.
/// `mode` is narrowed by the umask, as for any new file.
pub fn create_new(path: &Path, mode: u32) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

/// A new temporary file beside `path` (`.NAME.tmp.PID.RAND`, so a rename onto `path` never
/// crosses a file system); a name already taken, by anyone, is skipped.
pub fn create_temp(path: &Path) -> Result<(File, PathBuf)> {
    let dir = parent_dir(path);
    let name = file_name(path);
    let mut last = None;
    for _ in 0..16 {
        let tmp = dir.join(temp_name(&name, std::process::id(), &random_part()));
        match create_new(&tmp, 0o666) {
            Ok(f) => return Ok((f, tmp)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e).with_context(|| format!("creating {}", tmp.display())),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
        .with_context(|| format!("creating a temporary file beside {}", path.display()))
}

/// Refuses an opened file that isn't regular or has more names than one.
fn check_single_regular(file: &File, path: &Path) -> std::io::Result<()> {
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if m.nlink() != 1 {
        return Err(std::io::Error::other(format!(
            "{} has {} names (hard links); not writing into a file that is also elsewhere",
            path.display(),
            m.nlink()
        )));
    }
    Ok(())
}

/// Opens (creating if needed) a lock file for reading and writing: not through a link, not a
/// FIFO or device, not a file with other names.
pub fn open_lock(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| link_error(e, path))?;
    check_single_regular(&file, path)?;
    Ok(file)
}

/// ELOOP from `O_NOFOLLOW` said as what it is.
fn link_error(e: std::io::Error, path: &Path) -> std::io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        std::io::Error::other(format!(
            "{} is a symbolic link; not following it (remove it)",
            path.display()
        ))
    } else {
        e
    }
}

/// Opens `path` for appending, created if missing: a symlink the user gave is followed only
/// when trusted ([`resolve_trusted`]); a regular file must have one name. Other file types
/// (a terminal, a pipe with a reader) are taken as they are; a FIFO without a reader fails
/// rather than waits.
pub fn open_append(path: &Path) -> Result<File> {
    let target = resolve_trusted(path)?;
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o666)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&target)
        .map_err(|e| link_error(e, &target))
        .with_context(|| format!("opening {} for appending", path.display()))?;
    if file.metadata()?.is_file() {
        check_single_regular(&file, &target)
            .with_context(|| format!("opening {} for appending", path.display()))?;
    }
    Ok(file)
}

/// Creates the directory `path` (and its parents) if missing and returns where it is: a
/// symlink at `path` is followed only when trusted, and what is there must be a directory.
/// `what` names it for the usage errors.
pub fn ensure_dir(path: &Path, what: &str) -> Result<PathBuf> {
    let target = resolve_trusted(path)?;
    if let Err(e) = std::fs::create_dir_all(&target) {
        crate::usage_bail!(
            "{}: can't create the {} ({}); give a writable directory",
            path.display(),
            what,
            e
        );
    }
    match std::fs::symlink_metadata(&target) {
        Ok(m) if m.is_dir() => Ok(target),
        Ok(_) => crate::usage_bail!(
            "{}: is not a directory; the {} must be one",
            path.display(),
            what
        ),
        Err(e) => crate::usage_bail!("{}: can't use the {} ({})", path.display(), what, e),
    }
}

/// The longest file name the file system holding `dir` takes.
fn name_max(dir: &Path) -> usize {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return 255;
    };
    // SAFETY: a NUL-terminated path and a zeroed struct statvfs fills.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 || st.f_namemax == 0 {
        return 255;
    }
    st.f_namemax as usize
}

/// Checks, before any work, that the names a save of `path` (a final target, symlinks
/// resolved) will create fit its file system: its own and the longest derived one. `what`
/// names the file.
pub fn check_names_fit(path: &Path, what: &str) -> Result<()> {
    let len = path.file_name().map_or(0, |n| n.len());
    let max = name_max(parent_dir(path));
    if len + DERIVED_NAME_EXTRA > max {
        crate::usage_bail!(
            "{}: a {}-byte file name; the {} may have at most {} bytes here (its temporary \
             files add {} to the {} the file system takes)",
            path.display(),
            len,
            what,
            max.saturating_sub(DERIVED_NAME_EXTRA),
            DERIVED_NAME_EXTRA,
            max
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_temp_name_is_what_the_check_allows_for() {
        let longest = temp_name("n", 4194304, &random_part());
        assert_eq!(longest.len(), 1 + DERIVED_NAME_EXTRA);
        assert_eq!(temp_pid(&longest, ".n.tmp."), Some(4194304));
        assert_eq!(temp_pid(".n.tmp.12", ".n.tmp."), Some(12));
        assert_eq!(temp_pid(".n.tmp.x.ab", ".n.tmp."), None);
    }

    #[test]
    fn temps_skip_planted_names_and_locks_refuse_links() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let r = dir.path().join("r.json");
        let (_f, tmp) = create_temp(&r).unwrap();
        assert!(tmp
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(&temp_prefix(&r)));
        // A link at the lock's name, and a second name of the victim.
        let lock = dir.path().join(".r.json.lock");
        std::os::unix::fs::symlink(&victim, &lock).unwrap();
        let e = open_lock(&lock).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{}", e);
        std::fs::remove_file(&lock).unwrap();
        std::fs::hard_link(&victim, &lock).unwrap();
        let e = open_lock(&lock).unwrap_err();
        assert!(e.to_string().contains("2 names"), "{}", e);
        assert!(open_append(&lock).is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    }

    #[test]
    fn names_too_long_for_a_save_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("r".repeat(255 - DERIVED_NAME_EXTRA));
        check_names_fit(&ok, "result file").unwrap();
        let long = dir.path().join("r".repeat(256 - DERIVED_NAME_EXTRA));
        let e = check_names_fit(&long, "result file").unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
    }
}
