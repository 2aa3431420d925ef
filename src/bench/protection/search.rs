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
//! neighbouring configuration's). The search then probes the top first, which fails early
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
mod tests {
    use super::*;

    const G: f64 = (1u64 << 30) as f64;

    use ProbeOutcome::{EarlyFail, Fail, Pass};

    /// A studied verdict: pass, or a fail too close to call early.
    fn studied(passed: bool) -> ProbeOutcome {
        if passed {
            Pass
        } else {
            Fail
        }
    }

    /// Runs a search (from `hint`, if any) against a host whose verdict on a size is `host`;
    /// returns the answer and the probes taken.
    fn tune_on(
        search: Search,
        hint: Option<f64>,
        grid: &[f64],
        host: impl Fn(f64) -> ProbeOutcome,
    ) -> (Next, Vec<f64>) {
        let mut done = vec![];
        loop {
            match next_from(search, hint, grid, &done) {
                Next::Probe { size, .. } => {
                    // Only the bottom and a start that passed are probed again, once.
                    let before: Vec<_> = done
                        .iter()
                        .filter(|d: &&(f64, ProbeOutcome)| d.0 == size)
                        .collect();
                    assert!(
                        before.is_empty()
                            || (before.len() == 1
                                && (Some(&size) == grid.last() || before[0].1.passed())),
                        "reprobed {} after {:?}",
                        size,
                        done
                    );
                    done.push((size, host(size)));
                }
                n => return (n, done.iter().map(|d| d.0).collect()),
            }
        }
    }

    fn tune_with(
        search: Search,
        hint: Option<f64>,
        grid: &[f64],
        pass: impl Fn(f64) -> bool,
    ) -> (Next, Vec<f64>) {
        tune_on(search, hint, grid, |s| studied(pass(s)))
    }

    fn tune(search: Search, grid: &[f64], pass: impl Fn(f64) -> bool) -> (Next, Vec<f64>) {
        tune_with(search, None, grid, pass)
    }

    fn tune_from(grid: &[f64], hint: f64, pass: impl Fn(f64) -> bool) -> (Next, Vec<f64>) {
        tune_with(Search::Linear, Some(hint), grid, pass)
    }

    #[test]
    fn a_hint_gives_the_linear_answer_in_three_probes_when_right() {
        let g = grid(6.0 * G, 16.0 * G, 10);
        for thr in [5.0, 6.0, 6.5, 9.0, 11.2, 15.9, 16.0, 20.0] {
            let pass = |s: f64| s <= thr * G;
            let (lin, _) = tune(Search::Linear, &g, pass);
            for hint in [3.0, 6.0, 9.0, 11.0, 13.4, 16.0, 30.0] {
                let (near, probes) = tune_from(&g, hint * G, pass);
                assert_eq!(near, lin, "threshold {}G hint {}G: {:?}", thr, hint, probes);
            }
        }
        // The hint on the answer: the top and the two points above it (failing), then it.
        let pass = |s: f64| s <= 11.2 * G;
        let (n, probes) = tune_from(&g, 11.0 * G, pass);
        assert_eq!(n, Next::Found(11.0 * G));
        assert_eq!(probes, vec![16.0 * G, 13.0 * G, 12.0 * G, 11.0 * G]);
        // Linear from the top needed six.
        assert_eq!(tune(Search::Linear, &g, pass).1.len(), 6);
        // The answer at the start: it passed after the top failed, so it counts once the
        // next start, two points above it, and the point between fail.
        let pass = |s: f64| s <= 11.0 * G;
        let (n, probes) = tune_from(&g, 9.0 * G, pass);
        assert_eq!(n, Next::Found(11.0 * G));
        assert_eq!(probes, vec![16.0 * G, 11.0 * G, 13.0 * G, 12.0 * G]);
        // Well above the hint: the second start passes too (climbing, right after a pass
        // below it), the third is the top, which failed first; the points between are walked
        // down and the second start is probed again right below them.
        let pass = |s: f64| s <= 13.0 * G;
        let (n, probes) = tune_from(&g, 9.0 * G, pass);
        assert_eq!(n, Next::Found(13.0 * G));
        assert_eq!(
            probes,
            vec![16.0 * G, 11.0 * G, 13.0 * G, 15.0 * G, 14.0 * G, 13.0 * G]
        );
        // The top passing is the answer at once.
        let (n, probes) = tune_from(&g, 7.0 * G, |_| true);
        assert_eq!(n, Next::Found(16.0 * G));
        assert_eq!(probes, vec![16.0 * G]);
        // A host that is lenient until it has been squeezed once (a fresh hashd passes two
        // points more): the top's fail squeezes it, so the start is judged as upstream's
        // walk judges it, and the answer is linear's.
        let squeezed = std::cell::Cell::new(false);
        let lenient = |s: f64| {
            if s <= 10.0 * G || (!squeezed.get() && s <= 12.0 * G) {
                return Pass;
            }
            squeezed.set(true);
            EarlyFail
        };
        let (n, probes) = tune_on(Search::Linear, Some(10.0 * G), &g, lenient);
        assert_eq!(n, Next::Found(10.0 * G));
        assert_eq!(probes, vec![16.0 * G, 12.0 * G, 11.0 * G, 10.0 * G]);
        // No hint: the plain search.
        assert_eq!(
            next_from(Search::Linear, None, &g, &[]),
            next(Search::Linear, &g, &[])
        );
    }

