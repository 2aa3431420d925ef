//! The iocost-qos properties: the vrate grid and judging knobs of the first group (plus
//! `storage-*` forwarded to storage), one explicit QoS configuration per later group.

use crate::bench::contract::api::{
    prop, Forward, PropDesc, Shape, SpecError, ValueKind, PCT_LABELS,
};
use crate::bench::iocost_tune::adaptive::{Adaptive, DFL_ADAPTIVE};
use crate::bench::storage::props::{StorageProps, PROPS as STORAGE_PROPS};
use crate::spec::{Group, JobSpec};
use crate::system::iocost::QosOverride;
use crate::units::parse::ParsedValue;

pub const DFL_VRATE_MAX: f64 = 100.0;
pub const DFL_VRATE_INTVS: u64 = 5;
/// The grid `vrate-intvs=auto` picks its vrates from: iocost-tune's.
pub const AUTO_VRATE_INTVS: u64 = 25;
/// Sanity limit on the number of vrate grid points of a stored spec.
pub const MAX_VRATE_INTVS: u64 = 10_000;

pub const SHAPE: Shape = Shape {
    props: &FIRST_PROPS,
    forward: &[Forward {
        prefix: "storage-",
        bench: "storage",
        props: &STORAGE_PROPS,
    }],
    group_props: Some(&GROUP_PROPS),
    open_keys: None,
    format_props: &[prop(
        "sub-full",
        ValueKind::Bool,
        "print sub-bench results in full",
    )],
};

const FIRST_PROPS: [PropDesc; 18] = [
    prop(
        "vrate-min",
        ValueKind::Float,
        "lowest vrate of the grid (0: one step above 0)",
    ),
    prop("vrate-max", ValueKind::Float, "highest vrate of the grid"),
    prop(
        "vrate-intvs",
        ValueKind::IntOrAuto,
        "number of vrate grid points, or auto: an adaptive grid",
    ),
    prop(
        "auto-budget",
        ValueKind::Int,
        "with vrate-intvs=auto: at most this many vrates (12)",
    ),
    prop(
        "auto-target",
        ValueKind::Float,
        "with vrate-intvs=auto: done when every interval is this narrow (two grid steps)",
    ),
    prop(
        "dither",
        ValueKind::BoolOrFloat,
        "shift the grid randomly, or by the given amount",
    ),
    prop(
        "storage-base-loops",
        ValueKind::Int,
        "storage loops for the baseline run",
    ),
    prop(
        "storage-loops",
        ValueKind::Int,
        "storage loops for the other runs",
    ),
    prop(
        "isol-pct",
        ValueKind::Enum(PCT_LABELS),
        "isolation percentile to judge by",
    ),
    prop("isol-thr", ValueKind::Frac, "isolation threshold"),
    prop(
        "retries",
        ValueKind::Int,
        "extra storage attempts per configuration",
    ),
    prop(
        "allow-fail",
        ValueKind::Bool,
        "skip a failing configuration instead of aborting",
    ),
    prop(
        "ignore-min-perf",
        ValueKind::Bool,
        "don't skip vrates below the device minimum",
    ),
    prop(
        "mof-hint",
        ValueKind::Bool,
        "start each storage search at the previous footprint (true)",
    ),
    prop(
        "mof-ceiling",
        ValueKind::Bool,
        "bound each storage search by the baseline's failing footprint (true)",
    ),
    prop(
        "tune-hint",
        ValueKind::Bool,
        "start each tune at the previous protected size (true)",
    ),
    prop(
        "tune-bisect",
        ValueKind::Bool,
        "bisect a tune's sizes, from the top or below the hint (false)",
    ),
    prop(
        "early-stop",
        ValueKind::BoolOrFrac,
        "end storage loops once two agree within 10% or the given fraction (true)",
    ),
];

