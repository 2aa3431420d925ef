//! hashd's testfiles: the page-cache half of its memory footprint.
//!
//! The set is `ceil(size / unit)` files of `unit` bytes (32 MiB; the last one holds the rest),
//! at `<dir>/rdh-DDDD/rdh-FFFFFFF` — FFFFFFF the file index in 7 hex digits, DDDD the index
//! divided by 4096 in 4 hex digits — upstream's layout. Contents are random, with a
//! compressibility knob: of every 512-byte block the first `floor(64 × (1 − comp))` u64 words
//! are random and the rest zero. The first 8 bytes hold `comp` as a little-endian f64, which
//! marks a complete file made with that compressibility (upstream writes it in native order and
//! reads it as little-endian; we use little-endian both ways).
//!
//! A file is written under a temporary name and renamed into place, so a name that exists
//! belongs to a complete file; existing files with the right size and marker are reused.

use super::dist::Rng;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Bytes per testfile.
pub const UNIT_SIZE: u64 = 32 << 20;
/// Files per directory.
const FILES_PER_DIR: u64 = 4096;
/// At most 2^28 files.
const MAX_FILES: u64 = 1 << 28;
/// The system page size we lay out by.
pub const PAGE: u64 = 4096;
/// Bytes per read when preloading a testfile.
const PRELOAD_READ: usize = 2 << 20;

/// What `prepare` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrepStats {
    pub created: u64,
    pub kept: u64,
}

/// A testfile set: where, how big, and open handles for reading.
#[derive(Debug)]
pub struct TestFiles {
    dir: PathBuf,
    size: u64,
    unit: u64,
    comp: f64,
    files: Vec<OnceLock<Option<File>>>,
}

impl TestFiles {
    /// `size` is rounded up to whole pages; `comp` is clamped into [0, 1].
    pub fn new(dir: &Path, size: u64, comp: f64) -> Result<TestFiles> {
        Self::with_unit(dir, size, comp, UNIT_SIZE)
    }

