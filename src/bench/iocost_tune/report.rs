//! What `summary` and `format` print for an iocost-tune result, as upstream prints it: the
//! text graphs of every series (`format` only), the solutions grouped by rules that share one,
//! the remarks; and the two digests without the common header, `high-level` and `hwdb` (the
//! systemd hwdb lines). Ours: the solutions' intervals (`:intervals`).

use super::interval::{self, Bounds, SolutionSpread};
use super::model::{DataSeries, IocostTuneResult, QosSolution, LAT_PCTS};
use super::rules::QosRule;
use super::sel::DataSel;
use crate::format::text::double_underline;
use crate::format::textplot::{self, Axis, Marker, Series};
use crate::units::{format_duration, format_pct, format_size};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The solutions the hwdb lists, in its order; the `rlat-*` ones follow in the file.
const HWDB_SOLUTIONS: [&str; 4] = ["isolation", "isolated-bandwidth", "bandwidth", "naive"];

/// Graph face, in characters.
const GRAPH_SIZE: (u32, u32) = (80, 24);

/// `N points, MOF=[lo,hi], aMOF=[lo,hi]` over the solutions.
fn points_summary(res: &IocostTuneResult) -> String {
    let points = res
        .data
        .get(&DataSel::Mof)
        .map_or(0, |s| s.data.len() + s.outliers.len());
    let sols: Vec<&QosSolution> = res.solutions.values().collect();
    if sols.is_empty() {
        return format!("{} points, no solutions", points);
    }
    let range = |f: fn(&QosSolution) -> f64| {
        let lo = sols.iter().map(|s| f(s)).fold(f64::INFINITY, f64::min);
        let hi = sols.iter().map(|s| f(s)).fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    };
    let (mof, amof) = (
        range(|s| s.mem_offload_factor),
        range(|s| s.adjusted_mem_offload_factor),
    );
    format!(
        "{} points, MOF=[{:.3},{:.3}], aMOF=[{:.3},{:.3}]",
        points, mof.0, mof.1, amof.0, amof.1
    )
}

/// `format iocost-tune:high-level`: the points, the base model in short sizes and each rule's
/// scale. Upstream prints its base bandwidths through a one-character precision on the size
/// text (`rbps=3` for 3.0G), and stops at the first rule without a solution after saying so
/// ahead of everything else; both kept.
pub fn high_level(out: &mut String, res: &IocostTuneResult, rules: &[QosRule]) {
    let mut sols = Vec::new();
    for rule in rules {
        match res.solutions.get(&rule.name) {
            Some(s) => sols.push(format!("{}={}%", rule.name, format_pct(s.scale_factor))),
            None => {
                let _ = writeln!(out, "Solution {} not found...", rule.name);
                break;
            }
        }
    }
    let first_char = |v: u64| format_size(v as f64).chars().take(1).collect::<String>();
    let m = &res.base_model;
    let _ = writeln!(out, "[iocost-tune result]\n");
    let _ = writeln!(out, "{}", points_summary(res));
    let _ = writeln!(
        out,
        "base model: rbps={} rseqiops={} rrandiops={} wbps={} wseqiops={} wrandiops={}",
        first_char(m.rbps),
        format_size(m.rseqiops as f64),
        format_size(m.rrandiops as f64),
        first_char(m.wbps),
        format_size(m.wseqiops as f64),
        format_size(m.wrandiops as f64)
    );
    if sols.len() < 4 {
        let _ = writeln!(out, "solutions : {}", sols.join(" "));
    } else {
        let _ = writeln!(out, "solutions : {}", sols[..4].join(" "));
        let _ = writeln!(out, "            {}", sols[4..].join(" "));
    }
    out.push('\n');
}

/// `format iocost-tune:hwdb` / `:hwdb-fwrev`: a systemd hwdb entry for the device model (and
/// firmware with `fwrev`) with each solution's model and QoS.
pub fn hwdb(out: &mut String, res: &IocostTuneResult, model: &str, fwrev: Option<&str>) {
    let _ = writeln!(out, "# {}", points_summary(res));
    let _ = writeln!(
        out,
        "block:*:name:{}:fwrev:{}:",
        model,
        fwrev.unwrap_or("*")
    );
    let mut listed: Vec<(&str, &QosSolution)> = HWDB_SOLUTIONS
        .iter()
        .filter_map(|n| res.solutions.get(*n).map(|s| (*n, s)))
        .collect();
    let names: Vec<&str> = listed.iter().map(|(n, _)| *n).collect();
    let _ = write!(out, "  IOCOST_SOLUTIONS={}", names.join(" "));
    listed.extend(
        res.solutions
            .iter()
            .filter(|(n, _)| n.starts_with("rlat"))
            .map(|(n, s)| (n.as_str(), s)),
    );
    for (name, s) in listed {
        let key = name.to_uppercase().replace('-', "_");
        let (r, w) = s.model.lines();
        let _ = writeln!(out, "\n  IOCOST_MODEL_{}={} {}", key, r, w);
        let _ = write!(out, "  IOCOST_QOS_{}={}", key, s.qos.line());
    }
    out.push('\n');
}

