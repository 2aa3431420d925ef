//! Resource-stat (`--rstat`) tables: the main per-slice table and, from detail level 1, the
//! `memory.stat`, `io.stat` and `vmstat` tables (level 2 also shows the hidden keys). The
//! model and its key lists are `study::rstat`'s.

use crate::format::text::{pct_table_header, pct_table_row};
use crate::study::rstat::{
    ResourceStat, RowFmt, IO_STAT_KEYS, MAIN_ROWS, MEMORY_STAT_KEYS, VMSTAT_KEYS,
};
use crate::units::{format_pct, format_size, PCT_LABELS};
use anyhow::{Context, Result};
use serde_json::value::RawValue;

/// Renders the `[TITLE]` table and, from `level` 1, the `[TITLE - memory.stat]`,
/// `[TITLE - io.stat]` and (when the data has it) `[TITLE - vmstat]` tables. Every table is
/// followed by one blank line.
pub fn format_rstat(out: &mut String, rs: &ResourceStat, title: &str, level: u8) {
    let width = label_width(level);

    pct_table_header(out, &format!("[{}]", title), width, PCT_LABELS);
    for ((name, fmt), dist) in MAIN_ROWS.iter().zip(rs.main_rows()) {
        let Some(dist) = dist else { continue };
        match fmt {
            RowFmt::Pct => pct_table_row(out, name, width, dist, format_pct),
            RowFmt::Size => pct_table_row(out, name, width, dist, format_size),
        }
    }
    out.push('\n');

    if level == 0 {
        return;
    }
    let keyed = [
        ("memory.stat", MEMORY_STAT_KEYS, &rs.mem_stat, true),
        ("io.stat", IO_STAT_KEYS, &rs.io_stat, true),
        ("vmstat", VMSTAT_KEYS, &rs.vmstat, rs.vmstat.present),
    ];
    for (name, keys, dists, show) in keyed {
        if !show {
            continue;
        }
        pct_table_header(out, &format!("[{} - {}]", title, name), width, PCT_LABELS);
        for (key, dist) in keys.iter().zip(dists.dists().iter()) {
            if key.shown_at(level) {
                pct_table_row(out, key.name, width, dist, |v| key.format(v));
            }
        }
        out.push('\n');
    }
}

/// Label column width of every table of a block: the longest row name shown at `level` across
/// all key lists (whether or not the slice has that table), at least 10.
fn label_width(level: u8) -> usize {
    let main = MAIN_ROWS.iter().map(|(name, _)| name.len());
    if level == 0 {
        return main.max().unwrap_or(0).max(10);
    }
    let keyed = [MEMORY_STAT_KEYS, IO_STAT_KEYS, VMSTAT_KEYS]
        .into_iter()
        .flatten()
        .filter(|k| k.shown_at(level))
        .map(|k| k.name.len());
    main.chain(keyed).max().unwrap_or(0).max(10)
}

