//! The study as text — the services alone, then one row per profile like the seed's tables
//! (the client's IOPS and latencies, the background's throughput and completion
//! time, best effort's throughput) — and its headline numbers for `summary -o json|csv` and
//! `compare`.

use super::profiles::Service;
use super::record::{QosStudyRecord, ServiceOut};
use super::study::{ProfileRow, QosStudyResult, Stat};
use crate::bench::contract::headline::Row;
use crate::workload::ioengine::result::si;
use serde_json::json;
use std::fmt::Write;

const MIB: f64 = (1 << 20) as f64;

/// `512us`, `1.29ms`, `3.91s` from µs.
pub fn lat_text(us: f64) -> String {
    if us < 10.0 {
        format!("{:.1}us", us)
    } else if us < 1e3 {
        format!("{:.0}us", us)
    } else if us < 1e6 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// `±3%`: the spread over repetitions as a share of the mean (empty for one run).
fn spread(s: &Stat, runs: u32) -> String {
    if runs < 2 {
        String::new()
    } else if s.mean > 0.0 {
        format!("±{:.0}%", s.stdev / s.mean * 100.0)
    } else {
        "±-".into()
    }
}

fn alone_text(out: &mut String, svc: Service, o: &ServiceOut) {
    let _ = writeln!(
        out,
        "  {:<12} {:>7} IOPS {:>8.1} MiB/s  lat mean {} p99 {}  in {:.1}s",
        svc.name(),
        si(o.iops),
        o.bps / MIB,
        lat_text(o.lat_mean_us),
        lat_text(o.lat(Some(99.0)).unwrap_or(0.0)),
        o.runtime_s
    );
}

fn row_text(out: &mut String, r: &ProfileRow) {
    let mut line = format!(
        "{:<24} {:>4} {:>7}{:<5} {:>8} {:>8} {:>8} {:>8} {:>9.1}{:<5} {:>7.1}{:<5}",
        r.profile,
        r.runs,
        si(r.client_iops.mean),
        spread(&r.client_iops, r.runs),
        lat_text(r.client_lat_mean_us.mean),
        lat_text(r.client_lat_p95_us.mean),
        lat_text(r.client_lat_p99_us.mean),
        lat_text(r.client_lat_p99_5_us.mean),
        r.bg_bps.mean / MIB,
        spread(&r.bg_bps, r.runs),
        r.bg_secs.mean,
        spread(&r.bg_secs, r.runs),
    );
    if let Some(be) = &r.be_bps {
        let _ = write!(line, " {:>8.1}", be.mean / MIB);
    }
    if r.bg_done < r.runs {
        let _ = write!(line, "  ({} of {} unfinished)", r.runs - r.bg_done, r.runs);
    }
    // One run has no spreads: no blanks left at the end of the line.
    out.push_str(line.trim_end());
    out.push('\n');
}

pub fn text(res: &QosStudyResult, rec: Option<&QosStudyRecord>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Device {} ({})",
        res.dev,
        if res.rotational {
            "rotational"
        } else {
            "non-rotational"
        }
    );
    if let Some(r) = rec {
        let _ = writeln!(
            out,
            "Background work {}, a mixed run capped at {:.0}s",
            crate::workload::ioengine::result::size_text(r.bg_size),
            r.dur_s
        );
        if let Some(m) = &r.iocost {
            let _ = writeln!(out, "io.cost: {}", m);
        }
    }
    out.push_str("\nAlone:\n");
    for (svc, o) in &res.alone {
        alone_text(&mut out, *svc, o);
    }
    let be = res.rows.iter().any(|r| r.be_bps.is_some());
    let _ = write!(
        out,
        "\n{:<24} {:>4} {:>12} {:>8} {:>8} {:>8} {:>8} {:>14} {:>12}",
        "profile", "runs", "client IOPS", "mean", "p95", "p99", "p99.5", "bg MiB/s", "bg secs"
    );
    if be {
        let _ = write!(out, " {:>8}", "be MiB/s");
    }
    out.push('\n');
    for r in &res.rows {
        row_text(&mut out, r);
    }
    if res.rows.is_empty() {
        out.push_str("(no profile has run yet)\n");
    }
    out
}

fn stat_cells(key: [&'static str; 2], s: &Stat) -> [(&'static str, serde_json::Value); 2] {
    [(key[0], json!(s.mean)), (key[1], json!(s.stdev))]
}

