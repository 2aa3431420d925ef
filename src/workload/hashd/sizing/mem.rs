//! The memory-footprint search (benches-doc/hashd.md): with rps_target =
//! rps_max, the largest mem_frac at which hashd still reaches `pass` × rps_max.
//!
//! Sustainability falls monotonically with the footprint, so this is a bisection:
//!
//! 1. **up** — step from below (0.2, 0.4, …) until a probe fails; small footprints pass fast
//!    through the "high enough" exit, and the device never sees a footprint far past what it
//!    sustains. If 1.0 passes, the workload doesn't saturate. Before the first probe the
//!    workload warms up at that footprint (cold page cache, unfilled anon area), unjudged and
//!    with a loose latency target, until it has held the pass level at the real target for
//!    half a window; as the warm-up is capped, a failing first probe is measured once more
//!    (with a hint, judged again later; see below).
//! 2. **bisect** — narrow the bracket (highest pass, lowest fail) until it is narrower than
//!    `rel_tol` of its upper end, by halving it, unless the ends' measured RPS shares place the
//!    boundary within one tolerance of an end: where the line through them crosses the pass
//!    level (a fail far below the pass level says the boundary lies close to the passing end).
//!    Then the probe one tolerance from that end closes the bracket if its verdict comes out as
//!    the line expects — in TCG guests, where RPS falls off gently past the boundary, one probe
//!    instead of three or four. A guided probe that didn't at least halve the bracket is
//!    followed by a halving, so a fall-off too steep for the line (which then aims short)
//!    costs at most every other probe.
//! 3. **confirm** — probe the highest pass again with the long probe (unless the last probe
//!    was a recheck that measured it passing with the long probe); if it now fails, step down
//!    by `rel_tol` until one passes. The result's probe is the last one, so the final period
//!    and memory usage are the result footprint's.
//!
//! With a *hint* — a footprint another search found on a similar setup (iocost-qos passes the
//! neighbouring configuration's) — the up phase starts half a tolerance below it instead of
//! at the first step: a pass there is followed by half a tolerance above it and then steps up
//! of one tolerance, two, four… (at most the usual step); a fail there by steps down the same
//! way until one passes. The fails before that first pass are then judged again, lowest first,
//! climbing on if they all pass: the workload started at the hint instead of climbing to it,
//! and close to the boundary it warms so slowly that its first probes can fail at a footprint
//! it sustains once warm (a TCG guest's first probe at a hint ran at 69 %, then 86 %, where the
//! unhinted search later passed). Bisection and confirmation are the same, so the answer is as
//! exact; a right hint closes the bracket in two probes instead of climbing to it and halving,
//! and one a few percent off (the answer moved with the configuration) in one or two more.
//!
//! With a *ceiling* — a footprint that failed on a setup at least as capable as this one
//! (iocost-qos passes the baseline's, measured with io.cost off: a configuration with io.cost
//! on can only be slower) — the bracket's upper end is known from the start and never probed.
//! When the hint (or no hint) puts the answer within a tolerance of the ceiling, the first
//! probe is the footprint one tolerance below it, measured with the long probe: a pass there
//! closes the bracket and is the confirmation at once. A fail there is handled as a hint's
//! first fail (steps down, then judged again warm); a hint further below starts as above, and
//! no probe goes past the ceiling.
//!
//! After a failing probe the next one first lets the workload recover the same way, for at most
//! two windows: the footprint it couldn't sustain has pushed its hot pages out to swap, and
//! under the real latency target the refilling is slow enough to fail the next footprint too
//! (a chain of failing confirmations, seen in TCG guests).
//!
//! Confidence at the boundary: a measurement within `margin` of the threshold is repeated with
//! the long probe and the two are averaged; a repeat that still can't tell, with neither probe
//! converged, counts as a fail. Every footprint the result is based on has been measured as
//! sustainable at least once with the long probe.

use super::converge::ConvergeCfg;
use super::phase::Phase;
use super::probe::{measure, Early, ProbeRecord};
use super::target::{Knobs, SizingTarget};
use super::timing::{Thresholds, Timing};
use crate::logging::progress;
use anyhow::Result;

/// After a failed probe, the next one first recovers for at most this many of its windows.
const RECOVER_PERIODS: u32 = 2;

