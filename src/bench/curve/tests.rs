//! The curve on a simulated device whose queueing theory is known: one server with a fixed
//! service time fed Poisson arrivals is an M/D/1 queue, whose latency distribution has a
//! closed form (Erlang's), so the knee and the latency target's answer can be computed here
//! and compared with what the curve measures.

use super::props::{CurveProps, LatTarget, Mode};
use super::record::{CurveRecord, PointOut};
use super::run::{run_curve, JobRunner};
use super::study::study;
use crate::bench::io::IoProps;
use crate::workload::ioengine::job::{IoJob, Stop};
use crate::workload::ioengine::pace::Arrivals;
use anyhow::Result;
use std::time::Duration;

/// Service time of the simulated device, ns: 5,000 IOPS at most.
const SERVICE_NS: u64 = 200_000;

struct SimRunner {
    extra_pct: Option<f64>,
    jobs: usize,
    /// Fail the job with this number (counting from 0), as a kill would end it.
    fail_at: Option<usize>,
}

impl JobRunner for SimRunner {
    fn run(&mut self, job: &IoJob, what: &str, _left: usize) -> Result<PointOut> {
        if self.fail_at == Some(self.jobs) {
            anyhow::bail!("killed during {}", what);
        }
        self.jobs += 1;
        let r = crate::workload::ioengine::sim::run(job, 1 << 30, |_| SERVICE_NS)?;
        Ok(PointOut::of(&r, self.extra_pct, None))
    }
}

fn base_job(dur_s: u64) -> IoJob {
    let mut j = IoJob::new("/sim".into());
    j.qd = 1024;
    j.batch = 1;
    j.arrivals = Arrivals::Poisson;
    j.stop = Stop::Time(Duration::from_secs(dur_s));
    j
}

fn props(points: &[f64], knee: f64, lat_target: Option<LatTarget>, dur_s: u64) -> CurveProps {
    CurveProps {
        io: IoProps {
            job: base_job(dur_s),
            target: None,
            file_size: 0,
        },
        dur_given: true,
        mode: Mode::Rate,
        points: points.to_vec(),
        repeat: 1,
        knee,
        lat_target,
        probes: 6,
    }
}

fn record(p: &CurveProps) -> CurveRecord {
    CurveRecord {
        mode: "rate".into(),
        points: p.points.clone(),
        knee: p.knee,
        lat_target: p.lat_target.map(|t| t.name()),
        job: Some(p.io.job.clone()),
        ..Default::default()
    }
}

fn run_sim(p: &CurveProps, rec: &mut CurveRecord, fail_at: Option<usize>) -> (Result<()>, usize) {
    let mut runner = SimRunner {
        extra_pct: p.lat_target.and_then(|t| t.pct),
        jobs: 0,
        fail_at,
    };
    let mut saved = rec.clone();
    let r = run_curve(p, &p.io.job.clone(), rec, &mut runner, &mut |r| {
        saved = r.clone();
        Ok(())
    });
    *rec = saved;
    (r, runner.jobs)
}

/// P(wait ≤ t) in an M/D/1 queue at load `rho`, service time 1 (Erlang's formula; terms in
/// logs, which stays accurate up to the loads used here).
fn md1_wait_cdf(t: f64, rho: f64) -> f64 {
    let mut sum = 0.0;
    for k in 0..=(t.floor() as u32) {
        let x = rho * (k as f64 - t);
        let term = if x == 0.0 {
            if k == 0 {
                1.0
            } else {
                0.0
            }
        } else {
            let mag = (k as f64 * x.abs().ln() - ln_factorial(k) - x).exp();
            if x < 0.0 && k % 2 == 1 {
                -mag
            } else {
                mag
            }
        };
        sum += term;
    }
    (1.0 - rho) * sum
}

fn ln_factorial(k: u32) -> f64 {
    (1..=k).map(|i| (i as f64).ln()).sum()
}

/// The latency (wait and service) percentile `q` of M/D/1 at `rho`, in service times.
fn md1_latency_quantile(rho: f64, q: f64) -> f64 {
    if md1_wait_cdf(0.0, rho) >= q {
        return 1.0;
    }
    // Grow the bracket from below: far past the quantile the alternating sum cancels badly.
    let (mut lo, mut hi) = (0.0, 1.0);
    while md1_wait_cdf(hi, rho) < q {
        (lo, hi) = (hi, hi * 2.0);
    }
    for _ in 0..60 {
        let m = (lo + hi) / 2.0;
        if md1_wait_cdf(m, rho) >= q {
            hi = m;
        } else {
            lo = m;
        }
    }
    1.0 + hi
}

