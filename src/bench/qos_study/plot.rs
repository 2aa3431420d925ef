//! `format --plot`: the seed's charts — the client's IOPS per profile (bars, with the
//! repetitions' range), its latency per profile (mean, p95, p99, p99.5), the
//! client's IOPS over time and the background's progress over time, one line per profile
//! (its first repetition).

use super::profiles::Service;
use super::record::{MixedRun, QosStudyRecord, SecondOut};
use super::study::QosStudyResult;
use anyhow::{anyhow, Result};
use plotters::prelude::*;

const WIDTH: u32 = 960;
const HEIGHT: u32 = 540;
const COLORS: [RGBColor; 8] = [
    RGBColor(30, 80, 200),
    RGBColor(220, 110, 0),
    RGBColor(0, 140, 60),
    RGBColor(200, 30, 30),
    RGBColor(130, 60, 170),
    RGBColor(120, 85, 60),
    RGBColor(210, 80, 160),
    RGBColor(90, 90, 90),
];

type DrawResult = Result<(), Box<dyn std::error::Error>>;
/// A service's seconds as the points of a line.
type Series<'a> = dyn Fn(&[SecondOut]) -> Vec<(f64, f64)> + 'a;

/// Bars: one group per category, one bar per series in it; `ranges` (per series, per
/// category) draws a whisker from min to max.
struct Bars<'a> {
    title: String,
    y_desc: &'a str,
    cats: Vec<String>,
    series: Vec<(&'a str, Vec<f64>)>,
    ranges: Option<Vec<(f64, f64)>>,
}

fn bars(b: &Bars) -> Result<String> {
    let mut out = String::new();
    draw_bars(&mut out, b).map_err(|e| anyhow!("drawing the plot: {}", e))?;
    Ok(out)
}

fn draw_bars(out: &mut String, b: &Bars) -> DrawResult {
    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&b.title, ("sans-serif", 18))?;
    let top = b
        .series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .chain(b.ranges.iter().flatten().map(|r| r.1))
        .filter(|v| crate::format::plottable(*v))
        .fold(1e-9, f64::max)
        * 1.12;
    let n = b.cats.len();
    let cats = b.cats.clone();
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(1))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                cats.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(b.y_desc)
        .light_line_style(WHITE)
        .draw()?;
    let k = b.series.len().max(1) as f64;
    let w = 0.8 / k;
    for (si, (name, vals)) in b.series.iter().enumerate() {
        let color = COLORS[si % COLORS.len()];
        let x0 = |ci: usize| ci as f64 - 0.4 + si as f64 * w;
        chart
            .draw_series(vals.iter().enumerate().map(|(ci, v)| {
                Rectangle::new([(x0(ci), 0.0), (x0(ci) + w * 0.9, *v)], color.filled())
            }))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        if let Some(r) = &b.ranges {
            chart.draw_series(r.iter().enumerate().map(|(ci, (lo, hi))| {
                let x = x0(ci) + w * 0.45;
                PathElement::new([(x, *lo), (x, *hi)], BLACK.stroke_width(2))
            }))?;
        }
    }
    if b.series.len() > 1 {
        legend(&mut chart)?;
    }
    root.present()?;
    Ok(())
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The series' names, top right.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> DrawResult {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK.mix(0.4))
        .background_style(WHITE.mix(0.9))
        .draw()?;
    Ok(())
}

/// Lines over time: one per profile.
fn lines(title: &str, y_desc: &str, series: &[(String, Vec<(f64, f64)>)]) -> Result<String> {
    let mut out = String::new();
    draw_lines(&mut out, title, y_desc, series).map_err(|e| anyhow!("drawing the plot: {}", e))?;
    Ok(out)
}