    #[test]
    fn the_grid_includes_both_ends() {
        let g = grid(6.0 * G, 16.0 * G, 10);
        assert_eq!(g.len(), 11);
        assert_eq!((g[0], g[10]), (16.0 * G, 6.0 * G));
        assert_eq!(g[1], 15.0 * G);
        assert_eq!(grid(4.0, 4.0, 10), vec![4.0]);
    }

    #[test]
    fn both_searches_find_the_same_size_bisect_with_fewer_probes() {
        let g = grid(6.0 * G, 16.0 * G, 10);
        for thr in [5.0, 6.0, 6.5, 9.0, 11.2, 15.9, 16.0, 20.0] {
            let pass = |s: f64| s <= thr * G;
            let (lin, lp) = tune(Search::Linear, &g, pass);
            let (bis, bp) = tune(Search::Bisect, &g, pass);
            assert_eq!(lin, bis, "threshold {}G", thr);
            let want = g.iter().copied().find(|&s| pass(s));
            assert_eq!(
                lin,
                want.map_or(Next::NotFound, Next::Found),
                "threshold {}G",
                thr
            );
            // Nothing passes: the top, and the bottom twice (a fail at the study is probed
            // again).
            let most = if want.is_some() { 2 + 4 } else { 3 };
            assert!(bp.len() <= most, "{} probes at {}G", bp.len(), thr);
            // Deep answers are where bisecting pays; near the top the linear scan is quicker.
            if (6.0..=10.0).contains(&thr) {
                assert!(
                    bp.len() < lp.len(),
                    "{}G: {} vs {}",
                    thr,
                    bp.len(),
                    lp.len()
                );
            }
        }
    }

    #[test]
    fn the_last_candidate_is_marked_and_a_resume_continues() {
        let g = grid(0.0, 10.0 * G, 10);
        assert_eq!(
            next(Search::Linear, &g, &[]),
            Next::Probe {
                size: 10.0 * G,
                last: false
            }
        );
        let failed: Vec<(f64, ProbeOutcome)> = g[..10].iter().map(|&s| (s, Fail)).collect();
        assert_eq!(
            next(Search::Linear, &g, &failed),
            Next::Probe {
                size: 0.0,
                last: true
            }
        );
        // The bottom is not the last candidate of a bisect: if it fails at the study, the
        // middle is scanned.
        assert_eq!(
            next(Search::Bisect, &g, &[(10.0 * G, Fail)]),
            Next::Probe {
                size: 0.0,
                last: false
            }
        );
        // Top failed, bottom passed: halve.
        let done = [(10.0 * G, Fail), (0.0, Pass)];
        assert_eq!(
            next(Search::Bisect, &g, &done),
            Next::Probe {
                size: 5.0 * G,
                last: false
            }
        );
        // The bottom failed at the study: once more, then a second fail ends it.
        assert_eq!(
            next(Search::Bisect, &g, &[(10.0 * G, Fail), (0.0, Fail)]),
            Next::Probe {
                size: 0.0,
                last: false
            }
        );
        for again in [Fail, EarlyFail] {
            assert_eq!(
                next(
                    Search::Bisect,
                    &g,
                    &[(10.0 * G, Fail), (0.0, Fail), (0.0, again)]
                ),
                Next::NotFound
            );
        }
        // A pass the second time: the bracket above it is halved.
        assert_eq!(
            next(
                Search::Bisect,
                &g,
                &[(10.0 * G, Fail), (0.0, Fail), (0.0, Pass)]
            ),
            Next::Probe {
                size: 5.0 * G,
                last: false
            }
        );
        // A record of the first version, which scanned after such a bottom: resumed, it
        // repeats the bottom and ends.
        let all_failed: Vec<(f64, ProbeOutcome)> = g.iter().map(|&s| (s, Fail)).collect();
        assert_eq!(
            next(Search::Bisect, &g, &all_failed),
            Next::Probe {
                size: 0.0,
                last: false
            }
        );
        let mut twice = all_failed.clone();
        twice.push((0.0, Fail));
        assert_eq!(next(Search::Bisect, &g, &twice), Next::NotFound);
    }

