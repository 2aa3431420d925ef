//! `curve`'s properties: every property of an `io` job but its rate (the curve sets it), and
//! what the curve adds — its points, repetitions, the knee's factor and a latency target.

use super::points::DFL_POINTS;
use crate::bench::contract::api::{concat_props, prop, PropDesc, SpecError, ValueKind};
use crate::bench::io::{read_props, IoProps, JOB_PROPS};
use crate::spec::JobSpec;
use crate::workload::ioengine::pace::Arrivals;

const CURVE_PROPS: [PropDesc; 6] = [
    prop(
        "mode",
        ValueKind::Enum(&["rate", "qd"]),
        "points are rates (% of the max run) or queue depths (rate)",
    ),
    prop(
        "points",
        ValueKind::Str,
        "/-separated: % of max (Vdbench's 10/50/…/98/100) or queue depths (1/2/4/…/qd)",
    ),
    prop(
        "repeat",
        ValueKind::Int,
        "run the whole curve this many times (1)",
    ),
    prop(
        "knee",
        ValueKind::Float,
        "the knee: the last point whose p99 stays within this factor of the first's (2)",
    ),
    prop(
        "lat-target",
        ValueKind::Str,
        "find the highest rate (qd) meeting PCT/TIME, like p99/2ms or mean/500us",
    ),
    prop(
        "probes",
        ValueKind::Int,
        "at most this many bisection runs for lat-target (6)",
    ),
];

pub static PROPS: [PropDesc; JOB_PROPS.len() + CURVE_PROPS.len()] =
    concat_props(&JOB_PROPS, &CURVE_PROPS);

/// The curve's queue depth when none is given: its max run needs requests in flight to find
/// the device's maximum (Vdbench's advice is many threads), and open-loop points use only
/// the slots their rate needs.
pub const DFL_QD: u32 = 32;
pub const DFL_KNEE: f64 = 2.0;
pub const DFL_PROBES: u32 = 6;
/// Measured time per point in quick mode when `dur` isn't given.
pub const QUICK_DUR_S: f64 = 5.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Open-loop rates, as percentages of a closed-loop max run's IOPS.
    Rate,
    /// Closed loops at queue depths.
    Qd,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Rate => "rate",
            Mode::Qd => "qd",
        }
    }
}

/// `p99/2ms`: a latency percentile (`None`: the mean) and its limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatTarget {
    pub pct: Option<f64>,
    pub ns: f64,
}

