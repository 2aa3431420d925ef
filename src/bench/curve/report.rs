//! The curve as text — a table like Vdbench's, one line per point, then the knee and the
//! latency target's answer — and its headline numbers for `summary -o json|csv`.

use super::record::CurveRecord;
use super::study::{CurveResult, Row, Stat};
use crate::workload::ioengine::result::si;
use serde_json::json;
use std::fmt::Write;

/// `512us`, `1.29ms`, `3.91s`.
pub fn lat_text(ns: f64) -> String {
    if ns < 10e3 {
        format!("{:.1}us", ns / 1e3)
    } else if ns < 1e6 {
        format!("{:.0}us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.2}s", ns / 1e9)
    }
}

/// `±3%`: the spread over repetitions as a share of the mean.
fn spread(s: &Stat) -> String {
    if s.mean > 0.0 {
        format!("±{:.0}%", s.stdev / s.mean * 100.0)
    } else {
        "-".into()
    }
}

fn point_label(r: &Row, mode: &str) -> String {
    match (r.point, mode) {
        (None, _) => "max".into(),
        (Some(x), "qd") => format!("qd={}", x),
        (Some(x), _) => format!("{}%", x),
    }
}

fn row_text(out: &mut String, r: &Row, mode: &str, repeat: bool, knee: bool) {
    let pct = |p: f64| r.lat(Some(p)).map_or("-".into(), lat_text);
    let _ = write!(
        out,
        "{:>7} {:>8} {:>8} {:>9.1} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6.1} {:>6} {:>5.0}%",
        point_label(r, mode),
        r.target_iops.map_or("-".into(), si),
        si(r.iops.mean),
        r.bps.mean / (1 << 20) as f64,
        lat_text(r.lat_mean.mean),
        pct(50.0),
        pct(90.0),
        pct(99.0),
        pct(99.9),
        lat_text(r.lat_max.mean),
        r.depth_little.mean,
        r.depth_device
            .map_or("-".into(), |d| format!("{:.1}", d.mean)),
        r.cpu.mean * 100.0,
    );
    if repeat {
        let p99 = r
            .lat_pcts
            .iter()
            .find(|x| x.0 == 99.0)
            .map_or("-".into(), |x| spread(&x.1));
        let _ = write!(out, " {:>6} {:>6}", spread(&r.iops), p99);
    }
    let mark = match (r.target_iops.is_some() && !r.reached, knee) {
        (true, _) => "  missed its rate",
        (false, true) => "  <- knee",
        _ => "",
    };
    let _ = writeln!(out, "{}", mark);
}

fn header(out: &mut String, res: &CurveResult, rec: Option<&CurveRecord>) {
    if let Some(j) = &res.job {
        let _ = writeln!(
            out,
            "{}: bs={} qd={} workers={} {} on {}, {} per point{}",
            j.rw_name(),
            crate::workload::ioengine::result::size_text(j.bs),
            j.qd,
            j.workers,
            if j.direct { "direct" } else { "buffered" },
            res.target.display(),
            match j.stop {
                crate::workload::ioengine::job::Stop::Time(d) => format!("{}s", d.as_secs_f64()),
                crate::workload::ioengine::job::Stop::Bytes(b) =>
                    crate::workload::ioengine::result::size_text(b),
            },
            j.ss.map(|s| format!(" or until steady ({})", s.name()))
                .unwrap_or_default()
        );
    }
    let runs = rec.map_or(0, |r| r.runs.len());
    if runs > 1 {
        let _ = writeln!(
            out,
            "{} runs of the curve: means, with the spread of IOPS and p99",
            runs
        );
    }
}

