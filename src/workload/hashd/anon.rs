//! The anonymous half of hashd's footprint: a resizable area of untouched anonymous memory
//! whose pages get random contents the first time a request touches them.
//!
//! The area is a list of separately mapped units (32 MiB by default), so growing and
//! shrinking never moves the pages that stay. Requests share it without locking the contents:
//! a page is a slice of `AtomicU64` accessed with relaxed ordering, which compiles to plain
//! loads and stores but keeps concurrent writers well defined. Only a resize takes the write
//! side of the lock.

use super::dist::Rng;
use super::testfiles::PAGE;
use anyhow::{bail, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

/// Bytes per mapping unit.
pub const UNIT_SIZE: usize = 32 << 20;
const WORDS_PER_PAGE: usize = PAGE as usize / 8;

struct Unit {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by the unit; its contents are only accessed as
// atomics.
unsafe impl Send for Unit {}
unsafe impl Sync for Unit {}

impl Unit {
    fn map(len: usize) -> Result<Unit> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            bail!(
                "mapping {} bytes of anonymous memory: {}",
                len,
                std::io::Error::last_os_error()
            );
        }
        Ok(Unit { ptr, len })
    }

    fn page(&self, idx: usize) -> &[AtomicU64] {
        debug_assert!((idx + 1) * PAGE as usize <= self.len);
        // SAFETY: the page lies inside the mapping, which lives as long as `self`; AtomicU64
        // has the size and alignment of u64 and the mapping is page aligned.
        unsafe {
            std::slice::from_raw_parts(
                (self.ptr as *const AtomicU64).add(idx * WORDS_PER_PAGE),
                WORDS_PER_PAGE,
            )
        }
    }
}

impl Drop for Unit {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped; no references outlive the unit.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// The resizable anonymous area.
pub struct AnonArea {
    unit_size: usize,
    units: RwLock<Vec<Unit>>,
}

impl std::fmt::Debug for AnonArea {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "AnonArea({} bytes)", self.size())
    }
}

impl AnonArea {
    /// An area of at least `size` bytes (whole units, at least one).
    pub fn new(size: u64) -> Result<AnonArea> {
        Self::with_unit(size, UNIT_SIZE)
    }

    /// [`AnonArea::new`] with another unit size (tests); must be a page multiple.
    pub fn with_unit(size: u64, unit_size: usize) -> Result<AnonArea> {
        if unit_size == 0 || unit_size % PAGE as usize != 0 {
            bail!("anon unit {} is not a positive page multiple", unit_size);
        }
        let a = AnonArea {
            unit_size,
            units: RwLock::new(Vec::new()),
        };
        a.resize(size)?;
        Ok(a)
    }

    /// Units needed for `size` bytes.
    fn units_for(&self, size: u64) -> usize {
        (size.div_ceil(self.unit_size as u64) as usize).max(1)
    }

    /// Grows or shrinks to hold `size` bytes; kept units keep their contents.
    pub fn resize(&self, size: u64) -> Result<()> {
        let want = self.units_for(size);
        let mut units = self.units.write().unwrap_or_else(|e| e.into_inner());
        while units.len() > want {
            units.pop();
        }
        while units.len() < want {
            units.push(Unit::map(self.unit_size)?);
        }
        Ok(())
    }

    /// Mapped bytes.
    pub fn size(&self) -> u64 {
        let units = self.units.read().unwrap_or_else(|e| e.into_inner());
        (units.len() * self.unit_size) as u64
    }

    /// Runs `f` with access to the pages; a resize waits until it returns.
    pub fn with_pages<R>(&self, f: impl FnOnce(&AnonPages) -> R) -> R {
        let units = self.units.read().unwrap_or_else(|e| e.into_inner());
        f(&AnonPages {
            units: &units,
            unit_pages: self.unit_size / PAGE as usize,
        })
    }
}

/// The pages of an [`AnonArea`] while its read lock is held.
pub struct AnonPages<'a> {
    units: &'a [Unit],
    unit_pages: usize,
}

