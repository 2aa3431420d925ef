//! The configurations an iocost-qos job measures (benches-doc/iocost-qos.md): the iocost-off
//! baseline, the explicit groups, then the vrate grid (with its dither); the minimum-performance
//! rule that skips or adjusts vrates too slow for the device (benches-doc/iocost-qos.md); and which
//! configurations a previous record already holds.

use super::props::{Dither, IocostQosProps};
use super::record::{QosRecord, QosRun};
use crate::system::iocost::{abs_min_vrate, round2, IoCostModel, IoCostQos, QosOverride};
use anyhow::Result;

/// The vrate grid never goes below this.
pub const VRATE_INTVS_MIN: f64 = 1.0;

/// The grid's step and, for `vrate-min=0`, the shift a random dither is centred on.
fn click_shift(p: &IocostQosProps) -> (f64, f64) {
    let click = p.grid_step();
    if p.vrate_min == 0.0 {
        (click, -click / 2.0)
    } else {
        (click, 0.0)
    }
}

/// A configuration pinned to `vrate` (`min` = `max`).
pub fn pinned(vrate: f64) -> QosOverride {
    QosOverride {
        min: Some(vrate),
        max: Some(vrate),
        ..Default::default()
    }
}

/// A random dither offset: uniform in `[−click/2, click/2)` plus the shift.
pub fn draw_dither(p: &IocostQosProps, rng: &mut impl rand::Rng) -> f64 {
    let (click, shift) = click_shift(p);
    if click <= 0.0 || !click.is_finite() {
        return 0.0;
    }
    rng.gen_range(-click / 2.0..click / 2.0) + shift
}

/// The grid offset a job uses: the spec's `dither=F`, else (random dither) the recorded one.
pub fn dither_offset(p: &IocostQosProps, recorded: Option<f64>) -> Option<f64> {
    match p.dither {
        Dither::Off => None,
        Dither::Random => Some(recorded.unwrap_or(0.0)),
        Dither::By(v) => Some(v),
    }
}

/// Baseline, explicit groups, then the grid from `vrate-max` down, shifted by `offset`; the
/// grid never goes below [`VRATE_INTVS_MIN`] and has at most `vrate-intvs + 1` points
/// whatever a stored spec says.
pub fn configs_of(p: &IocostQosProps, offset: Option<f64>) -> Vec<QosOverride> {
    let mut cfgs = vec![QosOverride::off()];
    cfgs.extend(p.groups.iter().cloned());
    if p.vrate_intvs == 0 {
        return cfgs;
    }
    let (click, _) = click_shift(p);
    let mut min = if p.vrate_min == 0.0 {
        click
    } else if p.vrate_intvs > 1 {
        p.vrate_min
    } else {
        p.vrate_max
    };
    let mut max = p.vrate_max;
    if let Some(off) = offset {
        min += off;
        max += off;
    }
    min = min.max(VRATE_INTVS_MIN);
    let mut v = max;
    for _ in 0..=p.vrate_intvs {
        if v <= min - 0.001 {
            break;
        }
        cfgs.push(pinned(round2(v)));
        if click <= 0.0 || !click.is_finite() {
            break;
        }
        v -= click;
    }
    cfgs
}

/// One configuration as the job plans it.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// What is applied and recorded: the configuration, its `min` raised by the
    /// minimum-performance rule when `adjusted`.
    pub ovr: QosOverride,
    /// Too slow for the device: not measured (`[NN]  SKIP` in the report).
    pub skip: bool,
    pub adjusted: bool,
}

/// The minimum-performance rule, unless `ignore`: a configuration whose `max` is below the
/// vrate at which `model` drops under the minimum device performance is skipped; one whose
/// `min` (its own, else `base_min`) is below it gets that vrate as `min`. Configurations
/// without a `max` are never skipped.
pub fn apply_min_perf(
    cfgs: &[QosOverride],
    model: &IoCostModel,
    base_min: f64,
    ignore: bool,
) -> Vec<Planned> {
    let floor = abs_min_vrate(model);
    cfgs.iter()
        .map(|c| {
            let mut p = Planned {
                ovr: *c,
                skip: false,
                adjusted: false,
            };
            if ignore || c.off {
                return p;
            }
            let Some(max) = c.max else {
                return p;
            };
            if max < floor {
                p.skip = true;
            } else if c.min.unwrap_or(base_min) < floor {
                p.ovr.min = Some(floor);
                p.adjusted = true;
            }
            p
        })
        .collect()
}