    #[test]
    fn a_bottom_failed_by_chance_is_probed_again() {
        // What the VM showed: a quick probe at the bottom failed (76.7 %) although a larger
        // size passed; the same size passed in the next run. Here it fails the first time only.
        let g = grid(6.0 * G, 16.0 * G, 10);
        let bottom_probes = std::cell::Cell::new(0);
        let chance = |s: f64| {
            if s == 6.0 * G {
                bottom_probes.set(bottom_probes.get() + 1);
                return studied(bottom_probes.get() > 1);
            }
            studied(s <= 12.0 * G)
        };
        let (lin, _) = tune(Search::Linear, &g, |s| s <= 12.0 * G);
        let (bis, bp) = tune_on(Search::Bisect, None, &g, chance);
        assert_eq!(lin, Next::Found(12.0 * G));
        assert_eq!(bis, lin);
        // Top, bottom twice, then the halvings.
        assert_eq!(&bp[..3], &[16.0 * G, 6.0 * G, 6.0 * G]);
        assert!(bp.len() <= 3 + 4, "{:?}", bp);
        // Nothing passes: three probes where linear takes every point.
        let (lin, lp) = tune(Search::Linear, &g, |_| false);
        let (bis, bp) = tune(Search::Bisect, &g, |_| false);
        assert_eq!((lin, bis), (Next::NotFound, Next::NotFound));
        assert_eq!((bp.len(), lp.len()), (3, 11));
        assert_eq!(most_probes(Search::Bisect, &g, &[]), 6);
        assert_eq!(
            most_probes(Search::Bisect, &g, &[(16.0 * G, Fail), (6.0 * G, Fail)]),
            7
        );
        assert_eq!(most_probes(Search::Linear, &g, &[]), 11);
    }

    #[test]
    fn a_bottom_that_fails_early_ends_the_bisect() {
        let g = grid(6.0 * G, 16.0 * G, 10);
        for thr in [5.0, 6.0, 6.5, 9.0, 11.2, 15.9, 16.0, 20.0] {
            // Clear fails end early, as they do on a host.
            let host = |s: f64| if s <= thr * G { Pass } else { EarlyFail };
            let (lin, lp) = tune_on(Search::Linear, None, &g, host);
            let (bis, bp) = tune_on(Search::Bisect, None, &g, host);
            assert_eq!(lin, bis, "threshold {}G", thr);
            assert!(bp.len() <= 6, "{} probes at {}G", bp.len(), thr);
            if lin == Next::NotFound {
                // The top and the bottom, against every point.
                assert_eq!((bp.len(), lp.len()), (2, 11));
            }
        }
        // A bottom failed at the study is probed again before it is believed.
        let host = |s: f64| match s {
            s if s <= 6.0 * G => Fail,
            _ => EarlyFail,
        };
        let (bis, bp) = tune_on(Search::Bisect, None, &g, host);
        assert_eq!(bis, Next::NotFound);
        assert_eq!(bp, vec![16.0 * G, 6.0 * G, 6.0 * G]);
        // Top and bottom adjacent: the bottom is the last candidate, run to its end.
        let two = grid(6.0 * G, 7.0 * G, 1);
        assert_eq!(
            next(Search::Bisect, &two, &[(7.0 * G, EarlyFail)]),
            Next::Probe {
                size: 6.0 * G,
                last: true
            }
        );
        assert_eq!(
            next(
                Search::Bisect,
                &two,
                &[(7.0 * G, EarlyFail), (6.0 * G, Fail)]
            ),
            Next::NotFound
        );
    }

