//! `compare A B`: the headline numbers of two result files side by side, with their ratio.
//! Records pair up by bench, id and (iocost-qos) configuration; a record only one side has is
//! listed as such.

use super::headline::Row;
use crate::units::{format_duration, format_size};
use serde_json::Value;
use std::fmt::Write;

/// What pairs two records: kind, id and configuration number.
fn key(r: &Row) -> (String, String, Option<u64>) {
    let get = |k: &str| r.iter().find(|(rk, _)| *rk == k).map(|(_, v)| v);
    let text = |k: &str| match get(k) {
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    };
    (
        text("kind"),
        text("id"),
        get("config").and_then(|v| v.as_u64()),
    )
}

/// A value as the reports show its kind of number.
fn show(key: &str, v: f64) -> String {
    let is_lat = key.contains("_lat_") || key.contains("_clat_");
    if key.ends_with("_bps") || key.ends_with("_bps_final") {
        format!("{}/s", format_size(v))
    } else if is_lat && key.ends_with("_us") {
        format_duration(v / 1e6)
    } else if is_lat && key.ends_with("_ns") {
        format_duration(v / 1e9)
    } else if is_lat {
        format_duration(v)
    } else if key.starts_with("mem_size")
        || key.starts_with("mem_usage")
        || key == "mem_actual"
        || key == "hash_size"
    {
        format_size(v)
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{:.3}", v)
    }
}

/// Keys that say what a record is rather than what was measured.
const IDENTITY: &[&str] = &["kind", "id", "spec", "start", "end", "complete", "config"];

/// The comparison table of `a` and `b` (named `name_a`, `name_b` in the header).
pub fn compare(a: &[Row], b: &[Row], name_a: &str, name_b: &str) -> String {
    let mut out = String::new();
    let partner = pair(a, b);
    let mut used_b = vec![false; b.len()];
    for (ra, ib) in a.iter().zip(&partner) {
        let title = title(ra);
        let Some(ib) = *ib else {
            let _ = writeln!(out, "{}: only in {}\n", title, name_a);
            continue;
        };
        let rb = &b[ib];
        used_b[ib] = true;
        let _ = writeln!(out, "{}", title);
        let _ = writeln!(out, "  {:<18} {:>14} {:>14} {:>8}", "", "A", "B", "B/A");
        for (field, va) in ra.iter().filter(|(f, _)| !IDENTITY.contains(f)) {
            let vb = rb.iter().find(|(f, _)| f == field).map(|(_, v)| v);
            let (x, y) = (va.as_f64(), vb.and_then(|v| v.as_f64()));
            if x.is_none() && y.is_none() {
                // Text fields (qos, devnr) only when they differ.
                if let (Value::String(x), Some(Value::String(y))) = (va, vb) {
                    if x != y {
                        let _ = writeln!(out, "  {:<18} {} | {}", field, x, y);
                    }
                }
                continue;
            }
            let ratio = match (x, y) {
                (Some(x), Some(y)) if x != 0.0 => format!("{:.3}", y / x),
                _ => "-".to_string(),
            };
            let shown = |v: Option<f64>| v.map_or("-".to_string(), |v| show(field, v));
            let _ = writeln!(
                out,
                "  {:<18} {:>14} {:>14} {:>8}",
                field,
                shown(x),
                shown(y),
                ratio
            );
        }
        out.push('\n');
    }
    for (rb, used) in b.iter().zip(&used_b) {
        if !used {
            let _ = writeln!(out, "{}: only in {}\n", title(rb), name_b);
        }
    }
    let _ = writeln!(out, "A: {}\nB: {}", name_a, name_b);
    out
}

/// For each record of `a`, the record of `b` it pairs with: first those of the same key and
/// the same spec (a file's randread io entry with the other's randread, not with its randwrite),
/// then, among the rest, the first of the same key.
fn pair(a: &[Row], b: &[Row]) -> Vec<Option<usize>> {
    let spec = |r: &Row| r.iter().find(|(k, _)| *k == "spec").map(|(_, v)| v.clone());
    let mut used_b = vec![false; b.len()];
    let mut partner: Vec<Option<usize>> = vec![None; a.len()];
    for exact in [true, false] {
        for (ia, ra) in a.iter().enumerate() {
            if partner[ia].is_some() {
                continue;
            }
            let k = key(ra);
            let found = b
                .iter()
                .enumerate()
                .position(|(i, rb)| !used_b[i] && key(rb) == k && (!exact || spec(rb) == spec(ra)));
            if let Some(i) = found {
                used_b[i] = true;
                partner[ia] = Some(i);
            }
        }
    }
    partner
}

/// `[storage] storage:loops=1`, `[iocost-qos #03] rpct=95.00 …`.
fn title(r: &Row) -> String {
    let get = |k: &str| r.iter().find(|(rk, _)| *rk == k).map(|(_, v)| v.clone());
    let kind = get("kind").and_then(|v| v.as_str().map(str::to_string));
    let config = get("config").and_then(|v| v.as_u64());
    let what = match config {
        Some(c) => get("qos")
            .and_then(|v| v.as_str().map(str::to_string))
            .map(|q| format!("[{} #{:02}] {}", kind.clone().unwrap_or_default(), c, q)),
        None => get("spec")
            .and_then(|v| v.as_str().map(str::to_string))
            .map(|s| format!("[{}] {}", kind.clone().unwrap_or_default(), s)),
    };
    what.unwrap_or_else(|| format!("[{}]", kind.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn storage(mof: f64, size: f64) -> Row {
        vec![
            ("kind", json!("storage")),
            ("id", Value::Null),
            ("spec", json!("storage")),
            ("mof", json!(mof)),
            ("mem_size", json!(size)),
            ("read_lat_p99", json!(0.0025)),
        ]
    }

    #[test]
    fn pairs_records_and_shows_ratios() {
        let a = vec![storage(1.5, 1.5 * (1u64 << 30) as f64)];
        let mut b = vec![storage(1.8, 1.8 * (1u64 << 30) as f64)];
        b.push(vec![
            ("kind", json!("hashd-params")),
            ("rps_max", json!(900)),
        ]);
        let text = compare(&a, &b, "a.json", "b.json");
        assert_eq!(
            text,
            "[storage] storage\n\
             \x20                                 A              B      B/A\n\
             \x20 mof                         1.500          1.800    1.200\n\
             \x20 mem_size                     1.5G           1.8G    1.200\n\
             \x20 read_lat_p99                 2.5m           2.5m    1.000\n\
             \n\
             [hashd-params]: only in b.json\n\
             \n\
             A: a.json\nB: b.json\n"
        );
    }

    fn io(spec: &str, iops: f64) -> Row {
        vec![
            ("kind", json!("io")),
            ("id", Value::Null),
            ("spec", json!(spec)),
            ("iops", json!(iops)),
            ("read_lat_mean_us", json!(34.6)),
        ]
    }

    #[test]
    fn io_records_pair_by_spec_and_microseconds_show_as_such() {
        let a = vec![io("io:rw=randread", 100.0), io("io:rw=randwrite", 50.0)];
        let b = vec![io("io:rw=randwrite", 60.0), io("io:rw=randread", 120.0)];
        let text = compare(&a, &b, "a.json", "b.json");
        assert!(!text.contains("only in"), "{}", text);
        assert!(
            text.contains("iops                          100            120    1.200"),
            "{}",
            text
        );
        assert!(
            text.contains("iops                           50             60    1.200"),
            "{}",
            text
        );
        assert!(text.contains(" 34.6u "), "{}", text);
    }
}
