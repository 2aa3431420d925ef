//! `compare A B`: the headline numbers of two result files side by side, with their ratio.
//!
//! Entries pair by bench, id and spec (then by bench and id); inside a pair of entries, records
//! pair by what they are, never by position alone: iocost-tune solutions and protection
//! scenarios by name, iocost-qos configurations by their QoS — the same QoS first, then the
//! nearest override of the same kind, as two dithered vrate grids never hold the same vrates.
//! By default each pair shows its bench's key numbers (one screen for two iocost-qos runs);
//! `full` shows every number. Units and percentages are shown as `summary` shows them.

mod pair;

use crate::bench::contract::headline::Row;
use crate::units::{format_duration, format_pct, format_size};
use pair::{entries, get, name, naming, pair_by, pair_rows, text, Entry, Naming, PairIx};
use std::fmt::Write;

/// What `compare` prints.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompareOpts {
    /// Every headline number instead of the bench's key numbers.
    pub full: bool,
}

/// Fractions that the reports print as percentages.
fn is_fraction_pct(key: &str) -> bool {
    key == "isol" || key == "work_csv" || key.starts_with("isol_") || key.starts_with("lat_imp_")
}

/// The column name: a fraction shown as a percentage gets `%`, as in `summary` (`isol` is
/// judged at the percentile the record names: `isol-05%`).
fn label(key: &str, rows: &[&Row]) -> String {
    if key == "isol" {
        if let Some(p) = rows
            .iter()
            .map(|r| text(r, "isol_pct"))
            .find(|p| !p.is_empty())
        {
            return format!("isol-{}%", p);
        }
    }
    if is_fraction_pct(key) {
        format!("{}%", key)
    } else {
        key.to_string()
    }
}

/// A value as the reports show its kind of number.
fn show(key: &str, v: f64) -> String {
    let is_lat = key.contains("_lat_") || key.contains("_clat_");
    if key.ends_with("_bps") || key.ends_with("_bps_final") {
        format!("{}/s", format_size(v))
    } else if is_fraction_pct(key) {
        format_pct(v)
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
        || key == "hog_bytes"
    {
        format_size(v)
    } else if key == "min" || key == "max" || key.ends_with("pct") {
        format!("{:.2}", v)
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{:.3}", v)
    }
}

/// Keys that say what a record is rather than what was measured.
const IDENTITY: &[&str] = &[
    "kind",
    "id",
    "spec",
    "start",
    "end",
    "complete",
    "config",
    "qos",
    "solution",
    "scenario",
    "scenario_kind",
    "isol_pct",
];

/// The numeric fields to show: `keys` (the bench's key numbers) unless `full` or empty, else
/// every number either side has, in the records' order.
fn fields(rows: &[&Row], keys: &[&'static str], full: bool) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in rows {
        for (k, v) in r.iter() {
            let numeric = v.is_number() || v.is_null();
            if !IDENTITY.contains(k) && numeric && !out.contains(k) {
                out.push(k);
            }
        }
    }
    if full || keys.is_empty() {
        out
    } else {
        keys.iter().copied().filter(|k| out.contains(k)).collect()
    }
}

/// `shown A`, `shown B`, `B/A` of one field.
fn cells(key: &str, a: Option<&Row>, b: Option<&Row>) -> [String; 3] {
    let num = |r: Option<&Row>| r.and_then(|r| get(r, key)).and_then(|v| v.as_f64());
    let (x, y) = (num(a), num(b));
    let shown = |v: Option<f64>| v.map_or("-".to_string(), |v| show(key, v));
    let ratio = match (x, y) {
        (Some(x), Some(y)) if x != 0.0 => format!("{:.3}", y / x),
        _ => "-".to_string(),
    };
    [shown(x), shown(y), ratio]
}

/// The comparison of `a` and `b` (named `name_a`, `name_b`); `keys` gives a bench's key
/// numbers by kind.
pub fn compare(
    a: &[Row],
    b: &[Row],
    names: (&str, &str),
    keys: &dyn Fn(&str) -> &'static [&'static str],
    opts: CompareOpts,
) -> String {
    let (ea, eb) = (entries(a), entries(b));
    let exact = |x: &Entry, y: &Entry| (&x.kind, &x.id, &x.spec) == (&y.kind, &y.id, &y.spec);
    let loose = |x: &Entry, y: &Entry| (&x.kind, &x.id) == (&y.kind, &y.id);
    let pairs = pair_by(&ea, &eb, |x, y| {
        if exact(x, y) {
            Some(0.0)
        } else if loose(x, y) {
            Some(1.0)
        } else {
            None
        }
    });
    let mut out = String::new();
    for (ia, ib) in pairs {
        let (x, y) = (ia.map(|i| &ea[i]), ib.map(|i| &eb[i]));
        match (x, y) {
            (Some(x), Some(y)) => entry_pair(&mut out, x, y, keys(&x.kind), opts),
            (Some(x), None) => only(&mut out, x, names.0),
            (None, Some(y)) => only(&mut out, y, names.1),
            (None, None) => {}
        }
    }
    let _ = writeln!(out, "A: {}\nB: {}", names.0, names.1);
    if !opts.full {
        out.push_str("(key numbers; --full shows every number)\n");
    }
    out
}

