//! Which hashd size a mem-hog-tune probes next. Sizes form a grid of `intvs + 1` points from
//! `size-max` down to `size-min`, both included (upstream never probed `size-min`). The
//! protected sizes are those at or below a threshold, so the answer is the largest grid point
//! that passes:
//!
//! * `linear` (upstream): from the top down, until one passes — up to `intvs + 1` probes;
//! * `bisect`: the top, then the bottom, then halving the bracket between the largest failed
//!   and the smallest passed point — at most `2 + ⌈log2 intvs⌉` probes, the same answer when
//!   passing really is monotonic in the size. Short probes are noisy, so a failed bottom does
//!   not end it: the points in between are then scanned from the top like `linear` (a
//!   bottom that failed by chance cannot hide a passing size linear would have found).
//!
//! Either can start from a *hint*, a size another tune found protected (iocost-qos passes the
//! neighbouring configuration's): the grid point nearest to it is probed first; if it passes,
//! the points above it are probed upwards until one fails, else the points below it downwards
//! until one passes. When passing is monotonic in the size that is the same answer as the
//! plain search, in two probes when the hint is right.
//!
//! The next step is a function of the probes so far, so a resumed tune picks up exactly where
//! the interrupted one stopped.

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

/// How grid point `i` came out in `done` (its latest probe), if it was probed.
fn outcome(grid: &[f64], done: &[(f64, bool)], i: usize) -> Option<bool> {
    done.iter()
        .rev()
        .find(|(s, _)| (s - grid[i]).abs() < 0.5)
        .map(|d| d.1)
}

/// The next step of `search` over `grid` after `done` (size, passed), in probe order.
pub fn next(search: Search, grid: &[f64], done: &[(f64, bool)]) -> Next {
    if grid.is_empty() {
        return Next::NotFound;
    }
    let result = |i: usize| outcome(grid, done, i);
    let bottom = grid.len() - 1;
    let probe = |i: usize, last: bool| Next::Probe {
        size: grid[i],
        last,
    };
    match search {
        Search::Linear => {
            for (i, &size) in grid.iter().enumerate() {
                match result(i) {
                    Some(true) => return Next::Found(size),
                    Some(false) => continue,
                    None => return probe(i, i == bottom),
                }
            }
            Next::NotFound
        }
        Search::Bisect => {
            match result(0) {
                Some(true) => return Next::Found(grid[0]),
                None => return probe(0, bottom == 0),
                Some(false) => {}
            }
            if bottom == 0 {
                return Next::NotFound;
            }
            match result(bottom) {
                Some(false) => {
                    for (i, &size) in grid.iter().enumerate().take(bottom).skip(1) {
                        match result(i) {
                            Some(true) => return Next::Found(size),
                            Some(false) => continue,
                            None => return probe(i, i == bottom - 1),
                        }
                    }
                    return Next::NotFound;
                }
                None => return probe(bottom, bottom == 1),
                Some(true) => {}
            }
            // The bracket: the largest failed point above the smallest passed one.
            let mut lo = 0;
            let mut hi = bottom;
            for i in 0..grid.len() {
                match result(i) {
                    Some(false) if i > lo && i < hi => lo = i,
                    Some(true) if i < hi && i > lo => hi = i,
                    _ => {}
                }
            }
            if hi - lo <= 1 {
                return Next::Found(grid[hi]);
            }
            probe((lo + hi) / 2, false)
        }
    }
}

