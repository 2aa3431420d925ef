//! Fitting a series with a piecewise-linear line, as upstream does, so a re-solve of a stored
//! result gives the same lines to the last bit: every candidate shape is scored by its error
//! (√Σ residual² / n) times 1.025 per segment beyond the first (fewer segments win ties), and
//! the lowest wins. Candidates, by the series' [`FitShape`]:
//!
//! * a flat line at the mean (always), a linear regression (more than three points);
//! * one flat part and one slope, split between two points (`fit_slope_with_left/right`);
//! * two flat parts joined by a slope (`fit_slope_with_left_and_right`);
//! * for a single-peak series (more than three points): up to two flats and two slopes, each
//!   part optional (`peak_vertices`).
//!
//! Splits sit halfway between neighbouring points, at least 0.25 apart from the previous split
//! tried and leaving every part at least 10 vrate points wide. A line that dips to 0 or below,
//! or goes against the shape (`Inc`, `Dec`), is not a candidate. Upstream's single-peak shape
//! check compares the vertices as whole points, left to right, so it never refuses one; kept.

use super::model::{DataLines, DataPoint, DataSeries};
use super::sel::FitShape;
use statrs::distribution::{ContinuousCDF, Normal};

mod bound;
mod floors;
mod peak;

/// Each extra segment multiplies a candidate's error by this: simpler lines win close calls.
const ERROR_MULTIPLIER: f64 = 1.025;
/// Splits closer than this to the previous one tried are skipped.
const MIN_DIV_DIST: f64 = 0.25;
/// Every part of a line spans at least this much vrate.
const MIN_SEG_DIST: f64 = 10.0;

/// A series with more points than this sums its parts per candidate.
const MAX_SUMS_POINTS: usize = 1500;

/// Why a line can't be built from its vertices.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine(pub String);

impl DataLines {
    /// A line through `input`, whose x must strictly increase; its range spans them.
    pub fn new(input: &[DataPoint]) -> Result<DataLines, BadLine> {
        if let Some(w) = input
            .windows(2)
            .find(|w| w[0].x >= w[1].x || w[0].x.is_nan())
        {
            return Err(BadLine(format!(
                "vertices out of order ({}, {}) before ({}, {})",
                w[0].x, w[0].y, w[1].x, w[1].y
            )));
        }
        let range = match (input.first(), input.last()) {
            (Some(a), Some(b)) => (a.x, b.x),
            _ => (0.0, 0.0),
        };
        Ok(DataLines {
            points: input.to_vec(),
            range,
        })
    }

    /// The same line over `range`, which may reach beyond it: the end vertices are replaced by
    /// the line's values at the new ends.
    pub fn with_range(&self, range: (f64, f64)) -> Result<DataLines, BadLine> {
        if range.0 > range.1 || range.0.is_nan() || range.1.is_nan() {
            return Err(BadLine(format!("invalid range [{}, {}]", range.0, range.1)));
        }
        match self.points.len() {
            0 => return DataLines::new(&[]),
            1 => {
                let y = self.points[0].y;
                return if range.0 == range.1 {
                    DataLines::new(&[DataPoint::new(range.0, y)])
                } else {
                    DataLines::new(&[DataPoint::new(range.0, y), DataPoint::new(range.1, y)])
                };
            }
            _ => {}
        }
        let (start_y, end_y) = (
            self.eval_extrapolate(range.0),
            self.eval_extrapolate(range.1),
        );
        if range.0 == range.1 {
            // Upstream's trimming from the back takes the new start vertex too.
            return DataLines::new(&[DataPoint::new(range.1, end_y)]);
        }
        let inner = &self.points[1..self.points.len() - 1];
        let mut pts = vec![DataPoint::new(range.0, start_y)];
        pts.extend(
            inner
                .iter()
                .filter(|p| p.x > range.0 && p.x < range.1)
                .copied(),
        );
        pts.push(DataPoint::new(range.1, end_y));
        DataLines::new(&pts)
    }

