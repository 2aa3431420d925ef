//! `format --plot`: the storage bench's memory search as a picture. Three panels share the
//! time axis (seconds since the first probe): the footprint each probe ran at, the share of
//! rps_max it reached, and its latency; each probe is a numbered segment over its duration,
//! green where it passed and red where it failed, so the search's bracket closing in is
//! visible. The answer — each loop's footprint and the MOF — is marked in blue, and the lines a
//! probe is judged by (the pass level, the latency target) are drawn and named.

use super::record::StorageRecord;
use crate::workload::hashd::params::Params;
use crate::workload::hashd::sizing::probe::ProbeRecord;
use crate::workload::hashd::sizing::timing::Thresholds;
use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const WIDTH: u32 = 960;
const HEIGHT: u32 = 760;
const PASS: RGBColor = RGBColor(0, 140, 60);
const FAIL: RGBColor = RGBColor(200, 30, 30);
const ANSWER: RGBColor = RGBColor(30, 80, 200);
const GIB: f64 = (1u64 << 30) as f64;

/// A probe as drawn: start and end (seconds since the first probe), footprint (GiB), share of
/// rps_max (%), latency (ms), verdict, and its number in its loop's search.
struct Seg {
    t0: f64,
    t1: f64,
    gib: f64,
    rps_pct: f64,
    lat_ms: f64,
    pass: bool,
    nr: usize,
}

/// A loop's answer: the footprint it found (GiB), over the loop's probes' time span.
struct Answer {
    t0: f64,
    t1: f64,
    gib: f64,
}

fn segments(rec: &StorageRecord) -> (Vec<Seg>, Vec<Answer>) {
    let Some(first) = rec
        .loops
        .iter()
        .flat_map(|l| l.mem_probes.iter().map(|p| p.start))
        .min()
    else {
        return (Vec::new(), Vec::new());
    };
    let seg = |p: &ProbeRecord, size: u64, nr: usize| {
        let t0 = p.start.saturating_sub(first) as f64;
        Seg {
            t0,
            t1: t0 + p.secs.max(1) as f64,
            gib: p.mem_frac * size as f64 / GIB,
            rps_pct: p.ratio * 100.0,
            lat_ms: p.lat * 1000.0,
            pass: p.pass.unwrap_or(false),
            nr,
        }
    };
    let (mut segs, mut answers) = (Vec::new(), Vec::new());
    for l in rec.loops.iter().filter(|l| !l.mem_probes.is_empty()) {
        let from = segs.len();
        segs.extend(
            l.mem_probes
                .iter()
                .enumerate()
                .map(|(i, p)| seg(p, l.size, i + 1)),
        );
        let mine = &segs[from..];
        answers.push(Answer {
            t0: mine.iter().map(|s| s.t0).fold(f64::MAX, f64::min),
            t1: mine.iter().map(|s| s.t1).fold(0.0, f64::max),
            gib: l.mem_frac * l.size as f64 / GIB,
        });
    }
    (segs, answers)
}

/// The SVG of a storage record's probes, `mof` in its title; `None` when the record has none
/// (upstream's and older records keep only the results).
pub fn svg(rec: &StorageRecord, spec: &str, mof: f64) -> Result<Option<String>> {
    let (segs, answers) = segments(rec);
    if segs.is_empty() {
        return Ok(None);
    }
    // A damaged record's absurd values would send the axis ticks into a loop without end.
    let plottable = crate::format::plottable;
    if let Some(s) = segs.iter().find(|s| {
        ![s.t1, s.gib, s.rps_pct, s.lat_ms]
            .into_iter()
            .all(plottable)
    }) {
        crate::usage_bail!(
            "{}: a probe's values can't be plotted (at {} s: footprint {} GiB, {} % of the \
             target RPS, latency {} ms); is the result file damaged?",
            spec,
            s.t0,
            s.gib,
            s.rps_pct,
            s.lat_ms
        );
    }
    if !answers.iter().all(|a| plottable(a.gib)) || !plottable(mof) {
        crate::usage_bail!(
            "{}: the footprints found or the MOF ({}) can't be plotted; is the result file \
             damaged?",
            spec,
            mof
        );
    }
    let found = answers
        .iter()
        .map(|a| crate::units::format_size(a.gib * GIB))
        .collect::<Vec<_>>()
        .join(", ");
    let title = format!(
        "{}: memory search, MOF {:.3} (footprint found {})",
        spec, mof, found
    );
    let mut out = String::new();
    draw(&mut out, &segs, &answers, &title).map_err(|e| anyhow!("drawing the plot: {}", e))?;
    Ok(Some(out))
}

/// A panel: its y label, the value it shows, a named horizontal line (value, name) and
/// whether its axis starts at zero.
struct Panel {
    label: String,
    value: fn(&Seg) -> f64,
    line: Option<(f64, String)>,
    from_zero: bool,
}

