//! IO buffers: one page-aligned region split into a buffer per queue slot (O_DIRECT needs the
//! alignment). Write buffers hold random bytes so compressing or deduplicating devices see
//! real data.

use anyhow::{bail, Result};
use rand::{RngCore, SeedableRng};
use std::alloc::{alloc_zeroed, dealloc, Layout};

pub struct Buffers {
    ptr: *mut u8,
    layout: Layout,
    each: usize,
    /// Set while the kernel may still write into the buffers (a worker gave up on IOs in
    /// flight): then they are never freed.
    pub leak: bool,
}

// The region is plain memory owned by one worker at a time.
unsafe impl Send for Buffers {}

impl Buffers {
    pub fn new(slots: usize, each: usize, seed: u64) -> Result<Buffers> {
        let size = slots.max(1) * each;
        let layout = match Layout::from_size_align(size, 4096) {
            Ok(l) if size > 0 => l,
            _ => bail!("can't lay out {} buffers of {} bytes", slots, each),
        };
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            bail!("out of memory for {} IO buffers of {} bytes", slots, each);
        }
        let mut b = Buffers {
            ptr,
            layout,
            each,
            leak: false,
        };
        rand::rngs::SmallRng::seed_from_u64(seed).fill_bytes(b.all_mut());
        Ok(b)
    }

    fn all_mut(&mut self) -> &mut [u8] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }

    /// Slot `i`'s buffer, for the kernel or an IO thread to fill or read.
    pub fn ptr(&self, i: usize) -> *mut u8 {
        debug_assert!((i + 1) * self.each <= self.layout.size());
        unsafe { self.ptr.add(i * self.each) }
    }

    pub fn each(&self) -> usize {
        self.each
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        if !self.leak {
            unsafe { dealloc(self.ptr, self.layout) };
        }
    }
}
