//! Files replaced atomically: a reader sees the old file or the complete new one, never a torn
//! one. [`write_atomic`] is durable (fsync of the file and the directory) and follows symlinks
//! to their final target (result files, `bench.json`, the restore journal, args files);
//! [`write_replacing`] skips the fsyncs for files rewritten every second on the device under
//! test (reports, hashd's status), where a flush would disturb what is measured.

use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Writes `path` through `tmp` (same directory) renamed over it, without fsync. The temp file
/// is removed if anything fails; `what` names the file in the error.
pub fn write_replacing(
    path: &Path,
    tmp: &Path,
    what: &str,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<()> {
    let res = (|| -> std::io::Result<()> {
        let mut f = File::create(tmp)?;
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

/// The temporary file a save of `path` writes before renaming: `.<name>.tmp.<pid>` in the same
/// directory, so the rename never crosses a filesystem.
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
    let Ok(path) = resolve_symlinks(path) else {
        return;
    };
    let path = path.as_path();
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let prefix = format!(".{}.tmp.", name);
    let Ok(dir) = std::fs::read_dir(parent_dir(path)) else {
        return;
    };
    for ent in dir.flatten() {
        let fname = ent.file_name().to_string_lossy().into_owned();
        let Some(pid) = fname
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<u32>().ok())
        else {
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

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Most symlinks followed to one path, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// The file `path` finally names: symlinks (also dangling ones, whose target a save creates)
/// followed to a path that isn't one. A loop is a usage error.
pub fn resolve_symlinks(path: &Path) -> Result<PathBuf> {
    let mut cur = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
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
    let target = resolve_symlinks(path)?;
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
    Ok(())
}

/// Creates `path` atomically from what `fill` writes: temp file, fsync, rename, fsync of the
/// directory. The temp file is removed if anything fails. An existing target's permissions are
/// carried over. A symlink at `path` stays: its final target is what gets replaced.
pub fn write_atomic(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let path = &resolve_symlinks(path)?;
    let tmp = temp_path(path);
    let res = write_and_rename(path, &tmp, fill);
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

fn write_and_rename(
    path: &Path,
    tmp: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
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
    drop(file);
    std::fs::rename(tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    sync_dir(parent_dir(path))
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    let d = File::open(dir).with_context(|| format!("opening directory {}", dir.display()))?;
    d.sync_all()
        .with_context(|| format!("syncing directory {}", dir.display()))
}