fn title(e: &Entry) -> String {
    let id = if e.id.is_empty() {
        String::new()
    } else {
        format!(":{}", e.id)
    };
    format!("[{}{}] {}", e.kind, id, e.spec)
}

fn only(out: &mut String, e: &Entry, name: &str) {
    let _ = writeln!(out, "{}: only in {}\n", title(e), name);
}

fn entry_pair(out: &mut String, x: &Entry, y: &Entry, keys: &[&'static str], opts: CompareOpts) {
    let _ = writeln!(out, "{}", title(x));
    if x.spec != y.spec {
        let _ = writeln!(out, "  B: {}", y.spec);
    }
    let naming = naming(&x.rows);
    let pairs = pair_rows(&x.rows, &y.rows, &naming);
    let all: Vec<&Row> = x.rows.iter().chain(&y.rows).copied().collect();
    let fields = fields(&all, keys, opts.full);
    if pairs.len() == 1 && matches!(naming, Naming::Order) || opts.full {
        for (ia, ib) in pairs {
            let (ra, rb) = (ia.map(|i| x.rows[i]), ib.map(|i| y.rows[i]));
            vertical(out, ra, rb, &fields, &naming, &all);
        }
    } else {
        table(out, &x.rows, &y.rows, &pairs, &fields, &naming, &all);
    }
    out.push('\n');
}

/// The two names of a pair: one when they agree, `A | B` when they don't.
fn pair_name(ra: Option<&Row>, rb: Option<&Row>, naming: &Naming) -> String {
    let (na, nb) = (ra.map(|r| name(r, naming)), rb.map(|r| name(r, naming)));
    match (na, nb) {
        (Some(p), Some(q)) if p == q => p,
        (Some(p), Some(q)) => match (p.strip_prefix("vrate "), q.strip_prefix("vrate ")) {
            (Some(p), Some(q)) => format!("vrate {} | {}", p, q),
            _ => format!("{} | {}", p, q),
        },
        (Some(p), None) => format!("{} (only A)", p),
        (None, Some(q)) => format!("{} (only B)", q),
        (None, None) => String::new(),
    }
}

/// One pair, a field a line (a single record, or `--full`).
fn vertical(
    out: &mut String,
    ra: Option<&Row>,
    rb: Option<&Row>,
    fields: &[&'static str],
    naming: &Naming,
    all: &[&Row],
) {
    let name = pair_name(ra, rb, naming);
    if ra.is_none() || rb.is_none() {
        let _ = writeln!(out, " {}", name);
        return;
    }
    if !name.is_empty() {
        let _ = writeln!(out, " {}", name);
    }
    // The whole QoS, where the name shows only the overrides.
    let qos = |r: Option<&Row>| r.map(|r| text(r, "qos")).unwrap_or_default();
    if matches!(naming, Naming::Qos) && qos(ra) != qos(rb) {
        let _ = writeln!(out, "  A: {}\n  B: {}", qos(ra), qos(rb));
    }
    let lw = fields
        .iter()
        .map(|f| label(f, all).len())
        .max()
        .unwrap_or(0)
        .max(8);
    let _ = writeln!(out, "  {:<lw$} {:>12} {:>12} {:>8}", "", "A", "B", "B/A");
    for f in fields {
        let [p, q, r] = cells(f, ra, rb);
        let _ = writeln!(out, "  {:<lw$} {:>12} {:>12} {:>8}", label(f, all), p, q, r);
    }
}

/// Several pairs, a pair a line: each field's A, B and B/A in columns as wide as their
/// longest cell, so long values don't break them.
fn table(
    out: &mut String,
    a: &[&Row],
    b: &[&Row],
    pairs: &[PairIx],
    fields: &[&'static str],
    naming: &Naming,
    all: &[&Row],
) {
    let lines: Vec<(String, Vec<[String; 3]>)> = pairs
        .iter()
        .map(|(ia, ib)| {
            let (ra, rb) = (ia.map(|i| a[i]), ib.map(|i| b[i]));
            let row = fields.iter().map(|f| cells(f, ra, rb)).collect();
            (pair_name(ra, rb, naming), row)
        })
        .collect();
    let nw = lines.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let widths: Vec<[usize; 3]> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut w = [1, 1, 3];
            for (_, cs) in &lines {
                for (j, c) in cs[i].iter().enumerate() {
                    w[j] = w[j].max(c.len());
                }
            }
            // The field's name spans its three columns.
            let span = w[0] + w[1] + w[2] + 2;
            let need = label(f, all).len();
            if need > span {
                w[0] += need - span;
            }
            w
        })
        .collect();
    let mut head = format!("  {:nw$}", "");
    let mut sub = format!("  {:nw$}", "");
    for (f, w) in fields.iter().zip(&widths) {
        let span = w[0] + w[1] + w[2] + 2;
        let _ = write!(head, "   {:^span$}", label(f, all));
        let _ = write!(
            sub,
            "   {:>a$} {:>b$} {:>c$}",
            "A",
            "B",
            "B/A",
            a = w[0],
            b = w[1],
            c = w[2]
        );
    }
    let _ = writeln!(out, "{}\n{}", head.trim_end(), sub);
    for (n, cs) in &lines {
        let mut line = format!("  {:<nw$}", n);
        for (c, w) in cs.iter().zip(&widths) {
            let _ = write!(
                line,
                "   {:>a$} {:>b$} {:>c$}",
                c[0],
                c[1],
                c[2],
                a = w[0],
                b = w[1],
                c = w[2]
            );
        }
        let _ = writeln!(out, "{}", line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn no_keys(_: &str) -> &'static [&'static str] {
        &[]
    }

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
            ("spec", json!("hashd-params")),
            ("rps_max", json!(900)),
        ]);
        let text = compare(
            &a,
            &b,
            ("a.json", "b.json"),
            &no_keys,
            CompareOpts::default(),
        );
        assert_eq!(
            text,
            "[storage] storage\n\
             \x20                         A            B      B/A\n\
             \x20 mof                 1.500        1.800    1.200\n\
             \x20 mem_size             1.5G         1.8G    1.200\n\
             \x20 read_lat_p99         2.5m         2.5m    1.000\n\
             \n\
             [hashd-params] hashd-params: only in b.json\n\
             \n\
             A: a.json\nB: b.json\n\
             (key numbers; --full shows every number)\n"
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
        let text = compare(&a, &b, ("a", "b"), &no_keys, CompareOpts::default());
        assert!(!text.contains("only in"), "{}", text);
        assert!(text.contains("[io] io:rw=randread\n"), "{}", text);
        assert!(
            text.contains("  iops                      100          120    1.200"),
            "{}",
            text
        );
        assert!(
            text.contains("  iops                       50           60    1.200"),
            "{}",
            text
        );
        assert!(text.contains(" 34.6u "), "{}", text);
    }

    fn point(name: &str, iops: f64, p99_us: f64) -> Row {
        vec![
            ("kind", json!("curve")),
            ("id", Value::Null),
            ("spec", json!("curve")),
            ("point", json!(name)),
            ("iops", json!(iops)),
            ("pt_lat_p99_us", json!(p99_us)),
        ]
    }

    #[test]
    fn curve_points_pair_by_name() {
        // B's curve lacks the 50 % point and lists its points in another order.
        let a = vec![
            point("10%", 1000.0, 200.0),
            point("50%", 5000.0, 300.0),
            point("90%", 9000.0, 900.0),
        ];
        let b = vec![point("90%", 9900.0, 450.0), point("10%", 1100.0, 100.0)];
        let text = compare(&a, &b, ("a", "b"), &no_keys, CompareOpts::default());
        for line in [
            "  10%            1000 1100 1.100   200u 100u 0.500",
            "  50% (only A)   5000    -     -   300u    -     -",
            "  90%            9000 9900 1.100   900u 450u 0.500",
        ] {
            assert!(text.contains(line), "{:?} not in\n{}", line, text);
        }
    }

    fn config(n: u64, qos: &str, mof: f64, isol: f64) -> Row {
        vec![
            ("kind", json!("iocost-qos")),
            ("id", Value::Null),
            ("spec", json!("iocost-qos")),
            ("start", json!(1)),
            ("config", json!(n)),
            ("qos", json!(qos)),
            ("mof", json!(mof)),
            ("isol_pct", json!("05")),
            ("isol", json!(isol)),
        ]
    }

    fn vrate(v: f64) -> String {
        format!("rpct=95.00 rlat=1000 wpct=95.00 wlat=2000 [min={v}] [max={v}]")
    }

    #[test]
    fn configurations_pair_by_qos_whatever_their_order() {
        let a = vec![
            config(0, "iocost=off", 1.5, 0.9),
            config(1, &vrate(100.0), 1.4, 0.91),
            config(2, &vrate(50.0), 1.2, 0.95),
        ];
        let b = vec![
            config(0, "iocost=off", 1.6, 0.8),
            config(1, &vrate(102.5), 1.3, 0.918),
            config(2, &vrate(52.5), 1.1, 0.99),
        ];
        let keys = |_: &str| -> &'static [&'static str] { &["mof", "isol"] };
        let text = compare(&a, &b, ("a", "b"), &keys, CompareOpts::default());
        let mut swapped = b.clone();
        swapped.swap(1, 2);
        swapped.swap(0, 2);
        assert_eq!(
            text,
            compare(&a, &swapped, ("a", "b"), &keys, CompareOpts::default())
        );
        assert_eq!(
            text,
            "[iocost-qos] iocost-qos\n\
             \x20                            mof              isol-05%\n\
             \x20                         A     B   B/A       A     B   B/A\n\
             \x20 off                 1.500 1.600 1.067   90.00 80.00 0.889\n\
             \x20 vrate 100 | 102.5   1.400 1.300 0.929   91.00 91.80 1.009\n\
             \x20 vrate 50 | 52.5     1.200 1.100 0.917   95.00 99.00 1.042\n\
             \n\
             A: a\nB: b\n(key numbers; --full shows every number)\n"
        );
    }

    #[test]
    fn a_grid_missing_a_step_skips_it() {
        let a: Vec<Row> = [100.0, 80.0, 60.0, 40.0]
            .iter()
            .enumerate()
            .map(|(i, v)| config(i as u64, &vrate(*v), 1.0, 0.9))
            .collect();
        let b: Vec<Row> = [41.0, 101.0, 61.0]
            .iter()
            .enumerate()
            .map(|(i, v)| config(i as u64, &vrate(*v), 1.0, 0.9))
            .collect();
        let text = compare(&a, &b, ("a", "b"), &no_keys, CompareOpts::default());
        for want in [
            "vrate 100 | 101 ",
            "vrate 80 (only A) ",
            "vrate 60 | 61 ",
            "vrate 40 | 41 ",
        ] {
            assert!(text.contains(want), "{}\n{}", want, text);
        }
    }
}
