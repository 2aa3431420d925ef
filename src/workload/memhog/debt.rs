//! The hog's rate keeping: a worker owes bytes for every second that passes and pays for every
//! page it touches. Owing more than `max_debt` seconds' worth writes the excess off as lost:
//! a hog slowed down by reclaim doesn't catch up in a burst once the kernel lets it go, and
//! the loss says how far behind it fell.
//!
//! The clock is a plain number of seconds so the accounting runs on a simulated clock in
//! tests; [`Pacer`] turns it into what a worker does next.

/// Bytes per page the hog touches.
pub const PAGE: u64 = 4096;
/// The most a worker touches in one go (1 MiB).
pub const MAX_STEP: u64 = 1 << 20;

/// Debt and loss of one worker running at `bps`.
#[derive(Debug, Clone, PartialEq)]
pub struct Debt {
    bps: f64,
    max_debt: f64,
    /// Seconds of work owed.
    debt: f64,
    /// Seconds of work written off.
    loss: f64,
    last: f64,
}

impl Debt {
    /// A worker at `bps` bytes/s (> 0) that may owe up to `max_debt` seconds, starting at
    /// `now` with nothing owed.
    pub fn new(bps: f64, max_debt: f64, now: f64) -> Self {
        Debt {
            bps,
            max_debt: max_debt.max(0.0),
            debt: 0.0,
            loss: 0.0,
            last: now,
        }
    }

    /// Adds the time since the last update to the debt; the excess over `max_debt` is lost.
    pub fn update(&mut self, now: f64) {
        if now > self.last {
            self.debt += now - self.last;
            self.last = now;
        }
        if self.debt > self.max_debt {
            self.loss += self.debt - self.max_debt;
            self.debt = self.max_debt;
        }
    }

    /// Bytes owed now.
    pub fn owed(&self) -> u64 {
        (self.debt * self.bps).round().max(0.0) as u64
    }

    /// Pays for `bytes` of work.
    pub fn pay(&mut self, bytes: u64) {
        self.debt -= bytes as f64 / self.bps;
    }

    /// Current debt in bytes (what the report calls `wdebt`/`rdebt`).
    pub fn debt_bytes(&self) -> f64 {
        (self.debt * self.bps).max(0.0)
    }

    /// Bytes written off so far (`wloss`/`rloss`).
    pub fn loss_bytes(&self) -> f64 {
        self.loss * self.bps
    }

    pub fn bps(&self) -> f64 {
        self.bps
    }
}

/// What a worker does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Less than a page is owed: sleep this long (the time one page takes).
    Sleep(f64),
    /// Touch this many pages, then [`Pacer::done`].
    Touch(u64),
}

/// A worker's loop around its [`Debt`].
#[derive(Debug, Clone)]
pub struct Pacer {
    pub debt: Debt,
}

impl Pacer {
    pub fn new(bps: f64, max_debt: f64, now: f64) -> Self {
        Pacer {
            debt: Debt::new(bps, max_debt, now),
        }
    }

    pub fn next(&mut self, now: f64) -> Step {
        self.debt.update(now);
        let owed = self.debt.owed();
        if owed < PAGE {
            Step::Sleep(PAGE as f64 / self.debt.bps())
        } else {
            Step::Touch(owed.min(MAX_STEP) / PAGE)
        }
    }

    /// `pages` were touched.
    pub fn done(&mut self, pages: u64) {
        self.debt.pay(pages * PAGE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = (1u64 << 20) as f64;

    /// Runs a pacer on a simulated clock until `until`; a step started at `now` takes
    /// `cost(now)` seconds. Returns the bytes touched.
    fn simulate(p: &mut Pacer, start: f64, until: f64, cost: impl Fn(f64) -> f64) -> u64 {
        let mut now = start;
        let mut bytes = 0;
        while now < until {
            match p.next(now) {
                Step::Sleep(s) => now += s,
                Step::Touch(n) => {
                    now += cost(now);
                    p.done(n);
                    bytes += n * PAGE;
                }
            }
        }
        bytes
    }

    #[test]
    fn an_unhindered_worker_keeps_its_rate_and_loses_nothing() {
        let mut p = Pacer::new(8.0 * MIB, 10.0, 100.0);
        let bytes = simulate(&mut p, 100.0, 110.0, |_| 0.0);
        let want = 80.0 * MIB;
        assert!(
            (bytes as f64 - want).abs() <= PAGE as f64 * 2.0,
            "{}",
            bytes
        );
        assert_eq!(p.debt.loss_bytes(), 0.0);
        assert!(p.debt.debt_bytes() < PAGE as f64);
    }

    #[test]
    fn steps_are_at_most_a_mebibyte_and_sleep_a_page_time() {
        let mut p = Pacer::new(1.0 * MIB, 10.0, 0.0);
        assert_eq!(p.next(0.0), Step::Sleep(PAGE as f64 / MIB));
        assert_eq!(p.next(5.0), Step::Touch(256), "5 MiB owed, 1 MiB at a time");
        p.done(256);
        assert_eq!(p.next(5.0), Step::Touch(256));
    }

    #[test]
    fn a_stall_longer_than_max_debt_is_lost_and_the_rest_caught_up() {
        let bps = 4.0 * MIB;
        let mut p = Pacer::new(bps, 10.0, 0.0);
        // Unhindered, except that the first step after 10 s takes 25 s (reclaim).
        let stalled = std::cell::Cell::new(false);
        let cost = |now: f64| {
            if now >= 10.0 && !stalled.replace(true) {
                25.0
            } else {
                0.0
            }
        };
        let bytes = simulate(&mut p, 0.0, 60.0, cost);
        // The stall owed 25 s: 10 s are caught up afterwards, 15 s are lost.
        let lost = p.debt.loss_bytes() / bps;
        assert!((lost - 15.0).abs() < 0.01, "lost {} s", lost);
        let done = bytes as f64 / bps;
        assert!((done - 45.0).abs() < 0.01, "did {} s of work", done);
    }

    #[test]
    fn debt_is_capped_while_blocked() {
        let mut d = Debt::new(MIB, 10.0, 0.0);
        d.update(3.0);
        assert_eq!(d.owed(), (3.0 * MIB) as u64);
        d.update(30.0);
        assert_eq!(d.debt_bytes(), 10.0 * MIB);
        assert_eq!(d.loss_bytes(), 20.0 * MIB);
        // Time never runs backwards in the accounting.
        d.update(29.0);
        assert_eq!(d.loss_bytes(), 20.0 * MIB);
    }
}
