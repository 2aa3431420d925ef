//! Solving, as upstream: each series is refitted from its points (isolation first, since the
//! aMOF series drop the points beyond the vrate where isolation falls under its threshold,
//! and latency series drop Chauvenet outliers and are fitted again), then each rule's target
//! picks a vrate on the fitted lines, and the solution is the base model scaled to that vrate
//! with its QoS; last the remarks on what the data can't support.

use super::model::{DataLines, DataSeries, IocostTuneResult, QosSolution, TimePctsMap, LAT_PCTS};
use super::rules::{QosRule, QosTarget};
use super::sel::DataSel;
use crate::system::iocost::{IoCostModel, IoCostQos};
use crate::units::{format_duration, format_pct};
use std::collections::BTreeMap;

/// The vrate range (percent of the model) solutions are searched in: `scale-min`/`scale-max`.
pub const DFL_SCALE: (f64, f64) = (1.0, 100.0);

pub(super) type Data = BTreeMap<DataSel, DataSeries>;

fn rlat(p: &str, t: &str) -> DataSel {
    DataSel::RLat(p.into(), t.into())
}

fn wlat(p: &str, t: &str) -> DataSel {
    DataSel::WLat(p.into(), t.into())
}

/// A vertex's x, moved by `margin` (a fraction) toward the flat side when one side of it is
/// flat and the other a slope: the tip of a steep slope is a risky place to sit.
fn x_with_margin(dl: &DataLines, idx: usize, margin: f64) -> f64 {
    let p = &dl.points;
    let (mut x, y) = (p[idx].x, p[idx].y);
    if margin != 0.0 && idx > 0 && idx + 1 < p.len() {
        if p[idx - 1].y != y && p[idx + 1].y == y {
            x = (x * (1.0 + margin)).min(dl.range.1);
        } else if p[idx - 1].y == y && p[idx + 1].y != y {
            x = (x * (1.0 - margin)).max(dl.range.0);
        }
    }
    x
}

fn first_at(dl: &DataLines, y: f64) -> Option<usize> {
    dl.points.iter().position(|p| p.y == y)
}

fn last_at(dl: &DataLines, y: f64) -> Option<usize> {
    dl.points.iter().rposition(|p| p.y == y)
}

/// Where on a series' line (within `range`) to read a vrate: at its highest or lowest value,
/// the leftmost or rightmost such vertex. A flat line gives the range's right end (or, for
/// the leftmost maximum, `flat` if given, else the left end).
#[derive(Clone, Copy)]
enum Pick {
    MinXAtMax(Option<f64>),
    MaxXAtMin,
    MinXAtMin,
    MaxXAtMax,
}

fn pick(ds: &DataSeries, range: (f64, f64), margin: f64, how: Pick) -> Option<f64> {
    let dl = ds.lines.clamped(range).ok()??;
    let (lo, hi) = dl.range;
    let (min, max) = dl.min_max();
    if min == max {
        return Some(match how {
            Pick::MinXAtMax(flat) => {
                let v = flat.unwrap_or(lo);
                // f64::clamp, without its panic on a NaN bound.
                if v < lo {
                    lo
                } else if v > hi {
                    hi
                } else {
                    v
                }
            }
            _ => hi,
        });
    }
    let idx = match how {
        Pick::MinXAtMax(_) => first_at(&dl, max)?,
        Pick::MaxXAtMin => last_at(&dl, min)?,
        Pick::MinXAtMin => first_at(&dl, min)?,
        Pick::MaxXAtMax => last_at(&dl, max)?,
    };
    Some(x_with_margin(&dl, idx, margin))
}

/// µs of a latency in seconds, as io.cost takes it.
fn usecs(secs: f64) -> u64 {
    (secs * 1_000_000.0).round() as u64
}

