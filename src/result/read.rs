//! Reading result files (and other input files) as users hand them to us: only regular files
//! are opened for reading (a FIFO would block forever, a directory isn't a file), the size is
//! bounded before and while reading, every gzip member is read, and bytes after the data — the
//! torn tails upstream's in-place saves left in real community files — are ignored with one
//! warning naming the offset, never silently.

use crate::error::UsageError;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest result file we read, compressed or not (the largest real ones are tens of MB;
/// parsing needs the whole text in memory).
pub const MAX_RESULT_BYTES: u64 = 1 << 30;

/// The most a read reserves before it has data: beyond it the buffer grows with what arrives.
const INITIAL_CAPACITY: u64 = 64 << 20;

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

fn too_large(path: &Path, what: &str, limit: u64) -> anyhow::Error {
    UsageError::new(format!(
        "{}: too large to be a {} (more than {}); is it the right file?",
        path.display(),
        what,
        crate::units::format_size(limit as f64)
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

/// A reader that counts what was read through it.
struct Counted<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let got = self.inner.read(buf)?;
        self.n += got as u64;
        Ok(got)
    }
}

/// Decompresses every gzip member of `src` (`total` bytes), streaming. Bytes after the last
/// complete member that don't decode as another one are ignored with a warning naming the
/// offset; a first member that doesn't decode is a usage error.
pub fn gunzip(path: &Path, src: impl Read, total: u64, limit: u64) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(total.saturating_mul(8).min(INITIAL_CAPACITY) as usize);
    let mut rd = std::io::BufReader::with_capacity(32 << 10, Counted { inner: src, n: 0 });
    loop {
        let offset = rd.get_ref().n - rd.buffer().len() as u64;
        let before = out.len();
        let res = flate2::bufread::GzDecoder::new(&mut rd)
            .take(limit + 1 - before as u64)
            .read_to_end(&mut out);
        match res {
            Ok(_) if out.len() as u64 > limit => {
                return Err(too_large(path, "result file (uncompressed)", limit))
            }
            Ok(_) => {}
            Err(e) if offset == 0 => crate::usage_bail!(
                "{}: not a valid gzip file ({}); a result file named .gz must be gzip-compressed",
                path.display(),
                e
            ),
            Err(_) => {
                out.truncate(before);
                log::warn!(
                    "{}: ignoring {} bytes after the gzip data at offset {} (not gzip data: a torn tail of an earlier save?)",
                    path.display(),
                    total.saturating_sub(offset),
                    offset
                );
                return Ok(out);
            }
        }
        if rd
            .fill_buf()
            .with_context(|| format!("reading {}", path.display()))?
            .is_empty()
        {
            return Ok(out);
        }
    }
}

/// Where the meaningful part of `bytes` ends after a value ending at `end`: warns once if
/// anything but whitespace follows.
pub fn warn_trailing(path: &Path, bytes: &[u8], end: usize, what: &str) {
    let rest = &bytes[end.min(bytes.len())..];
    if rest.iter().any(|b| !b.is_ascii_whitespace()) {
        log::warn!(
            "{}: ignoring {} bytes after the {} at offset {} (a torn tail of an earlier save?)",
            path.display(),
            rest.len(),
            what,
            end
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn every_gzip_member_is_read_and_tails_are_dropped() {
        let p = Path::new("t.json.gz");
        let un = |data: &[u8], limit| gunzip(p, data, data.len() as u64, limit);
        let mut two = gz(b"[1,");
        two.extend(gz(b"2]"));
        assert_eq!(un(&two, 100).unwrap(), b"[1,2]");
        let mut torn = gz(b"[1]");
        torn.extend(b"\x00garbage");
        assert_eq!(un(&torn, 100).unwrap(), b"[1]");
        // A tail that looks like a member but isn't one.
        let mut fake = gz(b"[1]");
        fake.extend(b"\x1f\x8bnope");
        assert_eq!(un(&fake, 100).unwrap(), b"[1]");
        let err = un(b"plain text", 100).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert!(format!("{:#}", err).contains("not a valid gzip file"));
        let err = un(&two, 4).unwrap_err();
        assert!(format!("{:#}", err).contains("too large"), "{:#}", err);
    }

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