/// What earlier searches tell this one (iocost-qos's time-savers; see the module comment).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Prior {
    /// A footprint a search found on a similar setup: where the up phase starts.
    pub hint: Option<f64>,
    /// A footprint that failed on a setup at least as capable, with the RPS share it
    /// measured: the bracket's upper end from the start.
    pub ceiling: Option<(f64, f64)>,
}

impl Prior {
    /// Only a hint.
    pub fn hint(hint: Option<f64>) -> Prior {
        Prior {
            hint,
            ceiling: None,
        }
    }
}

/// Which early exits a probe may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exits {
    /// "High enough" and "too low": a short probe.
    Both,
    /// Only "too low": a long probe that stops early only when it fails.
    FailOnly,
    None,
}

struct Search<'a> {
    target: &'a mut dyn SizingTarget,
    rps_max: u32,
    timing: &'a Timing,
    th: &'a Thresholds,
    hist: &'a mut Vec<ProbeRecord>,
    probes: u32,
    /// The last probe failed: the next one settles for a window first.
    last_failed: bool,
    /// The footprint the last probe was, when it was a long one that on its own measured it
    /// as sustainable (a recheck during bisection): confirming it would repeat that probe.
    /// Any later probe clears it — the confirmation also measures the result after them.
    long_pass_at: Option<f64>,
    /// Bisection may take the guided closing probe (tests compare with plain halving).
    guided: bool,
    /// Where the up phase starts (see the module comment), 0 < hint ≤ 1.
    hint: Option<f64>,
    /// The bracket's known upper end and its RPS share (see the module comment).
    ceiling: Option<(f64, f64)>,
    /// Where this search's probes begin in `hist`, and when its first probe started (after
    /// the warm-up): what the time left is estimated from.
    first: usize,
    probing_since: Option<std::time::Instant>,
}