/// The report body.
pub fn text(res: &CurveResult, rec: Option<&CurveRecord>) -> String {
    let mut out = String::new();
    header(&mut out, res, rec);
    let repeat = res.rows.first().is_some_and(|r| r.runs > 1);
    let _ = write!(
        out,
        "\n{:>7} {:>8} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}",
        "point",
        "target",
        "IOPS",
        "MiB/s",
        "mean",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "depth",
        "dev-q",
        "cpu"
    );
    if repeat {
        let _ = write!(out, " {:>6} {:>6}", "±IOPS", "±p99");
    }
    out.push('\n');
    if let Some(m) = &res.max {
        row_text(&mut out, m, &res.mode, repeat, false);
    }
    for (i, r) in res.rows.iter().enumerate() {
        row_text(&mut out, r, &res.mode, repeat, res.knee == Some(i));
    }
    out.push_str(
        "\n(latency: from when each IO was due to its completion, reads and writes; depth: IOs in \
         flight by Little's law; dev-q: the block device's mean queue)\n",
    );
    if let (Some(k), Some(first)) = (res.knee.and_then(|k| res.rows.get(k)), res.rows.first()) {
        let _ = writeln!(
            out,
            "knee: {} ({} IOPS), p99 {}: within {}x the first point's {}",
            point_label(k, &res.mode),
            si(k.iops.mean),
            k.lat(Some(99.0)).map_or("-".into(), lat_text),
            res.knee_factor,
            first.lat(Some(99.0)).map_or("-".into(), lat_text)
        );
    }
    if let Some(a) = &res.lat_target {
        // Whole IOPS: a bracket narrowed to 1 % doesn't show in three digits.
        let unit = |x: f64| {
            if res.mode == "qd" {
                format!("qd={}", x)
            } else {
                format!("{:.0} IOPS", x)
            }
        };
        let line = match (a.outcome.as_str(), a.x) {
            ("below", _) => match a.met_above {
                Some(x) => format!(
                    "missed at the lowest point, though met at {} (the curve is not \
                     monotonic: too noisy to answer)",
                    unit(x)
                ),
                None => "missed even at the lowest point".to_string(),
            },
            ("all", Some(x)) => format!("met at every point, up to {}", unit(x)),
            (_, Some(x)) => format!(
                "met up to {}{}{}",
                unit(x),
                a.lat_ns
                    .map(|l| format!(" ({})", lat_text(l)))
                    .unwrap_or_default(),
                a.bracket
                    .map(|(lo, hi)| format!(
                        "; bisected to {}..{} in {} probes",
                        unit(lo),
                        unit(hi),
                        a.probes
                    ))
                    .unwrap_or_default()
            ),
            _ => "not searched".to_string(),
        };
        let _ = writeln!(out, "lat-target {}: {}", a.target, line);
    }
    out
}

/// `summary -o json|csv` and `compare`: a record for the curve (`point` = `curve`: the
/// maximum, the knee, the target's answer), then one per point (`point` = `max`, `10%`,
/// `qd=4`), by which two curves' points pair.
pub fn headline(res: &CurveResult) -> Vec<crate::bench::contract::headline::Row> {
    let knee = res.knee.and_then(|k| res.rows.get(k));
    let us = |v: Option<f64>| v.map_or(serde_json::Value::Null, |ns| json!(ns / 1e3));
    let mut rows = vec![vec![
        ("point", json!("curve")),
        ("mode", json!(res.mode)),
        ("max_iops", json!(res.max.as_ref().map(|m| m.iops.mean))),
        ("points", json!(res.rows.len())),
        ("knee_point", json!(knee.and_then(|k| k.point))),
        ("knee_iops", json!(knee.map(|k| k.iops.mean))),
        ("knee_lat_p99_us", us(knee.and_then(|k| k.lat(Some(99.0))))),
        (
            "lat_target",
            json!(res.lat_target.as_ref().map(|a| a.target.clone())),
        ),
        (
            "lat_target_x",
            json!(res.lat_target.as_ref().and_then(|a| a.x)),
        ),
        (
            "lat_target_iops",
            json!(res.lat_target.as_ref().and_then(|a| a.iops)),
        ),
    ]];
    for r in res.max.iter().chain(&res.rows) {
        rows.push(vec![
            ("point", json!(point_label(r, &res.mode))),
            ("target_iops", json!(r.target_iops)),
            ("iops", json!(r.iops.mean)),
            ("pt_bps", json!(r.bps.mean)),
            ("pt_lat_mean_us", json!(r.lat_mean.mean / 1e3)),
            ("pt_lat_p50_us", us(r.lat(Some(50.0)))),
            ("pt_lat_p90_us", us(r.lat(Some(90.0)))),
            ("pt_lat_p99_us", us(r.lat(Some(99.0)))),
            ("pt_lat_p99.9_us", us(r.lat(Some(99.9)))),
            ("pt_lat_max_us", json!(r.lat_max.mean / 1e3)),
            ("pt_clat_p50_us", us(r.clat(50.0))),
            ("pt_clat_p99_us", us(r.clat(99.0))),
            ("depth", json!(r.depth_little.mean)),
            ("dev_q", json!(r.depth_device.map(|d| d.mean))),
            ("cpu", json!(r.cpu.mean)),
            ("reached", json!(r.reached)),
        ]);
    }
    rows
}
