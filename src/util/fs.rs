//! File helpers: small kernel files, and input files as users hand them to us — only regular
//! files are opened for reading (a FIFO would block forever, a directory isn't a file) and
//! their size is bounded before and while reading.

use crate::error::UsageError;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The content of a small text file (a sysfs or procfs knob), trimmed; `None` if it can't be
/// read.
pub fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The most a read reserves before it has data: beyond it the buffer grows with what arrives.
pub(crate) const INITIAL_CAPACITY: u64 = 64 << 20;

/// What a non-regular file is, for messages.
fn file_kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading if it is a regular file (symlinks followed). `Ok(None)` if it
/// doesn't exist; any other problem is a usage error naming the path and `what` it should be.
pub fn open_regular(path: &Path, what: &str) -> Result<Option<File>> {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => crate::usage_bail!(
            "{}: too many levels of symbolic links (a loop?); the {} must be a regular file",
            path.display(),
            what
        ),
        Err(e) => crate::usage_bail!("{}: can't open the {} ({})", path.display(), what, e),
    };
    let meta = file
        .metadata()
        .with_context(|| format!("reading the metadata of {}", path.display()))?;
    if !meta.is_file() {
        crate::usage_bail!(
            "{}: is {}; the {} must be a regular file",
            path.display(),
            file_kind(&meta.file_type()),
            what
        );
    }
    Ok(Some(file))
}

pub(crate) fn too_large(path: &Path, what: &str, limit: u64) -> anyhow::Error {
    UsageError::new(format!(
        "{}: too large to be a {} (more than {} MiB); is it the right file?",
        path.display(),
        what,
        limit >> 20
    ))
    .into()
}

/// The size of an opened file, refused if it's over `limit`.
pub fn checked_size(file: &File, path: &Path, what: &str, limit: u64) -> Result<u64> {
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > limit {
        return Err(too_large(path, what, limit));
    }
    Ok(size)
}

/// All bytes of an opened regular file, refusing more than `limit`.
pub fn read_limited(mut file: File, path: &Path, what: &str, limit: u64) -> Result<Vec<u8>> {
    let size = checked_size(&file, path, what, limit)?;
    // The size only hints: a sparse file's says nothing about its data.
    let mut buf = Vec::with_capacity(size.min(INITIAL_CAPACITY) as usize);
    (&mut file)
        .take(limit + 1)
        .read_to_end(&mut buf)
        .with_context(|| format!("reading {}", path.display()))?;
    if buf.len() as u64 > limit {
        return Err(too_large(path, what, limit));
    }
    Ok(buf)
}

/// Bytes available to unprivileged users on the file system holding `path`.
pub fn free_bytes(path: &std::path::Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("path holds a NUL byte"))?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_regular_files_are_refused_without_opening_them_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: plain syscall with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (p, kind) in [(fifo.as_path(), "a FIFO"), (dir.path(), "a directory")] {
            let err = open_regular(p, "result file").unwrap_err();
            assert_eq!(crate::error::exit_code(&err), 2);
            let msg = format!("{:#}", err);
            assert!(
                msg.contains(&format!("is {}; the result file must be", kind)),
                "{}",
                msg
            );
        }
        assert!(open_regular(&dir.path().join("none"), "result file")
            .unwrap()
            .is_none());
    }
}