impl AnonPages<'_> {
    pub fn nr_pages(&self) -> u64 {
        (self.units.len() * self.unit_pages) as u64
    }

    /// Page `idx` (clamped to the last page).
    #[inline]
    pub fn page(&self, idx: u64) -> &[AtomicU64] {
        let idx = (idx as usize).min(self.units.len() * self.unit_pages - 1);
        // Units are normally a power of two pages: spare the divisions.
        let (u, i) = if self.unit_pages.is_power_of_two() {
            let shift = self.unit_pages.trailing_zeros();
            (idx >> shift, idx & (self.unit_pages - 1))
        } else {
            (idx / self.unit_pages, idx % self.unit_pages)
        };
        self.units[u].page(i)
    }
}

/// The first word of a page while one request fills it; other requests wait for the fill.
const FILLING: u64 = u64::MAX;

/// Gives `page` random contents if it was never touched (first word 0). The first word is
/// never 0 afterwards.
///
/// One request claims the fill by swapping the first word to [`FILLING`]; it writes the rest
/// and then publishes the first word (release). A request that finds the page being filled
/// waits until it is, so the words past the first are written once, before the first word
/// turns into a filled value, and never again while the page stays mapped. [`page_bytes`]
/// relies on that.
#[inline]
pub fn fill_if_new(page: &[AtomicU64], rng: &mut Rng) {
    let w0 = page[0].load(Ordering::Acquire);
    if w0 == FILLING {
        wait_filled(page);
        return;
    }
    if w0 != 0 {
        return;
    }
    if page[0]
        .compare_exchange(0, FILLING, Ordering::Acquire, Ordering::Acquire)
        .is_err()
    {
        wait_filled(page);
        return;
    }
    for w in &page[1..] {
        w.store(rng.next_u64(), Ordering::Relaxed);
    }
    let mut v = rng.next_u64() | 1;
    if v == FILLING {
        v = 1;
    }
    page[0].store(v, Ordering::Release);
}

