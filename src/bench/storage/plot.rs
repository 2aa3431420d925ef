//! `format --plot`: the storage bench's memory search as a picture. Three panels share the
//! time axis (seconds since the first probe): the footprint each probe ran at, the share of the
//! target RPS it reached, and its latency; each probe is a segment over its duration, green
//! where it passed and red where it failed, so the search's bracket closing in is visible.

use super::record::StorageRecord;
use crate::workload::hashd::sizing::probe::ProbeRecord;
use anyhow::{anyhow, Result};
use plotters::prelude::*;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 720;
const PASS: RGBColor = RGBColor(0, 140, 60);
const FAIL: RGBColor = RGBColor(200, 30, 30);

/// A probe as drawn: start and end (seconds since the first probe), footprint (GiB), share of
/// the target RPS (%), latency (ms), verdict.
struct Seg {
    t0: f64,
    t1: f64,
    gib: f64,
    rps_pct: f64,
    lat_ms: f64,
    pass: bool,
}

fn segments(rec: &StorageRecord) -> Vec<Seg> {
    let probes: Vec<(&ProbeRecord, u64)> = rec
        .loops
        .iter()
        .flat_map(|l| l.mem_probes.iter().map(move |p| (p, l.size)))
        .collect();
    let Some(first) = probes.iter().map(|(p, _)| p.start).min() else {
        return Vec::new();
    };
    probes
        .iter()
        .map(|(p, size)| {
            let t0 = (p.start - first) as f64;
            Seg {
                t0,
                t1: t0 + p.secs.max(1) as f64,
                gib: p.mem_frac * *size as f64 / (1u64 << 30) as f64,
                rps_pct: p.ratio * 100.0,
                lat_ms: p.lat * 1000.0,
                pass: p.pass.unwrap_or(false),
            }
        })
        .collect()
}

/// The SVG of a storage record's probes; `None` when the record has none (upstream's and
/// older records keep only the results).
pub fn svg(rec: &StorageRecord, title: &str) -> Result<Option<String>> {
    let segs = segments(rec);
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
            title,
            s.t0,
            s.gib,
            s.rps_pct,
            s.lat_ms
        );
    }
    let mut out = String::new();
    draw(&mut out, &segs, title).map_err(|e| anyhow!("drawing the plot: {}", e))?;
    Ok(Some(out))
}

type Panel<'a> = (&'static str, fn(&Seg) -> f64, Option<(f64, &'a str)>);

fn draw(out: &mut String, segs: &[Seg], title: &str) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let t_max = segs.iter().map(|s| s.t1).fold(1.0, f64::max);
    let panels: [Panel; 3] = [
        ("footprint (GiB)", |s| s.gib, None),
        (
            "RPS (% of the target)",
            |s| s.rps_pct,
            Some((100.0, "target")),
        ),
        ("latency (ms)", |s| s.lat_ms, None),
    ];
    for (area, (label, value, line)) in root.split_evenly((3, 1)).iter().zip(panels) {
        let hi = segs
            .iter()
            .map(value)
            .chain(line.map(|l| l.0))
            .fold(0.0, f64::max);
        let hi = if hi > 0.0 { hi * 1.1 } else { 1.0 };
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..t_max, 0.0..hi)?;
        chart
            .configure_mesh()
            .x_desc("seconds since the first probe")
            .y_desc(label)
            .light_line_style(WHITE)
            .draw()?;
        if let Some((y, name)) = line {
            chart.draw_series(LineSeries::new([(0.0, y), (t_max, y)], BLACK.mix(0.4)))?;
            chart.draw_series(std::iter::once(Text::new(
                name,
                (0.0, y),
                ("sans-serif", 12).into_font(),
            )))?;
        }
        for s in segs {
            let color = if s.pass { PASS } else { FAIL };
            let y = value(s);
            chart.draw_series(LineSeries::new(
                [(s.t0, y), (s.t1, y)],
                color.stroke_width(3),
            ))?;
            chart.draw_series(std::iter::once(Circle::new((s.t1, y), 3, color.filled())))?;
        }
    }
    root.present()?;
    Ok(())
}
