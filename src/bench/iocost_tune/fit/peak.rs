//! Single-peak candidates: the split quadruples a fit tries, in upstream's order, and the
//! vertices each gives; groups of quadruples whose floor (see [`super::floors`]) can't beat
//! the best line so far are skipped whole.

use super::bound::Moments;
use super::floors::Floors;
use super::{linear_regression, slope_through, Fit, ERROR_MULTIPLIER, MIN_DIV_DIST, MIN_SEG_DIST};
use crate::bench::iocost_tune::model::DataPoint;

/// A single-peak candidate's vertices, left to right, each with how many points lie left of
/// it: the points between two vertices are the ones their segment values (a point on a vertex
/// has the vertex's value on either side, the lines being continuous).
#[derive(Default)]
pub(super) struct Vertices {
    pts: [DataPoint; 6],
    pub(super) at: [usize; 6],
    pub(super) len: usize,
}

impl Vertices {
    fn push(&mut self, p: DataPoint, at: usize) {
        self.pts[self.len] = p;
        self.at[self.len] = at;
        self.len += 1;
    }

    pub(super) fn points(&self) -> &[DataPoint] {
        &self.pts[..self.len]
    }
}

impl Fit<'_> {
    /// A floor under the error of every single-peak candidate whose splits start with `idx`
    /// (one to four of them), as what [`Moments::loses`] takes: Σ residual², the magnitude its
    /// rounding scales with, the least error multiplier. Parts the splits so far pin down are
    /// priced as the line they will be (a flat at its points' mean, a slope from a known
    /// vertex, a segment between two); the rest by the floors of any constant or line.
    pub(super) fn group_floor(&self, m: &Moments, f: &Floors, idx: &[usize]) -> (f64, f64, f64) {
        let n = self.data.len();
        // The left flat's vertex, when there is a left flat and a slope after it.
        let rise_from = |ll: usize, l: usize| {
            (ll > 0 && l > ll).then(|| DataPoint::new(self.div(ll), self.height(0, ll)))
        };
        match *idx {
            [ll, l] => {
                if let Some(v1) = rise_from(ll, l) {
                    let sse = f.flat(0, ll) + m.hinged(ll, l, &v1) + f.top_onward(l);
                    return (sse, 0.0, 1.0);
                }
            }
            [ll, l, r] if l < r => {
                let v2 = DataPoint::new(self.div(l), self.height(l, r));
                let (rise, mag) = match rise_from(ll, l) {
                    Some(v1) => m.segment_sse(ll, l, &v1, &v2),
                    None if ll == 0 => (m.hinged(0, l, &v2), 0.0),
                    None => (0.0, 0.0),
                };
                let sse = f.flat(0, ll) + rise + f.flat(l, r) + f.after_top(r);
                return (sse, mag, 1.0);
            }
            // All but two crossing regressions, whose vertices leave their splits.
            [ll, l, r, rr] if !(ll == 0 && l == r && rr == n) => {
                let top = (l < r).then(|| self.height(l, r));
                let left = rise_from(ll, l);
                let right =
                    (r < rr && rr < n).then(|| DataPoint::new(self.div(rr), self.height(rr, n)));
                let at = |i: usize| top.map(|h| DataPoint::new(self.div(i), h));
                let (rise, rise_mag) = self.slope_floor(m, f, (ll, l), left, at(l));
                let (fall, fall_mag) = self.slope_floor(m, f, (r, rr), at(r), right);
                let sse = f.flat(0, ll) + rise + f.flat(l, r) + fall + f.flat(rr, n);
                // With every part there, the line has the four split vertices and one at
                // the left end at least (the right end's may coincide with the fourth).
                let every = 0 < ll && ll < l && l < r && r < rr && rr < n;
                let mult = if every { ERROR_MULTIPLIER.powi(4) } else { 1.0 };
                return (sse, rise_mag + fall_mag, mult);
            }
            _ => {}
        }
        (f.of(idx), 0.0, 1.0)
    }

    /// A floor under the Σ residual² of points `a..b` valued by a slope, from what is known of
    /// its ends: the segment between two known vertices (estimated, with its magnitude), the
    /// best line through one, or the best line.
    fn slope_floor(
        &self,
        m: &Moments,
        f: &Floors,
        (a, b): (usize, usize),
        from: Option<DataPoint>,
        to: Option<DataPoint>,
    ) -> (f64, f64) {
        if b <= a {
            return (0.0, 0.0);
        }
        match (from, to) {
            (Some(p), Some(q)) => m.segment_sse(a, b, &p, &q),
            (Some(p), None) | (None, Some(p)) => (m.hinged(a, b, &p), 0.0),
            (None, None) => (f.line(a, b), 0.0),
        }
    }

    /// Visits the split quadruples a single-peak fit tries, in upstream's order, but for the
    /// groups `skip` refuses: it is asked about every prefix of one to four splits (after the
    /// spacing rules have seen it, so that what is visited doesn't depend on what is skipped).
    pub(super) fn single_peak_splits(
        &self,
        (start, end): (f64, f64),
        skip: impl Fn(&[usize]) -> bool,
        mut visit: impl FnMut([usize; 4]),
    ) {
        let n = self.data.len();
        let mut last_ll = f64::MIN;
        for llidx in 0..=n {
            let lldiv = self.div(llidx);
            if llidx > 0 && (lldiv < last_ll + MIN_DIV_DIST || lldiv < start + MIN_SEG_DIST) {
                continue;
            }
            last_ll = lldiv;
            if skip(&[llidx]) {
                continue;
            }
            let mut last_l = f64::MIN;
            for lidx in llidx..=n {
                let ldiv = self.div(lidx);
                if lidx > llidx && (ldiv < last_l + MIN_DIV_DIST || ldiv - lldiv < MIN_SEG_DIST) {
                    continue;
                }
                last_l = ldiv;
                if skip(&[llidx, lidx]) {
                    continue;
                }
                let mut last_r = f64::MIN;
                for ridx in lidx..=n {
                    let rdiv = self.div(ridx);
                    if ridx > lidx && (rdiv < last_r + MIN_DIV_DIST || rdiv - ldiv < MIN_SEG_DIST) {
                        continue;
                    }
                    last_r = rdiv;
                    if skip(&[llidx, lidx, ridx]) {
                        continue;
                    }
                    let mut last_rr = f64::MIN;
                    for rridx in ridx..=n {
                        let rrdiv = self.div(rridx);
                        if rridx > ridx
                            && (rrdiv - rdiv < MIN_SEG_DIST
                                || (rridx + 1 < n
                                    && (rrdiv < last_rr + MIN_DIV_DIST
                                        || rrdiv > end - MIN_SEG_DIST)))
                        {
                            continue;
                        }
                        last_rr = rrdiv;
                        let idx = [llidx, lidx, ridx, rridx];
                        if !skip(&idx) {
                            visit(idx);
                        }
                    }
                }
            }
        }
    }

    /// Flat (`..llidx`), slope (`llidx..lidx`), flat top (`lidx..ridx`), slope
    /// (`ridx..rridx`), flat (`rridx..`); any part may be empty. Flats are means; a slope next
    /// to a flat hinges on it; two slopes alone are two regressions meeting where they cross.
    /// The vertices come with the points each sits right of (see [`Vertices`]).
    pub(super) fn peak_vertices(&self, idx: [usize; 4]) -> Option<Vertices> {
        let n = self.data.len();
        let mut pts: [Option<DataPoint>; 4] = [None; 4];
        // Every vertex sits at its split unless the two-regression case below moves it.
        let mut at = idx;
        // A split shared by several indices sets all of them.
        let set = |i: usize, y: f64, pts: &mut [Option<DataPoint>; 4]| {
            for j in 0..4 {
                if idx[i] == idx[j] {
                    pts[j] = Some(DataPoint::new(self.div(idx[i]), y));
                }
            }
        };
        let [llidx, lidx, ridx, rridx] = idx;
        if llidx > 0 {
            set(0, self.height(0, llidx), &mut pts);
        }
        if rridx < n {
            set(3, self.height(rridx, n), &mut pts);
        }
        if lidx < ridx {
            let h = self.height(lidx, ridx);
            set(1, h, &mut pts);
            set(2, h, &mut pts);
        }
        // Upstream slices the data by the positions of the two hinges in this array (0..1,
        // 2..3), not by their split indices; kept, as the fitted lines depend on it.
        let anchor =
            |li: usize, ri: usize, pts: &mut [Option<DataPoint>; 4]| match (pts[li], pts[ri]) {
                (Some(l), None) => {
                    let slope = slope_through(&self.data[li..ri], &l);
                    set(ri, l.y + slope * (self.div(ri) - l.x), pts);
                }
                (None, Some(r)) => {
                    let slope = slope_through(&self.data[li..ri], &r);
                    set(li, r.y - slope * (r.x - self.div(li)), pts);
                }
                _ => {}
            };
        anchor(0, 1, &mut pts);
        anchor(2, 3, &mut pts);
        anchor(0, 1, &mut pts);
        match pts.iter().filter(|p| p.is_some()).count() {
            0 => {
                if llidx != 0 || lidx != ridx || rridx != n {
                    return None;
                }
                if lidx == 0 || lidx == n {
                    let dl = self.fit_line()?;
                    let (a, b) = (dl.points[0], dl.points[1]);
                    pts = [Some(a), Some(b), Some(b), Some(b)];
                    at = [0, n, n, n];
                } else {
                    let (a_slope, a_intcp) = linear_regression(&self.data[..lidx])?;
                    let (b_slope, b_intcp) = linear_regression(&self.data[lidx..])?;
                    if a_slope == b_slope {
                        return None;
                    }
                    let ix = (b_intcp - a_intcp) / (a_slope - b_slope);
                    let iy = (a_slope * b_intcp - b_slope * a_intcp) / (a_slope - b_slope);
                    if ix < self.data[0].x || ix > self.data[n - 1].x {
                        return None;
                    }
                    let (llx, rrx) = (self.div(llidx), self.div(rridx));
                    let cross = self.data.partition_point(|p| p.x <= ix);
                    at = [llidx, cross, cross, rridx];
                    pts = [
                        Some(DataPoint::new(llx, a_slope * llx + a_intcp)),
                        Some(DataPoint::new(ix, iy)),
                        Some(DataPoint::new(ix, iy)),
                        Some(DataPoint::new(rrx, b_slope * rrx + b_intcp)),
                    ];
                }
            }
            4 => {}
            _ => return None,
        }
        let pts = pts.map(|p| p.unwrap_or_default());
        let mut out = Vertices::default();
        if pts[0].x != self.div(0) {
            out.push(DataPoint::new(self.div(0), pts[0].y), 0);
        }
        out.push(pts[0], at[0]);
        for (p, at) in pts[1..].iter().zip(&at[1..]) {
            if out.points().last().is_some_and(|l| l.x != p.x) {
                out.push(*p, *at);
            }
        }
        if pts[3].x != self.div(n) {
            out.push(DataPoint::new(self.div(n), pts[3].y), n);
        }
        Some(out)
    }
}