#[test]
fn the_knee_is_where_md1_theory_puts_it() {
    let points = [10.0, 50.0, 70.0, 80.0, 90.0];
    let p = props(&points, 3.0, None, 8);
    let mut rec = record(&p);
    let (r, jobs) = run_sim(&p, &mut rec, None);
    r.unwrap();
    assert_eq!(jobs, 6);
    let res = study(&rec);
    let max = res.max.as_ref().unwrap().iops.mean;
    assert!((max - 5_000.0).abs() < 50.0, "max {}", max);
    let rows = super::report::headline(&res);
    let missing = crate::bench::contract::headline::missing_keys(
        <super::Curve as crate::bench::contract::api::Bench>::KEY_NUMBERS,
        &rows,
    );
    assert!(missing.is_empty(), "{:?}", missing);
    // Up to 90 % every point reaches its rate.
    for row in &res.rows {
        assert!(row.reached, "{:?}", row);
        let t = row.target_iops.unwrap();
        assert!(
            (row.iops.mean - t).abs() <= 0.02 * t,
            "{} of {}",
            row.iops.mean,
            t
        );
    }
    // Theory: p99 at each load over p99 at the first; the knee is the last point within the
    // factor. The factors are picked away from any ratio, so the simulation's noise can't
    // move the answer.
    let theory: Vec<f64> = points
        .iter()
        .map(|pct| md1_latency_quantile(pct / 100.0, 0.99))
        .collect();
    let ratios: Vec<f64> = theory.iter().map(|t| t / theory[0]).collect();
    let measured: Vec<f64> = res
        .rows
        .iter()
        .map(|r| r.lat(Some(99.0)).unwrap())
        .collect();
    for factor in [3.0, 10.0] {
        assert!(
            ratios.iter().all(|r| (r / factor - 1.0).abs() > 0.15),
            "{:?}",
            ratios
        );
        let want = super::points::knee(&ratios, factor);
        assert_eq!(
            super::points::knee(&measured, factor),
            want,
            "factor {}",
            factor
        );
    }
    assert_eq!(res.knee, Some(1), "factor 3: the knee is at 50 %");
    // Measured p99 against theory's, point by point (the simulation's tail is noisy).
    for (m, t) in measured.iter().zip(&theory) {
        let t_ns = t * SERVICE_NS as f64;
        assert!((m / t_ns - 1.0).abs() < 0.25, "{} vs {}", m, t_ns);
    }
    // Little's law: at 80 % the server holds 0.8 IOs plus the mean queue ρ²/(2(1-ρ)) = 1.6.
    let d = res.rows[3].depth_little.mean;
    assert!((d - 2.4).abs() < 0.4, "depth {}", d);
}

#[test]
fn the_latency_target_is_found_where_md1_theory_puts_it() {
    // Mean latency 1 + ρ/(2(1-ρ)) service times: 2 at ρ = 2/3.
    let t = LatTarget::parse(&format!("mean:{}us", 2 * SERVICE_NS / 1000)).unwrap();
    let p = props(&[10.0, 50.0, 70.0, 90.0], 2.0, Some(t), 10);
    let mut rec = record(&p);
    let (r, jobs) = run_sim(&p, &mut rec, None);
    r.unwrap();
    let res = study(&rec);
    let a = res.lat_target.as_ref().unwrap();
    assert_eq!(a.outcome, "met");
    let want = 5_000.0 * 2.0 / 3.0;
    let got = a.x.unwrap();
    assert!((got - want).abs() <= 0.03 * 5_000.0, "{} vs {}", got, want);
    // 1,000 IOPS between 50 % and 70 % halved down to 1 % of the max: 5 probes.
    assert_eq!(a.probes, 5);
    assert_eq!(jobs, 5 + 5);
    assert!(rec.search_done);
}

#[test]
fn a_killed_curve_resumes_at_its_next_point() {
    let p = props(&[10.0, 50.0, 90.0], 2.0, None, 2);
    let mut rec = record(&p);
    // Killed during the third job (max run, 10 % done).
    let (r, jobs) = run_sim(&p, &mut rec, Some(2));
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("killed during point 2/3 (50%)"));
    assert_eq!((jobs, rec.runs[0].points.len()), (2, 1));
    let first_max = rec.runs[0].max.clone();
    let (r, jobs) = run_sim(&p, &mut rec, None);
    r.unwrap();
    // Only the two points left ran; the max run was kept.
    assert_eq!(jobs, 2);
    assert_eq!(rec.runs[0].points.len(), 3);
    assert_eq!(rec.runs[0].max, first_max);
    // A finished curve runs nothing more.
    let (_, jobs) = run_sim(&p, &mut rec, None);
    assert_eq!(jobs, 0);
}