    /// [`TestFiles::new`] with another file size (tests); `unit` must be a page multiple.
    pub fn with_unit(dir: &Path, size: u64, comp: f64, unit: u64) -> Result<TestFiles> {
        if unit == 0 || unit % PAGE != 0 {
            bail!("testfile unit {} is not a positive page multiple", unit);
        }
        let size = size.max(PAGE).div_ceil(PAGE) * PAGE;
        let nr = size.div_ceil(unit);
        if nr > MAX_FILES {
            bail!("{} testfiles are too many (at most {})", nr, MAX_FILES);
        }
        let comp = if comp.is_finite() {
            comp.clamp(0.0, 1.0)
        } else {
            0.0
        };
        Ok(TestFiles {
            dir: dir.to_path_buf(),
            size,
            unit,
            comp,
            files: (0..nr).map(|_| OnceLock::new()).collect(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Total bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn unit(&self) -> u64 {
        self.unit
    }

    pub fn nr_files(&self) -> u64 {
        self.files.len() as u64
    }

    /// Total pages.
    pub fn nr_pages(&self) -> u64 {
        self.size / PAGE
    }

    /// Bytes of file `i`.
    pub fn file_size(&self, i: u64) -> u64 {
        (self.size - i * self.unit).min(self.unit)
    }

    fn dir_of(&self, i: u64) -> PathBuf {
        self.dir.join(format!("rdh-{:04x}", i / FILES_PER_DIR))
    }

    /// Path of file `i`.
    pub fn path(&self, i: u64) -> PathBuf {
        self.dir_of(i).join(format!("rdh-{:07x}", i))
    }

    /// (file index, byte offset) of page `page`.
    pub fn locate(&self, page: u64) -> (u64, u64) {
        let off = page * PAGE;
        (off / self.unit, off % self.unit)
    }

    /// True if file `i` exists with the right size and marker.
    pub fn is_valid(&self, i: u64) -> bool {
        let Ok(f) = File::open(self.path(i)) else {
            return false;
        };
        let Ok(meta) = f.metadata() else {
            return false;
        };
        let mut marker = [0u8; 8];
        meta.len() == self.file_size(i)
            && f.read_exact_at(&mut marker, 0).is_ok()
            && f64::from_le_bytes(marker) == self.comp
    }

    /// Creates missing or invalid files, reporting progress (0 … 1) after each file; stops
    /// early when `progress` returns false. Syncs the filesystem when a new directory starts
    /// and at the end.
    pub fn prepare(&self, progress: &mut dyn FnMut(f64) -> bool) -> Result<PrepStats> {
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating testfiles dir {}", self.dir.display()))?;
        let mut st = PrepStats::default();
        let mut rng = Rng::from_entropy();
        let mut buf = vec![0u8; (1 << 20).min(self.unit as usize)];
        let nr = self.nr_files();
        for i in 0..nr {
            if i % FILES_PER_DIR == 0 {
                let d = self.dir_of(i);
                std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
                if st.created > 0 {
                    self.sync();
                }
            }
            if self.is_valid(i) {
                st.kept += 1;
            } else {
                self.create(i, &mut rng, &mut buf)?;
                st.created += 1;
            }
            if !progress((i + 1) as f64 / nr as f64) {
                break;
            }
        }
        if st.created > 0 {
            self.sync();
        }
        Ok(st)
    }

    fn create(&self, i: u64, rng: &mut Rng, buf: &mut [u8]) -> Result<()> {
        let path = self.path(i);
        let tmp = path.with_extension("tmp");
        let size = self.file_size(i);
        crate::util::atomic::write_replacing(&path, &tmp, "testfile", |f| {
            let mut done = 0u64;
            while done < size {
                let n = ((size - done) as usize).min(buf.len());
                fill_block(rng, &mut buf[..n], self.comp);
                if done == 0 {
                    buf[..8].copy_from_slice(&self.comp.to_le_bytes());
                }
                f.write_all(&buf[..n])?;
                done += n as u64;
            }
            Ok(())
        })
    }

    fn sync(&self) {
        if let Ok(d) = File::open(&self.dir) {
            // SAFETY: syncfs on a valid open descriptor.
            unsafe { libc::syncfs(d.as_raw_fd()) };
        }
    }

    /// Drops the testfiles from the page cache (posix_fadvise DONTNEED), best effort.
    pub fn drop_cache(&self) {
        for i in 0..self.nr_files() {
            if let Ok(f) = File::open(self.path(i)) {
                // SAFETY: fadvise on a valid open descriptor.
                unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            }
        }
    }

    /// The files a preload of `bytes` touches, in the order it touches them: the first
    /// `min(bytes / unit, nr_files)` files, highest index first, so the hottest (lowest) files
    /// are loaded last.
    pub fn preload_order(&self, bytes: u64) -> impl Iterator<Item = u64> {
        (0..(bytes / self.unit).min(self.nr_files())).rev()
    }

    /// Reads file `i` into the page cache, charging it to the calling process's cgroup, in
    /// [`PRELOAD_READ`]-sized reads into `buf` (scratch the caller keeps across files, so each
    /// file doesn't fault in a fresh buffer). Returns the pages read.
    pub fn preload_file(&self, i: u64, buf: &mut Vec<u8>) -> Result<u64> {
        let Some(f) = self.file(i) else {
            bail!("can't open testfile {}", self.path(i).display());
        };
        let size = self.file_size(i);
        // Whole-buffer reads, not a byte per page: with a request this large the kernel's
        // readahead issues IOs up to the device's largest, where page-sized reads keep it at
        // its 128 KiB window (and WILLNEED reads only the first such IO). The pages cached are
        // the same; an IOPS-bound disk loads them several times faster.
        buf.resize(PRELOAD_READ, 0);
        let mut pos = 0;
        while pos < size {
            let n = (size - pos).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..n], pos)
                .with_context(|| format!("preloading {} at {}", self.path(i).display(), pos))?;
            pos += n as u64;
        }
        Ok(size / PAGE)
    }

    /// The open file `i` (opened on first use and kept); `None` if it can't be opened. Files
    /// are opened read-write when possible so chunk writes work, else read-only.
    pub fn file(&self, i: u64) -> Option<&File> {
        self.files
            .get(i as usize)?
            .get_or_init(|| {
                let path = self.path(i);
                File::options()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .or_else(|_| File::open(&path))
                    .map_err(|e| log::warn!("can't open testfile {}: {}", path.display(), e))
                    .ok()
            })
            .as_ref()
    }
}

/// Fills `buf` (a multiple of 512 bytes except possibly at the end) with random words and
/// the zero tail of each 512-byte block that `comp` asks for.
fn fill_block(rng: &mut Rng, buf: &mut [u8], comp: f64) {
    let rand_words = (64.0 * (1.0 - comp)).floor() as usize;
    for block in buf.chunks_mut(512) {
        let split = (rand_words * 8).min(block.len());
        rng.fill(&mut block[..split]);
        block[split..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_names_and_sizes() {
        let tf = TestFiles::with_unit(Path::new("/t"), 10 * PAGE + 1, 0.0, 4 * PAGE).unwrap();
        assert_eq!(tf.size(), 11 * PAGE);
        assert_eq!(tf.nr_files(), 3);
        assert_eq!(tf.file_size(0), 4 * PAGE);
        assert_eq!(tf.file_size(2), 3 * PAGE);
        assert_eq!(tf.path(0), Path::new("/t/rdh-0000/rdh-0000000"));
        assert_eq!(tf.path(0x1234), Path::new("/t/rdh-0001/rdh-0001234"));
        assert_eq!(tf.locate(5), (1, PAGE));
        let big = TestFiles::new(Path::new("/t"), 100 << 30, 0.0).unwrap();
        assert_eq!(big.nr_files(), 3200);
        assert!(TestFiles::with_unit(Path::new("/t"), 1, 0.0, 1000).is_err());
    }

    #[test]
    fn compressibility_zeroes_block_tails() {
        let mut rng = Rng::seeded(5);
        let mut buf = vec![0xffu8; 1024];
        fill_block(&mut rng, &mut buf, 0.5);
        for block in buf.chunks(512) {
            assert!(block[256..].iter().all(|b| *b == 0));
            assert!(block[..256].iter().filter(|b| **b != 0).count() > 200);
        }
        fill_block(&mut rng, &mut buf, 1.0);
        assert!(buf.iter().all(|b| *b == 0));
    }

    #[test]
    fn preload_touches_the_first_files_hottest_last() {
        let dir = tempfile::tempdir().unwrap();
        let unit = 4 * PAGE;
        let tf = TestFiles::with_unit(dir.path(), 10 * PAGE, 0.0, unit).unwrap();
        let order = |bytes: u64| tf.preload_order(bytes).collect::<Vec<_>>();
        assert_eq!(order(0), Vec::<u64>::new());
        assert_eq!(order(unit - 1), Vec::<u64>::new(), "whole files only");
        assert_eq!(order(unit), vec![0]);
        assert_eq!(order(2 * unit + PAGE), vec![1, 0]);
        assert_eq!(order(100 * unit), vec![2, 1, 0], "capped at nr_files");
        tf.prepare(&mut |_| true).unwrap();
        tf.drop_cache();
        assert_eq!(tf.preload_file(0, &mut Vec::new()).unwrap(), 4);
        assert_eq!(
            tf.preload_file(2, &mut Vec::new()).unwrap(),
            2,
            "the last file is short"
        );
        assert!(
            (0..4).all(|p| cached(&tf.path(0), p)),
            "every page of file 0 is in the page cache"
        );
        let missing = TestFiles::with_unit(&dir.path().join("none"), unit, 0.0, unit).unwrap();
        assert!(missing.preload_file(0, &mut Vec::new()).is_err());
    }

    #[test]
    fn preload_reads_a_file_larger_than_its_buffer_whole() {
        let dir = tempfile::tempdir().unwrap();
        let unit = PRELOAD_READ as u64 * 2 + 3 * PAGE;
        let tf = TestFiles::with_unit(dir.path(), unit, 0.0, unit).unwrap();
        tf.prepare(&mut |_| true).unwrap();
        tf.drop_cache();
        let pages = unit / PAGE;
        assert_eq!(tf.preload_file(0, &mut Vec::new()).unwrap(), pages);
        let buf_pages = PRELOAD_READ as u64 / PAGE;
        for p in [0, buf_pages - 1, buf_pages, 2 * buf_pages, pages - 1] {
            assert!(cached(&tf.path(0), p), "page {} of {} is cached", p, pages);
        }
    }

    /// Whether page `p` of `path` is in the page cache (mincore over a mapping).
    fn cached(path: &Path, p: u64) -> bool {
        let f = File::open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a read-only shared mapping of a file we hold open, unmapped below; mincore
        // writes one byte per page into `vec`.
        unsafe {
            let addr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(addr, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(PAGE as usize)];
            assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
            libc::munmap(addr, len);
            vec[p as usize] & 1 == 1
        }
    }

    #[test]
    fn prepare_creates_then_reuses_and_repairs() {
        let dir = tempfile::tempdir().unwrap();
        let tf = TestFiles::with_unit(dir.path(), 10 * PAGE, 0.25, 4 * PAGE).unwrap();
        let mut last = 0.0;
        let st = tf
            .prepare(&mut |p| {
                last = p;
                true
            })
            .unwrap();
        assert_eq!(
            st,
            PrepStats {
                created: 3,
                kept: 0
            }
        );
        assert_eq!(last, 1.0);
        for i in 0..3 {
            assert!(tf.is_valid(i));
            let data = std::fs::read(tf.path(i)).unwrap();
            assert_eq!(data.len() as u64, tf.file_size(i));
            assert_eq!(f64::from_le_bytes(data[..8].try_into().unwrap()), 0.25);
        }
        let before = std::fs::metadata(tf.path(1)).unwrap().modified().unwrap();

        // Second run: everything reused, nothing rewritten.
        let st = tf.prepare(&mut |_| true).unwrap();
        assert_eq!(
            st,
            PrepStats {
                created: 0,
                kept: 3
            }
        );
        assert_eq!(
            std::fs::metadata(tf.path(1)).unwrap().modified().unwrap(),
            before
        );

        // A truncated file and one with another marker are recreated; a missing one too.
        std::fs::OpenOptions::new()
            .write(true)
            .open(tf.path(0))
            .unwrap()
            .set_len(PAGE)
            .unwrap();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(tf.path(1))
            .unwrap();
        f.write_all_at(&0.5f64.to_le_bytes(), 0).unwrap();
        std::fs::remove_file(tf.path(2)).unwrap();
        let st = tf.prepare(&mut |_| true).unwrap();
        assert_eq!(
            st,
            PrepStats {
                created: 3,
                kept: 0
            }
        );
        assert!((0..3).all(|i| tf.is_valid(i)));

        // Another compressibility doesn't accept these files.
        let other = TestFiles::with_unit(dir.path(), 10 * PAGE, 0.0, 4 * PAGE).unwrap();
        assert!(!other.is_valid(0));
    }
}
