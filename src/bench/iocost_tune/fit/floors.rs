//! Floors under whole groups of single-peak candidates, so that a fit skips a group without
//! looking at its members. A single-peak candidate with splits `[ll, l, r, rr]` values the
//! points `..ll` with a constant, `ll..l` with a line, `l..r` with a constant, `r..rr` with a
//! line and `rr..` with a constant (an empty part values nothing; where neighbouring parts
//! share a vertex, their values meet there). No constant does better over a run of points than
//! their mean and no line better than their regression, so the sum of those least errors over
//! the five parts is a floor under the candidate's Σ residual². The floor of every candidate
//! that starts with the same splits is that prefix's least errors plus the least any ending
//! can add, which tables of suffix minima give in one lookup.
//!
//! The one candidate whose vertices move off its splits (`ll = 0`, `l = r`, `rr = n`: two
//! regressions meeting where they cross) values two runs with lines wherever they cross; its
//! floor is the least any such pair can make.

use super::bound::Moments;

pub(super) struct Floors {
    n: usize,
    /// `flat[a * (n + 1) + b]`, `line[..]`: the least Σ residual² of points `a..b` around a
    /// constant, around a line (0 for no points).
    flat: Vec<f64>,
    line: Vec<f64>,
    /// Least of `line(r, rr) + flat(rr, n)` over `rr ≥ r`.
    after_top: Vec<f64>,
    /// Least of `flat(l, r) + after_top[r]` over `r ≥ l`.
    top_onward: Vec<f64>,
    /// Least of `line(ll, l) + top_onward[l]` over `l ≥ ll`.
    rise_onward: Vec<f64>,
    /// Least of `line(0, c) + line(c, n)` over every `c`.
    two_lines: f64,
}

impl Floors {
    pub(super) fn new(m: &Moments) -> Floors {
        let n = m.len();
        let w = n + 1;
        let (mut flat, mut line) = (vec![0.0; w * w], vec![0.0; w * w]);
        for a in 0..n {
            for b in a + 1..=n {
                let (f, l) = m.floors(a, b);
                flat[a * w + b] = f;
                line[a * w + b] = l;
            }
        }
        // Each table's entry `i` is the least over the ends from `i` on.
        let least = |part: &[f64], next: &dyn Fn(usize) -> f64| -> Vec<f64> {
            (0..=n)
                .map(|i| {
                    (i..=n)
                        .map(|j| part[i * w + j] + next(j))
                        .fold(f64::INFINITY, f64::min)
                })
                .collect()
        };
        let after_top = least(&line, &|rr| flat[rr * w + n]);
        let top_onward = least(&flat, &|r| after_top[r]);
        let rise_onward = least(&line, &|l| top_onward[l]);
        let two_lines = (0..=n)
            .map(|c| line[c] + line[c * w + n])
            .fold(f64::INFINITY, f64::min);
        Floors {
            n,
            flat,
            line,
            after_top,
            top_onward,
            rise_onward,
            two_lines,
        }
    }

    pub(super) fn flat(&self, a: usize, b: usize) -> f64 {
        self.flat[a * (self.n + 1) + b]
    }

    pub(super) fn line(&self, a: usize, b: usize) -> f64 {
        self.line[a * (self.n + 1) + b]
    }

    /// Least of `line(r, rr) + flat(rr, n)` over `rr ≥ r`.
    pub(super) fn after_top(&self, r: usize) -> f64 {
        self.after_top[r]
    }

    /// Least of `flat(l, r) + after_top(r)` over `r ≥ l`.
    pub(super) fn top_onward(&self, l: usize) -> f64 {
        self.top_onward[l]
    }

    /// A floor under the Σ residual² of every candidate whose splits start with `idx`
    /// (one to four of them).
    pub(super) fn of(&self, idx: &[usize]) -> f64 {
        let n = self.n;
        let floor = match *idx {
            [ll] => self.flat(0, ll) + self.rise_onward[ll],
            [ll, l] => self.flat(0, ll) + self.line(ll, l) + self.top_onward[l],
            [ll, l, r] => self.flat(0, ll) + self.line(ll, l) + self.flat(l, r) + self.after_top[r],
            [ll, l, r, rr] => {
                self.flat(0, ll)
                    + self.line(ll, l)
                    + self.flat(l, r)
                    + self.line(r, rr)
                    + self.flat(rr, n)
            }
            _ => 0.0,
        };
        // Whether the group may hold the candidate of two crossing regressions.
        let crossing = match *idx {
            [ll] | [ll, _] => ll == 0,
            [ll, l, r] => ll == 0 && l == r,
            [ll, l, r, rr] => ll == 0 && l == r && rr == n,
            _ => true,
        };
        if crossing {
            floor.min(self.two_lines)
        } else {
            floor
        }
    }
}