/// Solves one target: the QoS and the vrate it was found at. `Err` names a series the target
/// needs and the data lacks (the rule is then skipped, as upstream).
pub(super) fn solve_target(
    target: &QosTarget,
    data: &Data,
    scale: (f64, f64),
) -> Result<Option<(IoCostQos, f64)>, String> {
    let ds = |sel: &DataSel| {
        data.get(sel)
            .ok_or_else(|| format!("the {} series it needs isn't in the data", sel))
    };
    let mof = ds(&DataSel::Mof)?;
    // How far to keep off an inflection: proportional to MOF's slope times its relative
    // error, at most 10 % (upstream's empirical factor 800).
    let margin = || {
        let (Some(min_x), Some(max_x)) = (
            pick(mof, mof.lines.range, 0.0, Pick::MaxXAtMin),
            pick(mof, mof.lines.range, 0.0, Pick::MinXAtMax(None)),
        ) else {
            return 0.0;
        };
        if min_x == max_x {
            return 0.0;
        }
        let (min_y, max_y) = (mof.lines.eval(min_x), mof.lines.eval(max_x));
        let slope = (max_y - min_y) / (max_x - min_x);
        (slope * (mof.error / max_y) * 800.0).min(0.1)
    };
    let (r99, w99) = (
        &ds(&rlat("99", "mean"))?.lines,
        &ds(&wlat("99", "mean"))?.lines,
    );
    // A fixed vrate: no latency percentiles to modulate by, but the latencies still set
    // io.cost's period.
    let at_vrate = |v: f64| {
        (
            IoCostQos {
                min: v,
                max: v,
                rlat: usecs(r99.eval(v)),
                wlat: usecs(w99.eval(v)),
                ..Default::default()
            },
            v,
        )
    };
    let max_vrate = |sel: &DataSel| -> Result<Option<f64>, String> {
        Ok(ds(sel)?
            .lines
            .clamped(scale)
            .ok()
            .flatten()
            .map(|l| l.range.1))
    };
    Ok(match target {
        QosTarget::VrateRange(range, pcts) => Some(vrate_range(data, *range, pcts)?),
        QosTarget::MofMax | QosTarget::AmofMax => {
            let sel = if *target == QosTarget::MofMax {
                DataSel::Mof
            } else {
                DataSel::Amof
            };
            // A flat series: where latency impact is lowest instead.
            let flat = pick(ds(&DataSel::LatImp)?, scale, margin(), Pick::MaxXAtMin);
            pick(ds(&sel)?, scale, margin(), Pick::MinXAtMax(flat)).map(at_vrate)
        }
        QosTarget::AmofMaxVrate => max_vrate(&DataSel::Amof)?.map(at_vrate),
        QosTarget::IsolatedBandwidth => {
            let low = pick(ds(&DataSel::AmofDelta)?, scale, margin(), Pick::MaxXAtMin);
            match (low, max_vrate(&DataSel::Amof)?) {
                (Some(low), Some(high)) => {
                    pick(ds(&DataSel::Amof)?, scale, margin(), Pick::MaxXAtMax).map(|v| {
                        // f64::clamp panics if low > high; upstream's data never has that.
                        at_vrate(v.max(low).min(high))
                    })
                }
                _ => None,
            }
        }
        QosTarget::AmofDeltaMin => {
            pick(ds(&DataSel::AmofDelta)?, scale, margin(), Pick::MaxXAtMin).map(at_vrate)
        }
        QosTarget::LatRange(sel, rel) => lat_range(ds(sel)?, sel, *rel, scale),
    })
}

/// A vrate range: the latency targets are the percentiles' fitted latencies at its top.
fn vrate_range(
    data: &Data,
    (lo, hi): (f64, f64),
    (rp, wp): &(Option<String>, Option<String>),
) -> Result<(IoCostQos, f64), String> {
    let lat = |sel: Option<DataSel>| -> Result<(f64, u64), String> {
        let Some(sel) = sel else { return Ok((0.0, 0)) };
        let s = data
            .get(&sel)
            .ok_or_else(|| format!("the {} series it needs isn't in the data", sel))?;
        Ok((pct_of(&sel), usecs(s.lines.eval(hi))))
    };
    let (rpct, rl) = lat(rp.as_deref().map(|p| rlat(p, "mean")))?;
    let (wpct, wl) = lat(wp.as_deref().map(|p| wlat(p, "mean")))?;
    let q = IoCostQos {
        rpct,
        rlat: rl,
        wpct,
        wlat: wl,
        min: lo,
        max: hi,
        ..Default::default()
    };
    Ok((q, hi))
}