impl LatTarget {
    pub fn parse(text: &str) -> Result<LatTarget, String> {
        let bad = || {
            format!(
                "lat-target={:?}: expected a percentile or mean, '/' (or an escaped '\\:'), \
                 and a time, like p99/2ms, p99.9/10ms or mean/500us",
                text
            )
        };
        let (which, time) = text.split_once([':', '/']).ok_or_else(bad)?;
        let which = which.trim().to_ascii_lowercase();
        let pct = match which.as_str() {
            "mean" => None,
            w => Some(
                w.strip_prefix('p')
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| *v > 0.0 && *v < 100.0)
                    .ok_or_else(bad)?,
            ),
        };
        let secs = crate::units::parse::parse_duration(time.trim()).map_err(|_| bad())?;
        if secs <= 0.0 {
            return Err(bad());
        }
        Ok(LatTarget {
            pct,
            ns: secs * 1e9,
        })
    }

    pub fn name(&self) -> String {
        let which = self.pct.map_or("mean".to_string(), |p| format!("p{}", p));
        let ns = self.ns.round();
        let time = if ns >= 1e6 && ns % 1e3 == 0.0 {
            format!("{}ms", ns / 1e6)
        } else if ns % 1e3 == 0.0 {
            format!("{}us", ns / 1e3)
        } else {
            format!("{}ns", ns)
        };
        format!("{}/{}", which, time)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CurveProps {
    /// The job every run starts from (no rate; `qd` the max run's).
    pub io: IoProps,
    /// `dur` was given (quick mode shortens only the default).
    pub dur_given: bool,
    pub mode: Mode,
    /// Rising: percentages of the max run (rate mode) or queue depths.
    pub points: Vec<f64>,
    pub repeat: u32,
    pub knee: f64,
    pub lat_target: Option<LatTarget>,
    pub probes: u32,
}

fn parse_points(text: &str, mode: Mode, qd: u32) -> Result<Vec<f64>, String> {
    let what = match mode {
        Mode::Rate => "percentages above 0 and at most 100",
        Mode::Qd => "queue depths from 1 to 4096",
    };
    let bad = || format!("points={:?}: expected {}, /-separated", text, what);
    let mut v = text
        .split('/')
        .map(|p| p.trim().parse::<f64>().ok())
        .collect::<Option<Vec<f64>>>()
        .ok_or_else(bad)?;
    let ok = |x: f64| match mode {
        Mode::Rate => x > 0.0 && x <= 100.0,
        Mode::Qd => (1.0..=4096.0).contains(&x) && x.fract() == 0.0,
    };
    if v.is_empty() || !v.iter().all(|&x| ok(x)) {
        return Err(bad());
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    v.dedup();
    if mode == Mode::Qd && v.last().is_some_and(|&m| m > qd as f64) {
        return Err(format!(
            "points={:?}: queue depths above qd={} (the deepest point is the qd)",
            text, qd
        ));
    }
    Ok(v)
}

/// Powers of two up to `qd`, and `qd` itself.
fn dfl_qd_points(qd: u32) -> Vec<f64> {
    let mut v: Vec<f64> = (0..13)
        .map(|i| (1u32 << i) as f64)
        .filter(|&d| d < qd as f64)
        .collect();
    v.push(qd as f64);
    v
}

pub fn read(spec: &JobSpec) -> Result<CurveProps, SpecError> {
    let g = spec.group(0);
    let mut io = read_props(spec)?;
    if g.text("qd").is_none() {
        io.job.qd = DFL_QD;
        io.job.batch = io.job.batch.min(io.job.qd);
        io.job.reap = io.job.reap.min(io.job.qd);
    }
    let mode = match g.text("mode") {
        Some("qd") => Mode::Qd,
        _ => Mode::Rate,
    };
    let points = match g.text("points") {
        Some(t) => parse_points(t, mode, io.job.qd).map_err(|e| g.err(e))?,
        None if mode == Mode::Rate => DFL_POINTS.to_vec(),
        None => dfl_qd_points(io.job.qd),
    };
    if mode == Mode::Qd && g.text("arrivals").is_some() {
        return Err(g.err("arrivals is for mode=rate (mode=qd runs closed loops)"));
    }
    if g.text("arrivals").is_none() {
        // Random gaps, as Vdbench's default, so a queue builds toward the maximum even on a
        // device whose service time hardly varies; counted per second, so each point's rate
        // is exact over a short run.
        io.job.arrivals = Arrivals::Stratified;
    }
    let repeat = match g.u64("repeat", ValueKind::Int)? {
        Some(r) if !(1..=100).contains(&r) => {
            return Err(g.err(format!("repeat={} is not from 1 to 100", r)))
        }
        r => r.unwrap_or(1) as u32,
    };
    let knee = match g.f64("knee", ValueKind::Float)? {
        Some(k) if !(k > 1.0 && k.is_finite()) => {
            return Err(g.err(format!("knee={} is not a factor above 1", k)))
        }
        k => k.unwrap_or(DFL_KNEE),
    };
    let lat_target = g
        .text("lat-target")
        .map(LatTarget::parse)
        .transpose()
        .map_err(|e| g.err(e))?;
    let probes = match g.u64("probes", ValueKind::Int)? {
        Some(_) if lat_target.is_none() => {
            return Err(g.err("probes is for lat-target; give lat-target too"))
        }
        Some(p) if p > 20 => return Err(g.err(format!("probes={} is not from 0 to 20", p))),
        p => p.map_or(DFL_PROBES, |p| p as u32),
    };
    Ok(CurveProps {
        io,
        dur_given: g.text("dur").is_some() || g.text("size").is_some(),
        mode,
        points,
        repeat,
        knee,
        lat_target,
        probes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_and_targets_parse_or_say_what_is_accepted() {
        assert_eq!(
            parse_points("90/10/50/50", Mode::Rate, 32).unwrap(),
            vec![10.0, 50.0, 90.0]
        );
        let e = parse_points("10/150", Mode::Rate, 32).unwrap_err();
        assert!(e.contains("percentages above 0 and at most 100"), "{}", e);
        assert_eq!(
            parse_points("1/4/16", Mode::Qd, 16).unwrap(),
            vec![1.0, 4.0, 16.0]
        );
        assert!(parse_points("1/2.5", Mode::Qd, 16).is_err());
        assert!(parse_points("1/64", Mode::Qd, 16)
            .unwrap_err()
            .contains("above qd=16"));
        assert_eq!(dfl_qd_points(32), vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0]);
        assert_eq!(dfl_qd_points(24), vec![1.0, 2.0, 4.0, 8.0, 16.0, 24.0]);
        assert_eq!(dfl_qd_points(1), vec![1.0]);

        let t = LatTarget::parse("p99/2ms").unwrap();
        assert_eq!((t.pct, t.ns), (Some(99.0), 2e6));
        let t = LatTarget::parse("P99.9:500us").unwrap();
        assert_eq!(t.pct, Some(99.9));
        assert_eq!(t.name(), "p99.9/500us");
        assert_eq!(LatTarget::parse("p99:2.5ms").unwrap().name(), "p99/2.5ms");
        assert!((t.ns - 5e5).abs() < 1e-3);
        assert_eq!(LatTarget::parse("mean:1ms").unwrap().pct, None);
        for bad in ["p99", "p100:1ms", "x:1ms", "p99:fast", "p50:0"] {
            assert!(
                LatTarget::parse(bad).unwrap_err().contains("like p99/2ms"),
                "{}",
                bad
            );
        }
    }
}
