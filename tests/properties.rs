//! Properties over large input spaces (proptest): the job-spec grammar, the value parsers and
//! formatters, the result-file reader and the latency histograms' merge. Each one holds for
//! every input the strategy draws; a failure prints the smallest input that breaks it.

use proptest::prelude::*;
use resctl_bench::result::parse_entries;
use resctl_bench::spec::JobSpec;
use resctl_bench::units::parse::{parse_duration, parse_frac, parse_int, parse_size};
use resctl_bench::units::{format_pct, format_size};
use std::path::Path;

/// 512 cases: enough to find the edges, few enough for `cargo test` on a debug build;
/// `PROPTEST_CASES=N` runs more (e.g. a long run in release mode).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// A property key or value: letters, digits and the characters the grammar escapes.
fn token() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r"[a-z0-9:,=\\. _-]{0,8}").unwrap()
}

/// A spec's text built from parts: a kind, then groups of `key=value` with every special
/// character escaped, as a user would write it.
fn spec_text() -> impl Strategy<Value = String> {
    let esc = |s: &str| {
        s.chars()
            .flat_map(|c| match c {
                ':' | ',' | '=' | '\\' => vec!['\\', c],
                c => vec![c],
            })
            .collect::<String>()
    };
    (
        "[a-z][a-z-]{0,10}",
        prop::collection::vec(prop::collection::vec((token(), token()), 0..4), 0..4),
    )
        .prop_map(move |(kind, groups)| {
            let mut s = kind;
            for g in groups {
                s.push(':');
                let props: Vec<String> = g
                    .iter()
                    .filter(|(k, _)| !k.is_empty())
                    .map(|(k, v)| format!("{}={}", esc(k), esc(v)))
                    .collect();
                s += &props.join(",");
            }
            s
        })
}

proptest! {
    #![proptest_config(config())]

    /// Any string: a spec or one clear error, never a panic.
    #[test]
    fn spec_parse_never_panics(s in any::<String>()) {
        let _ = JobSpec::parse(&s);
    }

    /// A parsed spec prints as text that parses back to the same spec, and printing is stable.
    #[test]
    fn spec_print_parse_round_trip(s in spec_text()) {
        let spec = JobSpec::parse(&s).unwrap();
        let printed = spec.canonical();
        let again = JobSpec::parse(&printed).unwrap();
        prop_assert_eq!(&again, &spec, "{} printed as {}", s, printed);
        prop_assert_eq!(again.canonical(), printed);
    }

    /// The value parsers take any string without a panic.
    #[test]
    fn value_parsers_never_panic(s in any::<String>()) {
        let _ = parse_size(&s);
        let _ = parse_duration(&s);
        let _ = parse_frac(&s);
        let _ = parse_int(&s);
    }

    /// Sizes: a bare number is bytes, units are powers of 1024, and terms add up.
    #[test]
    fn sizes_scale_and_add(n in 0u64..(1 << 40), k in 0u64..(1 << 20)) {
        prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
        prop_assert_eq!(parse_size(&format!("{}K", k)), Ok(k << 10));
        prop_assert_eq!(parse_size(&format!("{}M+{}", k, n)), Ok((k << 20) + n));
    }

    /// A size as `format_size` prints it reads back within the precision it prints, and a
    /// larger size never prints as a smaller one. Below 1 TiB only: from there on the reports
    /// print upstream's units, `P` for 2^40 and `E` for 2^50 (the next property), which a
    /// size given on the command line means as 2^50 and 2^60.
    #[test]
    fn printed_sizes_read_back_close_and_in_order(a in 1.0f64..1099511627776.0, b in 1.0f64..1099511627776.0) {
        for x in [a, b] {
            let back = parse_size(&format_size(x)).unwrap() as f64;
            prop_assert!((back - x).abs() <= x * 0.05 + 1.0, "{} printed as {} reads {}", x, format_size(x), back);
        }
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let (plo, phi) = (parse_size(&format_size(lo)).unwrap(), parse_size(&format_size(hi)).unwrap());
        prop_assert!(plo <= phi, "{} -> {}, {} -> {}", lo, format_size(lo), hi, format_size(hi));
    }

    /// Upstream's quirk, kept for byte-identical reports: sizes of 1 TiB and up print with
    /// units one step too large, and read back 1024 times too large.
    #[test]
    fn printed_sizes_from_a_tebibyte_up_read_back_1024_times_larger(x in 1099511627776.0f64..1.6e16) {
        let back = parse_size(&format_size(x)).unwrap() as f64 / 1024.0;
        prop_assert!((back - x).abs() <= x * 0.05, "{} printed as {}", x, format_size(x));
    }

    /// Durations: seconds, minutes and hours add up; `ms` is a thousandth.
    #[test]
    fn durations_add_up(h in 0u32..100, m in 0u32..60, s in 0u32..60, ms in 0u32..1000) {
        let want = h as f64 * 3600.0 + m as f64 * 60.0 + s as f64;
        prop_assert_eq!(parse_duration(&format!("{}h{}m{}s", h, m, s)), Ok(want));
        let got = parse_duration(&format!("{}ms", ms)).unwrap();
        prop_assert!((got - ms as f64 / 1000.0).abs() < 1e-9);
    }

    /// Fractions: `P%` is P/100, and a percentage as `format_pct` prints it reads back within
    /// its two decimals.
    #[test]
    fn fractions_and_percentages(p in 0.0f64..100.0) {
        let f = parse_frac(&format!("{}%", p)).unwrap();
        prop_assert!((f - p / 100.0).abs() < 1e-12);
        let printed = format_pct(p / 100.0);
        let back = parse_frac(&format!("{}%", printed.trim_end_matches('%'))).unwrap();
        prop_assert!((back - p / 100.0).abs() <= 0.00005 + 1e-12, "{} printed as {}", p, printed);
    }

    /// Any bytes: entries or one clear error, never a panic.
    #[test]
    fn result_reader_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_entries(Path::new("x.json"), &bytes);
    }

    /// JSON arrays shaped like result files, with any values where the fields go: read, and
    /// when read, printed by `format` and `summary` without a panic.
    #[test]
    fn result_reader_and_reports_never_panic_on_entry_shapes(entries in prop::collection::vec(entry_json(), 0..3)) {
        let text = serde_json::to_string(&entries).unwrap();
        if let Ok(read) = parse_entries(Path::new("x.json"), text.as_bytes()) {
            let _ = resctl_bench::bench::results::show::format_entries(&read, &[], true, 1);
            let _ = resctl_bench::bench::results::show::format_entries(&read, &[], false, 0);
            let _ = resctl_bench::bench::results::export::records(&read, &[]);
        }
    }
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z0-9]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An entry with a real bench kind and any values in its fields.
fn entry_json() -> impl Strategy<Value = serde_json::Value> {
    let kinds = prop::sample::select(vec![
        "storage",
        "protection",
        "iocost-params",
        "iocost-qos",
        "iocost-tune",
        "hashd-params",
        "io",
        "nosuch",
    ]);
    (
        kinds,
        json_value(),
        json_value(),
        json_value(),
        0u64..2_000_000_000,
    )
        .prop_map(|(kind, sysinfo, record, result, t)| {
            serde_json::json!({
                "spec": {"kind": kind, "id": null, "passive": null, "props": [{}]},
                "period": [t, t + 60],
                "sysinfo": sysinfo,
                "record": record,
                "result": result,
            })
        })
}