#[test]
fn repetitions_give_mean_and_spread_per_point() {
    let mut p = props(&[50.0, 100.0], 2.0, None, 2);
    p.repeat = 3;
    let mut rec = record(&p);
    let (r, jobs) = run_sim(&p, &mut rec, None);
    r.unwrap();
    assert_eq!(jobs, 9);
    let res = study(&rec);
    assert_eq!(res.rows[0].runs, 3);
    assert!(res.rows[0].iops.stdev >= 0.0 && res.rows[0].iops.mean > 2_400.0);
    let text = super::report::text(&res, Some(&rec));
    assert!(text.contains("3 runs of the curve"), "{}", text);
    assert!(text.contains("±IOPS"), "{}", text);
}

#[test]
fn qd_mode_finds_the_deepest_queue_meeting_the_target() {
    // A closed loop of k IOs on one server: every IO waits for the k - 1 ahead of it, so its
    // latency is k service times, and p99 meets 3.5 service times up to k = 3.
    let t = LatTarget::parse(&format!("p99/{}us", 35 * SERVICE_NS / 10_000)).unwrap();
    let mut p = props(&[1.0, 2.0, 4.0, 8.0], 2.5, Some(t), 2);
    p.mode = Mode::Qd;
    p.io.job.qd = 8;
    p.io.job.arrivals = Arrivals::Linear;
    let mut rec = record(&p);
    rec.mode = "qd".into();
    let (r, jobs) = run_sim(&p, &mut rec, None);
    r.unwrap();
    // No max run in mode=qd: four points and one probe (qd=3 between 2 and 4).
    assert_eq!(jobs, 5);
    assert!(rec.runs[0].max.is_none());
    let res = study(&rec);
    for row in &res.rows {
        let k = row.qd as f64;
        let p99 = row.lat(Some(99.0)).unwrap();
        assert!(
            (p99 / (k * SERVICE_NS as f64) - 1.0).abs() < 0.02,
            "qd {}: {}",
            k,
            p99
        );
        assert!(
            (row.iops.mean - 5_000.0).abs() < 100.0,
            "qd {}: {}",
            k,
            row.iops.mean
        );
    }
    let a = res.lat_target.unwrap();
    assert_eq!((a.outcome.as_str(), a.x), ("met", Some(3.0)));
    assert_eq!(a.bracket, Some((3.0, 4.0)));
    // The knee: p99 doubles from qd 1 to 2 and again to 4, so with factor 2.5 it is qd=2.
    assert_eq!(res.knee, Some(1));
}

#[test]
fn the_plot_names_the_points_the_knee_and_the_target() {
    let t = LatTarget::parse("mean/400us").unwrap();
    let p = props(&[10.0, 50.0, 70.0, 90.0], 3.0, Some(t), 2);
    let mut rec = record(&p);
    run_sim(&p, &mut rec, None).0.unwrap();
    let res = study(&rec);
    let svg = super::plot::svg(&res, "curve:test").unwrap().unwrap();
    // The text nodes, whatever the lines around them.
    let texts: Vec<&str> = svg
        .split('<')
        .filter_map(|t| t.split_once('>').map(|x| x.1.trim()))
        .filter(|t| !t.is_empty())
        .collect();
    let has = |w: &str| texts.iter().any(|t| t.contains(w));
    for want in [
        "latency against IOPS, knee at",
        "p99",
        "mean",
        "10%",
        "90%",
        "knee",
        "target mean/400us",
        "met up to",
    ] {
        assert!(has(want), "{} not in the plot's texts {:?}", want, texts);
    }
    // A curve with no points yet has nothing to draw.
    let empty = study(&record(&p));
    assert!(super::plot::svg(&empty, "curve:test").unwrap().is_none());
}

#[test]
fn a_target_missed_at_the_lowest_point_but_met_above_says_so() {
    let t = LatTarget::parse("p99/200us").unwrap();
    let mut p = props(&[1.0, 2.0, 4.0], 2.5, Some(t), 2);
    p.mode = Mode::Qd;
    let mut rec = record(&p);
    rec.mode = "qd".into();
    run_sim(&p, &mut rec, None).0.unwrap();
    // Noise: the lowest point missed, the next one met.
    for pt in rec.runs.iter_mut().flat_map(|r| r.points.iter_mut()) {
        let ns = if pt.qd == 1 { 10_000_000 } else { 1_000 };
        pt.lat_pcts.iter_mut().for_each(|x| x.1 = ns);
    }
    let res = study(&rec);
    let a = res.lat_target.as_ref().unwrap();
    assert_eq!(
        (a.outcome.as_str(), a.x, a.met_above),
        ("below", None, Some(2.0))
    );
    let text = super::report::text(&res, None);
    assert!(text.contains("though met at qd=2"), "{}", text);
    assert!(!text.contains("missed even at"), "{}", text);
}