/// One record for the services alone, then one per profile.
pub fn headline(res: &QosStudyResult) -> Vec<Row> {
    let alone = |s: Service| res.alone.get(&s);
    let mut rows = vec![vec![
        ("profile", json!("alone")),
        ("client_iops", json!(alone(Service::Client).map(|o| o.iops))),
        (
            "client_lat_mean_us",
            json!(alone(Service::Client).map(|o| o.lat_mean_us)),
        ),
        (
            "client_lat_p99_us",
            json!(alone(Service::Client).and_then(|o| o.lat(Some(99.0)))),
        ),
        ("bg_bps", json!(alone(Service::Background).map(|o| o.bps))),
        (
            "bg_secs",
            json!(alone(Service::Background).map(|o| o.runtime_s)),
        ),
        ("be_bps", json!(alone(Service::BestEffort).map(|o| o.bps))),
    ]];
    for r in &res.rows {
        let mut row: Row = vec![
            ("profile", json!(r.profile)),
            ("control", json!(r.control)),
            ("runs", json!(r.runs)),
        ];
        row.extend(stat_cells(
            ["client_iops", "client_iops_sd"],
            &r.client_iops,
        ));
        row.extend([
            ("client_lat_mean_us", json!(r.client_lat_mean_us.mean)),
            ("client_lat_p95_us", json!(r.client_lat_p95_us.mean)),
            ("client_lat_p99_us", json!(r.client_lat_p99_us.mean)),
            ("client_lat_p99.5_us", json!(r.client_lat_p99_5_us.mean)),
        ]);
        row.extend(stat_cells(["bg_bps", "bg_bps_sd"], &r.bg_bps));
        row.extend(stat_cells(["bg_secs", "bg_secs_sd"], &r.bg_secs));
        row.push(("bg_done", json!(r.bg_done)));
        row.push(("be_bps", json!(r.be_bps.map(|s| s.mean))));
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::qos_study::study::ProfileRow;
    use std::collections::BTreeMap;

    fn stat(mean: f64, stdev: f64) -> Stat {
        Stat {
            mean,
            stdev,
            min: mean - stdev,
            max: mean + stdev,
        }
    }

    fn result() -> QosStudyResult {
        let mut alone = BTreeMap::new();
        alone.insert(
            Service::Client,
            ServiceOut {
                iops: 3690.0,
                lat_mean_us: 9290.0,
                lat_pcts_us: vec![(99.0, 21890.0)],
                runtime_s: 10.0,
                ..Default::default()
            },
        );
        let row = |name: &str, runs, done, iops| ProfileRow {
            profile: name.into(),
            control: "iocost".into(),
            runs,
            client_iops: stat(iops, iops / 10.0),
            client_lat_mean_us: stat(10180.0, 0.0),
            client_lat_p95_us: stat(18220.0, 0.0),
            client_lat_p99_us: stat(22020.0, 0.0),
            client_lat_p99_5_us: stat(25170.0, 0.0),
            bg_bps: stat(50.8 * MIB, 0.0),
            bg_secs: stat(29.5, 1.0),
            bg_done: done,
            be_bps: None,
        };
        QosStudyResult {
            dev: "254:0".into(),
            rotational: false,
            capacity: None,
            alone,
            rows: vec![
                row("iocost-high-client", 1, 1, 3340.0),
                row("iocost-balanced", 3, 2, 3000.0),
            ],
        }
    }

    #[test]
    fn text_has_a_row_per_profile_with_spreads_only_over_repetitions() {
        let t = text(&result(), None);
        assert!(t.lines().all(|l| l == l.trim_end()), "{:?}", t);
        let line = |p: &str| t.lines().find(|l| l.starts_with(p)).unwrap().to_string();
        let one = line("iocost-high-client ");
        assert!(
            one.contains("3.34k") && one.contains("22.02ms") && !one.contains('±'),
            "{}",
            one
        );
        let three = line("iocost-balanced ");
        assert!(three.contains("3.00k±10%"), "{}", three);
        assert!(three.ends_with("(1 of 3 unfinished)"), "{}", three);
        assert!(t.contains("client         3.69k IOPS"), "{}", t);
    }

    #[test]
    fn headline_has_the_alone_record_then_one_per_profile() {
        let rows = headline(&result());
        let get = |r: &Row, k: &str| r.iter().find(|(key, _)| *key == k).map(|(_, v)| v.clone());
        assert_eq!(rows.len(), 3);
        assert_eq!(get(&rows[0], "profile"), Some(json!("alone")));
        assert_eq!(get(&rows[0], "client_iops"), Some(json!(3690.0)));
        assert_eq!(get(&rows[0], "bg_bps"), Some(json!(null)));
        assert_eq!(get(&rows[2], "profile"), Some(json!("iocost-balanced")));
        assert_eq!(get(&rows[2], "client_iops_sd"), Some(json!(300.0)));
        assert_eq!(get(&rows[2], "bg_done"), Some(json!(2)));
        assert_eq!(get(&rows[2], "client_lat_p99.5_us"), Some(json!(25170.0)));
        let missing = crate::bench::contract::headline::missing_keys(
            <super::super::QosStudy as crate::bench::contract::api::Bench>::KEY_NUMBERS,
            &rows,
        );
        assert!(missing.is_empty(), "{:?}", missing);
    }
}