    #[test]
    fn a_failed_start_walks_down_to_the_hint_then_bisects() {
        let g = grid(6.0 * G, 16.0 * G, 10);
        for thr in [5.0, 6.0, 6.5, 9.0, 11.2, 15.9, 16.0, 20.0] {
            for early in [false, true] {
                let host = |s: f64| match (s <= thr * G, early) {
                    (true, _) => Pass,
                    (false, true) => EarlyFail,
                    (false, false) => Fail,
                };
                let (lin, _) = tune_on(Search::Linear, None, &g, host);
                for hint in [3.0, 6.0, 9.0, 11.0, 13.4, 16.0, 30.0] {
                    let (bis, bp) = tune_on(Search::Bisect, Some(hint * G), &g, host);
                    assert_eq!(bis, lin, "threshold {}G hint {}G: {:?}", thr, hint, bp);
                    let (walk, wp) = tune_on(Search::Linear, Some(hint * G), &g, host);
                    assert_eq!(walk, lin, "threshold {}G hint {}G: {:?}", thr, hint, wp);
                    // Below a start that failed: never more than the top, the walk to the
                    // hint, a whole bisection and the bottom's repeat.
                    let start = if bp[0] == g[0] && bp.len() > 1 {
                        bp[1]
                    } else {
                        bp[0]
                    };
                    let down = !host(start).passed();
                    assert!(
                        down || bp.len() <= 1 + HINT_HEADROOM + 1 + 6 + 1,
                        "{:?}",
                        bp
                    );
                }
            }
        }
        // The answer one step below the hint: the walk down to the hint, then bisect's top.
        let pass = |s: f64| if s <= 10.0 * G { Pass } else { EarlyFail };
        let (n, probes) = tune_on(Search::Bisect, Some(11.0 * G), &g, pass);
        assert_eq!(n, Next::Found(10.0 * G));
        assert_eq!(
            probes,
            vec![16.0 * G, 13.0 * G, 12.0 * G, 11.0 * G, 10.0 * G]
        );
        // Nothing passes: down to the hint, the point below and the bottom, instead of
        // walking all.
        let (n, probes) = tune_on(Search::Bisect, Some(14.0 * G), &g, |_| EarlyFail);
        assert_eq!(n, Next::NotFound);
        assert_eq!(
            probes,
            vec![16.0 * G, 15.0 * G, 14.0 * G, 13.0 * G, 6.0 * G]
        );
        let (_, walked) = tune_on(Search::Linear, Some(14.0 * G), &g, |_| EarlyFail);
        assert_eq!(walked.len(), 11);
        // A bottom that fails at the study is probed once more by bisect (seen: 819M at
        // 88.3 % after the configuration before had protected it), not by linear.
        let (n, probes) = tune_on(Search::Bisect, Some(6.0 * G), &g, |_| Fail);
        assert_eq!(n, Next::NotFound);
        assert_eq!(probes, vec![16.0 * G, 8.0 * G, 7.0 * G, 6.0 * G, 6.0 * G]);
        let (n, probes) = tune_on(Search::Linear, Some(6.0 * G), &g, |_| Fail);
        assert_eq!(n, Next::NotFound);
        assert_eq!(probes, vec![16.0 * G, 8.0 * G, 7.0 * G, 6.0 * G]);
        let (n, _) = tune_on(Search::Bisect, Some(6.0 * G), &g, |_| EarlyFail);
        assert_eq!(n, Next::NotFound);
    }

    #[test]
    fn a_noisy_host_lands_within_a_step_of_linear() {
        // Passing flips once near the threshold: bisect may skip it, but stays one step off.
        let g = grid(6.0 * G, 16.0 * G, 10);
        let flaky = |s: f64| s <= 9.0 * G || (s - 11.0 * G).abs() < 1.0;
        let (lin, _) = tune(Search::Linear, &g, flaky);
        let (bis, _) = tune(Search::Bisect, &g, flaky);
        let (Next::Found(a), Next::Found(b)) = (lin, bis) else {
            panic!("{:?} {:?}", lin, bis)
        };
        assert!((a - b).abs() <= 2.0 * G, "{} vs {}", a / G, b / G);
    }
}
