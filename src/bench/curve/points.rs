//! The arithmetic of a curve, pure: the rates its points ask for, the knee, and the queue
//! depth Little's law puts on the device.

/// Vdbench's curve: coarse steps at low load, fine ones toward the maximum, where latency turns.
pub const DFL_POINTS: &[f64] = &[10.0, 50.0, 70.0, 80.0, 90.0, 92.0, 94.0, 96.0, 98.0, 100.0];

/// The open-loop rate of the point at `pct` % of `max` IOPS, rounded up as Vdbench does: to
/// four significant digits of the maximum (hundreds at 130,848 IOPS, so 10 % asks 13,100 and
/// 1 % 1,400), never below 0.1 IOPS.
pub fn target_iops(max: f64, pct: f64) -> f64 {
    let step = 10f64.powi(max.max(1.0).log10().floor() as i32 - 3).max(0.1);
    let raw = max * pct / 100.0;
    // Rounding up what is already a multiple (up to float noise) keeps it.
    let steps = (raw / step - 1e-9).ceil().max(1.0);
    // Cleans 1.23e4 * 0.1-style products of float noise.
    (steps * step * 10.0).round() / 10.0
}

/// The knee: the last point (in rising load) up to which every point's latency stays within
/// `factor` times the first point's. `lat` in rising load; `None` when empty.
pub fn knee(lat: &[f64], factor: f64) -> Option<usize> {
    let base = *lat.first()?;
    let over = lat.iter().position(|&l| l > factor * base);
    Some(match over {
        Some(0) | None => lat.len() - 1,
        Some(i) => i - 1,
    })
}

/// IOs in flight on average, by Little's law: throughput times time in the system.
pub fn little_depth(iops: f64, mean_lat_ns: f64) -> f64 {
    iops * mean_lat_ns / 1e9
}

/// Mean IOs queued at the device over an interval, from the block layer's weighted time in
/// queue (`/sys/.../stat` field 11, ms) and the interval's length (ms).
pub fn device_depth(time_in_queue_ms: u64, interval_ms: f64) -> Option<f64> {
    (interval_ms > 0.0).then(|| time_in_queue_ms as f64 / interval_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_up_as_vdbench_did() {
        // The seed's run: 130,848.33 IOPS at the maximum.
        let max = 130_848.33;
        for (pct, want) in [
            (1.0, 1_400.0),
            (10.0, 13_100.0),
            (80.0, 104_700.0),
            (85.0, 111_300.0),
            (90.0, 117_800.0),
            (92.0, 120_400.0),
            (94.0, 123_000.0),
            (96.0, 125_700.0),
            (98.0, 128_300.0),
        ] {
            assert_eq!(target_iops(max, pct), want, "{}%", pct);
        }
        // A disk: four digits of 151.3 are tenths.
        assert_eq!(target_iops(151.3, 10.0), 15.2);
        assert_eq!(target_iops(151.3, 100.0), 151.3);
        assert_eq!(target_iops(2.0, 10.0), 0.2);
        assert_eq!(target_iops(10_000.0, 50.0), 5_000.0);
    }

    #[test]
    fn the_knee_is_the_last_point_before_latency_leaves_the_band() {
        let lat = [1.0, 1.2, 1.9, 2.1, 1.5, 8.0];
        assert_eq!(knee(&lat, 2.0), Some(2));
        // A later dip back into the band doesn't move it.
        assert_eq!(knee(&lat, 2.2), Some(4));
        assert_eq!(knee(&lat, 10.0), Some(5));
        assert_eq!(knee(&[], 2.0), None);
    }

    #[test]
    fn depths() {
        // 10,000 IOPS at 1.5 ms each: 15 in flight.
        assert!((little_depth(10_000.0, 1.5e6) - 15.0).abs() < 1e-9);
        assert_eq!(device_depth(30_000, 10_000.0), Some(3.0));
        assert_eq!(device_depth(5, 0.0), None);
    }
}