mod hist {
    use proptest::prelude::*;
    use resctl_bench::report::hist::LatHist as ReportHist;
    use resctl_bench::workload::ioengine::hist::LatHist as EngineHist;

    proptest! {
        #![proptest_config(super::config())]

        /// The reports' histogram: merging the histograms of two parts gives the histogram
        /// of the whole.
        #[test]
        fn report_hist_merge_is_the_whole(a in prop::collection::vec(0u64..(1 << 40), 0..64),
                                           b in prop::collection::vec(0u64..(1 << 40), 0..64)) {
            let (mut ha, mut hb, mut whole) = (ReportHist::new(), ReportHist::new(), ReportHist::new());
            a.iter().for_each(|v| ha.record_ns(*v));
            b.iter().for_each(|v| hb.record_ns(*v));
            a.iter().chain(&b).for_each(|v| whole.record_ns(*v));
            ha.merge(&hb);
            prop_assert_eq!(ha, whole);
        }

        /// The IO engine's histogram: the same for count, extremes, mean and every
        /// percentile.
        #[test]
        fn engine_hist_merge_is_the_whole(a in prop::collection::vec(1u64..(1 << 36), 0..64),
                                           b in prop::collection::vec(1u64..(1 << 36), 0..64)) {
            let (mut ha, mut hb, mut whole) = (EngineHist::new(), EngineHist::new(), EngineHist::new());
            a.iter().for_each(|v| ha.record(*v));
            b.iter().for_each(|v| hb.record(*v));
            a.iter().chain(&b).for_each(|v| whole.record(*v));
            ha.merge(&hb);
            prop_assert_eq!(ha.count(), whole.count());
            prop_assert_eq!(ha.min(), whole.min());
            prop_assert_eq!(ha.max(), whole.max());
            prop_assert!((ha.mean() - whole.mean()).abs() <= 1e-6 * whole.mean().abs().max(1.0));
            for p in [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
                prop_assert_eq!(ha.percentile(p), whole.percentile(p), "p{}", p);
            }
        }
    }
}
