//! The nested IO-latency result: for reads and writes, per latency percentile of each second
//! (`p50` = the median completion latency of that second), the distribution of that value over
//! the seconds of a period, plus `cum`, the percentile of the cumulative histogram.
//!
//! Stored as `[read, write]`, each `{lat_pct: {time_pct: seconds}}`. Rendered as a two-line
//! summary (`IO Latency: R p50=mean:stdev/max …`) and, in full mode, as the READ/WRITE
//! distribution tables.

use crate::units::format_duration;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Latency percentiles of one second, in table-row order, with their row labels.
pub const LAT_PCTS: &[(&str, &str)] = &[
    ("00", "min"),
    ("01", "p01"),
    ("05", "p05"),
    ("10", "p10"),
    ("25", "p25"),
    ("50", "p50"),
    ("75", "p75"),
    ("90", "p90"),
    ("95", "p95"),
    ("99", "p99"),
    ("99.9", "p99.9"),
    ("99.99", "p99.99"),
    ("99.999", "p99.999"),
    ("100", "max"),
];

/// Latency percentiles shown in the summary line and in the iocost-qos latency tables.
pub const SUMMARY_PCTS: &[(&str, &str)] =
    &[("50", "p50"), ("90", "p90"), ("99", "p99"), ("100", "max")];

/// Distribution over time of one per-second latency percentile (seconds). Missing keys read as 0.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TimeDist {
    #[serde(rename = "00")]
    pub min: f64,
    #[serde(rename = "01")]
    pub p01: f64,
    #[serde(rename = "05")]
    pub p05: f64,
    #[serde(rename = "10")]
    pub p10: f64,
    #[serde(rename = "25")]
    pub p25: f64,
    #[serde(rename = "50")]
    pub p50: f64,
    #[serde(rename = "75")]
    pub p75: f64,
    #[serde(rename = "90")]
    pub p90: f64,
    #[serde(rename = "95")]
    pub p95: f64,
    #[serde(rename = "99")]
    pub p99: f64,
    #[serde(rename = "99.9")]
    pub p99_9: f64,
    #[serde(rename = "100")]
    pub max: f64,
    pub mean: f64,
    pub stdev: f64,
    pub cum: f64,
    /// Ours: the latency source measured no per-IO latencies (counter fallback), so there
    /// are no percentiles; printed as `unavailable` rather than as zeros.
    pub unavailable: bool,
}

impl TimeDist {
    /// The table columns: label, width, value.
    fn columns(&self) -> [(&'static str, usize, f64); 12] {
        [
            ("min", 5, self.min),
            ("p25", 5, self.p25),
            ("p50", 5, self.p50),
            ("p75", 5, self.p75),
            ("p90", 5, self.p90),
            ("p95", 5, self.p95),
            ("p99", 5, self.p99),
            ("p99.9", 5, self.p99_9),
            ("max", 5, self.max),
            ("cum", 5, self.cum),
            ("mean", 5, self.mean),
            ("stdev", 6, self.stdev),
        ]
    }

    /// `mean:stdev/max`, each as a duration.
    pub fn mean_stdev_max(&self) -> (String, String, String) {
        (
            format_duration(self.mean),
            format_duration(self.stdev),
            format_duration(self.max),
        )
    }
}

/// One IO direction: latency percentile → its distribution over time.
pub type LatMap = BTreeMap<String, TimeDist>;

/// `[read, write]` as stored in results.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IoLat(pub LatMap, pub LatMap);

impl IoLat {
    /// Reads the study's stored JSON; none (or `null`) reads as empty tables. `what` names the
    /// distributions in the error.
    pub fn from_raw(
        raw: Option<&serde_json::value::RawValue>,
        what: &str,
    ) -> anyhow::Result<IoLat> {
        match raw {
            Some(raw) if raw.get() != "null" => {
                serde_json::from_str(raw.get()).map_err(|e| anyhow::anyhow!("{}: {}", what, e))
            }
            _ => Ok(IoLat::default()),
        }
    }

    pub fn read(&self) -> &LatMap {
        &self.0
    }

    pub fn write(&self) -> &LatMap {
        &self.1
    }

    /// `IO Latency: R p50=…` and `            W p50=…`.
    pub fn format_summary(&self, out: &mut String) {
        summary_line(out, "IO Latency: R", self.read());
        summary_line(out, "            W", self.write());
    }

    /// `IO Latency Distribution:`, a blank line, the READ and WRITE tables each followed by a
    /// blank line.
    pub fn format_tables(&self, out: &mut String) {
        out.push_str("IO Latency Distribution:\n\n");
        table(out, "READ", self.read());
        out.push('\n');
        table(out, "WRITE", self.write());
        out.push('\n');
    }