/// The listing line of configuration `i` (`iocost-qos[03]: +a rpct=…`): `+` when it will
/// run, `-` when reused or skipped; `s` skipped, `a` min adjusted.
pub fn listing_line(i: usize, p: &Planned, reused: bool, desc: &str) -> String {
    let a = if p.skip || reused { '-' } else { '+' };
    let b = if p.skip {
        's'
    } else if p.adjusted {
        'a'
    } else {
        ' '
    };
    format!("iocost-qos[{:02}]: {}{} {}", i, a, b, desc)
}

/// A finished run of an earlier invocation measured with the same configuration and the same
/// sub-bench parameters, if any. Runs without recorded parameters (upstream's) match on the
/// configuration alone.
pub fn reusable<'a>(
    prev: impl IntoIterator<Item = &'a QosRun>,
    ovr: &QosOverride,
    params: &str,
) -> Option<&'a QosRun> {
    prev.into_iter()
        .find(|r| r.done && r.ovr == *ovr && r.params.as_deref().is_none_or(|p| p == params))
}

/// What a job measures with: its runs are only comparable with runs measured under the same
/// io.cost model and QoS and the same memory profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Base {
    pub model: IoCostModel,
    pub qos: IoCostQos,
    pub profile: u32,
}

/// What differs between an earlier record and this job's base, if anything.
pub fn mismatch(prev: &QosRecord, base: &Base) -> Option<String> {
    let mut what = Vec::new();
    if !prev.base_model.same_params(&base.model) {
        let m = prev.base_model.params();
        let m: Vec<String> = m.iter().map(|(k, v)| format!("{}={}", k, v)).collect();
        what.push(format!("another io.cost model ({})", m.join(" ")));
    }
    if !prev.base_qos.same_params(&base.qos) {
        what.push(format!(
            "another io.cost QoS ({})",
            prev.base_qos.rounded().line()
        ));
    }
    match prev.profile() {
        Some(p) if p != base.profile => {
            what.push(format!("memory profile {} (this job: {})", p, base.profile))
        }
        _ => {}
    }
    (!what.is_empty()).then(|| what.join(" and "))
}

/// What an earlier record of the job gives this one.
#[derive(Debug, Default, PartialEq)]
pub struct Reuse {
    /// Per planned configuration, the finished run it reuses.
    pub runs: Vec<Option<QosRun>>,
    /// The runs the new record starts its `inc_runs` with (see [`QosRecord::carry_over`]).
    pub carried: Vec<QosRun>,
    /// Why the earlier runs were dropped (another base), when they were.
    pub dropped: Option<String>,
}

/// Matches the planned configurations (with their sub-bench `params`) against `prev`. Runs
/// measured under another base are never mixed with new ones: when any of them would be
/// reused, the error says what differs and how to go on; otherwise the job starts over.
pub fn reuse(
    prev: Option<&QosRecord>,
    base: &Base,
    planned: &[Planned],
    params: &[String],
) -> Result<Reuse, String> {
    let Some(prev) = prev else {
        return Ok(Reuse {
            runs: vec![None; planned.len()],
            ..Default::default()
        });
    };
    let runs: Vec<Option<QosRun>> = planned
        .iter()
        .zip(params)
        .map(|(p, par)| reusable(prev.finished(), &p.ovr, par).cloned())
        .collect();
    match mismatch(prev, base) {
        None => Ok(Reuse {
            runs,
            carried: prev.carry_over(),
            dropped: None,
        }),
        Some(why) if runs.iter().any(|r| r.is_some()) => Err(format!(
            "iocost-qos: the result file's earlier runs of this job were measured with {}; \
             they can't be combined with new ones: remove the iocost-qos entry from the \
             result file (or give this job another id=) to measure again",
            why
        )),
        Some(why) => Ok(Reuse {
            runs,
            carried: Vec::new(),
            dropped: Some(why),
        }),
    }
}

