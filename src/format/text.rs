//! Small text-layout helpers shared by every report: underlined titles and the generic
//! percentile-distribution table.

use crate::units::pct_label;
use std::fmt::Write;

/// `title`, a line of `-` as long as it, and a blank line.
pub fn underline(out: &mut String, title: &str) {
    let _ = writeln!(out, "{}\n{}\n", title, "-".repeat(title.chars().count()));
}

/// `title`, a line of `=` as long as it, and a blank line.
pub fn double_underline(out: &mut String, title: &str) {
    let _ = writeln!(out, "{}\n{}\n", title, "=".repeat(title.chars().count()));
}

/// Header of a percentile table: the title left-aligned in `width` (at least 10), two spaces,
/// then each percentile label right-aligned in 5 columns, separated by single spaces.
pub fn pct_table_header(out: &mut String, title: &str, width: usize, pcts: &[&str]) {
    let width = width.max(10);
    let labels: Vec<String> = pcts
        .iter()
        .map(|p| format!("{:>5}", pct_label(p)))
        .collect();
    let _ = writeln!(
        out,
        "{:<width$}  {}",
        title,
        labels.join(" "),
        width = width
    );
}

/// One row of a percentile table: `name` padded like the header title, then each value rendered
/// by `fmt` right-aligned in 5 columns followed by a space. A row whose values are all zero prints
/// `-` in every cell, so idle counters don't drown the interesting ones.
pub fn pct_table_row(
    out: &mut String,
    name: &str,
    width: usize,
    values: &[f64],
    fmt: impl Fn(f64) -> String,
) {
    let width = width.max(10);
    let _ = write!(out, "{:<width$}  ", name, width = width);
    let all_zero = values.iter().all(|v| *v == 0.0);
    for v in values {
        if all_zero {
            let _ = write!(out, "{:>5} ", "-");
        } else {
            let _ = write!(out, "{:>5} ", fmt(*v));
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::format_pct;

    const PCTS: &[&str] = &[
        "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "100", "mean", "stdev",
    ];

    #[test]
    fn isolation_table_layout() {
        let mut out = String::new();
        pct_table_header(&mut out, "", 0, PCTS);
        let vals = [
            0.949, 0.949, 0.949, 0.954, 0.9925, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.9933, 0.0139,
        ];
        pct_table_row(&mut out, "isol%", 0, &vals, format_pct);
        pct_table_row(&mut out, "lat-imp%", 0, &[0.0; 13], format_pct);
        assert_eq!(
            out,
            "              min   p01   p05   p10   p25   p50   p75   p90   p95   p99   max  mean stdev\n\
             isol%       94.90 94.90 94.90 95.40 99.25 100.0 100.0 100.0 100.0 100.0 100.0 99.33  1.39 \n\
             lat-imp%        -     -     -     -     -     -     -     -     -     -     -     -     - \n"
        );
    }

    #[test]
    fn underlines() {
        let mut out = String::new();
        double_underline(&mut out, "RUN 00");
        underline(&mut out, "RUN 00 - Storage");
        assert_eq!(
            out,
            "RUN 00\n======\n\nRUN 00 - Storage\n----------------\n\n"
        );
    }
}
