//! Reading result files as users hand them to us: only regular files are opened (see
//! `util::fs::open_regular`), the size is bounded before and while reading, every gzip member
//! is read, and bytes after the data — the torn tails upstream's in-place saves left in real
//! community files — are ignored with one warning naming the offset, never silently.

pub use crate::util::fs::{checked_size, open_regular, read_limited};
use crate::util::fs::{too_large, INITIAL_CAPACITY};
use anyhow::{Context, Result};
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::Path;

/// The largest result file we read, compressed or not (the largest real ones are tens of MB;
/// parsing needs the whole text in memory).
pub const MAX_RESULT_BYTES: u64 = 1 << 30;

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

/// The most a gzip stream decodes to per compressed byte (deflate's limit is about 1032).
const MAX_GZIP_RATIO: u64 = 1100;

/// Decompresses every gzip member of `src` (`total` bytes), streaming. Bytes after the last
/// complete member that don't decode as another one are ignored with a warning naming the
/// offset; a first member that doesn't decode is a usage error. A file that could decode past
/// `limit` is measured first without keeping what it decodes, so that one over it (a gzip
/// bomb) is refused before it takes the memory.
pub fn gunzip<R: Read + Seek>(path: &Path, mut src: R, total: u64, limit: u64) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if total.saturating_mul(MAX_GZIP_RATIO) > limit {
        let size = decode(path, &mut src, total, limit, None)?;
        src.seek(SeekFrom::Start(0))
            .with_context(|| format!("reading {}", path.display()))?;
        out.reserve_exact(size as usize);
    } else {
        out.reserve(total.saturating_mul(8).min(INITIAL_CAPACITY) as usize);
    }
    decode(path, src, total, limit, Some(&mut out))?;
    Ok(out)
}

/// [`gunzip`]'s pass over the members: into `out`, or only counted. Returns the bytes decoded.
fn decode(
    path: &Path,
    src: impl Read,
    total: u64,
    limit: u64,
    mut out: Option<&mut Vec<u8>>,
) -> Result<u64> {
    let mut rd = std::io::BufReader::with_capacity(32 << 10, Counted { inner: src, n: 0 });
    let mut done = 0u64;
    loop {
        let offset = rd.get_ref().n - rd.buffer().len() as u64;
        let mut member = flate2::bufread::GzDecoder::new(&mut rd).take(limit + 1 - done);
        let res = match out.as_deref_mut() {
            Some(v) => {
                let before = v.len();
                let r = member.read_to_end(v).map(|n| n as u64);
                if r.is_err() {
                    v.truncate(before);
                }
                r
            }
            None => std::io::copy(&mut member, &mut std::io::sink()),
        };
        match res {
            Ok(n) => done += n,
            Err(e) if offset == 0 => crate::usage_bail!(
                "{}: not a valid gzip file ({}); a result file named .gz must be gzip-compressed",
                path.display(),
                e
            ),
            Err(_) => {
                if out.is_some() {
                    log::warn!(
                        "{}: ignoring {} bytes after the gzip data at offset {} (not gzip data: a torn tail of an earlier save?)",
                        path.display(),
                        total.saturating_sub(offset),
                        offset
                    );
                }
                return Ok(done);
            }
        }
        if done > limit {
            return Err(too_large(path, "result file (uncompressed)", limit));
        }
        if rd
            .fill_buf()
            .with_context(|| format!("reading {}", path.display()))?
            .is_empty()
        {
            return Ok(done);
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
        let un =
            |data: &[u8], limit| gunzip(p, std::io::Cursor::new(data), data.len() as u64, limit);
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
        // A bomb: 64 MiB of zeros in a few KiB, with a 1 MiB limit, is measured (not kept) and
        // refused; one within the limit is read in the two passes.
        let bomb = gz(&vec![0u8; 64 << 20]);
        let err = un(&bomb, 1 << 20).unwrap_err();
        assert!(format!("{:#}", err).contains("too large"), "{:#}", err);
        assert_eq!(un(&bomb, 64 << 20).unwrap().len(), 64 << 20);
    }
}
