//! The latency-target search: fio's `latency_target` (the highest queue depth whose latency
//! percentile stays under a target) applied to a curve. The curve's points bracket the
//! answer — the last point meeting the target and the first one above it — and bisection
//! between them narrows it: each probe runs the job at the middle of the bracket, and the
//! half that still holds the crossing is kept. Pure: the probes' results are fed in, so a
//! resumed run replays the ones it already has.

/// Where the answer lies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bracket {
    /// Even the lowest point misses the target.
    BelowLowest,
    /// Every point meets it: the answer is the highest.
    AtHighest(f64),
    /// `lo` meets the target, `hi` misses it.
    Between { lo: f64, hi: f64 },
}

/// The bracket from the curve's points: `(x, met)` in rising `x` (rate or queue depth). The
/// first miss after the last run of meets ends it; a point meeting the target above a miss
/// (noise) doesn't reopen it.
pub fn bracket(points: &[(f64, bool)]) -> Bracket {
    match points.iter().position(|p| !p.1) {
        None => Bracket::AtHighest(points.last().map_or(0.0, |p| p.0)),
        Some(0) => Bracket::BelowLowest,
        Some(i) => Bracket::Between {
            lo: points[i - 1].0,
            hi: points[i].0,
        },
    }
}

/// Bisection inside a bracket until it is no wider than `resolution` (or `max_probes` ran).
/// With `integer`, probes are whole numbers (queue depths).
#[derive(Debug, Clone, PartialEq)]
pub struct Bisect {
    pub lo: f64,
    pub hi: f64,
    resolution: f64,
    integer: bool,
    probes_left: u32,
}

impl Bisect {
    pub fn new(lo: f64, hi: f64, resolution: f64, integer: bool, max_probes: u32) -> Bisect {
        Bisect {
            lo,
            hi,
            resolution: if integer {
                resolution.max(1.0)
            } else {
                resolution
            },
            integer,
            probes_left: max_probes,
        }
    }

    /// The next `x` to probe, or `None` when done: `lo` is then the answer.
    pub fn next(&self) -> Option<f64> {
        if self.probes_left == 0 || self.hi - self.lo <= self.resolution {
            return None;
        }
        let mid = (self.lo + self.hi) / 2.0;
        let mid = if self.integer { mid.floor() } else { mid };
        (mid > self.lo && mid < self.hi).then_some(mid)
    }

    /// The probe at `x` met the target or not.
    pub fn feed(&mut self, x: f64, met: bool) {
        self.probes_left = self.probes_left.saturating_sub(1);
        if met {
            self.lo = self.lo.max(x);
        } else {
            self.hi = self.hi.min(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brackets() {
        let pts = [(10.0, true), (50.0, true), (70.0, false), (80.0, true)];
        assert_eq!(bracket(&pts), Bracket::Between { lo: 50.0, hi: 70.0 });
        assert_eq!(bracket(&pts[..2]), Bracket::AtHighest(50.0));
        assert_eq!(bracket(&pts[2..]), Bracket::BelowLowest);
    }

    /// A device whose p99 grows as 1/(capacity − rate): the highest rate under a target has a
    /// closed form, and bisection between curve points finds it to the resolution asked.
    #[test]
    fn bisection_finds_the_known_answer() {
        let (cap, base_us) = (10_000.0, 100.0);
        let p99 = |rate: f64| base_us * cap / (cap - rate);
        let target_us = 1_000.0;
        // p99 = target at rate = cap (1 - base/target) = 9,000.
        let answer = cap * (1.0 - base_us / target_us);
        let curve: Vec<(f64, bool)> = [1_000.0, 5_000.0, 7_000.0, 8_000.0, 9_500.0]
            .iter()
            .map(|&r| (r, p99(r) <= target_us))
            .collect();
        let Bracket::Between { lo, hi } = bracket(&curve) else {
            panic!("{:?}", bracket(&curve));
        };
        assert_eq!((lo, hi), (8_000.0, 9_500.0));
        let mut b = Bisect::new(lo, hi, 20.0, false, 20);
        let mut probes = 0;
        while let Some(x) = b.next() {
            b.feed(x, p99(x) <= target_us);
            probes += 1;
        }
        assert!(
            b.lo <= answer && answer - b.lo <= 20.0,
            "{} vs {}",
            b.lo,
            answer
        );
        // 1,500 IOPS halved to at most 20: 7 probes.
        assert_eq!(probes, 7);
        // The probe limit ends it early, the answer still on the safe side.
        let mut b = Bisect::new(lo, hi, 20.0, false, 2);
        while let Some(x) = b.next() {
            b.feed(x, p99(x) <= target_us);
        }
        assert!(b.lo <= answer && b.lo >= lo);
    }

    #[test]
    fn queue_depths_are_whole() {
        // Latency meets the target up to QD 11.
        let mut b = Bisect::new(8.0, 16.0, 1.0, true, 10);
        let mut seen = vec![];
        while let Some(x) = b.next() {
            seen.push(x);
            b.feed(x, x <= 11.0);
        }
        assert_eq!(b.lo, 11.0);
        assert!(seen.iter().all(|x| x.fract() == 0.0), "{:?}", seen);
        assert_eq!(seen, vec![12.0, 10.0, 11.0]);
    }
}