/// Renders one resource-stat block (see [`format_rstat`]) from the study's JSON.
pub fn format_table(out: &mut String, title: &str, rstat: &RawValue, level: u8) -> Result<()> {
    let rs = ResourceStat::parse(rstat)
        .with_context(|| format!("reading the resource stat of [{}]", title))?;
    format_rstat(out, &rs, title, level);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::reports::study_period;
    use crate::study::rstat_study::tests::{close, write};
    use crate::study::rstat_study::{ResourceStatStudy, ROOT_SLICE};
    use serde_json::Value;
    use std::io::Read;
    use std::sync::OnceLock;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results/");
    const MODEL: &str = "Samsung_SSD_970_PRO_512GB";

    /// The `iocost-qos` entry's `result.runs` of the Samsung fixture.
    fn runs() -> &'static [Value] {
        static RUNS: OnceLock<Vec<Value>> = OnceLock::new();
        RUNS.get_or_init(|| {
            let path = format!("{}{}.json.gz", FIXTURES, MODEL);
            let mut json = String::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
                .read_to_string(&mut json)
                .unwrap();
            let entries: Vec<Value> = serde_json::from_str(&json).unwrap();
            let qos = entries
                .into_iter()
                .find(|e| e["spec"]["kind"] == "iocost-qos")
                .unwrap();
            match &qos["result"]["runs"] {
                Value::Array(runs) => runs.clone(),
                _ => panic!("no runs"),
            }
        })
    }

    fn fixture_text() -> &'static str {
        static TEXT: OnceLock<String> = OnceLock::new();
        TEXT.get_or_init(|| {
            let path = format!("{}{}.format-rstat2-subfull.iocost-qos.txt", FIXTURES, MODEL);
            std::fs::read_to_string(path).unwrap()
        })
    }

    /// The text of the `nth` section that starts after the line `start` + a blank line and ends
    /// right before the next line beginning with `end`.
    fn fixture_section(start: &str, end: &str, nth: usize) -> &'static str {
        let text = fixture_text();
        let marker = format!("\n{}\n\n", start);
        let (pos, _) = text.match_indices(&marker).nth(nth).unwrap();
        let body = &text[pos + marker.len()..];
        let stop = body.find(&format!("\n{}", end)).unwrap();
        &body[..stop + 1]
    }

    fn raw(v: &Value) -> Box<RawValue> {
        RawValue::from_string(serde_json::to_string(v).unwrap()).unwrap()
    }

    fn render(blocks: &[(&str, &Value)], level: u8) -> String {
        let mut out = String::new();
        for (title, v) in blocks {
            format_table(&mut out, title, &raw(v), level).unwrap();
        }
        out
    }

    fn assert_same(got: &str, want: &str) {
        if got != want {
            for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
                assert_eq!(g, w, "first difference at line {}", i + 1);
            }
            assert_eq!(
                got.lines().count(),
                want.lines().count(),
                "line counts differ"
            );
            assert_eq!(got, want);
        }
    }

    fn check_storage(run: usize) {
        let stor = &runs()[run]["stor"];
        let got = render(
            &[("ALL", &stor["all_rstat"]), ("FINAL", &stor["final_rstat"])],
            2,
        );
        assert_same(&got, fixture_section("Resource stat:", "IO BPS:", run));
    }

    fn check_mem_hog(run: usize) {
        let fr = &runs()[run]["prot"]["scenarios"][0]["MemHogTune"]["final_run"];
        let got = render(
            &[
                ("ROOT", &fr["root_rstat"]),
                ("WORKLOAD", &fr["work_rstat"]),
                ("SYSTEM", &fr["sys_rstat"]),
            ],
            2,
        );
        let want = fixture_section("Slice resource stat:", "Isolation and Request", run);
        assert_same(&got, want);
    }

    #[test]
    fn storage_all_and_final_run_00() {
        check_storage(0);
    }

    #[test]
    fn storage_all_and_final_run_13() {
        check_storage(13);
    }

    #[test]
    fn mem_hog_slices_run_00() {
        check_mem_hog(0);
    }

    #[test]
    fn mem_hog_slices_run_17() {
        check_mem_hog(17);
    }

    #[test]
    fn every_run_matches_fixture() {
        for run in 0..25 {
            check_storage(run);
            check_mem_hog(run);
        }
    }

    /// A distribution JSON object with every label set to `v`.
    fn dist_json(v: f64) -> String {
        let fields: Vec<String> = PCT_LABELS
            .iter()
            .map(|p| format!("\"{}\": {}", p, v))
            .collect();
        format!("{{{}}}", fields.join(", "))
    }

    fn synthetic_rstat(with_vmstat: bool) -> Box<RawValue> {
        let d = dist_json(2048.0);
        let pct = dist_json(0.5);
        let vmstat = if with_vmstat {
            format!(
                "{{\"nr_free_pages\": {d}, \"nr_zone_active_anon\": {d}, \"slabs_scanned\": {c}, \
                 \"pgscan_kswapd\": {d}, \"not_a_vmstat_key\": {d}}}",
                d = d,
                c = dist_json(12345.0)
            )
        } else {
            "{}".into()
        };
        let json = format!(
            "{{\"cpu_util\": {pct}, \"cpu_sys\": {pct}, \"mem_bytes\": {d}, \"swap_bytes\": {d}, \
             \"io_util\": {pct}, \"io_bps\": [{d}, {d}], \"psi_cpu\": {pct}, \
             \"psi_mem\": [{pct}, {pct}], \"psi_io\": [{pct}, {pct}], \
             \"mem_stat\": {{\"anon\": {d}, \"kernel_stack\": {d}, \"unknown_key\": {d}}}, \
             \"io_stat\": {{\"rios\": {c}, \"rbytes\": {d}}}, \"vmstat\": {vm}, \
             \"future_field\": [1, 2, 3]}}",
            pct = pct,
            d = d,
            c = dist_json(1500.0),
            vm = vmstat
        );
        RawValue::from_string(json).unwrap()
    }

    #[test]
    fn level_1_hides_hidden_keys_and_narrows_labels() {
        let mut out = String::new();
        format_table(&mut out, "ROOT", &synthetic_rstat(true), 1).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        let w = 24;
        let header = |t: &str| {
            format!(
                "{:<w$}    min   p01   p05   p10   p25   p50   p75   p90   p95   p99   max  mean stdev",
                t,
                w = w
            )
        };
        let row = |name: &str, cell: &str| {
            format!(
                "{:<w$}  {}",
                name,
                format!("{:>5} ", cell).repeat(13),
                w = w
            )
        };
        assert_eq!(lines[0], header("[ROOT]"));
        assert_eq!(lines[1], row("cpu%", "50.00"));
        assert_eq!(lines[3], row("mem", "2048"));
        assert_eq!(lines[12], row("io-full%", "50.00"));
        assert_eq!(lines[13], "");
        assert_eq!(lines[14], header("[ROOT - memory.stat]"));
        assert_eq!(lines[15], row("anon", "2048"));
        // kernel_stack is hidden at level 1: file follows anon directly.
        assert_eq!(lines[16], row("file", "-"));
        let names = |from: usize| -> Vec<&str> {
            lines[from..]
                .iter()
                .take_while(|l| !l.is_empty())
                .map(|l| l.split_whitespace().next().unwrap())
                .collect()
        };
        let mem_names = names(15);
        let visible: Vec<&str> = MEMORY_STAT_KEYS
            .iter()
            .filter(|k| !k.is_hidden())
            .map(|k| k.name)
            .collect();
        assert_eq!(mem_names, visible);
        assert!(!out.contains("kernel_stack"));
        assert!(!out.contains("unknown_key"));

        let io_at = 15 + mem_names.len() + 1;
        assert_eq!(lines[io_at], header("[ROOT - io.stat]"));
        assert_eq!(lines[io_at + 1], row("rbytes", "2048"));
        assert_eq!(lines[io_at + 2], row("rios", "1.5k"));
        assert_eq!(names(io_at + 1).len(), 11);

        let vm_at = io_at + 1 + 11 + 1;
        assert_eq!(lines[vm_at], header("[ROOT - vmstat]"));
        assert_eq!(lines[vm_at + 1], row("nr_free_pages", "2048"));
        let vm_names = names(vm_at + 1);
        assert_eq!(vm_names.len(), 47);
        assert!(!vm_names.contains(&"nr_zone_active_anon"));
        assert!(!vm_names.contains(&"slabs_scanned"));
        assert!(out.ends_with(" \n\n"));
        assert_eq!(lines.len(), vm_at + 1 + 47 + 1);
    }

    #[test]
    fn level_2_shows_hidden_keys_with_their_formats() {
        let mut out = String::new();
        format_table(&mut out, "ALL", &synthetic_rstat(true), 2).unwrap();
        let row = |name: &str, cell: &str| {
            format!("{:<30}  {}\n", name, format!("{:>5} ", cell).repeat(13))
        };
        assert!(out.contains(&row("kernel_stack", "2048")));
        assert!(out.contains(&row("nr_zone_active_anon", "2048")));
        assert!(out.contains(&row("slabs_scanned", "12.3k")));
        assert!(out.contains(&row("compact_daemon_migrate_scanned", "-")));
        assert!(!out.contains("not_a_vmstat_key"));
    }

    /// Event counters upstream prints base 10 (`1030` → `1.0k`), and a rate that overflowed
    /// the units (a counter reset reads as 2^64) prints `INF`.
    #[test]
    fn event_counts_print_base_10_and_overflowed_values_inf() {
        let json = format!(
            "{{\"mem_bytes\": {big}, \"swap_bytes\": {d}, \"vmstat\": {{\
             \"kswapd_high_wmark_hit_quickly\": {c}, \"kswapd_low_wmark_hit_quickly\": {c}, \
             \"drop_pagecache\": {c}, \"oom_kill\": {c}, \"balloon_migrate\": {c}, \
             \"pageoutrun\": {c}, \"pgrotated\": {big}}}}}",
            big = dist_json(u64::MAX as f64),
            d = dist_json(2048.0),
            c = dist_json(1030.0)
        );
        let mut out = String::new();
        format_table(&mut out, "ALL", &RawValue::from_string(json).unwrap(), 2).unwrap();
        let row = |name: &str, cell: &str| {
            format!("{:<30}  {}\n", name, format!("{:>5} ", cell).repeat(13))
        };
        for name in [
            "kswapd_high_wmark_hit_quickly",
            "kswapd_low_wmark_hit_quickly",
            "drop_pagecache",
            "oom_kill",
            "balloon_migrate",
        ] {
            assert!(out.contains(&row(name, "1.0k")), "{} in\n{}", name, out);
        }
        // A page-event counter stays a size, as upstream prints it.
        assert!(out.contains(&row("pageoutrun", "1030")));
        assert!(out.contains(&row("pgrotated", "INF")));
        assert!(out.contains(&row("mem", "INF")));
        assert!(out.contains(&row("swap", "2048")));
    }

    #[test]
    fn slices_without_vmstat_have_no_vmstat_table() {
        let mut out = String::new();
        format_table(&mut out, "WORKLOAD", &synthetic_rstat(false), 2).unwrap();
        assert!(out.contains("[WORKLOAD - io.stat]"));
        assert!(!out.contains("vmstat"));
        // The label column stays as wide as the widest key of any list.
        assert!(out.starts_with(&format!("{:<30}    min", "[WORKLOAD]")));
    }

    #[test]
    fn missing_keys_print_as_dashes() {
        let rs = RawValue::from_string(
            "{\"cpu_util\": {\"00\": 0.25, \"100\": null}, \"mem_stat\": {}, \"vmstat\": {\"x\": {}}}"
                .into(),
        )
        .unwrap();
        let mut out = String::new();
        format_table(&mut out, "ROOT", &rs, 2).unwrap();
        let dashes = "    - ".repeat(13);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[1],
            format!("{:<30}  25.00 {}", "cpu%", "    0 ".repeat(12))
        );
        // No `swap_bytes` (the 2.1 layout): no swap row, as upstream 2.1 printed it.
        assert!(!out.contains("\nswap "));
        for l in &lines[2..12] {
            assert!(l.ends_with(&dashes), "{}", l);
        }
        assert_eq!(lines[12], "");
        // Every memory.stat, io.stat and (present but with unknown keys only) vmstat key.
        let rows = out.lines().filter(|l| l.ends_with(&dashes)).count();
        assert_eq!(rows, 10 + 39 + 11 + 154);
        assert!(out.contains("[ROOT - vmstat]"));
    }

    #[test]
    fn level_0_prints_only_the_main_table() {
        let mut out = String::new();
        format_table(&mut out, "ROOT", &synthetic_rstat(true), 0).unwrap();
        assert_eq!(out.lines().count(), 14);
        assert!(out.starts_with("[ROOT]        min"));
        assert!(out.ends_with("\n\n"));
    }

    #[test]
    fn malformed_rstat_names_the_table() {
        for bad in [
            "[1, 2]",
            "{\"cpu_util\": 3}",
            "{\"io_bps\": [{}]}",
            "{\"mem_stat\": {\"anon\": {\"00\": \"x\"}}}",
        ] {
            let rs = RawValue::from_string(bad.into()).unwrap();
            let err = format_table(&mut String::new(), "SYSTEM", &rs, 1).unwrap_err();
            assert!(
                format!("{:#}", err).contains("resource stat of [SYSTEM]"),
                "{:#}",
                err
            );
        }
    }

    #[test]
    fn label_widths_follow_the_shown_keys() {
        assert_eq!(label_width(0), 10);
        assert_eq!(label_width(1), 24);
        assert_eq!(label_width(2), 30);
    }

    /// Study output → the existing parser and formatter, with the expected numbers.
    #[test]
    fn result_renders_with_the_rstat_formatter() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 0..10);
        let mut root = ResourceStatStudy::new(ROOT_SLICE);
        let mut work = ResourceStatStudy::new("workload.slice");
        study_period(dir.path(), (1000, 1010), &mut [&mut root, &mut work]).unwrap();

        let raw = root.result().to_raw().unwrap();
        let parsed = ResourceStat::parse(&raw).unwrap();
        assert!(close(parsed.cpu_util[5], 0.5));
        assert!(parsed.vmstat.present);
        let mut out = String::new();
        format_table(&mut out, "ROOT", &raw, 1).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        let row = |name: &str| {
            lines
                .iter()
                .find(|l| l.split_whitespace().next() == Some(name))
                .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>())
                .unwrap_or_default()
        };
        assert_eq!(row("cpu%")[..12], vec!["50.00"; 12]);
        assert_eq!(row("rbps")[5], "2.0M");
        assert_eq!(row("io-full%")[0], "15.00");
        assert_eq!(row("pgfault")[10], "1000");
        assert_eq!(row("pgscan_kswapd")[11], "50");
        assert!(out.contains("[ROOT - vmstat]"));

        let raw = work.result().to_raw().unwrap();
        let mut out = String::new();
        format_table(&mut out, "WORKLOAD", &raw, 2).unwrap();
        assert!(out.contains("[WORKLOAD - io.stat]"));
        assert!(!out.contains("vmstat"));
    }
}
