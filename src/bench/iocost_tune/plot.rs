//! `format --plot DIR` of an iocost-tune result: one SVG per data series — the points, the
//! rejected points, the fitted line, a dashed mark at each solution's vrate and a band over
//! that vrate's 90 % interval — and one HTML page with the solutions table (with their
//! intervals) and every graph inline (what upstream made a PDF of).

use super::interval::SolutionSpread;
use super::model::{DataSeries, IocostTuneResult, QosSolution};
use super::report;
use super::sel::DataSel;
use crate::bench::contract::api::PlotFile;
use crate::units::format_pct;
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write;

type Spreads = BTreeMap<String, SolutionSpread>;

const WIDTH: u32 = 640;
const HEIGHT: u32 = 420;
const POINT: RGBColor = RGBColor(0x37, 0xc0, 0xe6);
const LINE: RGBColor = RGBColor(0x37, 0x49, 0xe6);
const MARK: RGBColor = RGBColor(0xd0, 0x60, 0x20);

/// The solutions' vrates, one mark per distinct vrate with the names that share it.
fn marks(res: &IocostTuneResult) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    for (name, s) in &res.solutions {
        let v = s.scale_factor * 100.0;
        match out.iter_mut().find(|(x, _)| (*x - v).abs() < 1e-9) {
            Some((_, names)) => {
                names.push_str(", ");
                names.push_str(name);
            }
            None => out.push((v, name.clone())),
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The unit the graph's values are in.
fn unit(sel: &DataSel) -> &'static str {
    match sel {
        DataSel::Mof | DataSel::Amof | DataSel::AmofDelta => "",
        DataSel::RLat(..) | DataSel::WLat(..) => " (ms)",
        _ => " (%)",
    }
}

/// The 90 % intervals of the solutions' marked vrates (the top of a range), merged where
/// they overlap.
fn bands(spreads: &Spreads) -> Vec<(f64, f64)> {
    let mut b: Vec<(f64, f64)> = spreads
        .values()
        .map(|s| (s.vrate_max.lo, s.vrate_max.hi))
        .filter(|(lo, hi)| {
            hi > lo && crate::format::plottable(*lo) && crate::format::plottable(*hi)
        })
        .collect();
    b.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (lo, hi) in b {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// One series' SVG.
fn series_svg(
    sel: &DataSel,
    s: &DataSeries,
    res: &IocostTuneResult,
    spreads: &Spreads,
    vmax: f64,
    device: &str,
) -> Result<String> {
    let g = report::graph_frame(sel, s, res);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        let draw = || -> Result<(), Box<dyn std::error::Error>> {
            root.fill(&WHITE)?;
            let title = format!("{} — {}", g.y_label, device);
            let x_hi = (vmax * 1.1).max(1e-6);
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..x_hi, g.y_min..g.y_max)?;
            let y_desc = format!("{}{}", g.y_label, unit(sel));
            chart
                .configure_mesh()
                .x_desc(g.x_label.as_str())
                .y_desc(y_desc.as_str())
                .light_line_style(WHITE.mix(0.0))
                .draw()?;
            for (lo, hi) in bands(spreads) {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(lo, g.y_min), (hi, g.y_max)],
                    MARK.mix(0.08).filled(),
                )))?;
            }
            // Labels of nearby marks go on staggered rows.
            let row = (g.y_max - g.y_min) * 0.05;
            for (i, (v, names)) in marks(res).into_iter().enumerate() {
                chart.draw_series(DashedLineSeries::new(
                    [(v, g.y_min), (v, g.y_max)],
                    4,
                    3,
                    MARK.mix(0.7).stroke_width(1),
                ))?;
                chart.draw_series(std::iter::once(Text::new(
                    names,
                    (v, g.y_max - row * (i % 3) as f64),
                    ("sans-serif", 10).into_font().color(&MARK),
                )))?;
            }
            let y = |v: f64| v * g.yscale;
            chart.draw_series(
                s.outliers
                    .iter()
                    .map(|p| Cross::new((p.x, y(p.y)), 4, POINT.stroke_width(2))),
            )?;
            chart.draw_series(
                s.data
                    .iter()
                    .map(|p| Circle::new((p.x, y(p.y)), 3, POINT.filled())),
            )?;
            if !s.lines.points.is_empty() {
                chart.draw_series(LineSeries::new(
                    s.lines.points.iter().map(|p| (p.x, y(p.y))),
                    LINE.stroke_width(2),
                ))?;
            }
            root.present()?;
            Ok(())
        };
        draw().map_err(|e| anyhow!("drawing the {} graph: {}", sel, e))?;
    }
    Ok(out)
}

