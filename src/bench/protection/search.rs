//! Which hashd size a mem-hog-tune probes next. Sizes form a grid of `intvs + 1` points from
//! `size-max` down to `size-min`, both included (upstream never probed `size-min`). The
//! protected sizes are those at or below a threshold, so the answer is the largest grid point
//! that passes:
//!
//! * `linear` (upstream): from the top down, until one passes — up to `intvs + 1` probes;
//! * `bisect`: the top, then the bottom, then halving the bracket between the largest failed
//!   and the smallest passed point — at most `2 + ⌈log2 intvs⌉` probes, the same answer when
//!   passing really is monotonic in the size. A bottom that fails early (more seconds below
//!   the threshold than the percentile allows, before the probe's end) ends it: nothing is
//!   protected. A bottom that fails only at the study may have failed by chance (short probes
//!   are noisy), so it is probed once more: a second fail of either kind ends the search, a
//!   pass bisects the bracket above it. The smallest size is the likeliest to pass, so one
//!   repeat there tells more than scanning the larger sizes from the top, as the first
//!   version did (up to `intvs - 1` more probes, each a worse candidate).
//!
//! Either can start from a *hint*, a size another tune found protected (iocost-qos passes the
//! neighbouring configuration's, or its smallest size when it protected none). The search then probes the top first, which fails early
//! and cheaply as upstream's first probe does, and then starts [`HINT_HEADROOM`] grid points
//! above the point nearest to the hint and walks down from there as `linear` does (below a
//! failed start, `bisect` bisects instead). The top comes first because a freshly started
//! hashd is lenient: in the VM compares, 7 of 8 hinted starts that passed as their tune's
//! first probe failed when probed again right after the point above them had failed, see
//! iocost-qos.md. The top's fail squeezes hashd harder than a fail one point up does, so the
//! start, which comes right after it, is two points above the hint: the points below it are
//! judged after the point above them failed, as upstream judges every point. If the start
//! passes, the answer may lie higher: the next start is as far above it, each later one twice
//! as far as the last, until one fails (or the top passes), and the points between the failed
//! start and the passed one are walked down. A start that passed counts once its latest probe
//! came right after a larger size failed (a pass under the top's squeeze is, if anything,
//! too strict); one that passed right after a pass below it (a climb) is probed again once
//! the points above it failed, and only that verdict counts. Every answer is thus reached
//! from above, as upstream reaches it: walking up from a passed size instead found larger
//! sizes protected than the walk down did on the same device (hashd, growing into memory it
//! already holds, fares better than after shrinking). When passing is monotonic in the size
//! the answer is the plain search's, in four probes when the hint is right: the top and the
//! two points above the answer, which fail early, and the answer.
//!
//! The next step is a function of the probes so far, so a resumed tune picks up exactly where
//! the interrupted one stopped.

use super::record::ProbeOutcome;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Search {
    Linear,
    Bisect,
}

impl Search {
    pub fn name(self) -> &'static str {
        match self {
            Search::Linear => "linear",
            Search::Bisect => "bisect",
        }
    }

    pub fn parse(s: &str) -> Option<Search> {
        match s {
            "linear" => Some(Search::Linear),
            "bisect" => Some(Search::Bisect),
            _ => None,
        }
    }
}

/// The grid: `intvs + 1` sizes (bytes) from `max` down to `min`.
pub fn grid(min: f64, max: f64, intvs: u64) -> Vec<f64> {
    let intvs = intvs.max(1);
    let step = (max - min) / intvs as f64;
    let mut v: Vec<f64> = (0..=intvs)
        .map(|i| (max - (i as f64 * step).round()).max(min))
        .collect();
    v.dedup();
    v
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    /// Probe this size; `last` when failing it ends the search (no early end then: its
    /// run is the one the result shows).
    Probe {
        size: f64,
        last: bool,
    },
    Found(f64),
    NotFound,
}

/// Whether a probe of `size` was one of grid point `i` (sizes are whole bytes).
fn is_point(grid: &[f64], i: usize, size: f64) -> bool {
    (size - grid[i]).abs() < 0.5
}

/// How grid point `i` came out in `done` (its latest probe), if it was probed.
fn outcome(grid: &[f64], done: &[(f64, ProbeOutcome)], i: usize) -> Option<ProbeOutcome> {
    done.iter()
        .rev()
        .find(|(s, _)| is_point(grid, i, *s))
        .map(|d| d.1)
}