    /// [`with_range`](Self::with_range) limited to the line's own range; `None` if they don't
    /// overlap.
    pub fn clamped(&self, range: (f64, f64)) -> Result<Option<DataLines>, BadLine> {
        let lo = range.0.max(self.range.0);
        let hi = range.1.min(self.range.1);
        if lo <= hi {
            self.with_range((lo, hi)).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// `(slope, intercept)` of the least-squares line, or `None` when it is undefined (all x
/// equal). Means first, then the centred sums, as the `linreg` crate upstream uses computes
/// them.
pub fn linear_regression(pts: &[DataPoint]) -> Option<(f64, f64)> {
    if pts.is_empty() {
        return None;
    }
    let n = pts.len() as f64;
    let (sx, sy) = pts
        .iter()
        .fold((0.0, 0.0), |(sx, sy), p| (sx + p.x, sy + p.y));
    let (mx, my) = (sx / n, sy / n);
    let (mut xx, mut xy) = (0.0, 0.0);
    for p in pts {
        xx += (p.x - mx) * (p.x - mx);
        xy += (p.x - mx) * (p.y - my);
    }
    let slope = xy / xx;
    if slope.is_nan() {
        return None;
    }
    Some((slope, my - slope * mx))
}

/// Mean of the values (NaN for none), summed left to right.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |a, x| a + x) / v.len() as f64
}

/// Sample standard deviation (n − 1), around the mean.
pub fn stdev(v: &[f64]) -> f64 {
    let m = mean(v);
    let sum = v.iter().map(|x| (x - m) * (x - m)).fold(0.0, |a, x| a + x);
    (sum / (v.len() as f64 - 1.0)).sqrt()
}

/// The level that minimises the squared distance to the points: their mean.
fn height(pts: &[DataPoint]) -> f64 {
    pts.iter().fold(0.0, |a, p| a + p.y) / pts.len() as f64
}

/// The slope through `hinge` that minimises the squared distance to the points.
fn slope_through(pts: &[DataPoint], hinge: &DataPoint) -> f64 {
    let top = pts
        .iter()
        .fold(0.0, |a, p| a + (p.x - hinge.x) * (p.y - hinge.y));
    let bot = pts.iter().fold(0.0, |a, p| a + (p.x - hinge.x).powi(2));
    top / bot
}

/// √Σ residual² / n over `pts` (0 for none).
pub fn line_error<'a>(pts: impl Iterator<Item = &'a DataPoint>, lines: &DataLines) -> f64 {
    let (sum, n) = pts.fold((0.0, 0u32), |(s, n), p| {
        (s + (p.y - lines.eval(p.x)).powi(2), n + 1)
    });
    if n > 0 {
        sum.sqrt() / f64::from(n)
    } else {
        0.0
    }
}

/// Whether `lines`' error over `pts` times `mult` is below `best`, and the error if so, to the
/// bit as [`line_error`] computes it; given up on once a partial sum reaches `best` (exact:
/// squares are never negative and rounding is monotone, so no partial sum exceeds the whole).
fn error_below(pts: &[DataPoint], lines: &DataLines, mult: f64, best: f64) -> Option<f64> {
    let n = pts.len() as f64;
    let err = |sum: f64| sum.sqrt() / n * mult;
    let mut sum = 0.0;
    for chunk in pts.chunks(8) {
        for p in chunk {
            sum += (p.y - lines.eval(p.x)).powi(2);
        }
        if err(sum) >= best {
            return None;
        }
    }
    let e = err(sum);
    (e < best).then_some(e)
}

/// One fit of a series' points (at least one, sorted): the candidates and what scores them.
struct Fit<'a> {
    data: &'a [DataPoint],
    /// `sums[a * (n + 1) + b]`: the y of points `a..b` summed left to right, so that a part's
    /// mean is [`height`]'s to the bit without a pass over the part per candidate (empty for
    /// more than [`MAX_SUMS_POINTS`] points, whose table would be too large).
    sums: Vec<f64>,
    /// Refuses most candidates before their exact error is summed (see [`bound`]).
    bound: Option<bound::Moments>,
}

impl<'a> Fit<'a> {
    fn new(data: &'a [DataPoint]) -> Fit<'a> {
        let n = data.len();
        let table = n <= MAX_SUMS_POINTS;
        let mut sums = vec![0.0; if table { (n + 1) * (n + 1) } else { 0 }];
        for a in (0..n).filter(|_| table) {
            let mut acc = 0.0;
            for b in a..n {
                acc += data[b].y;
                sums[a * (n + 1) + b + 1] = acc;
            }
        }
        Fit {
            data,
            sums,
            bound: bound::Moments::new(data),
        }
    }

    /// The mean of points `a..b` (non-empty), as [`height`] of them.
    fn height(&self, a: usize, b: usize) -> f64 {
        match self.sums.get(a * (self.data.len() + 1) + b) {
            Some(sum) => sum / (b - a) as f64,
            None => height(&self.data[a..b]),
        }
    }
}

/// Sorts points by x, then y (NaN last, never a panic).
pub fn sort_points(pts: &mut [DataPoint]) {
    pts.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.y.total_cmp(&b.y)));
}

