//! Files replaced atomically: a reader sees the old file or the complete new one, never a torn
//! one. [`write_atomic`] is durable (fsync of the file and the directory) and follows symlinks
//! to their final target (result files, `bench.json`, the restore journal, args files);
//! [`write_replacing`] skips the fsyncs for files rewritten every second on the device under
//! test (reports, hashd's status), where a flush would disturb what is measured.

use super::create::{check_names_fit, create_new, create_temp, temp_pid, temp_prefix};
pub use super::create::{parent_dir, resolve_trusted, FileId};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes `path` through `tmp` (same directory) renamed over it, without fsync. `tmp` is a
/// fixed staging name of the caller's: created new (a leftover of a killed writer, or anything
/// planted there, is unlinked first, never written through). The temp file is removed if
/// anything fails; `what` names the file in the error.
pub fn write_replacing(
    path: &Path,
    tmp: &Path,
    what: &str,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<()> {
    let res = (|| -> std::io::Result<()> {
        let mut f = match create_new(tmp, 0o666) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(tmp)?;
                create_new(tmp, 0o666)?
            }
            r => r?,
        };
        fill(&mut f)?;
        drop(f);
        std::fs::rename(tmp, path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(tmp);
        return Err(e).with_context(|| format!("writing {} {}", what, path.display()));
    }
    Ok(())
}

/// The fixed staging name of a [`write_replacing`] of `path` by this process:
/// `.<name>.tmp.<pid>` in the same directory, so the rename never crosses a filesystem.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{}.tmp.{}", name, std::process::id()))
}

/// Removes temp files of earlier saves of `path` whose process is gone (a save killed midway
/// leaves one behind). Best effort: failures are only logged.
pub fn remove_stale_temps(path: &Path) {
    let Ok(path) = resolve_trusted(path) else {
        return;
    };
    let path = path.as_path();
    let prefix = temp_prefix(path);
    let Ok(dir) = std::fs::read_dir(parent_dir(path)) else {
        return;
    };
    for ent in dir.flatten() {
        let fname = ent.file_name().to_string_lossy().into_owned();
        let Some(pid) = temp_pid(&fname, &prefix) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{}", pid)).exists() {
            continue;
        }
        match std::fs::remove_file(ent.path()) {
            Ok(()) => log::debug!("removed stale {}", ent.path().display()),
            Err(e) => log::debug!("can't remove stale {}: {}", ent.path().display(), e),
        }
    }
}

/// Checks, before any work that would end in a save to `path`, that its directory exists and
/// takes new files: a usage error naming the path otherwise. `what` names the file.
pub fn check_dir_writable(path: &Path, what: &str) -> Result<()> {
    let text = path.as_os_str().as_encoded_bytes();
    if text.ends_with(b"/") || path.file_name().is_none() {
        crate::usage_bail!(
            "{}: names a directory, not a file; give the {} a file name",
            path.display(),
            what
        );
    }
    let target = resolve_trusted(path)?;
    let dir = parent_dir(&target);
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => crate::usage_bail!(
            "{}: {} is not a directory; the {} can't be saved there",
            path.display(),
            dir.display(),
            what
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => crate::usage_bail!(
            "{}: the directory {} doesn't exist; create it or give another {} path",
            path.display(),
            dir.display(),
            what
        ),
        Err(e) => crate::usage_bail!(
            "{}: can't use the directory {} ({})",
            path.display(),
            dir.display(),
            e
        ),
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .with_context(|| format!("{}: a path with a NUL byte", path.display()))?;
    // SAFETY: plain syscall with a valid C string.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        crate::usage_bail!(
            "{}: can't create files in {} ({}); the {} is saved there",
            path.display(),
            dir.display(),
            std::io::Error::last_os_error(),
            what
        );
    }
    check_names_fit(&target, what)
}

/// Creates `path` atomically from what `fill` writes: temp file, fsync, rename, fsync of the
/// directory. The temp file is removed if anything fails. An existing target's permissions are
/// carried over. A symlink at `path` stays (when trusted, see `util::create`): its final target
/// is what gets replaced.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    replace_atomic(path, None, fill).map(|_| ())
}

/// The file at a path is no longer the one a command read: another writer replaced or changed
/// it. Saves that expect a file refuse to replace it (see [`replace_atomic`]).
#[derive(Debug, thiserror::Error)]
#[error("{path} changed since it was read (another writer replaced or modified it); left as it is")]
pub struct Changed {
    pub path: String,
}

/// [`write_atomic`] that replaces only the file it expects: with `expect` set, the target's
/// identity just before the rename must be what it holds (`None`: no file there), otherwise
/// nothing is replaced and the error is [`Changed`]. Returns the identity of the new file.
pub fn replace_atomic(
    path: &Path,
    expect: Option<Option<FileId>>,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<FileId> {
    let path = &resolve_trusted(path)?;
    let (file, tmp) = create_temp(path)?;
    let res = write_and_rename(path, file, &tmp, expect, fill);
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

fn write_and_rename(
    path: &Path,
    file: File,
    tmp: &Path,
    expect: Option<Option<FileId>>,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<FileId> {
    if let Ok(meta) = std::fs::metadata(path) {
        // Best effort: a file we can't chmod is still a valid result file.
        let _ = file.set_permissions(meta.permissions());
    }
    let mut w = BufWriter::with_capacity(1 << 20, file);
    fill(&mut w).with_context(|| format!("writing {}", tmp.display()))?;
    let file = w
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", tmp.display()))?;
    file.sync_all()
        .with_context(|| format!("syncing {}", tmp.display()))?;
    let id = FileId::of(
        &file
            .metadata()
            .with_context(|| format!("reading the metadata of {}", tmp.display()))?,
    );
    drop(file);
    if let Some(want) = expect {
        let now = FileId::at(path).with_context(|| format!("checking {}", path.display()))?;
        if now != want {
            return Err(Changed {
                path: path.display().to_string(),
            }
            .into());
        }
    }
    std::fs::rename(tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    sync_dir(parent_dir(path))?;
    // What the next check will see through the path (network and VM-shared file systems may
    // report times a little differently than for the open file), unless another writer
    // already replaced ours.
    Ok(match FileId::at(path) {
        Ok(Some(now)) if now.same_inode(&id) => now,
        _ => id,
    })
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).with_context(|| format!("opening directory {}", dir.display()))?;
    d.sync_all()
        .with_context(|| format!("syncing directory {}", dir.display()))
}
