//! `format --plot`: the curve as Vdbench users draw it — latency (mean and p99) against the
//! IOPS achieved, one dot per point, named by its share of the maximum (or queue depth). The
//! knee is marked by a dashed line at its rate, and with a latency target the target's level
//! and the highest rate that met it.

use super::study::{CurveResult, Row};
use anyhow::{anyhow, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const WIDTH: u32 = 960;
const HEIGHT: u32 = 560;
const MEAN: RGBColor = RGBColor(30, 80, 200);
const P99: RGBColor = RGBColor(220, 110, 0);
const KNEE: RGBColor = RGBColor(0, 140, 60);
const TARGET: RGBColor = RGBColor(200, 30, 30);

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// A point as drawn: achieved IOPS, mean and p99 latency (ms), its name.
struct Dot {
    iops: f64,
    mean_ms: f64,
    p99_ms: f64,
    name: String,
}

fn dots(res: &CurveResult) -> Vec<Dot> {
    res.rows
        .iter()
        .map(|r: &Row| Dot {
            iops: r.iops.mean,
            mean_ms: r.lat_mean.mean / 1e6,
            p99_ms: r.lat(Some(99.0)).unwrap_or(0.0) / 1e6,
            name: match (r.point, res.mode.as_str()) {
                (Some(x), "qd") => format!("qd={}", x),
                (Some(x), _) => format!("{}%", x),
                (None, _) => "max".into(),
            },
        })
        .collect()
}

/// The SVG of a curve; `None` when it has no points yet.
pub fn svg(res: &CurveResult, spec: &str) -> Result<Option<String>> {
    let dots = dots(res);
    if dots.is_empty() {
        return Ok(None);
    }
    let plottable = crate::format::plottable;
    if let Some(d) = dots
        .iter()
        .find(|d| ![d.iops, d.mean_ms, d.p99_ms].into_iter().all(plottable))
    {
        crate::usage_bail!(
            "{}: point {} can't be plotted ({} IOPS, mean {} ms, p99 {} ms); is the result file \
             damaged?",
            spec,
            d.name,
            d.iops,
            d.mean_ms,
            d.p99_ms
        );
    }
    let title = match res.knee.and_then(|k| res.rows.get(k)) {
        Some(k) => format!(
            "{}: latency against IOPS, knee at {:.0} IOPS",
            spec, k.iops.mean
        ),
        None => format!("{}: latency against IOPS", spec),
    };
    let mut out = String::new();
    draw(&mut out, res, &dots, &title).map_err(|e| anyhow!("drawing the plot: {}", e))?;
    Ok(Some(out))
}

fn draw(out: &mut String, res: &CurveResult, dots: &[Dot], title: &str) -> DrawResult {
    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let target = res.lat_target.as_ref();
    let target_ms = target.and_then(|a| {
        super::props::LatTarget::parse(&a.target)
            .ok()
            .map(|t| t.ns / 1e6)
    });
    let x_max = dots.iter().map(|d| d.iops).fold(1.0, f64::max) * 1.08;
    let y_max = dots
        .iter()
        .map(|d| d.p99_ms.max(d.mean_ms))
        .chain(target_ms)
        .fold(1e-3, f64::max)
        * 1.12;
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("IOPS achieved")
        .y_desc("latency (ms)")
        .light_line_style(WHITE)
        .draw()?;
    for (color, name, val) in [
        (P99, "p99", (|d: &Dot| d.p99_ms) as fn(&Dot) -> f64),
        (MEAN, "mean", |d: &Dot| d.mean_ms),
    ] {
        chart
            .draw_series(LineSeries::new(
                dots.iter().map(|d| (d.iops, val(d))),
                color.stroke_width(2),
            ))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(
            dots.iter()
                .map(|d| Circle::new((d.iops, val(d)), 4, color.filled())),
        )?;
    }
    let up = y_max * 0.015;
    for d in dots {
        text(
            &mut chart,
            &d.name,
            (d.iops, d.p99_ms + up),
            &BLACK,
            HPos::Center,
            VPos::Bottom,
        )?;
    }
    marks(&mut chart, res, target_ms, (x_max, y_max))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperMiddle)
        .border_style(BLACK.mix(0.4))
        .background_style(WHITE.mix(0.9))
        .draw()?;
    root.present()?;
    Ok(())
}

/// The knee's dashed line and, with a latency target, its level and where it was met.
fn marks(
    chart: &mut Chart,
    res: &CurveResult,
    target_ms: Option<f64>,
    (x_max, y_max): (f64, f64),
) -> DrawResult {
    let up = y_max * 0.015;
    let target = res.lat_target.as_ref();
    if let Some(k) = res.knee.and_then(|k| res.rows.get(k)) {
        let x = k.iops.mean;
        chart.draw_series(DashedLineSeries::new(
            [(x, 0.0), (x, y_max)],
            6,
            4,
            KNEE.stroke_width(2),
        ))?;
        text(
            chart,
            " knee",
            (x, y_max * 0.97),
            &KNEE,
            HPos::Left,
            VPos::Top,
        )?;
    }
    if let (Some(a), Some(ms)) = (target, target_ms) {
        chart.draw_series(DashedLineSeries::new(
            [(0.0, ms), (x_max, ms)],
            6,
            4,
            TARGET.stroke_width(1),
        ))?;
        text(
            chart,
            &format!("target {} ", a.target),
            (x_max, ms + up),
            &TARGET,
            HPos::Right,
            VPos::Bottom,
        )?;
        // The achieved rate where the target was met, on the same axis as the dots.
        if let Some(x) = a.iops {
            chart.draw_series(DashedLineSeries::new(
                [(x, 0.0), (x, ms)],
                3,
                3,
                TARGET.stroke_width(2),
            ))?;
            text(
                chart,
                &format!(" met up to {:.0} IOPS", x),
                (x, ms * 0.5),
                &TARGET,
                HPos::Left,
                VPos::Center,
            )?;
        }
    }
    Ok(())
}

fn text(
    chart: &mut Chart,
    s: &str,
    at: (f64, f64),
    color: &RGBColor,
    h: HPos,
    v: VPos,
) -> DrawResult {
    let style = ("sans-serif", 13)
        .into_font()
        .color(color)
        .pos(Pos::new(h, v));
    chart.draw_series(std::iter::once(Text::new(s.to_string(), at, style)))?;
    Ok(())
}