/// Whether grid point `i`'s latest probe came right after a probe of a larger point that did
/// not pass (the top has none above: it counts as reached from above).
fn reached_from_above(grid: &[f64], done: &[(f64, ProbeOutcome)], i: usize) -> bool {
    if i == 0 {
        return true;
    }
    match done.iter().rposition(|d| is_point(grid, i, d.0)) {
        Some(k) if k > 0 => {
            let (size, o) = done[k - 1];
            (0..i).any(|j| is_point(grid, j, size)) && !o.passed()
        }
        _ => false,
    }
}

/// How many times grid point `i` was probed.
fn probes_at(grid: &[f64], done: &[(f64, ProbeOutcome)], i: usize) -> usize {
    done.iter().filter(|(s, _)| is_point(grid, i, *s)).count()
}

/// The next step of `search` over `grid` after `done` (size, outcome), in probe order.
pub fn next(search: Search, grid: &[f64], done: &[(f64, ProbeOutcome)]) -> Next {
    if grid.is_empty() {
        return Next::NotFound;
    }
    match search {
        Search::Linear => scan(grid, done, 0, grid.len() - 1),
        Search::Bisect => bisect(grid, done, 0),
    }
}

/// The points `from..=to` from the top down until one passes; `to` is the last candidate.
fn scan(grid: &[f64], done: &[(f64, ProbeOutcome)], from: usize, to: usize) -> Next {
    walk_down(grid, done, from..to + 1, |i| i == to).unwrap_or(Next::NotFound)
}

/// The points of `range` from the top down: the first that passed, else the first not probed
/// yet (`last(i)` says whether failing it ends the search); `None` when all of them failed.
fn walk_down(
    grid: &[f64],
    done: &[(f64, ProbeOutcome)],
    range: std::ops::Range<usize>,
    last: impl Fn(usize) -> bool,
) -> Option<Next> {
    range
        .into_iter()
        .find_map(|i| match outcome(grid, done, i) {
            Some(o) if o.passed() => Some(Next::Found(grid[i])),
            Some(_) => None,
            None => Some(Next::Probe {
                size: grid[i],
                last: last(i),
            }),
        })
}

/// Bisection of the points from `top` to the bottom (see the module doc).
fn bisect(grid: &[f64], done: &[(f64, ProbeOutcome)], top: usize) -> Next {
    let bottom = grid.len() - 1;
    if top > bottom {
        return Next::NotFound;
    }
    let result = |i: usize| outcome(grid, done, i);
    let probe = |i: usize, last: bool| Next::Probe {
        size: grid[i],
        last,
    };
    match result(top) {
        Some(ProbeOutcome::Pass) => return Next::Found(grid[top]),
        None => return probe(top, top == bottom),
        Some(_) => {}
    }
    if top == bottom {
        return Next::NotFound;
    }
    match result(bottom) {
        None => return probe(bottom, top + 1 == bottom),
        Some(ProbeOutcome::EarlyFail) => return Next::NotFound,
        Some(ProbeOutcome::Fail | ProbeOutcome::Error) if top + 1 == bottom => {
            return Next::NotFound
        }
        Some(ProbeOutcome::Fail | ProbeOutcome::Error) => {
            return if probes_at(grid, done, bottom) < 2 {
                probe(bottom, false)
            } else {
                Next::NotFound
            };
        }
        Some(ProbeOutcome::Pass) => {}
    }
    // The bracket: the largest failed point above the smallest passed one.
    let mut lo = top;
    let mut hi = bottom;
    for i in top..grid.len() {
        match result(i) {
            Some(o) if !o.passed() && i > lo && i < hi => lo = i,
            Some(o) if o.passed() && i < hi && i > lo => hi = i,
            _ => {}
        }
    }
    if hi - lo <= 1 {
        return Next::Found(grid[hi]);
    }
    probe((lo + hi) / 2, false)
}

/// How many grid points above the hint a hinted tune starts, after the top (see the module
/// doc). Not 1: right after the top's early fail hashd is squeezed harder than after a fail
/// one point up, and the point above the hint failed early there in all four vrate
/// configurations of a sata-ssd compare, where upstream's walk passed it (iocost-qos.md, run
/// 8). Two points up, the start takes that squeeze, and the point above the hint is judged
/// right after the point above it failed, as upstream's walk judges it.
pub const HINT_HEADROOM: usize = 2;