#[cold]
fn wait_filled(page: &[AtomicU64]) {
    let mut spins = 0u32;
    while page[0].load(Ordering::Acquire) == FILLING {
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// Increments the page's first word, skipping 0 and the in-fill marker so the page stays
/// marked as filled. Only for a page [`fill_if_new`] has returned for.
#[inline]
pub fn bump(page: &[AtomicU64]) {
    let v = page[0].load(Ordering::Relaxed).wrapping_add(1);
    page[0].store(
        if v == 0 || v == FILLING { 1 } else { v },
        Ordering::Relaxed,
    );
}

/// Bytes [`page_bytes`] copies off the front of a page: the first word, which other requests
/// bump at any time, rounded up to a SHA-1 block.
pub const HEAD: usize = 64;

/// The page's bytes for hashing without copying the page: its first [`HEAD`] bytes as a copy
/// (other requests bump the first word at any time) and the rest in place. The rest is read in
/// place only when the page is filled — its words past the first are then never written again
/// while it is mapped, and the caller's `AnonPages` keeps it mapped. A page that is fresh or
/// being filled is copied word by word into `scratch` (a page long) instead.
#[inline]
pub fn page_bytes<'a>(page: &'a [AtomicU64], scratch: &'a mut [u8]) -> ([u8; HEAD], &'a [u8]) {
    let mut head = [0u8; HEAD];
    let w0 = page[0].load(Ordering::Acquire);
    for (dst, w) in head.chunks_exact_mut(8).zip(page) {
        dst.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
    if w0 == 0 || w0 == FILLING {
        copy_page(page, scratch);
        return (head, &scratch[HEAD..PAGE as usize]);
    }
    let words = HEAD / 8;
    // SAFETY: the words past the first were written by the one fill that published `w0`
    // (release, observed by our acquire load) and nobody writes them again while the page is
    // mapped; `page` borrows from `AnonPages`, whose read lock keeps it mapped. So these bytes
    // are immutable for the lifetime of the returned slice, and reading them non-atomically
    // races with nothing.
    let rest = unsafe {
        std::slice::from_raw_parts(
            page[words..].as_ptr() as *const u8,
            (page.len() - words) * 8,
        )
    };
    (head, rest)
}

/// Copies the page's bytes into `out` (a page long).
#[inline]
pub fn copy_page(page: &[AtomicU64], out: &mut [u8]) {
    for (dst, w) in out.chunks_exact_mut(8).zip(page) {
        dst.copy_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_fill_lazily_and_survive_resizes() {
        let unit = 4 * PAGE as usize;
        let a = AnonArea::with_unit(5 * PAGE, unit).unwrap();
        assert_eq!(a.size(), 2 * unit as u64);
        let mut rng = Rng::seeded(2);
        let first = a.with_pages(|p| {
            assert_eq!(p.nr_pages(), 8);
            let pg = p.page(1);
            assert_eq!(pg[0].load(Ordering::Relaxed), 0, "untouched pages are zero");
            fill_if_new(pg, &mut rng);
            let v = pg[0].load(Ordering::Relaxed);
            assert_ne!(v, 0);
            fill_if_new(pg, &mut rng);
            assert_eq!(pg[0].load(Ordering::Relaxed), v, "filled only once");
            bump(pg);
            assert_eq!(pg[0].load(Ordering::Relaxed), v.wrapping_add(1).max(1));
            let mut out = vec![0u8; PAGE as usize];
            copy_page(pg, &mut out);
            assert_eq!(out[..8], pg[0].load(Ordering::Relaxed).to_ne_bytes());
            pg[0].load(Ordering::Relaxed)
        });
        a.resize(20 * PAGE).unwrap();
        assert_eq!(a.size(), 5 * unit as u64);
        a.resize(0).unwrap();
        assert_eq!(a.size(), unit as u64, "at least one unit");
        assert_eq!(
            a.with_pages(|p| p.page(1)[0].load(Ordering::Relaxed)),
            first
        );
        assert_eq!(a.with_pages(|p| p.nr_pages()), 4);
    }

    #[test]
    fn page_bytes_match_a_copy_of_the_page() {
        let a = AnonArea::with_unit(2 * PAGE, PAGE as usize).unwrap();
        let mut rng = Rng::seeded(3);
        let mut scratch = vec![0xaau8; PAGE as usize];
        a.with_pages(|p| {
            // Fresh: all zero, through the scratch copy.
            let (head, rest) = page_bytes(p.page(0), &mut scratch);
            assert!(head.iter().chain(rest).all(|b| *b == 0));
            assert_eq!(HEAD + rest.len(), PAGE as usize);
            // Filled and bumped: in place, same bytes as a copy.
            fill_if_new(p.page(1), &mut rng);
            bump(p.page(1));
            let mut copy = vec![0u8; PAGE as usize];
            copy_page(p.page(1), &mut copy);
            let (head, rest) = page_bytes(p.page(1), &mut scratch);
            assert_eq!(head[..], copy[..HEAD]);
            assert_eq!(rest, &copy[HEAD..]);
            assert_eq!(rest.as_ptr(), copy_ptr(p.page(1), HEAD), "read in place");
        });
    }

    fn copy_ptr(page: &[AtomicU64], off: usize) -> *const u8 {
        (page.as_ptr() as *const u8).wrapping_add(off)
    }

    #[test]
    fn racing_fills_fill_a_page_once() {
        let a = std::sync::Arc::new(AnonArea::with_unit(64 * PAGE, 64 * PAGE as usize).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let a = a.clone();
                std::thread::spawn(move || {
                    let mut rng = Rng::seeded(100 + t);
                    a.with_pages(|p| {
                        (0..64)
                            .map(|i| {
                                fill_if_new(p.page(i), &mut rng);
                                let mut copy = vec![0u8; PAGE as usize];
                                copy_page(p.page(i), &mut copy);
                                copy
                            })
                            .collect::<Vec<_>>()
                    })
                })
            })
            .collect();
        let seen: Vec<Vec<Vec<u8>>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        // Every thread saw each page only after its one fill completed: identical contents.
        for other in &seen[1..] {
            assert_eq!(other, &seen[0]);
        }
        a.with_pages(|p| {
            for i in 0..64 {
                let w0 = p.page(i)[0].load(Ordering::Relaxed);
                assert!(w0 != 0 && w0 != FILLING);
            }
        });
    }

    #[test]
    fn bump_never_returns_to_zero() {
        let a = AnonArea::with_unit(PAGE, PAGE as usize).unwrap();
        a.with_pages(|p| {
            let pg = p.page(0);
            pg[0].store(u64::MAX - 1, Ordering::Relaxed);
            bump(pg);
            assert_eq!(pg[0].load(Ordering::Relaxed), 1, "skips the in-fill marker");
            pg[0].store(u64::MAX - 2, Ordering::Relaxed);
            bump(pg);
            assert_eq!(pg[0].load(Ordering::Relaxed), u64::MAX - 1);
        });
    }
}