/// Whether a candidate's vertices follow the shape (a NaN vertex breaks no order, as
/// upstream's comparisons go).
fn follows(shape: FitShape, lines: &DataLines) -> bool {
    let mut last = match shape {
        FitShape::Any | FitShape::SinglePeak => return true,
        FitShape::Inc => f64::MIN,
        FitShape::Dec => f64::MAX,
    };
    for p in &lines.points {
        let against = match shape {
            FitShape::Inc => p.y < last,
            _ => p.y > last,
        };
        if against {
            return false;
        }
        last = p.y;
    }
    true
}

impl DataSeries {
    /// Points and rejected points back together, sorted, nothing fitted.
    pub fn reset(&mut self) {
        let mut data = std::mem::take(&mut self.data);
        data.append(&mut self.outliers);
        sort_points(&mut data);
        *self = DataSeries {
            data,
            ..Default::default()
        };
    }

    /// Fits `lines` to `data` (see the module doc).
    pub fn fit_lines(&mut self, shape: FitShape) {
        if self.data.is_empty() {
            return;
        }
        self.lines = Fit::new(&self.data).best(shape);
    }
}

impl Fit<'_> {
    /// The lowest-error candidate for `shape` (at least two points).
    fn best(&self, shape: FitShape) -> DataLines {
        let (start, end) = self.x_range();
        let ys: Vec<f64> = self.data.iter().map(|p| p.y).collect();
        let m = mean(&ys);
        if self.data.len() == 1 {
            return DataLines::new(&[DataPoint::new(start, m)]).unwrap_or_default();
        }
        let flat = DataLines::new(&[DataPoint::new(start, m), DataPoint::new(end, m)]);
        let mut best = flat.unwrap_or_default();
        let best_err = std::cell::Cell::new(line_error(self.data.iter(), &best));
        let mut pick = |cand: Option<DataLines>| {
            let Some(lines) = cand else { return };
            if lines.min_max().0 <= 0.0 || !follows(shape, &lines) {
                return;
            }
            let segs = lines.points.len() as i32 - 1;
            let mult = ERROR_MULTIPLIER.powi(segs);
            if let Some(b) = &self.bound {
                if b.refuses(&lines.points, mult, best_err.get()) {
                    return;
                }
            }
            if let Some(err) = error_below(self.data, &lines, mult, best_err.get()) {
                best = lines;
                best_err.set(err);
            }
        };
        let n = self.data.len();
        if shape == FitShape::SinglePeak && n > 3 {
            // The floors' tables are as large as the sums table: only where that one is kept.
            let floors = (self.bound.as_ref())
                .filter(|_| !self.sums.is_empty())
                .map(floors::Floors::new);
            let skip = |idx: &[usize]| match (&self.bound, &floors) {
                (Some(m), Some(f)) => {
                    let (sse, mag, mult) = self.group_floor(m, f, idx);
                    m.loses(sse, mag, mult, best_err.get())
                }
                _ => false,
            };
            self.single_peak_splits((start, end), skip, |idx| {
                let Some(v) = self.peak_vertices(idx) else {
                    return;
                };
                // Refused from the vertices alone: most are, and no line is built for them.
                let mult = ERROR_MULTIPLIER.powi(v.len as i32 - 1);
                if let Some(b) = &self.bound {
                    if b.refuses_between(v.points(), &v.at[..v.len], mult, best_err.get()) {
                        return;
                    }
                }
                pick(DataLines::new(v.points()).ok());
            });
        } else {
            if n > 3 {
                pick(self.fit_line());
            }
            let mut last = f64::MIN;
            for i in 0..n {
                let div = self.div(i);
                if div < last + MIN_DIV_DIST
                    || div < start + MIN_SEG_DIST
                    || div > end - MIN_SEG_DIST
                {
                    continue;
                }
                last = div;
                pick(self.fit_slope_with_left(i));
                pick(self.fit_slope_with_right(i));
            }
            let mut last_l = f64::MIN;
            for lidx in 0..n {
                let ldiv = self.div(lidx);
                if ldiv < last_l + MIN_DIV_DIST || ldiv < start + MIN_SEG_DIST {
                    continue;
                }
                last_l = ldiv;
                let mut last_r = f64::MIN;
                for ridx in lidx..n {
                    let rdiv = self.div(ridx);
                    if rdiv < last_r + MIN_DIV_DIST
                        || rdiv - ldiv < MIN_SEG_DIST
                        || rdiv > end - MIN_SEG_DIST
                    {
                        continue;
                    }
                    last_r = rdiv;
                    pick(self.fit_slope_with_left_and_right(lidx, ridx));
                }
            }
        }
        best
    }

    fn x_range(&self) -> (f64, f64) {
        match (self.data.first(), self.data.last()) {
            (Some(a), Some(b)) => (a.x, b.x),
            _ => (0.0, 0.0),
        }
    }

    /// Where a split before point `idx` falls: halfway to the previous point; the first or
    /// last point's own x at the ends.
    fn div(&self, idx: usize) -> f64 {
        if idx > 0 && idx < self.data.len() {
            (self.data[idx - 1].x + self.data[idx].x) / 2.0
        } else {
            self.data[idx.min(self.data.len() - 1)].x
        }
    }

    fn fit_line(&self) -> Option<DataLines> {
        let (slope, intcp) = linear_regression(self.data)?;
        let r = self.x_range();
        DataLines::new(&[
            DataPoint::new(r.0, slope * r.0 + intcp),
            DataPoint::new(r.1, slope * r.1 + intcp),
        ])
        .ok()
    }

    fn fit_slope_with_left(&self, lidx: usize) -> Option<DataLines> {
        let left = DataPoint::new(self.div(lidx), self.height(0, lidx));
        let slope = slope_through(&self.data[lidx..], &left);
        if slope == 0.0 {
            return None;
        }
        let r = self.x_range();
        DataLines::new(&[
            DataPoint::new(r.0, left.y),
            left,
            DataPoint::new(r.1, left.y + slope * (r.1 - left.x)),
        ])
        .ok()
    }

    fn fit_slope_with_right(&self, ridx: usize) -> Option<DataLines> {
        let right = DataPoint::new(self.div(ridx), self.height(ridx, self.data.len()));
        let slope = slope_through(&self.data[..ridx], &right);
        if slope == 0.0 {
            return None;
        }
        let r = self.x_range();
        DataLines::new(&[
            DataPoint::new(r.0, right.y - slope * (right.x - r.0)),
            right,
            DataPoint::new(r.1, right.y),
        ])
        .ok()
    }

    fn fit_slope_with_left_and_right(&self, lidx: usize, ridx: usize) -> Option<DataLines> {
        let left = DataPoint::new(self.div(lidx), self.height(0, lidx));
        let right = DataPoint::new(self.div(ridx), self.height(ridx, self.data.len()));
        let r = self.x_range();
        DataLines::new(&[
            DataPoint::new(r.0, left.y),
            left,
            right,
            DataPoint::new(r.1, right.y),
        ])
        .ok()
    }
}

