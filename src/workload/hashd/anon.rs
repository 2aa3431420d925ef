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
    pub fn page(&self, idx: u64) -> &[AtomicU64] {
        let idx = (idx as usize).min(self.units.len() * self.unit_pages - 1);
        self.units[idx / self.unit_pages].page(idx % self.unit_pages)
    }
}

/// Gives `page` random contents if it was never touched (first word 0). The first word is
/// never 0 afterwards.
#[inline]
pub fn fill_if_new(page: &[AtomicU64], rng: &mut Rng) {
    if page[0].load(Ordering::Relaxed) != 0 {
        return;
    }
    for w in &page[1..] {
        w.store(rng.next_u64(), Ordering::Relaxed);
    }
    page[0].store(rng.next_u64() | 1, Ordering::Relaxed);
}

/// Increments the page's first word, skipping 0 so the page stays marked as filled.
#[inline]
pub fn bump(page: &[AtomicU64]) {
    let v = page[0].load(Ordering::Relaxed).wrapping_add(1);
    page[0].store(if v == 0 { 1 } else { v }, Ordering::Relaxed);
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
    fn bump_never_returns_to_zero() {
        let a = AnonArea::with_unit(PAGE, PAGE as usize).unwrap();
        a.with_pages(|p| {
            let pg = p.page(0);
            pg[0].store(u64::MAX, Ordering::Relaxed);
            bump(pg);
            assert_eq!(pg[0].load(Ordering::Relaxed), 1);
        });
    }
}
