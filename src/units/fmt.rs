//! Number formatters whose output is part of the report contract: widths and rounding must match
//! upstream's text byte for byte, so keep these exact.

/// Picks the integer or one-decimal rendering the same way for all unit formatters: one decimal
/// below 99.95 units, none above.
fn scaled(v: f64, unit: &str) -> String {
    if v < 99.95 {
        format!("{:.1}{}", v, unit)
    } else {
        format!("{:.0}{}", v, unit)
    }
}

/// Binary size of the value truncated to an integer: `0`, plain bytes below 9999, then K/M/G
/// and — as upstream prints them — `P` for 2^40 and `E` for 2^50; `INF` from 1024E (2^60) up,
/// where the units run out.
pub fn format_size(size: f64) -> String {
    // Upstream converts to an integer byte count first: 35379.6 prints as 34.5K, not 34.6K.
    let size = size.trunc();
    if size == 0.0 {
        return "0".into();
    }
    if size.abs() < 9999.0 {
        return format!("{}", size as i64);
    }
    const UNITS: [(&str, u32); 5] = [("K", 10), ("M", 20), ("G", 30), ("P", 40), ("E", 50)];
    for (unit, shift) in UNITS {
        if size.abs() < 2f64.powi(shift as i32 + 10) {
            return scaled(size / 2f64.powi(shift as i32), unit);
        }
    }
    "INF".into()
}

/// Decimal count of the value truncated to an integer: plain below 1000, then k/m/g/p/e in steps
/// of 1000; `INF` from 1000e (10^18) up.
pub fn format_count(cnt: f64) -> String {
    // Like format_size, the value is truncated to an integer first.
    let cnt = cnt.trunc();
    if cnt == 0.0 {
        return "0".into();
    }
    if cnt.abs() < 1000.0 {
        return format!("{}", cnt as i64);
    }
    const UNITS: [&str; 5] = ["k", "m", "g", "p", "e"];
    let mut v = cnt;
    for unit in UNITS {
        v /= 1000.0;
        if v.abs() < 1000.0 {
            return scaled(v, unit);
        }
    }
    "INF".into()
}

/// Duration in seconds: n/u/m below a second, then s, M(inutes), H, D, Y.
pub fn format_duration(secs: f64) -> String {
    // Unlike sizes, durations are ROUNDED to whole nanoseconds first (upstream fixtures:
    // 5.1449814e-5 s prints `51.5u`, 3.0666e-7 s prints `307n`, 7.7e-21 s prints `0`).
    // Negative durations print `0` too.
    let ns = (secs * 1e9).round();
    if ns.is_nan() || ns <= 0.0 {
        return "0".into();
    }
    let steps: [(&str, f64); 8] = [
        ("n", 1.0),
        ("u", 1e3),
        ("m", 1e6),
        ("s", 1e9),
        ("M", 60e9),
        ("H", 3600e9),
        ("D", 86400e9),
        ("Y", 365.0 * 86400e9),
    ];
    let limits = [1e3, 1e3, 1e3, 60.0, 60.0, 24.0, 365.0, f64::INFINITY];
    for ((unit, div), limit) in steps.iter().zip(limits) {
        let v = ns / div;
        if v.abs() < limit {
            return scaled(v, unit);
        }
    }
    unreachable!()
}

/// Ratio as percent without the `%`: `0`, two decimals below 99.995, one below 999.95, none
/// below 99999.5, then `k`; negative ratios print `NEG`.
pub fn format_pct(ratio: f64) -> String {
    let pct = ratio * 100.0;
    if pct == 0.0 {
        "0".into()
    } else if pct < 0.0 {
        "NEG".into()
    } else if pct < 99.995 {
        format!("{:.2}", pct)
    } else if pct < 999.95 {
        format!("{:.1}", pct)
    } else if pct < 99999.5 {
        format!("{:.0}", pct)
    } else {
        format!("{:.0}k", pct / 1000.0)
    }
}

/// Percentile key as shown in table headers: `00` → `min`, `100` → `max`, `mean`/`stdev` as is,
/// otherwise `p<key>`.
pub fn pct_label(key: &str) -> String {
    match key {
        "00" => "min".into(),
        "100" => "max".into(),
        "mean" | "stdev" | "cum" => key.into(),
        _ => format!("p{}", key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(format_size(0.0), "0");
        assert_eq!(format_size(9998.0), "9998");
        assert_eq!(format_size(4115.98), "4115");
        assert_eq!(format_size(0.7), "0");
        assert_eq!(format_size(35379.62), "34.5K");
        assert_eq!(format_size(12.0 * (1u64 << 30) as f64), "12.0G");
        assert_eq!(format_size(961.0 * (1u64 << 20) as f64), "961M");
        assert_eq!(format_size(477.0 * (1u64 << 30) as f64), "477G");
        assert_eq!(format_size(1.8 * (1u64 << 40) as f64), "1.8P");
        assert_eq!(format_size(1023.0 * (1u64 << 50) as f64), "1023E");
    }

    /// Beyond the last unit upstream prints `INF` (an overflowed rate of 2^64 is `INF`, not
    /// `16384E`).
    #[test]
    fn sizes_and_counts_past_the_last_unit_print_inf() {
        assert_eq!(format_size((1u64 << 60) as f64), "INF");
        assert_eq!(format_size(u64::MAX as f64), "INF");
        assert_eq!(format_count(999.0e15), "999e");
        assert_eq!(format_count(1.0e18), "INF");
        assert_eq!(format_count(u64::MAX as f64), "INF");
    }

    #[test]
    fn counts() {
        assert_eq!(format_count(0.0), "0");
        assert_eq!(format_count(5.708), "5");
        assert_eq!(format_count(1500.0), "1.5k");
        assert_eq!(format_count(12345.0), "12.3k");
        assert_eq!(format_count(93050.2), "93.0k");
    }

    #[test]
    fn durations() {
        assert_eq!(format_duration(0.0), "0");
        assert_eq!(format_duration(343e-6), "343u");
        assert_eq!(format_duration(0.0675), "67.5m");
        assert_eq!(format_duration(0.15), "150m");
        assert_eq!(format_duration(200.0), "3.3M");
        assert_eq!(format_duration(532e-9), "532n");
        assert_eq!(format_duration(5e-6), "5.0u");
        assert_eq!(format_duration(1.1), "1.1s");
    }

    #[test]
    fn durations_round_to_whole_nanoseconds_first() {
        // Values from real upstream results and how upstream printed them.
        assert_eq!(format_duration(5.144981412639392e-05), "51.5u");
        assert_eq!(format_duration(3.294973544973566e-05), "33.0u");
        assert_eq!(format_duration(3.0666e-07), "307n");
        assert_eq!(format_duration(7.682622684823282e-21), "0");
    }

    #[test]
    fn pcts() {
        assert_eq!(format_pct(0.0), "0");
        assert_eq!(format_pct(-0.1), "NEG");
        assert_eq!(format_pct(0.9), "90.00");
        assert_eq!(format_pct(1.0), "100.0");
        assert_eq!(format_pct(0.2687), "26.87");
    }

    #[test]
    fn labels() {
        assert_eq!(pct_label("00"), "min");
        assert_eq!(pct_label("100"), "max");
        assert_eq!(pct_label("99.9"), "p99.9");
        assert_eq!(pct_label("mean"), "mean");
    }
}