impl Search<'_> {
    fn knobs(&self, p: f64) -> Knobs {
        Knobs {
            mem_frac: p,
            rps_target: self.rps_max,
            rps_max: self.rps_max,
            uniform: false,
        }
    }

    fn early(&self, exits: Exits) -> Option<Early> {
        Some(Early {
            rps_max: self.rps_max as f64,
            after: self.timing.early_after,
            high_enough: (exits == Exits::Both).then_some(self.th.high_enough),
            too_low: (exits != Exits::None).then_some(self.th.too_low),
        })
    }

    /// `1.5G (37.50%)`: a footprint as a size and a share of hashd's size.
    fn footprint(&self, p: f64) -> String {
        format!(
            "{} ({:.2}%)",
            crate::units::format_size(p * self.target.size() as f64),
            p * 100.0
        )
    }

    fn probe(
        &mut self,
        phase: Phase,
        p: f64,
        cfg: ConvergeCfg,
        exits: Exits,
    ) -> Result<ProbeRecord> {
        self.probes += 1;
        self.probing_since
            .get_or_insert_with(std::time::Instant::now);
        let knobs = self.knobs(p);
        let early = self.early(exits);
        if self.last_failed {
            self.recover(p, RECOVER_PERIODS * cfg.period as u32, "recovered")?;
        }
        progress::step(format!(
            "memory search probe {} ({}) · {}",
            self.probes,
            phase.doing(),
            self.footprint(p)
        ));
        measure(&mut *self.target, phase, &knobs, &cfg, early)
    }

    fn record(&mut self, rec: ProbeRecord, pass: bool) {
        log::info!(
            "memory search probe {} ({}) at {}: {} — {:.1} rps, {:.1}% of the target, in {}s{}",
            self.probes,
            rec.phase.doing(),
            self.footprint(rec.mem_frac),
            if pass { "passed" } else { "failed" },
            rec.rps,
            rec.ratio * 100.0,
            rec.secs,
            if rec.converged { "" } else { " (unconverged)" },
        );
        self.last_failed = !pass;
        self.long_pass_at = None;
        self.hist.push(ProbeRecord {
            pass: Some(pass),
            ..rec
        });
        self.show_time_left();
    }

    /// The phase's time left: the probes this search still needs, each as long as the probes
    /// so far took on average (their recoveries included).
    fn show_time_left(&self) {
        let Some(since) = self.probing_since else {
            return;
        };
        let t = self.timing;
        let left = probes_left(&self.hist[self.first..], t, self.th.up_step)
            .min(t.max_probes.saturating_sub(self.probes) as f64);
        let per_probe = since.elapsed().as_secs_f64() / self.probes.max(1) as f64;
        progress::phase_eta(left * per_probe);
    }

    /// Judges footprint `p`: one probe, repeated with the long probe when too close to call.
    /// Returns the verdict and the RPS share it rests on (both probes' mean for a repeat).
    fn judge(
        &mut self,
        phase: Phase,
        p: f64,
        cfg: ConvergeCfg,
        exits: Exits,
    ) -> Result<(bool, f64)> {
        let th = *self.th;
        let first = self.probe(phase, p, cfg, exits)?;
        let (r1, c1) = (first.ratio, first.converged);
        let decisive = (r1 - th.pass).abs() >= th.margin;
        if decisive || self.probes >= self.timing.max_probes {
            let pass = r1 >= th.pass;
            self.record(first, pass);
            if pass && exits != Exits::Both && cfg == self.timing.confirm {
                self.long_pass_at = Some(p);
            }
            return Ok((pass, r1));
        }
        self.record(first, r1 >= th.pass);
        let confirm = self.timing.confirm;
        let again = self.probe(Phase::MemRecheck, p, confirm, Exits::None)?;
        let r = (r1 + again.ratio) / 2.0;
        let still_close = (r - th.pass).abs() < th.margin;
        let pass = r >= th.pass && !(still_close && !c1 && !again.converged);
        let long_pass = pass && again.ratio >= th.pass;
        self.record(again, pass);
        if long_pass {
            self.long_pass_at = Some(p);
        }
        Ok((pass, r))
    }

    /// Runs footprint `p` unjudged, with a loose latency target, until the last half window
    /// has held the pass level at the real latency target, or for at most `max` seconds;
    /// returns whether it got there. Used before the first probe — a fresh workload has a cold
    /// page cache and an unfilled anon area — and after a failed one, whose footprint pushed
    /// the hot pages out to swap. Either way the first seconds say more about the caches than
    /// about the footprint, and under the real target the latency controller would hold
    /// concurrency, and with it the refilling, down for tens of seconds.
    fn recover(&mut self, p: f64, max: u32, what: &str) -> Result<bool> {
        progress::step(format!(
            "memory search {} · {}",
            if what == "recovered" {
                "recovering"
            } else {
                "warming up"
            },
            self.footprint(p)
        ));
        let need = (self.timing.up.period / 2).max(2);
        let knobs = self.knobs(p);
        self.target.begin_warm_up(&knobs)?;
        let floor = self.th.pass * self.rps_max as f64;
        let lat_target = self.target.lat_target();
        let mut recent = std::collections::VecDeque::with_capacity(need);
        let mut warm = false;
        let mut secs = 0u32;
        while secs < max && !warm {
            let s = self.target.next_sample()?;
            secs += 1;
            if recent.len() == need {
                recent.pop_front();
            }
            recent.push_back((s.rps, s.lat_ctl));
            let n = recent.len() as f64;
            warm = recent.len() == need
                && recent.iter().map(|r| r.0).sum::<f64>() / n >= floor
                && recent.iter().map(|r| r.1).sum::<f64>() / n <= lat_target;
        }
        log::debug!(
            "memory search: {} at {:.2}% in {}s{}",
            what,
            p * 100.0,
            secs,
            if warm {
                ""
            } else {
                " (not at the pass level yet)"
            }
        );
        Ok(warm)
    }

    /// A probe inside the bracket (`lo`, `hi`), whose ends measured RPS shares `r_lo` and
    /// `r_hi`, that is expected to close it (see the module comment), or `None` to halve it.
    fn closing_probe(&self, (lo, r_lo): (f64, f64), (hi, r_hi): (f64, f64)) -> Option<f64> {
        let (t, pass) = (self.timing, self.th.pass);
        // A fail at x leaves [lo, x] within tolerance; a pass at y leaves [y, hi] within it.
        // Pulled in by a hair so rounding can't leave the bracket a whisker too wide.
        let x = (lo / (1.0 - t.rel_tol)).max(lo + t.abs_tol);
        let x = x - (x - lo) * 1e-6;
        let y = self.closes_below(hi);
        let (r_lo, r_hi) = (r_lo.max(pass), r_hi.min(pass));
        if x >= y || r_lo - r_hi < 1e-9 {
            return None;
        }
        let guess = lo + (hi - lo) * (r_lo - pass) / (r_lo - r_hi);
        if guess <= x {
            Some(x)
        } else if guess >= y {
            Some(y)
        } else {
            None
        }
    }

    /// The highest footprint whose pass leaves (it, `hi`) within the search's tolerance,
    /// pulled in by a hair so rounding can't leave the bracket a whisker too wide.
    fn closes_below(&self, hi: f64) -> f64 {
        let t = self.timing;
        let y = (hi * (1.0 - t.rel_tol)).min(hi - t.abs_tol);
        y + (hi - y) * 1e-6
    }

    /// Where the climb goes next instead of `p` with a ceiling: no further than the footprint
    /// that closes the bracket below it; `None` once `lo` has closed it.
    fn capped(&self, p: f64, lo: f64) -> Option<f64> {
        match self.ceiling {
            Some((c, _)) => {
                let y = self.closes_below(c);
                (lo < y).then(|| p.min(y))
            }
            None => Some(p),
        }
    }

    /// Whether the search begins right below its ceiling, with the long probe: the hint (if
    /// any) lies within a tolerance of the footprint that closes the bracket there.
    fn starts_at_ceiling(&self) -> Option<f64> {
        let (c, _) = self.ceiling?;
        let y = self.closes_below(c);
        match self.hint {
            Some(h) if h < y * (1.0 - self.timing.rel_tol) => None,
            _ => Some(y),
        }
    }

    /// The up phase's usual step (and the first footprint without a hint).
    fn up_step(&self) -> f64 {
        self.th.up_step.clamp(0.01, 1.0)
    }

    /// The next footprint up from `p`, which passed (see the module comment).
    fn next_up(&self, p: f64, gallop: &mut u32) -> f64 {
        let t = self.timing;
        let step = self.up_step();
        match self.hint {
            // Just below the hint passed: just above it next.
            Some(h) if p < h => (h * (1.0 + t.rel_tol / 2.0)).min(1.0),
            // Above it too: the answer moved up a little, most likely.
            Some(_) => {
                *gallop += 1;
                (p + gallop_step(t, p, *gallop)).min(p + step).min(1.0)
            }
            None => (p + step).min(1.0),
        }
    }

    /// The up phase from `p`: probes upward until one fails, which it returns as the bracket's
    /// upper end with its RPS share; `lo` follows the passes. `None`: 100 % passed, or out of
    /// probes.
    fn climb(
        &mut self,
        mut p: f64,
        lo: &mut (f64, f64),
        gallop: &mut u32,
    ) -> Result<Option<(f64, f64)>> {
        let t = *self.timing;
        while self.probes < t.max_probes {
            p = match self.capped(p, lo.0) {
                Some(p) => p,
                None => return Ok(self.ceiling),
            };
            let mut verdict = self.judge(Phase::MemUp, p, t.up, Exits::Both)?;
            if !verdict.0 && self.probes == 1 && self.hint.is_none() && self.ceiling.is_none() {
                // The warm-up may have ended before the workload was warm (it is capped). With
                // a hint, fails before the first pass are judged again later, warm.
                log::info!("memory search: the first probe failed; measuring it again");
                verdict = self.judge(Phase::MemUp, p, t.up, Exits::Both)?;
            }
            if !verdict.0 {
                return Ok(Some((p, verdict.1)));
            }
            *lo = (p, verdict.1);
            if p >= 1.0 {
                log::info!("memory search: 100% is sustainable, the workload doesn't saturate");
                return Ok(None);
            }
            p = self.next_up(p, gallop);
        }
        Ok(None)
    }

    /// A hinted search whose first probe failed: steps down until a footprint passes, then
    /// judges the footprints that failed before it again, lowest first — they were measured on
    /// a workload that started at the hint instead of climbing to it and may have been cold —
    /// and climbs on if they all pass. Returns the bracket's upper end as [`climb`] does.
    ///
    /// [`climb`]: Self::climb
    fn descend(
        &mut self,
        first_fail: (f64, f64),
        lo: &mut (f64, f64),
        gallop: &mut u32,
    ) -> Result<Option<(f64, f64)>> {
        let t = *self.timing;
        let step = self.up_step();
        // Every fail so far, highest first.
        let mut cold = vec![first_fail];
        loop {
            let h = cold[cold.len() - 1];
            *gallop += 1;
            let q = h.0 - gallop_step(&t, h.0, *gallop).min(step);
            if q < t.abs_tol || self.probes >= t.max_probes {
                return Ok(Some(h));
            }
            let verdict = self.judge(Phase::MemUp, q, t.up, Exits::Both)?;
            if verdict.0 {
                *lo = (q, verdict.1);
                break;
            }
            cold.push((q, verdict.1));
        }
        *gallop = 0;
        while let Some(c) = cold.pop() {
            if self.probes >= t.max_probes {
                return Ok(Some(c));
            }
            log::info!(
                "memory search: {} failed before anything passed; judging it again",
                self.footprint(c.0)
            );
            let verdict = self.judge(Phase::MemUp, c.0, t.up, Exits::Both)?;
            if !verdict.0 {
                return Ok(Some((c.0, verdict.1)));
            }
            *lo = (c.0, verdict.1);
        }
        if lo.0 >= 1.0 {
            return Ok(None);
        }
        let p = self.next_up(lo.0, gallop);
        self.climb(p, lo, gallop)
    }

    fn run(&mut self) -> Result<f64> {
        let t = *self.timing;
        // The bracket's ends with their RPS shares (a footprint of zero is served in full).
        let mut lo = (0.0_f64, 1.0_f64);
        let at_ceiling = self.starts_at_ceiling();
        let p = match (at_ceiling, self.hint) {
            (Some(y), _) => y,
            (None, Some(h)) => (h * (1.0 - t.rel_tol / 2.0)).max(t.abs_tol),
            (None, None) => self.up_step(),
        };
        self.recover(p, t.warmup_max, "warmed up")?;
        // Steps taken away from the hint: each one twice the last.
        let mut gallop = 0;
        let mut hi = match (at_ceiling, self.ceiling) {
            (Some(y), Some(c)) => {
                log::info!(
                    "memory search: {} failed on a setup at least as capable; \
                     starting one tolerance below it",
                    self.footprint(c.0)
                );
                let (pass, r) = self.judge(Phase::MemCeiling, y, t.confirm, Exits::FailOnly)?;
                if pass {
                    lo = (y, r);
                    Some(c)
                } else {
                    Some((y, r))
                }
            }
            _ => self.climb(p, &mut lo, &mut gallop)?,
        };
        let prior = self.hint.is_some() || self.ceiling.is_some();
        if let Some(h) = hi.filter(|_| prior && lo.0 == 0.0) {
            hi = self.descend(h, &mut lo, &mut gallop)?;
        }
        if let Some(mut h) = hi {
            let mut halved = true;
            while h.0 - lo.0 > (t.rel_tol * h.0).max(t.abs_tol) && self.probes < t.max_probes {
                let width = h.0 - lo.0;
                let mid = (self.guided && halved)
                    .then(|| self.closing_probe(lo, h))
                    .flatten()
                    .unwrap_or((lo.0 + h.0) / 2.0);
                let (pass, r) = self.judge(Phase::MemBisect, mid, t.bisect, Exits::Both)?;
                if pass {
                    lo = (mid, r);
                } else {
                    h = (mid, r);
                }
                halved = h.0 - lo.0 <= width / 2.0 * (1.0 + 1e-9);
            }
        }
        let mut lo = lo.0;
        while lo > 0.0 && self.probes < t.max_probes {
            if self.long_pass_at == Some(lo) {
                log::info!(
                    "memory search: {:.2}% just passed a long probe; confirmed",
                    lo * 100.0
                );
                return Ok(lo);
            }
            if self.judge(Phase::MemConfirm, lo, t.confirm, Exits::None)?.0 {
                return Ok(lo);
            }
            lo *= 1.0 - t.rel_tol;
            if lo < t.abs_tol {
                lo = 0.0;
            }
        }
        if lo <= 0.0 {
            log::warn!(
                "Memory search: no footprint sustained {:.1}% of rps_max",
                self.th.pass * 100.0
            );
        } else {
            log::warn!(
                "Memory search: out of probes ({}); {:.3} unconfirmed",
                t.max_probes,
                lo
            );
        }
        Ok(lo)
    }
}

