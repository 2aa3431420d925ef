//! A bench's headline numbers (`Bench::headline`): the rows `summary -o json|csv` and
//! `compare` are made of, and the helpers benches fill them with.

use crate::study::iolat::{IoLat, SUMMARY_PCTS};
use serde_json::{json, Value};

/// One record: keys in the order they are written.
pub type Row = Vec<(&'static str, Value)>;

/// `read_lat_p50` … `write_lat_max`: the mean over time of each per-second latency percentile
/// of the summary line, in seconds; `null` where the source measured no per-IO latencies.
pub fn iolat_row(iolat: &IoLat) -> Row {
    let mut row = Row::new();
    for (dir, map) in [("read", iolat.read()), ("write", iolat.write())] {
        for (pct, label) in SUMMARY_PCTS {
            let key: &'static str = match (dir, *label) {
                ("read", "p50") => "read_lat_p50",
                ("read", "p90") => "read_lat_p90",
                ("read", "p99") => "read_lat_p99",
                ("read", _) => "read_lat_max",
                (_, "p50") => "write_lat_p50",
                (_, "p90") => "write_lat_p90",
                (_, "p99") => "write_lat_p99",
                _ => "write_lat_max",
            };
            let v = map
                .get(*pct)
                .filter(|d| !d.unavailable)
                .map_or(Value::Null, |d| json!(d.mean));
            row.push((key, v));
        }
    }
    row
}

/// A finite number, or `null` (NaN/inf have no JSON form).
pub fn num(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}
