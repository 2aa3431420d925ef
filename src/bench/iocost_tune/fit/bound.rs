//! A lower bound of a candidate line's error from prefix sums of the points' moments, so that a
//! fit refuses most of its candidates (a single-peak fit of a merged model tries tens of
//! thousands) in a few operations instead of a pass over every point. A candidate the bound
//! can't refuse gets the exact error, summed point by point in order as upstream does, so the
//! chosen line is the same to the bit with or without the bound.
//!
//! The estimate of Σ residual² over a run of points comes from their count and sums of u, w,
//! u², uw and w² (u, w: the points' x and y less their means, which keeps the terms small).
//! Prefix sums lose precision to cancellation; the bound allows for a rounding error far above
//! what summing n values can make (10⁻⁸ of the magnitudes involved, where n·ε is 10⁻¹³ for a
//! thousand points), and series whose mean dwarfs their spread are left to the exact sum.

use crate::bench::iocost_tune::model::DataPoint;

/// The relative rounding allowance on the estimate's magnitudes.
const TOLERANCE: f64 = 1e-8;
/// Below this many points the exact error is as cheap as the bound.
const MIN_POINTS: usize = 24;
/// A mean this many times the spread (or more) leaves too few bits for the estimate.
const MAX_MEAN_TO_SPREAD: f64 = 1e3;
/// A run of points whose Σu² (about their own mean) is below this share of all points' is
/// given no floor for a line: the regression's share of the sum is then too rounded to trust.
const MIN_LINE_SPREAD: f64 = 1e-6;

/// Prefix sums of the points' centred moments.
pub(super) struct Moments {
    xs: Vec<f64>,
    cx: f64,
    cy: f64,
    /// Per prefix of i points: Σu, Σw, Σu², Σuw, Σw².
    pre: Vec<[f64; 5]>,
    /// Over all points: Σ|u|, Σ|w|, Σu², Σ|uw|, Σw² (what the rounding scales with).
    abs: [f64; 5],
}

/// A run of points valued by one line, `w = a + b·u` in centred terms.
struct Part {
    from: usize,
    to: usize,
    a: f64,
    b: f64,
}

impl Moments {
    /// `None` when the bound can't be trusted or wouldn't pay: few points, points out of
    /// order, values that aren't finite, or a mean too large for the spread.
    pub(super) fn new(pts: &[DataPoint]) -> Option<Moments> {
        let n = pts.len();
        if n < MIN_POINTS
            || pts.windows(2).any(|w| w[0].x > w[1].x)
            || pts.iter().any(|p| !p.x.is_finite() || !p.y.is_finite())
        {
            return None;
        }
        let cx = pts.iter().map(|p| p.x).sum::<f64>() / n as f64;
        let cy = pts.iter().map(|p| p.y).sum::<f64>() / n as f64;
        let mut pre = Vec::with_capacity(n + 1);
        let mut acc = [0.0; 5];
        let mut abs = [0.0; 5];
        pre.push(acc);
        for p in pts {
            let (u, w) = (p.x - cx, p.y - cy);
            let terms = [u, w, u * u, u * w, w * w];
            for i in 0..5 {
                acc[i] += terms[i];
                abs[i] += terms[i].abs();
            }
            pre.push(acc);
        }
        let spread = (abs[4] / n as f64).sqrt();
        if cy.abs() > MAX_MEAN_TO_SPREAD * spread
            || cx.abs() > MAX_MEAN_TO_SPREAD * (abs[2] / n as f64).sqrt()
        {
            return None;
        }
        Some(Moments {
            xs: pts.iter().map(|p| p.x).collect(),
            cx,
            cy,
            pre,
            abs,
        })
    }

    /// How many points.
    pub(super) fn len(&self) -> usize {
        self.xs.len()
    }

    /// The least Σ residual² of points `a..b` around a constant (their mean) and around a
    /// line (their regression), each less the rounding allowance and never below 0.
    pub(super) fn floors(&self, a: usize, b: usize) -> (f64, f64) {
        if b <= a {
            return (0.0, 0.0);
        }
        let (hi, lo) = (&self.pre[b], &self.pre[a]);
        let [su, sw, suu, suw, sww]: [f64; 5] = std::array::from_fn(|i| hi[i] - lo[i]);
        let cnt = (b - a) as f64;
        let slack = TOLERANCE * self.abs[4];
        // f64::max takes the number over a NaN: a NaN floor is no floor.
        let around_mean = sww - sw * sw / cnt;
        let flat = (around_mean - slack).max(0.0);
        let spread = suu - su * su / cnt;
        let line = if spread > MIN_LINE_SPREAD * self.abs[2] {
            let cross = suw - su * sw / cnt;
            (around_mean - cross * cross / spread - slack).max(0.0)
        } else {
            0.0
        };
        (flat, line.min(flat))
    }