/// The next step of a search starting at the grid point nearest `hint` (see the module doc);
/// without a hint, [`next`].
pub fn next_from(search: Search, hint: Option<f64>, grid: &[f64], done: &[(f64, bool)]) -> Next {
    let Some(hint) = hint.filter(|h| h.is_finite() && *h > 0.0) else {
        return next(search, grid, done);
    };
    if grid.is_empty() {
        return Next::NotFound;
    }
    let result = |i: usize| outcome(grid, done, i);
    let bottom = grid.len() - 1;
    let start = (0..grid.len())
        .min_by(|&a, &b| {
            (grid[a] - hint)
                .abs()
                .partial_cmp(&(grid[b] - hint).abs())
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .unwrap_or(0);
    match result(start) {
        None => Next::Probe {
            size: grid[start],
            last: start == bottom,
        },
        Some(true) => {
            // Upwards (larger sizes) until one fails: the answer is the point below it.
            for i in (0..start).rev() {
                match result(i) {
                    Some(true) => continue,
                    Some(false) => return Next::Found(grid[i + 1]),
                    None => {
                        return Next::Probe {
                            size: grid[i],
                            last: false,
                        }
                    }
                }
            }
            Next::Found(grid[0])
        }
        Some(false) => {
            for (i, &size) in grid.iter().enumerate().skip(start + 1) {
                match result(i) {
                    Some(true) => return Next::Found(size),
                    Some(false) => continue,
                    None => {
                        return Next::Probe {
                            size,
                            last: i == bottom,
                        }
                    }
                }
            }
            Next::NotFound
        }
    }
}

/// The most probes `search` can still take in all, for the progress line: bisect's bound
/// until a failed bottom turns it into the linear scan.
pub fn most_probes(search: Search, grid: &[f64], done: &[(f64, bool)]) -> usize {
    let n = grid.len();
    match search {
        Search::Linear => n,
        Search::Bisect => {
            let bottom_failed = grid
                .last()
                .is_some_and(|&b| done.iter().any(|d| (d.0 - b).abs() < 0.5 && !d.1));
            if bottom_failed {
                return n;
            }
            let halvings = (n.max(2) - 1).next_power_of_two().trailing_zeros();
            n.min(2 + halvings as usize)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: f64 = (1u64 << 30) as f64;

    /// Runs a search (from `hint`, if any) against a host whose verdict on a size is `pass`;
    /// returns the answer and the probes taken.
    fn tune_with(
        search: Search,
        hint: Option<f64>,
        grid: &[f64],
        pass: impl Fn(f64) -> bool,
    ) -> (Next, Vec<f64>) {
        let mut done = vec![];
        loop {
            match next_from(search, hint, grid, &done) {
                Next::Probe { size, .. } => {
                    assert!(
                        done.iter().all(|d: &(f64, bool)| d.0 != size),
                        "reprobed {}",
                        size
                    );
                    done.push((size, pass(size)));
                }
                n => return (n, done.iter().map(|d| d.0).collect()),
            }
        }
    }

    fn tune(search: Search, grid: &[f64], pass: impl Fn(f64) -> bool) -> (Next, Vec<f64>) {
        tune_with(search, None, grid, pass)
    }

    fn tune_from(grid: &[f64], hint: f64, pass: impl Fn(f64) -> bool) -> (Next, Vec<f64>) {
        tune_with(Search::Linear, Some(hint), grid, pass)
    }

    #[test]
    fn a_hint_gives_the_linear_answer_in_two_probes_when_right() {
        let g = grid(6.0 * G, 16.0 * G, 10);
        for thr in [5.0, 6.0, 6.5, 9.0, 11.2, 15.9, 16.0, 20.0] {
            let pass = |s: f64| s <= thr * G;
            let (lin, _) = tune(Search::Linear, &g, pass);
            for hint in [3.0, 6.0, 9.0, 11.0, 13.4, 16.0, 30.0] {
                let (near, probes) = tune_from(&g, hint * G, pass);
                assert_eq!(near, lin, "threshold {}G hint {}G: {:?}", thr, hint, probes);
            }
        }
        // The hint on the answer: it and the point above it.
        let pass = |s: f64| s <= 11.2 * G;
        let (n, probes) = tune_from(&g, 11.0 * G, pass);
        assert_eq!(n, Next::Found(11.0 * G));
        assert_eq!(probes, vec![11.0 * G, 12.0 * G]);
        // Linear from the top needed six.
        assert_eq!(tune(Search::Linear, &g, pass).1.len(), 6);
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
            // Nothing passes: a failed bottom is not trusted, so every point is probed.
            let most = if want.is_some() { 2 + 4 } else { g.len() };
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
        let failed: Vec<(f64, bool)> = g[..10].iter().map(|&s| (s, false)).collect();
        assert_eq!(
            next(Search::Linear, &g, &failed),
            Next::Probe {
                size: 0.0,
                last: true
            }
        );
        // The bottom is not the last candidate of a bisect: if it fails, the middle is scanned.
        assert_eq!(
            next(Search::Bisect, &g, &[(10.0 * G, false)]),
            Next::Probe {
                size: 0.0,
                last: false
            }
        );
        // Top failed, bottom passed: halve.
        let done = [(10.0 * G, false), (0.0, true)];
        assert_eq!(
            next(Search::Bisect, &g, &done),
            Next::Probe {
                size: 5.0 * G,
                last: false
            }
        );
        assert_eq!(
            next(Search::Bisect, &g, &[(10.0 * G, false), (0.0, false)]),
            Next::Probe {
                size: 9.0 * G,
                last: false
            }
        );
        let all_failed: Vec<(f64, bool)> = g.iter().map(|&s| (s, false)).collect();
        assert_eq!(next(Search::Bisect, &g, &all_failed), Next::NotFound);
        let mut nearly = all_failed.clone();
        nearly.retain(|d| d.0 != G);
        assert_eq!(
            next(Search::Bisect, &g, &nearly),
            Next::Probe {
                size: G,
                last: true
            }
        );
    }

    #[test]
    fn a_bottom_failed_by_chance_falls_back_to_the_linear_scan() {
        // What the VM showed: a quick probe at the bottom failed although a larger size passed.
        let g = grid(6.0 * G, 16.0 * G, 10);
        let noisy = |s: f64| s <= 12.0 * G && s != 6.0 * G;
        let (lin, lp) = tune(Search::Linear, &g, noisy);
        let (bis, bp) = tune(Search::Bisect, &g, noisy);
        assert_eq!(lin, Next::Found(12.0 * G));
        assert_eq!(bis, lin);
        // Top, bottom, then the same scan linear made below the top.
        assert_eq!(bp.len(), lp.len() + 1);
        // Nothing passes: both probe every point, bisect no more often than linear.
        let (lin, lp) = tune(Search::Linear, &g, |_| false);
        let (bis, bp) = tune(Search::Bisect, &g, |_| false);
        assert_eq!((lin, bis), (Next::NotFound, Next::NotFound));
        assert_eq!(bp.len(), lp.len());
        assert_eq!(most_probes(Search::Bisect, &g, &[]), 6);
        assert_eq!(
            most_probes(Search::Bisect, &g, &[(16.0 * G, false), (6.0 * G, false)]),
            11
        );
        assert_eq!(most_probes(Search::Linear, &g, &[]), 11);
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