/// The probes a search still needs, estimated from its verdicts so far (`probes`, its own):
/// the halvings that narrow the bracket — the highest pass, the lowest fail above it — to the
/// tolerance, and the confirmation; while nothing above the highest pass has failed, first
/// half the steps up that are left (at least one), to a bracket one step wide. Guided closing
/// probes and close calls make the real count differ by a probe or two either way.
pub fn probes_left(probes: &[ProbeRecord], t: &Timing, up_step: f64) -> f64 {
    let lo = probes
        .iter()
        .filter(|p| p.pass == Some(true))
        .map(|p| p.mem_frac)
        .fold(0.0, f64::max);
    let fail = probes
        .iter()
        .filter(|p| p.pass == Some(false) && p.mem_frac > lo)
        .map(|p| p.mem_frac)
        .fold(f64::INFINITY, f64::min);
    let (steps, hi) = if fail.is_finite() {
        (0.0, fail)
    } else if lo >= 1.0 {
        return 1.0;
    } else {
        // The answer is as likely anywhere above: half the steps left up to the whole size.
        let steps = ((1.0 - lo) / up_step / 2.0).round().max(1.0);
        (steps, (lo + up_step).min(1.0))
    };
    let tol = (t.rel_tol * hi).max(t.abs_tol);
    let halvings = ((hi - lo) / tol).log2().ceil().max(0.0);
    steps + halvings + 1.0
}