/// `[name] target` for each rule of a group, the names padded to the longest.
fn rule_lines(out: &mut String, rules: &[&QosRule]) {
    let width = rules.iter().map(|r| r.name.len()).max().unwrap_or(0);
    for r in rules {
        let _ = writeln!(out, "[{:<w$}] {}", r.name, r.target, w = width);
    }
}

fn lat_line(out: &mut String, what: &str, map: &super::model::TimePctsMap) {
    let _ = write!(out, "  {}:", what);
    for (lat, time) in LAT_PCTS {
        let v = QosSolution::lat(map, lat, time);
        let _ = write!(out, " {}-{}={:>5}", lat, time, format_duration(v));
    }
    out.push('\n');
}

fn solution(out: &mut String, s: &QosSolution, isol_pct: &str) {
    let _ = writeln!(
        out,
        "  info: scale={}% MOF={:.3}@{} aMOF={:.3} aMOF-delta={:.3} isol-{}={}%",
        format_pct(s.scale_factor),
        s.mem_offload_factor,
        s.mem_profile,
        s.adjusted_mem_offload_factor,
        s.adjusted_mem_offload_delta,
        isol_pct,
        format_pct(s.isol)
    );
    lat_line(out, "rlat", &s.rlat);
    lat_line(out, "wlat", &s.wlat);
    let (r, w) = s.model.lines();
    let _ = writeln!(out, "  model: {} {}", r, w);
    let _ = writeln!(out, "  qos: {}", s.qos.line());
}

/// The Solutions section: consecutive rules with the same answer (or none) share one block.
pub fn solutions(out: &mut String, res: &IocostTuneResult, rules: &[QosRule]) {
    if rules.is_empty() {
        return;
    }
    double_underline(out, "Solutions");
    let mut group: Vec<&QosRule> = Vec::new();
    let mut prev: Option<&QosSolution> = None;
    let flush = |out: &mut String, group: &mut Vec<&QosRule>, prev: Option<&QosSolution>| {
        if group.is_empty() {
            return;
        }
        rule_lines(out, group);
        match prev {
            Some(s) => solution(out, s, &res.isol_pct),
            None => out.push_str("  NO SOLUTION\n"),
        }
        out.push('\n');
        group.clear();
    };
    for rule in rules {
        let sol = res.solutions.get(&rule.name);
        let same = match (sol, prev) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same_answer(b),
            _ => false,
        };
        if !group.is_empty() && !same {
            flush(out, &mut group, prev);
        }
        group.push(rule);
        prev = sol;
    }
    flush(out, &mut group, prev);
}

/// `:intervals`: per solution its vrate range with the 90 % intervals of its ends and of its
/// latency targets, and whether it is unstable (see `interval`).
pub fn intervals(
    out: &mut String,
    rules: &[QosRule],
    spreads: &BTreeMap<String, SolutionSpread>,
    configs: usize,
) {
    double_underline(out, "How sure the solutions are");
    let _ = writeln!(
        out,
        "90% intervals from {} resamples of {} configuration{} (vrates in % of the model)\n",
        interval::DFL_BOOT.resamples,
        configs,
        if configs == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "{:<20} {:>19} {:>19} {:>17} {:>17}",
        "solution", "vrate-min", "vrate-max", "rlat 90%", "wlat 90%"
    );
    let b = |v: f64, b: &Bounds| format!("{:.1} ({:.1}-{:.1})", v, b.lo, b.hi);
    let lat = |b: &Option<Bounds>| match b {
        Some(b) => format!(
            "{}-{}",
            format_duration(b.lo / 1e6),
            format_duration(b.hi / 1e6)
        ),
        None => "-".into(),
    };
    for r in rules {
        let Some(s) = spreads.get(&r.name) else {
            let _ = writeln!(out, "{:<20} no solution", r.name);
            continue;
        };
        let _ = write!(
            out,
            "{:<20} {:>19} {:>19} {:>17} {:>17}",
            r.name,
            b(s.vrate.0, &s.vrate_min),
            b(s.vrate.1, &s.vrate_max),
            lat(&s.rlat),
            lat(&s.wlat)
        );
        if s.unstable() {
            let _ = write!(
                out,
                "  UNSTABLE: found in {:.0}% of the resamples, fit shape changed in {:.0}%",
                s.found * 100.0,
                s.shape_changed * 100.0
            );
        }
        out.push('\n');
    }
    out.push('\n');
}

pub fn remarks(out: &mut String, res: &IocostTuneResult) {
    if res.remarks.is_empty() {
        return;
    }
    double_underline(out, "Remarks");
    for r in &res.remarks {
        let _ = writeln!(out, "* {}", r);
    }
}

/// Characters XML can't hold as they are; upstream escapes its graph labels for its SVGs and
/// prints the same labels in text.
fn escape_xml(s: &str) -> String {
    let mut e = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => e.push_str("&lt;"),
            '>' => e.push_str("&gt;"),
            '&' => e.push_str("&#38;"),
            '\'' => e.push_str("&#39;"),
            '"' => e.push_str("&#34;"),
            c => e.push(c),
        }
    }
    e
}