const GROUP_PROPS: [PropDesc; 7] = [
    prop("rpct", ValueKind::Float, "read latency percentile"),
    prop("rlat", ValueKind::Int, "read latency target in usecs"),
    prop("wpct", ValueKind::Float, "write latency percentile"),
    prop("wlat", ValueKind::Int, "write latency target in usecs"),
    prop("min", ValueKind::Float, "minimum vrate in percent"),
    prop("max", ValueKind::Float, "maximum vrate in percent"),
    prop(
        "vrate",
        ValueKind::Float,
        "fixed vrate in percent (min=max)",
    ),
];

/// How the vrate grid is shifted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dither {
    Off,
    /// By a random amount the run draws (and records).
    Random,
    By(f64),
}

pub const DFL_STOR_BASE_LOOPS: u32 = 3;
pub const DFL_STOR_LOOPS: u32 = 1;
pub const DFL_RETRIES: u32 = 1;

/// The typed first group and the explicit configurations.
#[derive(Debug, Clone, PartialEq)]
pub struct IocostQosProps {
    pub vrate_min: f64,
    pub vrate_max: f64,
    /// Grid points; 0 without a grid. With `vrate-intvs=auto`, the candidates' grid.
    pub vrate_intvs: u64,
    /// `vrate-intvs=auto`: the grid's vrates are picked one at a time (`adaptive`).
    pub adaptive: Option<Adaptive>,
    pub dither: Dither,
    /// The percentile the spec asks to judge isolation by, if any.
    pub isol_pct: Option<String>,
    pub isol_thr: f64,
    /// One per group from the second on, in order.
    pub groups: Vec<QosOverride>,
    /// The storage sub-bench's properties (`storage-*`); `loops` is set per configuration.
    pub storage: StorageProps,
    pub storage_base_loops: u32,
    pub storage_loops: u32,
    /// Extra storage attempts per configuration.
    pub retries: u32,
    pub allow_fail: bool,
    pub ignore_min_perf: bool,
    /// Time-saver: each mem-hog-tune starts at the size the previous configuration's
    /// protected (`tune-hint=false`: from the top, as upstream).
    pub tune_hint: bool,
    /// Opt-in: a tune bisects its sizes from the top, or below the hint, and trusts a bottom
    /// that fails early (`false`, the default: from the top down, as upstream — early fails
    /// make the walk about as fast, and bisect reaches sizes from below).
    pub tune_bisect: bool,
    /// Time-saver: each storage search starts at the footprint the previous configuration's
    /// found, a loop after the first at the one the loops before it found (`mof-hint=false`:
    /// from the bottom, as upstream). Off by default with `storage-search=upstream`, whose
    /// search takes no hint.
    pub mof_hint: bool,
    /// Time-saver: a configuration's storage search takes the lowest footprint the
    /// baseline's (io.cost off, so at least as capable) found failing as its bracket's upper
    /// end, unprobed (`mof-ceiling=false`: every search finds its own, as upstream). Off by
    /// default with `storage-search=upstream`.
    pub mof_ceiling: bool,
    /// Time-saver: a configuration's storage loops end once the last two found footprints
    /// within this fraction of each other ([`EARLY_STOP_TOL`] by default; `early-stop=false`,
    /// `None`: all of them, as upstream).
    pub early_stop: Option<f64>,
}

/// How close two storage loops' footprints must be for `early-stop`. The loops' MOF is their
/// mean: two loops this far apart are within 5 % of the mean of three whenever the third
/// lands no further than half their gap beyond them (within 1.7 % when it lands between), and
/// a loop varies by about 2 % in the VM compares, so a third loop rarely moves the MOF by more
/// than the goal's 5 %. Loops further apart than this disagree by more than noise, and the
/// third is measured. (5 % at first, the memory search's own resolution: in one VM compare the
/// baseline's first two loops landed 7.7 % apart, and its third loop cost as much time as the
/// savers gained elsewhere.)
pub const EARLY_STOP_TOL: f64 = 0.10;

impl IocostQosProps {
    /// The vrate grid's step (0 without a grid): `vrate-max` over the grid points from
    /// `vrate-min=0` (the lowest point one step above 0), else the range over the gaps.
    pub fn grid_step(&self) -> f64 {
        if self.vrate_min == 0.0 {
            if self.vrate_intvs == 0 {
                return 0.0;
            }
            self.vrate_max / self.vrate_intvs as f64
        } else if self.vrate_intvs > 1 {
            (self.vrate_max - self.vrate_min) / (self.vrate_intvs - 1) as f64
        } else {
            0.0
        }
    }