/// A latency series' percentile as a number.
fn pct_of(sel: &DataSel) -> f64 {
    match sel {
        DataSel::RLat(p, _) | DataSel::WLat(p, _) => p.parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// A share of a latency series' slope: the vrate range from `rel.0` to `rel.1` of the way
/// from the flat bottom to where it tops out (to the scale's top for 1), and the fitted
/// latency at its top as the target. `None` without a slope.
fn lat_range(
    s: &DataSeries,
    sel: &DataSel,
    (rel_lo, rel_hi): (f64, f64),
    scale: (f64, f64),
) -> Option<(IoCostQos, f64)> {
    let left = pick(s, scale, 0.0, Pick::MaxXAtMin)?;
    let right = pick(s, scale, 0.0, Pick::MinXAtMax(None))?;
    if left >= right {
        return None;
    }
    let d = right - left;
    let hi = if rel_hi < 1.0 {
        left + d * rel_hi
    } else {
        scale.1
    };
    let range = (left + d * rel_lo, hi);
    let target = usecs(s.lines.eval(range.1));
    let mut q = IoCostQos {
        min: range.0,
        max: range.1,
        ..Default::default()
    };
    if matches!(sel, DataSel::RLat(..)) {
        (q.rpct, q.rlat) = (pct_of(sel), target);
    } else {
        (q.wpct, q.wlat) = (pct_of(sel), target);
    }
    Some((q, range.1))
}

/// Upstream's model scaling: each parameter × factor, rounded.
fn scaled(m: &IoCostModel, f: f64) -> IoCostModel {
    let mul = |v: u64| (v as f64 * f).round() as u64;
    IoCostModel {
        ctrl: String::new(),
        model: String::new(),
        rbps: mul(m.rbps),
        rseqiops: mul(m.rseqiops),
        rrandiops: mul(m.rrandiops),
        wbps: mul(m.wbps),
        wseqiops: mul(m.wseqiops),
        wrandiops: mul(m.wrandiops),
    }
}

/// The kernel keeps two decimals; upstream rinses through text so values compare equal to
/// what it reads back.
fn two_decimals(v: f64) -> f64 {
    format!("{:.2}", v).parse().unwrap_or(v)
}

fn eval(data: &Data, sel: &DataSel, vrate: f64) -> f64 {
    data.get(sel).map_or(0.0, |s| s.lines.eval(vrate))
}

fn lat_table(read: bool, vrate: f64, data: &Data) -> TimePctsMap {
    let mut map = TimePctsMap::new();
    for (lat, time) in LAT_PCTS {
        let sel = if read {
            rlat(lat, time)
        } else {
            wlat(lat, time)
        };
        map.entry(lat.to_string())
            .or_default()
            .insert(time.to_string(), eval(data, &sel, vrate));
    }
    map
}

/// Refits one series. `isol` is the fitted isolation series, for the series filtered by it.
fn solve_series(sel: &DataSel, s: &mut DataSeries, isol: Option<&DataSeries>, isol_thr: f64) {
    let opts = sel.fit_opts();
    let mut fill_upto = None;
    if let (true, Some(ds)) = (opts.filter_by_isol, isol) {
        let r = ds.lines.range;
        if let (Some(lx), Some(rx)) = (
            pick(ds, r, 0.0, Pick::MaxXAtMax),
            pick(ds, r, 0.0, Pick::MinXAtMin),
        ) {
            let (ly, ry) = (ds.lines.eval(lx), ds.lines.eval(rx));
            let slope = if lx < rx { (ry - ly) / (rx - lx) } else { 0.0 };
            if slope != 0.0 && ry < isol_thr {
                // Where the isolation line crosses the threshold.
                let x = rx - (ry - isol_thr) / slope;
                let x = x.max(r.0).min(r.1);
                s.filter_beyond(x);
                fill_upto = Some(x);
            }
        }
    }
    s.fit_lines(opts.shape);
    if let Some(x) = fill_upto {
        s.lines = s.lines.with_range((s.lines.range.0, x)).unwrap_or_default();
    }
    if opts.filter_outliers {
        s.filter_outliers();
        let range = s.lines.range;
        s.fit_lines(opts.shape);
        s.lines = s.lines.with_range(range).unwrap_or_default();
    }
    // The error counts the rejected points too: how flaky the device is shows.
    s.error = super::fit::line_error(s.data.iter().chain(&s.outliers), &s.lines);
}

/// Remarks on one direction's latencies within the scale range.
fn lat_remarks(what: &str, series: [&DataSeries; 4], scale: (f64, f64)) -> Vec<String> {
    let lines: Vec<Option<DataLines>> = series
        .iter()
        .map(|s| s.lines.clamped(scale).ok().flatten())
        .collect();
    let [Some(m50), Some(m99), Some(p99), Some(p100)] =
        <[Option<DataLines>; 4]>::try_from(lines).unwrap_or([None, None, None, None])
    else {
        return vec![format!("Insufficient {} latencies data.", what)];
    };
    let mut out = Vec::new();
    let ((a, b), (c, d)) = (m50.min_max(), m99.min_max());
    if a == b && c == d {
        out.push(format!(
            "Mean {} latencies cannot be modulated with throttling.",
            what
        ));
    }
    let p99_min = p99.min_max().0;
    if p99_min >= 0.5 {
        out.push(format!(
            "Minimum p99 {} latencies spike above {} every 100s.",
            what,
            format_duration(p99_min)
        ));
    }
    let p100_min = p100.min_max().0;
    if p100_min >= 1.0 {
        out.push(format!(
            "Minimum {} tail latencies spike above {}.",
            what,
            format_duration(p100_min)
        ));
    }
    out
}

/// The remarks of a solved result. Upstream judges the write latencies by the read means
/// (its `wlat` remark takes `rlat-50-mean`/`rlat-99-mean`); kept, as it decides the text.
fn remarks(res: &IocostTuneResult, scale: (f64, f64)) -> Vec<String> {
    let mut out = Vec::new();
    let get = |s: DataSel| res.data.get(&s);
    let sides = [
        (
            "read",
            "rlat",
            [
                rlat("50", "mean"),
                rlat("99", "mean"),
                rlat("99", "99"),
                rlat("100", "100"),
            ],
        ),
        (
            "write",
            "wlat",
            [
                rlat("50", "mean"),
                rlat("99", "mean"),
                wlat("99", "99"),
                wlat("100", "100"),
            ],
        ),
    ];
    for (what, name, sels) in sides {
        let [a, b, c, d] = sels.map(get);
        match (a, b, c, d) {
            (Some(a), Some(b), Some(c), Some(d)) => {
                out.extend(lat_remarks(what, [a, b, c, d], scale))
            }
            _ => out.push(format!(
                "{}-99-99 and/or {}-100-100 unavailable.",
                name, name
            )),
        }
    }
    for (name, sol) in &res.solutions {
        let t: Option<QosTarget> = serde_json::from_value(sol.target.clone()).ok();
        if matches!(
            t,
            Some(QosTarget::AmofMaxVrate | QosTarget::AmofDeltaMin | QosTarget::IsolatedBandwidth)
        ) {
            let err = sol.adjusted_mem_offload_delta / sol.mem_offload_factor;
            if err >= 0.05 {
                out.push(format!(
                    "{}: Isolatable memory size is {}% < supportable, sizing may be difficult.",
                    name,
                    format_pct(err)
                ));
            }
        }
    }
    out
}

/// Refits every series from all its points (rejected ones back in), isolation first.
pub(super) fn refit(data: &mut Data, isol_thr: f64) {
    for s in data.values_mut() {
        s.reset();
    }
    let isol = data.remove(&DataSel::Isol).map(|mut s| {
        solve_series(&DataSel::Isol, &mut s, None, 0.0);
        s
    });
    for (sel, s) in data.iter_mut() {
        solve_series(sel, s, isol.as_ref(), isol_thr);
    }
    if let Some(s) = isol {
        data.insert(DataSel::Isol, s);
    }
}

/// Refits every series from its points and solves every rule (see the module doc). A rule
/// whose series are missing is skipped with a warning, as upstream.
pub fn solve(mut res: IocostTuneResult, rules: &[QosRule], scale: (f64, f64)) -> IocostTuneResult {
    refit(&mut res.data, res.isol_thr);
    res.solutions.clear();
    for rule in rules {
        let (mut qos, vrate) = match solve_target(&rule.target, &res.data, scale) {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                log::warn!("iocost-tune: can't solve rule {}: {}", rule.name, e);
                continue;
            }
        };
        let factor = vrate / 100.0;
        qos.min /= factor;
        qos.max /= factor;
        qos.rpct = two_decimals(qos.rpct);
        qos.wpct = two_decimals(qos.wpct);
        qos.min = two_decimals(qos.min);
        qos.max = two_decimals(qos.max);
        let d = &res.data;
        let sol = QosSolution {
            target: serde_json::to_value(&rule.target).unwrap_or_default(),
            model: scaled(&res.base_model, factor),
            qos,
            scale_factor: factor,
            mem_profile: res.mem_profile,
            mem_offload_factor: eval(d, &DataSel::Mof, vrate),
            adjusted_mem_offload_factor: eval(d, &DataSel::Amof, vrate),
            adjusted_mem_offload_delta: eval(d, &DataSel::AmofDelta, vrate),
            isol: eval(d, &DataSel::Isol, vrate),
            rlat: lat_table(true, vrate, d),
            wlat: lat_table(false, vrate, d),
        };
        res.solutions.insert(rule.name.clone(), sol);
    }
    res.remarks = remarks(&res, scale);
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::iocost_tune::model::DataPoint;

    fn line(pts: &[(f64, f64)]) -> DataSeries {
        let pts: Vec<DataPoint> = pts.iter().map(|&(x, y)| DataPoint::new(x, y)).collect();
        DataSeries {
            lines: DataLines::new(&pts).unwrap(),
            ..Default::default()
        }
    }

    /// Hand-made fitted lines: MOF rises to 1.8 at 50; aMOF peaks 30–50 and ends at 80;
    /// aMOF-delta is lowest up to 60; read p99 rises from 1 ms at 40 to 3 ms at 60.
    fn data() -> Data {
        let mut d = Data::new();
        d.insert(
            DataSel::Mof,
            line(&[(10.0, 1.2), (50.0, 1.8), (100.0, 1.8)]),
        );
        d.insert(
            DataSel::Amof,
            line(&[(10.0, 1.0), (30.0, 1.5), (50.0, 1.5), (80.0, 1.2)]),
        );
        d.insert(
            DataSel::AmofDelta,
            line(&[(10.0, 0.1), (60.0, 0.1), (100.0, 0.5)]),
        );
        d.insert(DataSel::LatImp, line(&[(10.0, 0.2), (100.0, 0.2)]));
        d.insert(
            rlat("99", "mean"),
            line(&[(10.0, 0.001), (40.0, 0.001), (60.0, 0.003), (100.0, 0.003)]),
        );
        d.insert(wlat("99", "mean"), line(&[(10.0, 0.002), (100.0, 0.002)]));
        d
    }

    fn vrate(t: QosTarget) -> f64 {
        solve_target(&t, &data(), DFL_SCALE).unwrap().unwrap().1
    }

    #[test]
    fn each_rule_by_hand() {
        // The leftmost vrate at MOF's maximum (no margin: MOF's error is 0).
        assert_eq!(vrate(QosTarget::MofMax), 50.0);
        // aMOF's maximum starts at 30.
        assert_eq!(vrate(QosTarget::AmofMax), 30.0);
        // The last vrate that has an aMOF.
        assert_eq!(vrate(QosTarget::AmofMaxVrate), 80.0);
        // The rightmost vrate at aMOF-delta's minimum.
        assert_eq!(vrate(QosTarget::AmofDeltaMin), 60.0);
        // aMOF's rightmost maximum (50), held between isolation (60) and bandwidth (80).
        assert_eq!(vrate(QosTarget::IsolatedBandwidth), 60.0);
        let (q, v) = solve_target(&QosTarget::IsolatedBandwidth, &data(), DFL_SCALE)
            .unwrap()
            .unwrap();
        assert_eq!(
            (q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max),
            (0.0, 3000, 0.0, 2000, v, v)
        );
        // The default vrate range: latency targets read at its top, 100.
        let (q, v) = solve_target(&QosTarget::default(), &data(), DFL_SCALE)
            .unwrap()
            .unwrap();
        assert_eq!(
            (q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max, v),
            (99.0, 3000, 99.0, 2000, 75.0, 100.0, 100.0)
        );
        // The read p99 slope runs from 40 to 60: q1 is its last quarter up to the scale's
        // top, q2 the quarter before, with the latency at the range's top.
        let q1 = QosTarget::LatRange(rlat("99", "mean"), (0.75, 1.0));
        let (q, v) = solve_target(&q1, &data(), DFL_SCALE).unwrap().unwrap();
        assert_eq!(
            (q.rpct, q.rlat, q.min, q.max, v),
            (99.0, 3000, 55.0, 100.0, 100.0)
        );
        let q2 = QosTarget::LatRange(rlat("99", "mean"), (0.5, 0.75));
        let (q, v) = solve_target(&q2, &data(), DFL_SCALE).unwrap().unwrap();
        assert_eq!((q.rlat, q.min, q.max, v), (2500, 50.0, 55.0, 55.0));
        // A flat latency line has no slope to pick a quarter of.
        let w = QosTarget::LatRange(wlat("99", "mean"), (0.75, 1.0));
        assert_eq!(solve_target(&w, &data(), DFL_SCALE).unwrap(), None);
        // A missing series skips the rule.
        let mut d = data();
        d.remove(&DataSel::AmofDelta);
        assert!(solve_target(&QosTarget::AmofDeltaMin, &d, DFL_SCALE).is_err());
    }

    #[test]
    fn margins_move_off_an_inflection_toward_the_flat_side() {
        let l = DataLines::new(&[
            DataPoint::new(10.0, 1.0),
            DataPoint::new(50.0, 2.0),
            DataPoint::new(100.0, 2.0),
        ])
        .unwrap();
        assert_eq!(x_with_margin(&l, 1, 0.5), 75.0);
        assert_eq!(x_with_margin(&l, 0, 0.5), 10.0);
        let r = DataLines::new(&[
            DataPoint::new(10.0, 1.0),
            DataPoint::new(50.0, 1.0),
            DataPoint::new(100.0, 2.0),
        ])
        .unwrap();
        assert_eq!(x_with_margin(&r, 1, 0.5), 25.0);
    }

    #[test]
    fn scaled_models_and_two_decimal_qos() {
        let m = IoCostModel {
            rbps: 1000,
            rseqiops: 3,
            ..Default::default()
        };
        let s = scaled(&m, 0.5);
        assert_eq!((s.rbps, s.rseqiops), (500, 2));
        assert_eq!(two_decimals(90.97727), 90.98);
    }
}