/// A series' y axis range and scale: MOF-like series start at 1 (lower only if a value is),
/// fractions print as percentages, latencies in milliseconds.
fn y_scale(sel: &DataSel, lo: f64, hi: f64) -> (f64, f64) {
    let mof_min = if lo >= 1.0 {
        1.0
    } else {
        lo - (hi - lo) / 10.0
    };
    match sel {
        DataSel::Mof | DataSel::Amof => (mof_min, 1.0),
        DataSel::AmofDelta => (0.0, 1.0),
        DataSel::RLat(..) | DataSel::WLat(..) => (0.0, 1000.0),
        _ => (0.0, 100.0),
    }
}

/// The x-axis label: the fitted range, the line's values, its inflections and error.
fn x_label(s: &DataSeries, yscale: f64) -> String {
    let (lo, hi) = s.lines.range;
    let mut l = format!("vrate {:.1}-{:.1} (", lo, hi);
    let (min, max) = s.lines.min_max();
    if min == max {
        let _ = write!(l, "mean={:.3}", min * yscale);
    } else {
        let _ = write!(l, "min={:.3} max={:.3}", min * yscale, max * yscale);
    }
    let p = &s.lines.points;
    if p.len() > 2 {
        let infls: Vec<String> = p[1..p.len() - 1]
            .iter()
            .map(|v| format!("{:.1}", v.x))
            .collect();
        let _ = write!(l, " infls={}", infls.join(","));
    }
    let _ = write!(l, " err={:.3})", s.error * yscale);
    l
}

fn y_label(sel: &DataSel, res: &IocostTuneResult) -> String {
    match sel {
        DataSel::Mof | DataSel::Amof | DataSel::AmofDelta => {
            format!("{}@{}", sel, res.mem_profile)
        }
        DataSel::Isol => format!("isol-{}", res.isol_pct),
        sel => sel.to_string(),
    }
}

/// What a series' graph shows, shared by the text and SVG graphs: the y range (scaled), the
/// scale of its values and both labels.
pub struct GraphFrame {
    pub y_min: f64,
    pub y_max: f64,
    pub yscale: f64,
    pub x_label: String,
    pub y_label: String,
}

pub fn graph_frame(sel: &DataSel, s: &DataSeries, res: &IocostTuneResult) -> GraphFrame {
    let (lo, hi) = s
        .data
        .iter()
        .chain(&s.outliers)
        .fold((f64::MAX, 0.0_f64), |(lo, hi), p| {
            (lo.min(p.y), hi.max(p.y))
        });
    let (ymin, yscale) = y_scale(sel, lo, hi);
    let ymax = (hi * 1.1).max(ymin + 0.000001);
    GraphFrame {
        y_min: ymin * yscale,
        y_max: ymax * yscale,
        yscale,
        x_label: x_label(s, yscale),
        y_label: y_label(sel, res),
    }
}

/// One series' graph: the fitted line sampled at 80 vrates (squares), the rejected points
/// (crosses) and the points (circles), over vrate 0 to 110 % of the widest range.
fn graph(out: &mut String, sel: &DataSel, s: &DataSeries, res: &IocostTuneResult, vmax: f64) {
    let g = graph_frame(sel, s, res);
    let (w, h) = GRAPH_SIZE;
    let x = Axis::new(0.0, (vmax * 1.1).max(0.000001), 6, &escape_xml(&g.x_label));
    let y = Axis::new(g.y_min, g.y_max, 6, &escape_xml(&g.y_label));
    let (Some(x), Some(y)) = (x, y) else {
        let _ = writeln!(out, "{}: no graph (no usable range)\n", sel);
        return;
    };
    let yscale = g.yscale;
    let range = s.lines.range;
    let line: Vec<(f64, f64)> = (0..w)
        .map(|i| range.1 / f64::from(w) * f64::from(i))
        .filter(|v| *v >= range.0)
        .map(|v| (v, s.lines.eval(v) * yscale))
        .collect();
    let scaled = |pts: &[super::model::DataPoint]| -> Vec<(f64, f64)> {
        pts.iter().map(|p| (p.x, p.y * yscale)).collect()
    };
    let (rejected, points) = (scaled(&s.outliers), scaled(&s.data));
    let series = [
        Series {
            points: &line,
            marker: Marker::Square,
        },
        Series {
            points: &rejected,
            marker: Marker::Cross,
        },
        Series {
            points: &points,
            marker: Marker::Circle,
        },
    ];
    let _ = write!(out, "{}\n\n", textplot::render(&x, &y, &series, w, h));
}

/// The Graphs section of `format`.
pub fn graphs(out: &mut String, res: &IocostTuneResult) {
    double_underline(
        out,
        "Graphs (square: fitted line, circle: data points, cross: rejected)",
    );
    let vmax = res
        .data
        .values()
        .fold(0.0_f64, |acc, s| s.lines.range.1.max(acc));
    for (sel, s) in &res.data {
        graph(out, sel, s, res, vmax);
    }
}