    /// The isolation percentile the tune judges by.
    pub fn isol_pct(&self) -> &str {
        self.isol_pct
            .as_deref()
            .unwrap_or(crate::bench::protection::DFL_ISOL_PCT)
    }
}

/// An explicit configuration group, as stored (no rules).
fn read_group(g: &Group) -> Result<QosOverride, SpecError> {
    let vrate = g.f64("vrate", ValueKind::Float)?;
    Ok(QosOverride {
        off: false,
        rpct: g.f64("rpct", ValueKind::Float)?,
        rlat: g.u64("rlat", ValueKind::Int)?,
        wpct: g.f64("wpct", ValueKind::Float)?,
        wlat: g.u64("wlat", ValueKind::Int)?,
        min: vrate.or(g.f64("min", ValueKind::Float)?),
        max: vrate.or(g.f64("max", ValueKind::Float)?),
    })
}

impl IocostQosProps {
    /// The values of a stored spec with their defaults (no rules beyond a grid size this
    /// version can hold). Without explicit groups the grid has 5 points by default.
    pub fn read(spec: &JobSpec) -> Result<IocostQosProps, SpecError> {
        let g = spec.group(0);
        let auto = g.text("vrate-intvs") == Some("auto");
        let mut vrate_intvs = if auto {
            AUTO_VRATE_INTVS
        } else {
            g.u64("vrate-intvs", ValueKind::IntOrAuto)?.unwrap_or(0)
        };
        if vrate_intvs == 0 && spec.props.len() <= 1 {
            vrate_intvs = DFL_VRATE_INTVS;
        }
        if vrate_intvs > MAX_VRATE_INTVS {
            return Err(g.err(format!(
                "vrate-intvs={} is more than this version handles (at most {})",
                vrate_intvs, MAX_VRATE_INTVS
            )));
        }
        let dither = match g.text("dither") {
            None | Some("false") | Some("0") => Dither::Off,
            Some("") | Some("true") | Some("1") => Dither::Random,
            Some(_) => match g.f64("dither", ValueKind::BoolOrFloat)? {
                Some(v) => Dither::By(v),
                None => Dither::Off,
            },
        };
        let count = |k: &str, dfl: u32| -> Result<u32, SpecError> {
            Ok(g.u64(k, ValueKind::Int)?
                .map_or(dfl, |v| v.min(u32::MAX as u64) as u32))
        };
        // Upstream's memory search starts from the bottom every time: no hint, no ceiling.
        let storage = StorageProps::read_prefixed(spec, "storage-")?;
        let upstream_search = storage.upstream.search;
        let mut props = IocostQosProps {
            vrate_min: g.f64("vrate-min", ValueKind::Float)?.unwrap_or(0.0),
            vrate_max: g
                .f64("vrate-max", ValueKind::Float)?
                .unwrap_or(DFL_VRATE_MAX),
            vrate_intvs,
            adaptive: None,
            dither,
            isol_pct: g.text("isol-pct").map(str::to_string),
            isol_thr: g
                .f64("isol-thr", ValueKind::Frac)?
                .unwrap_or(crate::bench::protection::DFL_ISOL_THR),
            storage,
            storage_base_loops: count("storage-base-loops", DFL_STOR_BASE_LOOPS)?,
            storage_loops: count("storage-loops", DFL_STOR_LOOPS)?,
            retries: count("retries", DFL_RETRIES)?,
            allow_fail: g.flag("allow-fail")?.unwrap_or(false),
            ignore_min_perf: g.flag("ignore-min-perf")?.unwrap_or(false),
            tune_hint: g.flag("tune-hint")?.unwrap_or(true),
            tune_bisect: g.flag("tune-bisect")?.unwrap_or(false),
            mof_hint: g.flag("mof-hint")?.unwrap_or(!upstream_search),
            mof_ceiling: g.flag("mof-ceiling")?.unwrap_or(!upstream_search),
            early_stop: match g.value("early-stop", ValueKind::BoolOrFrac)? {
                None | Some(ParsedValue::Bool(true)) => Some(EARLY_STOP_TOL),
                Some(ParsedValue::Frac(f)) => Some(f),
                Some(_) => None,
            },
            groups: spec
                .later_groups()
                .map(|g| read_group(&g))
                .collect::<Result<_, _>>()?,
        };
        if auto {
            let budget = g.u64("auto-budget", ValueKind::Int)?;
            let target = g.f64("auto-target", ValueKind::Float)?;
            props.adaptive = Some(Adaptive {
                coarse: DFL_ADAPTIVE.coarse,
                budget: budget.map_or(DFL_ADAPTIVE.budget, |b| b.min(MAX_VRATE_INTVS) as usize),
                target: target.unwrap_or(2.0 * props.grid_step()),
            });
        }
        Ok(props)
    }
}