/// `min (lo–hi) – max (lo–hi)`, with UNSTABLE where the bootstrap says so.
fn interval_cell(s: Option<&SolutionSpread>) -> String {
    let Some(s) = s else { return "–".into() };
    let mut c = format!(
        "{:.1} ({:.1}–{:.1}) – {:.1} ({:.1}–{:.1})",
        s.vrate.0, s.vrate_min.lo, s.vrate_min.hi, s.vrate.1, s.vrate_max.lo, s.vrate_max.hi
    );
    if s.unstable() {
        c += " <b>unstable</b>";
    }
    c
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page: the solutions (as `summary` groups them) as a table, then every graph.
fn page(
    res: &IocostTuneResult,
    rules: &[super::rules::QosRule],
    spreads: &Spreads,
    device: &str,
    svgs: &[(String, String)],
) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>iocost-tune: {d}</title>\n\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         td:first-child,td:nth-child(2){{text-align:left}}\
         .graphs{{display:grid;grid-template-columns:repeat(auto-fill,minmax(640px,1fr));gap:8px}}\
         code{{font-size:90%}}</style></head><body>\n<h1>iocost-tune: {d}</h1>\n",
        d = escape(device)
    );
    let _ = writeln!(
        h,
        "<p>Model measured: <code>{}</code><br>Memory profile {}, isolation judged at \
         isol-{} ≥ {}%.</p>",
        escape(&format!(
            "{} {}",
            res.base_model.lines().0,
            res.base_model.lines().1
        )),
        res.mem_profile,
        escape(&res.isol_pct),
        format_pct(res.isol_thr)
    );
    h.push_str(
        "<h2>Solutions</h2>\n<table><tr><th>rule</th><th>target</th><th>scale</th><th>MOF</th>\
         <th>aMOF</th><th>isolation</th><th>vrate range, 90% intervals of its ends</th>\
         <th>io.cost.model</th><th>io.cost.qos</th></tr>\n",
    );
    for r in rules {
        let target = escape(&r.target.to_string());
        match res.solutions.get(&r.name) {
            Some(s) => {
                let QosSolution { model, qos, .. } = s;
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}%</td><td>{:.3}</td><td>{:.3}</td>\
                     <td>{}%</td><td>{}</td><td><code>{} {}</code></td><td><code>{}</code></td></tr>",
                    escape(&r.name),
                    target,
                    format_pct(s.scale_factor),
                    s.mem_offload_factor,
                    s.adjusted_mem_offload_factor,
                    format_pct(s.isol),
                    interval_cell(spreads.get(&r.name)),
                    model.lines().0,
                    model.lines().1,
                    qos.line()
                );
            }
            None => {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td colspan=\"7\">no solution</td></tr>",
                    escape(&r.name),
                    target
                );
            }
        }
    }
    h.push_str("</table>\n");
    if !res.remarks.is_empty() {
        h.push_str("<h2>Remarks</h2>\n<ul>\n");
        for r in &res.remarks {
            let _ = writeln!(h, "<li>{}</li>", escape(r));
        }
        h.push_str("</ul>\n");
    }
    h.push_str(
        "<h2>Graphs</h2>\n<p>Circles: the points fitted; crosses: rejected points; line: the \
         fit; dashed: the solutions' vrates; shaded: their 90% intervals.</p>\n\
         <div class=\"graphs\">\n",
    );
    for (sel, svg) in svgs {
        let _ = writeln!(h, "<div id=\"{}\">{}</div>", escape(sel), svg);
    }
    h.push_str("</div>\n</body></html>\n");
    h
}

/// A usage error naming the first value no axis can show (a damaged result: the plotting
/// library would panic or never end on it).
fn check_plottable(res: &IocostTuneResult) -> Result<()> {
    for (sel, s) in &res.data {
        let points = s.data.iter().chain(&s.outliers).chain(&s.lines.points);
        let range = [s.lines.range.0, s.lines.range.1];
        if let Some(v) = points
            .flat_map(|p| [p.x, p.y])
            .chain(range)
            .find(|v| !crate::format::plottable(*v))
        {
            crate::usage_bail!(
                "iocost-tune: the {} series holds {}, which no plot can show; is the result \
                 file damaged?",
                sel,
                v
            );
        }
    }
    if let Some((name, s)) = res
        .solutions
        .iter()
        .find(|(_, s)| !crate::format::plottable(s.scale_factor * 100.0))
    {
        crate::usage_bail!(
            "iocost-tune: the solution {} has the scale factor {}, which no plot can show; is \
             the result file damaged?",
            name,
            s.scale_factor
        );
    }
    Ok(())
}

/// Every series' SVG (suffix `-<selector>`) and the page (`.html`).
pub fn files(
    res: &IocostTuneResult,
    rules: &[super::rules::QosRule],
    spreads: &Spreads,
    device: &str,
) -> Result<Vec<PlotFile>> {
    check_plottable(res)?;
    let vmax = res
        .data
        .values()
        .fold(0.0_f64, |acc, s| s.lines.range.1.max(acc));
    let mut svgs = Vec::new();
    let mut out = Vec::new();
    for (sel, s) in &res.data {
        let svg = series_svg(sel, s, res, spreads, vmax, device)?;
        svgs.push((sel.to_string(), svg.clone()));
        out.push(PlotFile::svg(format!("-{}", sel), svg));
    }
    out.push(PlotFile {
        suffix: String::new(),
        ext: "html",
        text: page(res, rules, spreads, device, &svgs),
    });
    Ok(out)
}
