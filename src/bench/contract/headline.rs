//! A bench's headline numbers (`Bench::headline`): the rows `summary -o json|csv` and
//! `compare` are made of, and the helpers benches fill them with.

use crate::study::iolat::{IoLat, SUMMARY_PCTS};
use serde_json::{json, Value};

/// One record: keys in the order they are written.
pub type Row = Vec<(&'static str, Value)>;

/// An io.cost model and QoS as cells: `rbps` … `wrandiops` (bytes and IOs per second), then
/// `rpct rlat wpct wlat min max` (percentiles, µs, vrate %).
pub fn model_qos_row(
    m: &crate::system::iocost::IoCostModel,
    q: &crate::system::iocost::IoCostQos,
) -> Row {
    let mut row: Row = m.params().iter().map(|(k, v)| (*k, json!(v))).collect();
    row.extend([
        ("rpct", num(q.rpct)),
        ("rlat", json!(q.rlat)),
        ("wpct", num(q.wpct)),
        ("wlat", json!(q.wlat)),
        ("min", num(q.min)),
        ("max", num(q.max)),
    ]);
    row
}

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

/// Test aid: the key numbers (a bench's `KEY_NUMBERS`) that are no field of any of `rows`
/// (`compare` shows them by default; a renamed field would drop out of its table silently).
#[cfg(test)]
pub fn missing_keys(keys: &[&'static str], rows: &[Row]) -> Vec<&'static str> {
    let has = |k: &str| rows.iter().any(|r| r.iter().any(|(f, _)| *f == k));
    keys.iter().copied().filter(|k| !has(k)).collect()
}
