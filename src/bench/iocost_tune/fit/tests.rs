use super::*;

fn series(pts: &[(f64, f64)]) -> DataSeries {
    DataSeries {
        data: pts.iter().map(|&(x, y)| DataPoint::new(x, y)).collect(),
        ..Default::default()
    }
}

fn xy(l: &DataLines) -> Vec<(f64, f64)> {
    l.points.iter().map(|p| (p.x, p.y)).collect()
}

#[test]
fn regression_and_means_by_hand() {
    let s = series(&[(1.0, 2.0), (2.0, 4.0), (3.0, 5.0), (4.0, 4.0), (5.0, 5.0)]);
    // x̄ = 3, ȳ = 4, Σ(x−x̄)(y−ȳ) = 6, Σ(x−x̄)² = 10.
    let (m, b) = linear_regression(&s.data).unwrap();
    assert!(
        (m - 0.6).abs() < 1e-12 && (b - 2.2).abs() < 1e-12,
        "{} {}",
        m,
        b
    );
    assert_eq!(
        linear_regression(&series(&[(1.0, 1.0), (1.0, 2.0)]).data),
        None
    );
    assert_eq!(stdev(&[1.0, 2.0, 3.0, 4.0]), (5.0f64 / 3.0).sqrt());
    assert_eq!(height(&s.data), 4.0);
    // Through (3, 4): Σ(x−3)(y−4) / Σ(x−3)² = 6 / 10.
    assert_eq!(slope_through(&s.data, &DataPoint::new(3.0, 4.0)), 0.6);
}

#[test]
fn a_constant_series_is_one_flat_line() {
    let mut s = series(&[
        (10.0, 2.0),
        (30.0, 2.0),
        (50.0, 2.0),
        (70.0, 2.0),
        (90.0, 2.0),
    ]);
    s.fit_lines(FitShape::Inc);
    assert_eq!(xy(&s.lines), vec![(10.0, 2.0), (90.0, 2.0)]);
    let mut one = series(&[(40.0, 3.0)]);
    one.fit_lines(FitShape::Inc);
    assert_eq!(
        (xy(&one.lines), one.lines.range),
        (vec![(40.0, 3.0)], (40.0, 40.0))
    );
}

#[test]
fn a_line_through_the_points_is_their_regression() {
    let pts: Vec<(f64, f64)> = (0..8)
        .map(|i| (10.0 + 10.0 * i as f64, 1.0 + 0.1 * i as f64))
        .collect();
    let mut s = series(&pts);
    s.fit_lines(FitShape::Inc);
    assert_eq!(s.lines.points.len(), 2);
    assert!((s.lines.points[0].y - 1.0).abs() < 1e-12);
    assert!((s.lines.points[1].y - 1.7).abs() < 1e-12);
}

#[test]
fn a_rise_then_a_plateau_gets_its_knee() {
    // Rising 0.2 per 10 until x = 40, flat at 2.0 after: the knee sits halfway between the
    // last rising point and the first flat one.
    let pts = [
        (0.0, 1.4),
        (10.0, 1.6),
        (20.0, 1.8),
        (40.0, 2.0),
        (60.0, 2.0),
        (80.0, 2.0),
        (100.0, 2.0),
    ];
    let mut s = series(&pts);
    s.fit_lines(FitShape::Inc);
    let p = xy(&s.lines);
    assert_eq!(p.len(), 3, "{:?}", p);
    assert_eq!(p[1], (30.0, 2.0), "{:?}", p);
    assert_eq!(p[2], (100.0, 2.0));
    // A falling series may not be fitted rising.
    let mut d = series(&pts);
    d.fit_lines(FitShape::Dec);
    assert_eq!(
        d.lines.min_max().0,
        d.lines.min_max().1,
        "{:?}",
        xy(&d.lines)
    );
}

#[test]
fn splits_leave_every_part_ten_vrate_points_wide() {
    // 8 points within 14 vrate points: no split fits, only flat or regression.
    let pts: Vec<(f64, f64)> = (0..8)
        .map(|i| (50.0 + 2.0 * i as f64, if i < 4 { 1.0 } else { 2.0 }))
        .collect();
    let mut s = series(&pts);
    s.fit_lines(FitShape::Inc);
    assert_eq!(s.lines.points.len(), 2, "{:?}", xy(&s.lines));
}

#[test]
fn chauvenet_rejects_the_far_point_only() {
    let mut pts: Vec<(f64, f64)> = (0..10)
        .map(|i| (10.0 * i as f64, 1.0 + 0.01 * (i % 2) as f64))
        .collect();
    pts[6].1 = 5.0;
    let mut s = series(&pts);
    s.lines = DataLines::new(&[DataPoint::new(0.0, 1.0), DataPoint::new(90.0, 1.0)]).unwrap();
    s.filter_outliers();
    assert_eq!(s.outliers, vec![DataPoint::new(60.0, 5.0)]);
    assert_eq!(s.data.len(), 9);
    s.filter_beyond(45.0);
    assert_eq!(s.data.len(), 5);
    assert_eq!(s.outliers.first(), Some(&DataPoint::new(50.0, 1.01)));
    s.reset();
    assert_eq!((s.data.len(), s.outliers.len()), (10, 0));
}

