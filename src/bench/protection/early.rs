//! The live verdict that ends a tune probe early: once hashd has spent more seconds below the
//! isolation threshold than the percentile allows, the study can only fail the probe, so it
//! stops there. A second counts as below when hashd's own second was slow, and also when
//! hashd stalled — no fresh status for
//! [`STALL_SECS`](super::workload::STALL_SECS) — because the study reads such a second
//! as no progress (isolation 0; see `workload`). Counting only hashd's fresh seconds let a
//! probe whose hashd stalled run to its end and then fail at the study with isol 0 %, which
//! bisect (trusting only early fails at the bottom) then had to rescan from the top.

use super::workload::Sample;

/// Counts a probe's seconds below the threshold while the hog swaps.
#[derive(Debug)]
pub struct BelowCount {
    thr_rps: f64,
    /// More seconds than this end the probe; `None`: never (the last candidate runs to its
    /// end, and percentiles that aren't a share of the run can't be decided early).
    max: Option<u64>,
    below: u64,
}

impl BelowCount {
    pub fn new(thr_rps: f64, max: Option<u64>) -> Self {
        BelowCount {
            thr_rps,
            max,
            below: 0,
        }
    }

    /// One tick's sample; `Some(why)` once the probe is doomed.
    pub fn push(&mut self, s: &Sample) -> Option<String> {
        let slow = s.fresh && s.rps < self.thr_rps;
        if !(slow || s.stalled) {
            return None;
        }
        self.below += 1;
        self.doomed()
            .then(|| format!("{} seconds below {:.0} rps", self.below, self.thr_rps))
    }

    /// Whether more seconds than allowed were below: the probe ended as an early fail.
    pub fn doomed(&self) -> bool {
        self.max.is_some_and(|m| self.below > m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(rps: f64) -> Sample {
        Sample {
            rps,
            fresh: true,
            alive: true,
            ..Default::default()
        }
    }

    fn stale(stalled: bool) -> Sample {
        Sample {
            rps: 0.0,
            fresh: false,
            alive: true,
            stalled,
            ..Default::default()
        }
    }

    #[test]
    fn slow_fresh_seconds_and_stalls_count_a_late_status_does_not() {
        let mut c = BelowCount::new(150.0, Some(1));
        assert_eq!(c.push(&fresh(160.0)), None);
        // A tick between two of hashd's seconds: not a stall yet.
        assert_eq!(c.push(&stale(false)), None);
        assert_eq!(c.push(&fresh(140.0)), None);
        assert_eq!(
            c.push(&stale(true)).as_deref(),
            Some("2 seconds below 150 rps")
        );
        // The stall alone is enough: what the study reads as two seconds without progress.
        let mut c = BelowCount::new(150.0, Some(1));
        assert_eq!(c.push(&stale(true)), None);
        assert!(c.push(&stale(true)).is_some());
        // No limit: never early.
        let mut c = BelowCount::new(150.0, None);
        for _ in 0..10 {
            assert_eq!(c.push(&stale(true)), None);
        }
        assert!(!c.doomed());
    }
}