/// The lowest footprint above `answer` that a search's probes judged failing, with the mean
/// RPS share measured there: what that search knows fails (a footprint's verdict is its last
/// probe's, as a close call's repeat decides it). `None`: nothing above the answer failed.
pub fn lowest_fail_above(probes: &[ProbeRecord], answer: f64) -> Option<(f64, f64)> {
    let mut above: Vec<f64> = probes
        .iter()
        .map(|p| p.mem_frac)
        .filter(|f| *f > answer)
        .collect();
    above.sort_by(f64::total_cmp);
    above.dedup();
    above.into_iter().find_map(|f| {
        let at: Vec<&ProbeRecord> = probes.iter().filter(|p| p.mem_frac == f).collect();
        let failed = at.last().is_some_and(|p| p.pass == Some(false));
        failed.then(|| (f, at.iter().map(|p| p.ratio).sum::<f64>() / at.len() as f64))
    })
}

/// The `k`-th step away from a hint, from `p`: one tolerance, then twice the last, so a hint
/// a little off closes its bracket in a probe or two and one far off is left in a few.
fn gallop_step(t: &Timing, p: f64, k: u32) -> f64 {
    (p * t.rel_tol).max(t.abs_tol) * f64::from(1u32 << (k - 1).min(16))
}

/// The memory-footprint search; returns mem_frac and appends every probe to `hist`.
pub fn search(
    target: &mut dyn SizingTarget,
    rps_max: u32,
    timing: &Timing,
    th: &Thresholds,
    hist: &mut Vec<ProbeRecord>,
) -> Result<f64> {
    search_by(target, rps_max, timing, th, hist, true, Prior::default())
}

