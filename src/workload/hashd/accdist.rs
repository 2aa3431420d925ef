//! Per-page access histograms (`acc_dist_slots`): how often each part of the file and anon
//! footprints is accessed, for checking the address distributions on a live hashd.
//!
//! The page space of a footprint is split into `slots` equal ranges; slot `s` counts the page
//! accesses to pages `p` with `p · slots / nr_pages = s`. The address mapping puts the hottest
//! page at 0, so slot 0 is the hottest and the counts fall off towards the last slot. A
//! histogram lives in the request config, which a params reload rebuilds: a reload resets it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Most slots a histogram may have (the status file carries every count each second).
pub const MAX_SLOTS: usize = 65536;

#[derive(Debug)]
pub struct AccDist {
    counts: Box<[AtomicU64]>,
    nr_pages: u64,
}

impl AccDist {
    /// A histogram of `slots` slots over `nr_pages` pages; `None` when either is 0 (off).
    pub fn new(slots: usize, nr_pages: u64) -> Option<AccDist> {
        (slots > 0 && nr_pages > 0).then(|| AccDist {
            counts: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            nr_pages,
        })
    }

    fn slot(&self, page: u64) -> usize {
        let n = self.counts.len();
        let s = (page as u128 * n as u128 / self.nr_pages as u128) as usize;
        s.min(n - 1)
    }

    /// Counts one access to each of pages `first .. first + n`. Pages past the footprint (a
    /// chunk starting near its end reads on) count in the last slot. One atomic add per slot
    /// the run crosses, not per page.
    pub fn add_run(&self, first: u64, n: u64) {
        let slots = self.counts.len() as u128;
        let end = first.saturating_add(n);
        let mut page = first;
        while page < end {
            let s = self.slot(page);
            // First page of the next slot: ceil((s + 1) · nr_pages / slots).
            let next = if s + 1 == self.counts.len() {
                end
            } else {
                let bound = ((s as u128 + 1) * self.nr_pages as u128).div_ceil(slots);
                (bound as u64).clamp(page + 1, end)
            };
            self.counts[s].fetch_add(next - page, Ordering::Relaxed);
            page = next;
        }
    }

    /// The counts so far, slot 0 first.
    pub fn counts(&self) -> Vec<u64> {
        self.counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_without_slots_or_pages() {
        assert!(AccDist::new(0, 100).is_none());
        assert!(AccDist::new(4, 0).is_none());
    }

    #[test]
    fn runs_count_every_page_in_its_slot() {
        // 10 pages in 4 slots: pages 0-2 → 0, 3-4 → 1, 5-7 → 2, 8-9 → 3.
        let d = AccDist::new(4, 10).unwrap();
        for p in 0..10 {
            d.add_run(p, 1);
        }
        assert_eq!(d.counts(), vec![3, 2, 3, 2]);
        let d = AccDist::new(4, 10).unwrap();
        d.add_run(0, 10);
        assert_eq!(d.counts(), vec![3, 2, 3, 2]);
        // A run past the end counts in the last slot.
        let d = AccDist::new(4, 10).unwrap();
        d.add_run(7, 25);
        assert_eq!(d.counts(), vec![0, 0, 1, 24]);
    }

    #[test]
    fn run_counts_equal_page_by_page_counts() {
        for (slots, pages) in [(1, 7), (3, 7), (7, 7), (10, 7), (16, 1000), (999, 1000)] {
            let runs = AccDist::new(slots, pages).unwrap();
            let single = AccDist::new(slots, pages).unwrap();
            for first in (0..pages + 30).step_by(3) {
                runs.add_run(first, 25);
                for p in first..first + 25 {
                    single.add_run(p, 1);
                }
            }
            assert_eq!(
                runs.counts(),
                single.counts(),
                "{slots} slots, {pages} pages"
            );
        }
    }
}
