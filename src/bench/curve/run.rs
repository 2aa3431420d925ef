//! Running a curve: per repetition the max run (mode=rate) and then each point, and after all
//! repetitions the latency-target search; the record is saved after every job, and a record
//! left by a killed run is continued where it stopped. Written against [`JobRunner`], so the
//! same sequence runs on the engine and, in the tests, on a simulated device.

use super::points::target_iops;
use super::props::{CurveProps, LatTarget, Mode};
use super::record::{CurveRecord, CurveRun, PointOut, Probe};
use super::search::{bracket, Bisect, Bracket};
use crate::workload::ioengine::job::{IoJob, Rate};
use anyhow::Result;

/// Runs one engine job and summarizes it; `what` names it for progress and messages, `left`
/// is how many jobs of the curve follow it (the search's probes aside).
pub trait JobRunner {
    fn run(&mut self, job: &IoJob, what: &str, left: usize) -> Result<PointOut>;
}

/// The bisection's resolution in mode=rate, as a share of the max run's IOPS.
const RATE_RESOLUTION: f64 = 0.01;

/// The job of the point at `x` (a percentage of `max_iops`, or a queue depth).
pub fn point_job(base: &IoJob, mode: Mode, x: f64, max_iops: f64) -> IoJob {
    let mut job = base.clone();
    match mode {
        Mode::Rate => job.rate = Some(Rate::Iops(target_iops(max_iops, x))),
        Mode::Qd => {
            job.qd = x as u32;
            job.batch = job.batch.min(job.qd);
            job.reap = job.reap.min(job.qd);
        }
    }
    job
}

/// `90%` or `qd=16`.
pub fn point_name(mode: Mode, x: f64) -> String {
    match mode {
        Mode::Rate => format!("{}%", x),
        Mode::Qd => format!("qd={}", x),
    }
}

/// The job of a probe at `x`: an open-loop rate in IOPS, or a queue depth.
fn probe_job(base: &IoJob, mode: Mode, x: f64) -> IoJob {
    let mut job = base.clone();
    match mode {
        Mode::Rate => job.rate = Some(Rate::Iops(x)),
        Mode::Qd => {
            job.qd = x as u32;
            job.batch = job.batch.min(job.qd);
            job.reap = job.reap.min(job.qd);
        }
    }
    job
}

/// The mean of the repetitions' max runs.
pub fn max_iops(rec: &CurveRecord) -> Option<f64> {
    let v: Vec<f64> = rec
        .runs
        .iter()
        .filter_map(|r| r.max.as_ref().map(|m| m.iops))
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Runs what `rec` doesn't hold yet, calling `save` after every job.
pub fn run_curve(
    props: &CurveProps,
    base: &IoJob,
    rec: &mut CurveRecord,
    runner: &mut dyn JobRunner,
    save: &mut dyn FnMut(&CurveRecord) -> Result<()>,
) -> Result<()> {
    let n = props.points.len();
    let per_run = n + usize::from(props.mode == Mode::Rate);
    let left = |rep: usize, done: usize| (props.repeat as usize - rep) * per_run - done - 1;
    for rep in 0..props.repeat as usize {
        if rec.runs.len() <= rep {
            rec.runs.push(CurveRun::default());
        }
        let of = |what: String| {
            if props.repeat > 1 {
                format!("run {}/{}, {}", rep + 1, props.repeat, what)
            } else {
                what
            }
        };
        if props.mode == Mode::Rate && rec.runs[rep].max.is_none() {
            let p = runner.run(base, &of("max run".into()), left(rep, 0))?;
            if p.iops <= 0.0 {
                anyhow::bail!("the max run completed no IOs: no rates to take shares of");
            }
            rec.runs[rep].max = Some(p);
            save(rec)?;
        }
        let max = rec.runs[rep].max.as_ref().map_or(0.0, |m| m.iops);
        while rec.runs[rep].points.len() < n {
            let k = rec.runs[rep].points.len();
            let job = point_job(base, props.mode, props.points[k], max);
            let what = of(format!(
                "point {}/{} ({})",
                k + 1,
                n,
                point_name(props.mode, props.points[k])
            ));
            let p = runner.run(&job, &what, left(rep, per_run - n + k))?;
            rec.runs[rep].points.push(p);
            save(rec)?;
        }
    }
    if let Some(t) = props.lat_target {
        if !rec.search_done {
            search(props, t, base, rec, runner, save)?;
            rec.search_done = true;
            save(rec)?;
        }
    } else {
        rec.search_done = true;
    }
    Ok(())
}

/// Whether a point meets the latency target: it reached its rate and its latency is within.
pub fn meets(p: &PointOut, t: &LatTarget) -> bool {
    p.reached() && p.lat(t.pct).is_some_and(|l| l <= t.ns)
}

/// The x of each point (rate asked, or queue depth) with whether every repetition met the
/// target there.
pub fn curve_meets(rec: &CurveRecord, mode: Mode, t: &LatTarget) -> Vec<(f64, bool)> {
    let n = rec.points.len();
    (0..n)
        .filter_map(|k| {
            let pts: Vec<&PointOut> = rec.runs.iter().filter_map(|r| r.points.get(k)).collect();
            let first = pts.first()?;
            let x = match mode {
                Mode::Rate => first.target_iops?,
                Mode::Qd => first.qd as f64,
            };
            Some((x, pts.iter().all(|p| meets(p, t))))
        })
        .collect()
}

/// The bisection as the curve and the probes so far leave it (`None`: nothing to search).
/// `max_probes` limits the probes still to run.
pub fn bisection(rec: &CurveRecord, mode: Mode, max_probes: u32, t: &LatTarget) -> Option<Bisect> {
    let Bracket::Between { lo, hi } = bracket(&curve_meets(rec, mode, t)) else {
        return None;
    };
    let (res, integer) = match mode {
        Mode::Rate => (max_iops(rec).unwrap_or(hi) * RATE_RESOLUTION, false),
        Mode::Qd => (1.0, true),
    };
    let mut b = Bisect::new(lo, hi, res, integer, max_probes);
    for p in &rec.probes {
        b.feed(p.x, meets(&p.point, t));
    }
    Some(b)
}

fn search(
    props: &CurveProps,
    t: LatTarget,
    base: &IoJob,
    rec: &mut CurveRecord,
    runner: &mut dyn JobRunner,
    save: &mut dyn FnMut(&CurveRecord) -> Result<()>,
) -> Result<()> {
    let Some(mut b) = bisection(rec, props.mode, props.probes, &t) else {
        return Ok(());
    };
    while let Some(x) = b.next() {
        let what = format!(
            "{} search, probe {}/{}",
            t.name(),
            rec.probes.len() + 1,
            props.probes
        );
        let point = runner.run(&probe_job(base, props.mode, x), &what, 0)?;
        b.feed(x, meets(&point, &t));
        rec.probes.push(Probe { x, point });
        save(rec)?;
    }
    Ok(())
}