fn draw_lines(
    out: &mut String,
    title: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> DrawResult {
    let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let pts = || series.iter().flat_map(|(_, v)| v.iter().copied());
    let x_max = pts().map(|p| p.0).fold(1.0, f64::max);
    let y_max = pts().map(|p| p.1).fold(1e-9, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc(y_desc)
        .light_line_style(WHITE)
        .draw()?;
    for (i, (name, v)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(v.iter().copied(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    legend(&mut chart)?;
    root.present()?;
    Ok(())
}

/// The first repetition of each profile that ran.
fn first_runs(rec: &QosStudyRecord) -> Vec<&MixedRun> {
    rec.profiles
        .iter()
        .filter_map(|p| rec.runs.iter().find(|r| r.profile == p.name))
        .collect()
}

/// The SVGs (file-name suffix, text); none before a profile has run.
pub fn svgs(
    res: &QosStudyResult,
    rec: &QosStudyRecord,
    spec: &str,
) -> Result<Vec<(String, String)>> {
    if res.rows.is_empty() {
        return Ok(Vec::new());
    }
    for r in &res.rows {
        let v = [r.client_iops.mean, r.client_lat_p99_us.mean, r.bg_secs.mean];
        if !v.into_iter().all(crate::format::plottable) {
            crate::usage_bail!(
                "{}: profile {} can't be plotted ({:?}); is the result file damaged?",
                spec,
                r.profile,
                v
            );
        }
    }
    let cats: Vec<String> = res.rows.iter().map(|r| r.profile.clone()).collect();
    let mut out = vec![(
        "-client-iops".to_string(),
        bars(&Bars {
            title: format!("{}: client IOPS per profile", spec),
            y_desc: "client IOPS",
            cats: cats.clone(),
            series: vec![(
                "IOPS",
                res.rows.iter().map(|r| r.client_iops.mean).collect(),
            )],
            ranges: Some(
                res.rows
                    .iter()
                    .map(|r| (r.client_iops.min, r.client_iops.max))
                    .collect(),
            ),
        })?,
    )];
    let ms =
        |f: fn(&super::study::ProfileRow) -> f64| res.rows.iter().map(|r| f(r) / 1e3).collect();
    out.push((
        "-client-lat".to_string(),
        bars(&Bars {
            title: format!("{}: client latency per profile", spec),
            y_desc: "latency (ms)",
            cats,
            series: vec![
                ("mean", ms(|r| r.client_lat_mean_us.mean)),
                ("p95", ms(|r| r.client_lat_p95_us.mean)),
                ("p99", ms(|r| r.client_lat_p99_us.mean)),
                ("p99.5", ms(|r| r.client_lat_p99_5_us.mean)),
            ],
            ranges: None,
        })?,
    ));
    let runs = first_runs(rec);
    let over_time = |svc: Service, f: &Series<'_>| {
        runs.iter()
            .filter_map(|r| Some((r.profile.clone(), f(&r.services.get(&svc)?.seconds))))
            .collect::<Vec<_>>()
    };
    let client = over_time(Service::Client, &|s| {
        s.iter()
            .enumerate()
            .map(|(i, x)| (i as f64 + 1.0, x.iops))
            .collect()
    });
    out.push((
        "-client-time".to_string(),
        lines(
            &format!("{}: client IOPS over time", spec),
            "client IOPS",
            &client,
        )?,
    ));
    let total = rec.bg_size.max(1) as f64;
    let bg = over_time(Service::Background, &|s| {
        let mut done = 0.0;
        std::iter::once((0.0, 0.0))
            .chain(s.iter().enumerate().map(|(i, x)| {
                done += x.bps;
                (i as f64 + 1.0, (done / total * 100.0).min(100.0))
            }))
            .collect()
    });
    out.push((
        "-bg-progress".to_string(),
        lines(
            &format!("{}: background progress", spec),
            "work done (%)",
            &bg,
        )?,
    ));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::qos_study::profiles;
    use crate::bench::qos_study::record::ServiceOut;

    #[test]
    fn a_study_draws_its_four_charts_and_none_before_a_run() {
        let sec = |iops: f64, bps: f64| SecondOut {
            iops,
            bps,
            lat_mean_us: 1e3,
        };
        let out = |iops: f64, bps: f64| ServiceOut {
            iops,
            bps,
            lat_pcts_us: vec![(95.0, 2e3), (99.0, 4e3), (99.5, 5e3)],
            seconds: vec![sec(iops, bps); 3],
            ..Default::default()
        };
        let run = |profile: &str| MixedRun {
            profile: profile.into(),
            services: [
                (Service::Client, out(2000.0, 8e6)),
                (Service::Background, out(100.0, 1e8)),
            ]
            .into_iter()
            .collect(),
            bg_secs: 3.0,
            bg_done: true,
            ..Default::default()
        };
        let mut rec = QosStudyRecord {
            profiles: vec![
                profiles::find("none").unwrap(),
                profiles::find("iocost-high-client").unwrap(),
            ],
            bg_size: 300_000_000,
            ..Default::default()
        };
        let empty = super::super::study::study(&rec);
        assert!(svgs(&empty, &rec, "qos-study").unwrap().is_empty());
        rec.runs = vec![run("none"), run("iocost-high-client")];
        let res = super::super::study::study(&rec);
        let files = svgs(&res, &rec, "qos-study").unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "-client-iops",
                "-client-lat",
                "-client-time",
                "-bg-progress"
            ]
        );
        for (n, svg) in &files {
            assert!(
                svg.starts_with("<svg") && svg.contains("iocost-high-client"),
                "{}",
                n
            );
        }
    }
}