/// The rules of a spec to run: a grid whose bounds are in order, and explicit groups that are
/// valid QoS overrides.
impl IocostQosProps {
    /// The time-savers in effect (upstream has none of them): what keeps a run's results
    /// apart from upstream-faithful ones in a merge.
    pub fn time_savers(&self) -> Vec<&'static str> {
        [
            (self.mof_hint, "mof-hint"),
            (self.mof_ceiling, "mof-ceiling"),
            (self.tune_hint, "tune-hint"),
            (self.early_stop.is_some(), "early-stop"),
            (self.tune_bisect, "tune-bisect"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

pub fn check(spec: &JobSpec) -> Result<IocostQosProps, SpecError> {
    let g = spec.group(0);
    let min = g.f64("vrate-min", ValueKind::Float)?;
    let max = g.f64("vrate-max", ValueKind::Float)?;
    for (key, v) in [("vrate-min", min), ("vrate-max", max)] {
        if let Some(v) = v.filter(|v| *v < 0.0) {
            return Err(g.err(format!("{}={} must not be negative", key, v)));
        }
    }
    let (lo, hi) = (min.unwrap_or(0.0), max.unwrap_or(DFL_VRATE_MAX));
    if lo >= hi {
        let hi_text = match max {
            Some(v) => format!("vrate-max={}", v),
            None => "vrate-max (default 100)".to_string(),
        };
        return Err(g.err(format!("vrate-min={} must be less than {}", lo, hi_text)));
    }
    for g in spec.later_groups() {
        QosOverride::from_pairs(g.props().iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| g.err(e))?;
    }
    StorageProps::check_prefixed(spec, "storage-")?;
    let props = IocostQosProps::read(spec)?;
    if props.early_stop.is_some_and(|t| !(t > 0.0 && t <= 1.0)) {
        return Err(g.err(format!(
            "early-stop={} is not a tolerance (accepted: more than 0% and at most 100%, \
             true for {}%, or false)",
            g.text("early-stop").unwrap_or_default(),
            EARLY_STOP_TOL * 100.0
        )));
    }
    match &props.adaptive {
        None => {
            if let Some(k) = ["auto-budget", "auto-target"]
                .into_iter()
                .find(|k| g.text(k).is_some())
            {
                return Err(g.err(format!(
                    "{} only applies to an adaptive grid (add vrate-intvs=auto)",
                    k
                )));
            }
        }
        Some(a) => {
            if a.budget == 0 {
                return Err(g.err(
                    "auto-budget=0: the adaptive grid needs a vrate to measure \
                     (accepted: 1 or more)",
                ));
            }
            if a.target <= 0.0 {
                return Err(g.err(format!(
                    "auto-target={} is not an interval width (accepted: more than 0 vrate points)",
                    a.target
                )));
            }
        }
    }
    if props.storage.upstream.search {
        if let Some(k) = [
            ("mof-hint", props.mof_hint),
            ("mof-ceiling", props.mof_ceiling),
        ]
        .into_iter()
        .find_map(|(k, on)| on.then_some(k))
        {
            return Err(g.err(format!(
                "{} needs our memory search, and storage-search=upstream asks for upstream's \
                 (accepted: {}=false, or leave it out)",
                k, k
            )));
        }
    }
    for (key, v) in [
        ("storage-base-loops", props.storage_base_loops),
        ("storage-loops", props.storage_loops),
    ] {
        if v == 0 {
            return Err(g.err(format!(
                "{}=0: each configuration needs a storage loop",
                key
            )));
        }
    }
    Ok(props)
}

#[cfg(test)]
mod saver_tests {
    use super::*;

    fn checked(spec: &str) -> Result<IocostQosProps, String> {
        check(&JobSpec::parse(spec).unwrap()).map_err(|e| e.msg)
    }

    #[test]
    fn an_adaptive_grid_and_its_properties() {
        let p = checked("iocost-qos:vrate-intvs=auto").unwrap();
        assert_eq!(p.vrate_intvs, AUTO_VRATE_INTVS);
        // Two steps of the 25-point grid up to 100.
        let a = p.adaptive.unwrap();
        assert_eq!((a.coarse, a.budget, a.target), (5, 12, 8.0));
        let p = checked("iocost-qos:dither,vrate-max=125,vrate-intvs=auto,auto-budget=8").unwrap();
        let a = p.adaptive.unwrap();
        assert_eq!((a.budget, a.target), (8, 10.0));
        let a = checked("iocost-qos:vrate-intvs=auto,auto-target=15")
            .unwrap()
            .adaptive
            .unwrap();
        assert_eq!(a.target, 15.0);
        assert_eq!(checked("iocost-qos:vrate-intvs=7").unwrap().adaptive, None);
        for (spec, want) in [
            (
                "iocost-qos:auto-budget=8",
                "only applies to an adaptive grid",
            ),
            (
                "iocost-qos:vrate-intvs=5,auto-target=3",
                "add vrate-intvs=auto",
            ),
            ("iocost-qos:vrate-intvs=auto,auto-budget=0", "auto-budget=0"),
            (
                "iocost-qos:vrate-intvs=auto,auto-target=0",
                "not an interval width",
            ),
            (
                "iocost-qos:vrate-intvs=often",
                "not a non-negative integer or auto",
            ),
        ] {
            let e = checked(spec).unwrap_err();
            assert!(e.contains(want), "{}: {}", spec, e);
        }
    }

    fn savers(spec: &str) -> Vec<&'static str> {
        IocostQosProps::read(&JobSpec::parse(spec).unwrap())
            .unwrap()
            .time_savers()
    }

    #[test]
    fn the_time_savers_in_effect() {
        assert_eq!(
            savers("iocost-qos"),
            ["mof-hint", "mof-ceiling", "tune-hint", "early-stop"]
        );
        assert_eq!(
            savers("iocost-qos:mof-hint=false,mof-ceiling=false,tune-hint=false,early-stop=false"),
            Vec::<&str>::new()
        );
        assert_eq!(savers("iocost-qos:early-stop=false,tune-bisect").len(), 4);
    }

    #[test]
    fn upstreams_search_turns_the_search_savers_off() {
        // Its search takes no hint or ceiling: off unless asked for, and asking is an error.
        assert_eq!(
            savers("iocost-qos:storage-search=upstream"),
            ["tune-hint", "early-stop"]
        );
        let p = check(&JobSpec::parse("iocost-qos:storage-search=upstream").unwrap()).unwrap();
        assert!(p.storage.upstream.search && !p.mof_hint && !p.mof_ceiling);
        for k in ["mof-hint", "mof-ceiling"] {
            let spec =
                JobSpec::parse(&format!("iocost-qos:storage-search=upstream,{}", k)).unwrap();
            let e = spec.error(check(&spec).unwrap_err()).to_string();
            assert!(
                e.contains(&format!("{}=false", k)) && !e.contains("  "),
                "{}",
                e
            );
        }
        assert!(check(&JobSpec::parse("iocost-qos:storage-search=ours,mof-hint").unwrap()).is_ok());
    }
}