    /// Tables (in full mode), then the summary lines.
    pub fn format(&self, out: &mut String, full: bool) {
        if full {
            self.format_tables(out);
        }
        self.format_summary(out);
    }
}

/// The map has entries and every one is marked unavailable.
fn all_unavailable(map: &LatMap) -> bool {
    !map.is_empty() && map.values().all(|d| d.unavailable)
}

fn summary_line(out: &mut String, prefix: &str, map: &LatMap) {
    out.push_str(prefix);
    if all_unavailable(map) {
        out.push_str(" unavailable\n");
        return;
    }
    for (key, label) in SUMMARY_PCTS {
        let dist = map.get(*key).cloned().unwrap_or_default();
        if dist.unavailable {
            let _ = write!(out, " {}=unavailable", label);
            continue;
        }
        let (mean, stdev, max) = dist.mean_stdev_max();
        let _ = write!(out, " {}={}:{}/{}", label, mean, stdev, max);
    }
    out.push('\n');
}

fn table(out: &mut String, title: &str, map: &LatMap) {
    if all_unavailable(map) {
        let _ = writeln!(out, "{:<7} unavailable", title);
        return;
    }
    let _ = write!(out, "{:<7}", title);
    for (label, width, _) in TimeDist::default().columns() {
        let _ = write!(out, " {:>width$}", label, width = width);
    }
    out.push('\n');
    for (key, label) in LAT_PCTS {
        let Some(dist) = map.get(*key) else { continue };
        let _ = write!(out, "{:<7}", label);
        if dist.unavailable {
            out.push_str(" unavailable\n");
            continue;
        }
        for (_, width, v) in dist.columns() {
            let _ = write!(out, " {:>width$}", format_duration(v), width = width);
        }
        out.push('\n');
    }
}

/// One group of the iocost-qos latency tables: `mean:stdev/max` with each value right-aligned
/// in 5 columns.
pub fn format_lat_group(dist: &TimeDist) -> String {
    if dist.unavailable {
        return format!("{:>17}", "unavailable");
    }
    let (mean, stdev, max) = dist.mean_stdev_max();
    format!("{:>5}:{:>5}/{:>5}", mean, stdev, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> IoLat {
        serde_json::from_str(
            r#"[{"50":{"00":5e-6,"25":0.000115,"50":0.000135,"75":0.000165,"90":0.000265,
                        "95":0.000415,"99":0.000965,"99.9":0.0015,"100":0.0025,"cum":0.000135,
                        "mean":0.000172,"stdev":0.000161},
                 "100":{"mean":0.0058,"stdev":0.0035,"100":0.0785}},
                {"50":{"mean":5.7e-5,"stdev":8.77e-5,"100":0.0025}}]"#,
        )
        .unwrap()
    }

    #[test]
    fn summary_lines() {
        let mut out = String::new();
        sample().format_summary(&mut out);
        assert_eq!(
            out,
            "IO Latency: R p50=172u:161u/2.5m p90=0:0/0 p99=0:0/0 max=5.8m:3.5m/78.5m\n            \
             W p50=57.0u:87.7u/2.5m p90=0:0/0 p99=0:0/0 max=0:0/0\n"
        );
    }

    #[test]
    fn table_layout() {
        let mut out = String::new();
        table(&mut out, "READ", sample().read());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "READ      min   p25   p50   p75   p90   p95   p99 p99.9   max   cum  mean  stdev"
        );
        assert_eq!(
            lines[1],
            "p50      5.0u  115u  135u  165u  265u  415u  965u  1.5m  2.5m  135u  172u   161u"
        );
    }

    #[test]
    fn unavailable_prints_as_such_not_zeros() {
        let iolat: IoLat = serde_json::from_str(
            r#"[{"50":{"unavailable":true},"100":{"unavailable":true}},
                {"50":{"unavailable":true},"90":{"mean":0.001,"stdev":0.0,"100":0.002}}]"#,
        )
        .unwrap();
        let mut out = String::new();
        iolat.format(&mut out, true);
        assert_eq!(
            out,
            "IO Latency Distribution:\n\nREAD    unavailable\n\n\
             WRITE     min   p25   p50   p75   p90   p95   p99 p99.9   max   cum  mean  stdev\n\
             p50     unavailable\n\
             p90         0     0     0     0     0     0     0     0  2.0m     0  1.0m      0\n\n\
             IO Latency: R unavailable\n            \
             W p50=unavailable p90=1.0m:0/2.0m p99=0:0/0 max=0:0/0\n"
        );
        let d: TimeDist = serde_json::from_str(r#"{"unavailable":true}"#).unwrap();
        assert_eq!(format_lat_group(&d), "      unavailable");
        assert_eq!(
            format_lat_group(&d).len(),
            format_lat_group(&TimeDist::default()).len()
        );
    }

    #[test]
    fn lat_group() {
        let d: TimeDist =
            serde_json::from_str(r#"{"mean":0.000343,"stdev":0.0013,"100":0.0675}"#).unwrap();
        assert_eq!(format_lat_group(&d), " 343u: 1.3m/67.5m");
    }
}