/// The y range that shows `vals` (and the named line) with a little room, from zero or from
/// just below the lowest value.
fn y_range(vals: impl Iterator<Item = f64> + Clone, from_zero: bool) -> (f64, f64) {
    let hi = vals.clone().fold(f64::MIN, f64::max);
    let lo = vals.fold(f64::MAX, f64::min);
    let span = (hi - lo).max(hi.abs() * 0.05).max(1e-3);
    let lo = if from_zero {
        0.0
    } else {
        (lo - span * 0.25).max(0.0)
    };
    (lo, hi + span * 0.2)
}

/// The three panels: footprint, RPS share with the pass level, latency with its target.
fn panels() -> [Panel; 3] {
    let hashd = Params::default();
    let pass = Thresholds::default().pass * 100.0;
    [
        Panel {
            label: "footprint (GiB)".into(),
            value: |s| s.gib,
            line: None,
            from_zero: false,
        },
        Panel {
            label: "RPS (% of rps_max)".into(),
            value: |s| s.rps_pct,
            line: Some((pass, format!("pass at {:.1} %", pass))),
            from_zero: false,
        },
        Panel {
            label: format!("latency, p{:.0} (ms)", hashd.lat_target_pct * 100.0),
            value: |s| s.lat_ms,
            line: Some((
                hashd.lat_target * 1000.0,
                format!("target {:.0} ms", hashd.lat_target * 1000.0),
            )),
            from_zero: true,
        },
    ]
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(out: &mut String, segs: &[Seg], answers: &[Answer], title: &str) -> DrawResult {
    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    // Room on the right, past the last probe, for the lines' names.
    let t_max = segs.iter().map(|s| s.t1).fold(1.0, f64::max) * 1.18;
    for (i, (area, p)) in root.split_evenly((3, 1)).iter().zip(&panels()).enumerate() {
        // The footprint panel also shows the answers and numbers the probes.
        let answers = if i == 0 { answers } else { &[] };
        panel(area, p, segs, answers, t_max)?;
    }
    root.present()?;
    Ok(())
}

/// One panel: its axes over the range that matters, its named line, the answers, the probes.
fn panel(area: &Area, p: &Panel, segs: &[Seg], answers: &[Answer], t_max: f64) -> DrawResult {
    let vals = segs
        .iter()
        .map(p.value)
        .chain(p.line.as_ref().map(|l| l.0))
        .chain(answers.iter().map(|a| a.gib));
    let (lo, hi) = y_range(vals, p.from_zero);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..t_max, lo..hi)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first probe")
        .y_desc(p.label.as_str())
        .light_line_style(WHITE)
        .draw()?;
    let up = (hi - lo) * 0.02;
    if let Some((y, name)) = &p.line {
        chart.draw_series(LineSeries::new([(0.0, *y), (t_max, *y)], BLACK.mix(0.5)))?;
        // In the room past the last probe, so that no probe strikes it through.
        label(
            &mut chart,
            name,
            (t_max, *y + up / 2.0),
            &BLACK,
            VPos::Bottom,
        )?;
    }
    for (k, a) in answers.iter().enumerate() {
        // To the name past the loop's last probe (the last loop's in the room on the right).
        let end = if k + 1 == answers.len() { t_max } else { a.t1 };
        chart.draw_series(DashedLineSeries::new(
            [(a.t0, a.gib), (end, a.gib)],
            6,
            4,
            ANSWER.stroke_width(2),
        ))?;
        let size = crate::units::format_size(a.gib * GIB);
        let name = if answers.len() > 1 {
            format!("loop {}: {}", k + 1, size)
        } else {
            format!("found {}", size)
        };
        label(&mut chart, &name, (end, a.gib - up), &ANSWER, VPos::Top)?;
    }
    for s in segs {
        let color = if s.pass { PASS } else { FAIL };
        let y = (p.value)(s);
        chart.draw_series(LineSeries::new(
            [(s.t0, y), (s.t1, y)],
            color.stroke_width(3),
        ))?;
        chart.draw_series(std::iter::once(Circle::new((s.t1, y), 3, color.filled())))?;
        if !answers.is_empty() {
            let style = ("sans-serif", 13)
                .into_font()
                .color(&color)
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            let at = ((s.t0 + s.t1) / 2.0, y + up);
            chart.draw_series(std::iter::once(Text::new(s.nr.to_string(), at, style)))?;
        }
    }
    Ok(())
}

/// A right-aligned label ending at `at`, above (`Bottom`) or below (`Top`) it.
fn label(chart: &mut Chart, text: &str, at: (f64, f64), color: &RGBColor, v: VPos) -> DrawResult {
    let style = ("sans-serif", 13)
        .into_font()
        .color(color)
        .pos(Pos::new(HPos::Right, v));
    chart.draw_series(std::iter::once(Text::new(text.to_string(), at, style)))?;
    Ok(())
}