/// The next step of a search that probes the top and then starts [`HINT_HEADROOM`] grid points
/// above the point nearest `hint` (see the module doc); without a hint, [`next`].
pub fn next_from(
    search: Search,
    hint: Option<f64>,
    grid: &[f64],
    done: &[(f64, ProbeOutcome)],
) -> Next {
    let Some(hint) = hint.filter(|h| h.is_finite() && *h > 0.0) else {
        return next(search, grid, done);
    };
    if grid.is_empty() {
        return Next::NotFound;
    }
    let result = |i: usize| outcome(grid, done, i);
    let bottom = grid.len() - 1;
    // Failing the bottom ends the search, except bisect's first probe there (it may repeat).
    let last =
        |i: usize| i == bottom && (search == Search::Linear || probes_at(grid, done, bottom) > 0);
    let probe = |i: usize| Next::Probe {
        size: grid[i],
        last: last(i),
    };
    let nearest = (0..grid.len())
        .min_by(|&a, &b| {
            (grid[a] - hint)
                .abs()
                .partial_cmp(&(grid[b] - hint).abs())
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .unwrap_or(0);
    // The starts: above the hint, then as far above the first one that passed, then twice as
    // far above each later one, until one fails or the top passes.
    let mut start = nearest.saturating_sub(HINT_HEADROOM);
    // The top first, to squeeze hashd before the start is judged (see the module doc).
    match result(0) {
        None if start > 0 => return probe(0),
        Some(o) if o.passed() => return Next::Found(grid[0]),
        _ => {}
    }
    let mut gap = HINT_HEADROOM;
    let mut passed: Option<usize> = None;
    loop {
        match result(start) {
            None => return probe(start),
            Some(o) if o.passed() => {
                if start == 0 {
                    return Next::Found(grid[0]);
                }
                if passed.is_some() {
                    gap *= 2;
                }
                passed = Some(start);
                start = start.saturating_sub(gap);
            }
            Some(_) => break,
        }
    }
    if let Some(below) = passed {
        // Down from the failed start to the start that passed, as upstream walks. That start
        // counts once it passed right after a larger size failed; one reached by climbing is
        // probed again (if it fails then, the walk goes on below it).
        return walk_down(grid, done, start + 1..below, last).unwrap_or_else(|| {
            // Probed twice, it passed the second time too (a climb that ended at the top,
            // whose fail came first, has no fail right above to probe it after).
            if reached_from_above(grid, done, below) || probes_at(grid, done, below) > 1 {
                Next::Found(grid[below])
            } else {
                probe(below)
            }
        });
    }
    // Below a failed start: walk down — to the bottom (`linear`), or to the hint's point and
    // bisect below it (`bisect`).
    let walk_to = match search {
        Search::Linear => bottom,
        Search::Bisect => nearest.max(start),
    };
    if let Some(n) = walk_down(grid, done, start + 1..walk_to + 1, last) {
        return n;
    }
    if walk_to < bottom {
        return bisect(grid, done, walk_to + 1);
    }
    // The bottom failed. Bisect probes one that failed at the study once more, as its own.
    match result(bottom) {
        Some(ProbeOutcome::Fail | ProbeOutcome::Error)
            if search == Search::Bisect && probes_at(grid, done, bottom) < 2 =>
        {
            probe(bottom)
        }
        _ => Next::NotFound,
    }
}

/// The most probes `search` takes in all, for the progress line: bisect's bound, plus the
/// repeat once the bottom failed at the study.
pub fn most_probes(search: Search, grid: &[f64], done: &[(f64, ProbeOutcome)]) -> usize {
    let n = grid.len();
    match search {
        Search::Linear => n,
        Search::Bisect => {
            let bottom_marginal = grid.last().is_some_and(|&b| {
                done.iter().any(|d| {
                    (d.0 - b).abs() < 0.5 && matches!(d.1, ProbeOutcome::Fail | ProbeOutcome::Error)
                })
            });
            let halvings = (n.max(2) - 1).next_power_of_two().trailing_zeros() as usize;
            if bottom_marginal && n > 2 {
                (n + 1).min(3 + halvings)
            } else {
                n.min(2 + halvings)
            }
        }
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