impl DataSeries {
    /// Moves the points beyond vrate `thr` to the rejected ones.
    pub fn filter_beyond(&mut self, thr: f64) {
        let (keep, beyond): (Vec<DataPoint>, Vec<DataPoint>) = std::mem::take(&mut self.data)
            .into_iter()
            .partition(|p| p.x <= thr);
        self.data = keep;
        self.outliers.extend(beyond);
        sort_points(&mut self.outliers);
    }

    /// Chauvenet's criterion on the squared residuals: a point whose residual is so far above
    /// the others' that fewer than half a point of this many would be expected there is
    /// rejected.
    pub fn filter_outliers(&mut self) {
        if self.data.len() < 2 {
            return;
        }
        let data = std::mem::take(&mut self.data);
        let errors: Vec<f64> = data
            .iter()
            .map(|p| (p.y - self.lines.eval(p.x)).powi(2))
            .collect();
        let n = data.len() as f64;
        match Normal::new(mean(&errors), stdev(&errors)) {
            Ok(dist) => {
                for (p, e) in data.into_iter().zip(&errors) {
                    if (1.0 - dist.cdf(*e)) * n >= 0.5 {
                        self.data.push(p);
                    } else {
                        self.outliers.push(p);
                    }
                }
                sort_points(&mut self.outliers);
            }
            Err(_) => self.data = data,
        }
    }
}

#[cfg(test)]
mod tests;