/// The QoS configurations of a stored iocost-qos entry's properties, in run order: the iocost-off baseline,
/// the explicit groups, then the vrate grid. The grid's dither offset comes from the spec
/// (`dither=F`) or, for a random dither, from the record that stored it; an adaptive grid's
/// vrates are the ones the record says it picked, in that order.
pub fn configs(props: &IocostQosProps, rec: &QosRecord) -> Vec<QosOverride> {
    let mut cfgs = configs_of(props, dither_offset(props, rec.dither_dist));
    if props.adaptive.is_some() {
        cfgs.truncate(1 + props.groups.len());
        let steps = rec.adaptive.iter().flat_map(|a| &a.steps);
        cfgs.extend(steps.map(|s| pinned(s.vrate)));
    }
    cfgs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::JobSpec;

    fn props(s: &str) -> IocostQosProps {
        super::super::props::check(&JobSpec::parse(s).unwrap()).unwrap()
    }

    fn maxes(c: &[QosOverride]) -> Vec<f64> {
        c.iter().skip(1).map(|c| c.max.unwrap()).collect()
    }

    #[test]
    fn the_default_grid_and_an_inclusive_range() {
        let p = props("iocost-qos");
        let c = configs_of(&p, None);
        assert!(c[0].off);
        assert_eq!(maxes(&c), vec![100.0, 80.0, 60.0, 40.0, 20.0]);
        assert!(c.iter().skip(1).all(|c| c.min == c.max));
        let p = props("iocost-qos:vrate-min=50,vrate-max=100,vrate-intvs=3");
        assert_eq!(maxes(&configs_of(&p, None)), vec![100.0, 75.0, 50.0]);
    }

    #[test]
    fn explicit_groups_come_before_the_grid_only_when_asked_for() {
        let p = props("iocost-qos::vrate=50:rpct=90");
        let c = configs_of(&p, None);
        assert_eq!(c.len(), 3);
        assert_eq!(c[1].min, Some(50.0));
        assert_eq!(c[2].rpct, Some(90.0));
        let p = props("iocost-qos:vrate-intvs=2:vrate=50");
        let c = configs_of(&p, None);
        assert_eq!(c.len(), 4);
        assert_eq!(maxes(&c[1..]), vec![100.0, 50.0]);
    }

    #[test]
    fn a_dither_shifts_the_grid_and_the_lowest_point_below_1_is_dropped() {
        // iocost-tune's default: step 5, offsets in [-5, 0).
        let p = props("iocost-qos:dither,vrate-max=125,vrate-intvs=25");
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(7);
        for _ in 0..1000 {
            let d = draw_dither(&p, &mut rng);
            assert!((-5.0..0.0).contains(&d), "{}", d);
        }
        // -4.5: the points are 120.5, 115.5, …, 5.5, 0.5; 0.5 is below 1.0 and dropped.
        let c = configs_of(&p, dither_offset(&p, Some(-4.5)));
        assert_eq!(c.len(), 1 + 24);
        assert_eq!(c[1].max, Some(120.5));
        assert_eq!(c[24].max, Some(5.5));
        // -0.5: 124.5 … 4.5, all 25 kept.
        let c = configs_of(&p, dither_offset(&p, Some(-0.5)));
        assert_eq!(c.len(), 1 + 25);
        assert_eq!(c[25].max, Some(4.5));
        // The recorded offset is what a resumed job uses; an explicit one wins.
        let p = props("iocost-qos:dither=2.5,vrate-intvs=5");
        let c = configs_of(&p, dither_offset(&p, Some(-1.0)));
        assert_eq!(maxes(&c), vec![102.5, 82.5, 62.5, 42.5, 22.5]);
    }

    #[test]
    fn the_min_perf_rule_skips_and_adjusts() {
        // wbps 600 MB/s: 125 MiB/s is 21.85 % of it, the highest ratio of the six.
        let model = IoCostModel {
            rbps: 2_000_000_000,
            rseqiops: 100_000,
            rrandiops: 100_000,
            wbps: 600_000_000,
            wseqiops: 50_000,
            wrandiops: 50_000,
            ..Default::default()
        };
        assert_eq!(abs_min_vrate(&model), 21.85);
        let p = props("iocost-qos::min=10,max=40:rpct=90");
        let mut cfgs = configs_of(&p, None);
        cfgs.extend(configs_of(&props("iocost-qos"), None).into_iter().skip(1));
        let plan = apply_min_perf(&cfgs, &model, 60.0, false);
        // off; min=10,max=40 → min raised; rpct=90 (no max) untouched; 100…40 as they are; 20
        // skipped.
        assert!(!plan[0].skip && !plan[0].adjusted);
        assert_eq!(plan[1].ovr.min, Some(21.85));
        assert!(plan[1].adjusted);
        assert_eq!(plan[2].ovr, cfgs[2]);
        assert!(plan[3..7].iter().all(|p| !p.skip && !p.adjusted));
        assert!(plan[7].skip);
        assert_eq!(plan[7].ovr.max, Some(20.0));
        // ignore-min-perf: all as given.
        let plan = apply_min_perf(&cfgs, &model, 60.0, true);
        assert!(plan.iter().all(|p| !p.skip && !p.adjusted));
        // A base min below the floor is raised too when the configuration has a max.
        let plan = apply_min_perf(
            &[QosOverride {
                max: Some(50.0),
                ..Default::default()
            }],
            &model,
            10.0,
            false,
        );
        assert_eq!(plan[0].ovr.min, Some(21.85));
    }

    #[test]
    fn listing_lines() {
        let p = Planned {
            ovr: QosOverride::off(),
            skip: false,
            adjusted: false,
        };
        assert_eq!(
            listing_line(0, &p, true, "iocost=off"),
            "iocost-qos[00]: -  iocost=off"
        );
        assert_eq!(listing_line(2, &p, false, "x"), "iocost-qos[02]: +  x");
        let s = Planned { skip: true, ..p };
        assert_eq!(listing_line(5, &s, false, "x"), "iocost-qos[05]: -s x");
        let a = Planned {
            adjusted: true,
            ..p
        };
        assert_eq!(listing_line(3, &a, false, "x"), "iocost-qos[03]: +a x");
    }

    #[test]
    fn reuse_needs_a_finished_run_with_the_same_configuration_and_parameters() {
        let v = |x: f64| QosOverride {
            min: Some(x),
            max: Some(x),
            ..Default::default()
        };
        let run = |o: QosOverride, params: Option<&str>, done: bool| QosRun {
            ovr: o,
            params: params.map(str::to_string),
            done,
            ..Default::default()
        };
        let prev = [
            run(v(80.0), Some("loops=1"), true),
            run(v(60.0), Some("loops=1"), false),
            run(v(40.0), None, true),
        ];
        assert!(reusable(&prev, &v(80.0), "loops=1").is_some());
        assert!(reusable(&prev, &v(80.0), "loops=2").is_none());
        assert!(reusable(&prev, &v(60.0), "loops=1").is_none());
        assert!(reusable(&prev, &v(40.0), "loops=9").is_some());
        assert!(reusable(&prev, &v(20.0), "loops=1").is_none());
    }

    /// A record of vrates 100 and 50 (finished) and 25 (killed inside) under `base`.
    fn earlier(base: &Base, params: &str) -> QosRecord {
        let run = |x: f64, done: bool| QosRun {
            ovr: QosOverride {
                min: Some(x),
                max: Some(x),
                ..Default::default()
            },
            params: Some(params.to_string()),
            done,
            ..Default::default()
        };
        QosRecord {
            base_model: base.model.clone(),
            base_qos: base.qos.clone(),
            mem_profile: base.profile,
            inc_runs: vec![run(100.0, true), run(50.0, true), run(25.0, false)],
            ..Default::default()
        }
    }

    fn test_base() -> Base {
        Base {
            model: IoCostModel {
                rbps: 500_000_000,
                rseqiops: 50_000,
                rrandiops: 40_000,
                wbps: 400_000_000,
                wseqiops: 40_000,
                wrandiops: 30_000,
                ..Default::default()
            },
            qos: IoCostQos {
                rpct: 95.0,
                rlat: 5000,
                wpct: 95.0,
                wlat: 10000,
                min: 50.0,
                max: 100.0,
                ..Default::default()
            },
            profile: 2,
        }
    }

    fn plan_of(spec: &str) -> Vec<Planned> {
        let cfgs = configs_of(&props(spec), None);
        apply_min_perf(&cfgs, &IoCostModel::default(), 50.0, true)
    }

    fn vrate(r: &Option<QosRun>) -> Option<f64> {
        r.as_ref().map(|r| r.ovr.max.unwrap())
    }

    #[test]
    fn a_rerun_fast_forwards_over_finished_configurations_added_or_removed_ones_included() {
        let base = test_base();
        let prev = earlier(&base, "p");
        // The same grid: 100 and 50 reused, 25 (unfinished) and the baseline to run.
        let planned = plan_of("iocost-qos:vrate-min=25,vrate-max=100,vrate-intvs=4");
        let vr: Vec<f64> = planned.iter().skip(1).map(|p| p.ovr.max.unwrap()).collect();
        assert_eq!(vr, vec![100.0, 75.0, 50.0, 25.0]);
        let params = vec!["p".to_string(); planned.len()];
        let r = reuse(Some(&prev), &base, &planned, &params).unwrap();
        let got: Vec<Option<f64>> = r.runs.iter().map(vrate).collect();
        assert_eq!(got, vec![None, Some(100.0), None, Some(50.0), None]);
        // Every earlier run is carried, the unfinished one last, so it resumes.
        assert_eq!(r.carried, prev.carry_over());
        assert_eq!(r.carried.last().map(|r| r.done), Some(false));
        assert_eq!(r.dropped, None);
        // 100 removed, 60 added: 50 is still reused and 100 is still carried (a later job
        // that asks for it again reuses it).
        let planned = plan_of("iocost-qos::vrate=60:vrate=50");
        let params = vec!["p".to_string(); planned.len()];
        let r = reuse(Some(&prev), &base, &planned, &params).unwrap();
        let got: Vec<Option<f64>> = r.runs.iter().map(vrate).collect();
        assert_eq!(got, vec![None, None, Some(50.0)]);
        assert_eq!(r.carried.len(), 3);
        // Other sub-bench parameters: nothing reused, nothing refused.
        let params = vec!["q".to_string(); planned.len()];
        let r = reuse(Some(&prev), &base, &planned, &params).unwrap();
        assert!(r.runs.iter().all(|r| r.is_none()));
        // No earlier record.
        let r = reuse(None, &base, &planned, &params).unwrap();
        assert_eq!(r.runs.len(), 3);
        assert!(r.runs.iter().all(|r| r.is_none()) && r.carried.is_empty());
    }

    #[test]
    fn runs_of_another_base_are_never_mixed_with_new_ones() {
        let base = test_base();
        let prev = earlier(&base, "p");
        let planned = plan_of("iocost-qos:vrate-min=50,vrate-max=100,vrate-intvs=2");
        let params = vec!["p".to_string(); planned.len()];
        let mut other = base.clone();
        other.model.wbps = 300_000_000;
        assert!(mismatch(&prev, &base).is_none());
        let err = reuse(Some(&prev), &other, &planned, &params).unwrap_err();
        assert!(err.contains("another io.cost model ("), "{}", err);
        assert!(err.contains("wbps=400000000"), "{}", err);
        assert!(err.contains("remove the iocost-qos entry"), "{}", err);
        assert!(!err.contains('\n'), "one line: {}", err);
        // QoS and memory profile, named together.
        let mut other = base.clone();
        other.qos.rlat = 7000;
        other.profile = 4;
        let why = mismatch(&prev, &other).unwrap();
        assert!(
            why.starts_with("another io.cost QoS (rpct=95.00 rlat=5000"),
            "{}",
            why
        );
        assert!(
            why.ends_with(" and memory profile 2 (this job: 4)"),
            "{}",
            why
        );
        // Nothing of the earlier record would be reused: the job starts over, carrying none
        // of the old runs into its checkpoints.
        let planned = plan_of("iocost-qos::vrate=75");
        let params = vec!["p".to_string(); planned.len()];
        let r = reuse(Some(&prev), &other, &planned, &params).unwrap();
        assert!(r.runs.iter().all(|r| r.is_none()));
        assert!(r.carried.is_empty());
        assert_eq!(r.dropped.as_deref(), Some(why.as_str()));
    }
}