/// [`search`] told what earlier searches found (a hint, a ceiling; see the module comment);
/// without either, the same as [`search`].
pub fn search_near(
    target: &mut dyn SizingTarget,
    rps_max: u32,
    timing: &Timing,
    th: &Thresholds,
    hist: &mut Vec<ProbeRecord>,
    prior: Prior,
) -> Result<f64> {
    search_by(target, rps_max, timing, th, hist, true, prior)
}

/// [`search`], with (`guided`) or without the guided closing probes.
pub(crate) fn search_by(
    target: &mut dyn SizingTarget,
    rps_max: u32,
    timing: &Timing,
    th: &Thresholds,
    hist: &mut Vec<ProbeRecord>,
    guided: bool,
    prior: Prior,
) -> Result<f64> {
    let first = hist.len();
    Search {
        target,
        rps_max: rps_max.max(1),
        timing,
        th,
        hist,
        probes: 0,
        last_failed: false,
        long_pass_at: None,
        guided,
        hint: prior
            .hint
            .filter(|h| h.is_finite() && *h > 0.0)
            .map(|h| h.min(1.0)),
        ceiling: prior
            .ceiling
            .filter(|(c, r)| c.is_finite() && *c > timing.abs_tol && *c <= 1.0 && r.is_finite()),
        first,
        probing_since: None,
    }
    .run()
}