    /// The least Σ residual² of points `a..b` around a line through `p`, less the rounding
    /// allowance and never below 0.
    pub(super) fn hinged(&self, a: usize, b: usize, p: &DataPoint) -> f64 {
        if b <= a {
            return 0.0;
        }
        let (hi, lo) = (&self.pre[b], &self.pre[a]);
        let [su, sw, suu, suw, sww]: [f64; 5] = std::array::from_fn(|i| hi[i] - lo[i]);
        let cnt = (b - a) as f64;
        // Moved to the hinge: u' = u − pu, w' = w − pw.
        let (pu, pw) = (p.x - self.cx, p.y - self.cy);
        let ww = sww - 2.0 * pw * sw + pw * pw * cnt;
        let uw = suw - pu * sw - pw * su + pu * pw * cnt;
        let uu = suu - 2.0 * pu * su + pu * pu * cnt;
        let [au, aw, auu, auw, aww] = self.abs;
        let n = self.xs.len() as f64;
        let slack = TOLERANCE
            * (aww + 2.0 * (pw * aw).abs() + pw * pw * n + auw + (pu * aw).abs() + (pw * au).abs());
        let spread = auu + 2.0 * (pu * au).abs() + pu * pu * n;
        if uu.is_nan() || uu <= MIN_LINE_SPREAD * spread {
            return 0.0;
        }
        (ww - uw * uw / uu - slack).max(0.0)
    }

    /// Σ residual² of points `a..b` around the line through `p` and `q`, estimated, and the
    /// magnitude its rounding scales with (see [`Moments::loses`]).
    pub(super) fn segment_sse(
        &self,
        a: usize,
        b: usize,
        p: &DataPoint,
        q: &DataPoint,
    ) -> (f64, f64) {
        self.sse(&self.segment(a, b, p, q))
    }

    /// Whether the exact error times `mult` of the line through the vertices `v` can't be
    /// below `best`. The points each segment values are found as `DataLines::eval` assigns them: points
    /// before the first vertex and after the last take its value; a point belongs to the first
    /// segment whose right end is at or beyond it.
    pub(super) fn refuses(&self, v: &[DataPoint], mult: f64, best: f64) -> bool {
        // Candidates have at most six vertices; a longer line is left to the exact sum.
        let mut at = [0; 8];
        if v.len() > at.len() {
            return false;
        }
        let mut from = 0;
        for (a, p) in at.iter_mut().zip(v) {
            from += self.xs[from..].partition_point(|&x| x <= p.x);
            *a = from;
        }
        if let Some(first) = v.first() {
            at[0] = self.xs.partition_point(|&x| x < first.x);
        }
        self.refuses_between(v, &at[..v.len()], mult, best)
    }

    /// [`Moments::refuses`] for a line whose vertices `v` come with how many points lie left
    /// of each (`at`, non-decreasing): a flat before the first, a segment between neighbours,
    /// a flat after the last, each over the points between.
    pub(super) fn refuses_between(
        &self,
        v: &[DataPoint],
        at: &[usize],
        mult: f64,
        best: f64,
    ) -> bool {
        let n = self.xs.len();
        let (Some(first), Some(last)) = (v.first(), v.last()) else {
            return false;
        };
        if at.len() != v.len() || at.windows(2).any(|w| w[0] > w[1]) || at[at.len() - 1] > n {
            return false;
        }
        let (mut sse, mut mag) = (0.0, 0.0);
        let mut add = |part: Part| {
            let (s, m) = self.sse(&part);
            sse += s;
            mag += m;
        };
        add(self.flat(0, at[0], first.y));
        for (w, a) in v.windows(2).zip(at.windows(2)) {
            add(self.segment(a[0], a[1], &w[0], &w[1]));
        }
        add(self.flat(at[at.len() - 1], n, last.y));
        self.loses(sse, mag, mult, best)
    }

    /// Whether an error sum estimated at `sse`, rounding scaling with `mag`, is certainly
    /// `best` or more once multiplied by `mult`.
    pub(super) fn loses(&self, sse: f64, mag: f64, mult: f64, best: f64) -> bool {
        let low = sse - TOLERANCE * mag;
        // A NaN refuses nothing either.
        if low.is_nan() || low <= 0.0 {
            return false;
        }
        low.sqrt() / self.xs.len() as f64 * mult > best * (1.0 + TOLERANCE)
    }

    /// Points `from..to` valued `y`.
    fn flat(&self, from: usize, to: usize, y: f64) -> Part {
        Part {
            from,
            to,
            a: y - self.cy,
            b: 0.0,
        }
    }

    /// Points `from..to` valued on the line through `p` and `q` (flat when their values are
    /// equal, as `DataLines::eval` takes them).
    fn segment(&self, from: usize, to: usize, p: &DataPoint, q: &DataPoint) -> Part {
        if p.y == q.y {
            return self.flat(from, to, p.y);
        }
        let b = (q.y - p.y) / (q.x - p.x);
        Part {
            from,
            to,
            a: p.y - self.cy + b * (self.cx - p.x),
            b,
        }
    }

    /// Σ (w − a − b·u)² over the part, and the magnitude its rounding scales with.
    fn sse(&self, p: &Part) -> (f64, f64) {
        let (hi, lo) = (&self.pre[p.to], &self.pre[p.from]);
        let d: [f64; 5] = std::array::from_fn(|i| hi[i] - lo[i]);
        let [su, sw, suu, suw, sww] = d;
        let cnt = (p.to - p.from) as f64;
        let (a, b) = (p.a, p.b);
        let sse = sww - 2.0 * a * sw - 2.0 * b * suw + a * a * cnt + 2.0 * a * b * su + b * b * suu;
        let [au, aw, auu, auw, aww] = self.abs;
        let n = self.xs.len() as f64;
        let mag = aww
            + 2.0 * (a * aw).abs()
            + 2.0 * (b * auw).abs()
            + a * a * n
            + 2.0 * (a * b * au).abs()
            + b * b * auu;
        (sse, mag)
    }
}