#[test]
fn ranges_stretch_and_clamp() {
    let l = DataLines::new(&[
        DataPoint::new(10.0, 1.0),
        DataPoint::new(50.0, 2.0),
        DataPoint::new(90.0, 2.0),
    ])
    .unwrap();
    assert_eq!(
        xy(&l.with_range((0.0, 100.0)).unwrap()),
        vec![(0.0, 0.75), (50.0, 2.0), (100.0, 2.0)]
    );
    assert_eq!(
        xy(&l.with_range((60.0, 70.0)).unwrap()),
        vec![(60.0, 2.0), (70.0, 2.0)]
    );
    assert_eq!(xy(&l.with_range((30.0, 30.0)).unwrap()), vec![(30.0, 1.5)]);
    assert_eq!(l.clamped((95.0, 99.0)).unwrap(), None);
    assert_eq!(
        xy(&l.clamped((0.0, 30.0)).unwrap().unwrap()),
        vec![(10.0, 1.0), (30.0, 1.5)]
    );
    assert!(DataLines::new(&[DataPoint::new(2.0, 1.0), DataPoint::new(1.0, 1.0)]).is_err());
}

/// A noisy series of `n` points on a grid of vrates (some taken twice, as a resample does)
/// around a shape: rising to a knee, falling, or rising to a peak and falling again.
fn noisy(seed: u64, n: usize, shape: FitShape) -> Vec<DataPoint> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let knee = rng.gen_range(30.0..80.0);
    let level = rng.gen_range(0.5..50.0);
    let noise = level * rng.gen_range(0.001..0.1);
    let mut pts: Vec<DataPoint> = (0..n)
        .map(|_| {
            let x = f64::from(rng.gen_range(2..=40)) * 2.5;
            let y = match shape {
                FitShape::Dec => level * (1.0 + (knee - x).max(0.0) / 50.0),
                FitShape::SinglePeak => level * (1.0 - ((x - knee) / 60.0).abs()),
                _ => level * (0.5 + x.min(knee) / 100.0),
            };
            DataPoint::new(x, y + noise * (rng.gen::<f64>() - 0.5))
        })
        .collect();
    sort_points(&mut pts);
    pts
}

#[test]
fn the_bound_never_changes_the_chosen_line() {
    // The bound only refuses candidates the exact error would: with and without it, every fit
    // picks the same line to the bit.
    let shapes = [
        FitShape::Inc,
        FitShape::Dec,
        FitShape::SinglePeak,
        FitShape::Any,
    ];
    for seed in 0..96u64 {
        let shape = shapes[seed as usize % shapes.len()];
        let n = 24 + (seed as usize * 7) % 40;
        let pts = noisy(seed, n, shape);
        let with = Fit::new(&pts);
        assert!(with.bound.is_some(), "seed {seed}: no bound for {n} points");
        let without = Fit {
            bound: None,
            ..Fit::new(&pts)
        };
        let (a, b) = (with.best(shape), without.best(shape));
        assert_eq!(
            format!("{a:?}"),
            format!("{b:?}"),
            "seed {seed}, {shape:?}, {n} points"
        );
    }
}

#[test]
fn parts_of_the_sums_table_are_the_folds_of_the_parts() {
    let pts = noisy(7, 40, FitShape::Inc);
    let fit = Fit::new(&pts);
    for a in 0..pts.len() {
        for b in a + 1..=pts.len() {
            assert_eq!(fit.height(a, b).to_bits(), height(&pts[a..b]).to_bits());
        }
    }
}

#[test]
fn no_floor_is_above_a_candidate_it_covers() {
    // No group of single-peak candidates is skipped for a floor above one of its members'
    // error: each candidate's own error, as the best so far, never loses to the floor of a
    // prefix of its splits. Noisy series of each shape, with vrates taken twice as resamples do.
    let shapes = [FitShape::SinglePeak, FitShape::Inc, FitShape::Dec];
    let mut seen = 0;
    for seed in 0..24u64 {
        let n = 24 + (seed as usize * 5) % 30;
        let pts = noisy(seed, n, shapes[seed as usize % shapes.len()]);
        let fit = Fit::new(&pts);
        let m = fit.bound.as_ref().unwrap();
        let floors = floors::Floors::new(m);
        fit.single_peak_splits(fit.x_range(), |_| false, |idx| {
            let Some(v) = fit.peak_vertices(idx) else {
                return;
            };
            let Ok(lines) = DataLines::new(v.points()) else {
                return;
            };
            let mult = ERROR_MULTIPLIER.powi(lines.points.len() as i32 - 1);
            let err = line_error(pts.iter(), &lines) * mult;
            // A line with no value somewhere (a slope over points of one vrate) is never picked.
            if err.is_nan() {
                return;
            }
            for k in 1..=4 {
                let (sse, mag, floor_mult) = fit.group_floor(m, &floors, &idx[..k]);
                assert!(
                    !m.loses(sse, mag, floor_mult, err) && !m.loses(floors.of(&idx[..k]), 0.0, 1.0, err),
                    "seed {seed}, splits {idx:?}, prefix {k}: floor {sse} (×{floor_mult}) over error {err}"
                );
            }
            seen += 1;
        });
    }
    assert!(seen > 10_000, "only {seen} candidates");
}
