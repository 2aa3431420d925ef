//! `vrate-intvs=auto` (benches-doc/iocost-qos.md): the vrate grid measured one configuration at
//! a time. The candidates are the `vrate-intvs=25` grid over the spec's range (dithered as
//! asked) less the vrates the minimum-performance rule skips; after the baseline and the
//! explicit groups, `iocost_tune::adaptive` picks the next vrate from the intervals of
//! iocost-tune's default solutions over the configurations measured so far, and says when to
//! stop. A resumed job drives the same procedure again: the finished configurations it asks
//! for are reused, so it goes on where it stopped.

use super::plan::Planned;
use super::record::{AdaptiveLog, IoCostQosResult, QosRecord, QosRun, RunResult};
use crate::bench::iocost_tune::adaptive::{coarse_step, next, Adaptive, Next};
use crate::bench::iocost_tune::interval::DFL_BOOT;
use crate::bench::iocost_tune::model::IocostTuneResult;
use crate::bench::iocost_tune::rules::{rules, QosRule};
use crate::bench::iocost_tune::solve::DFL_SCALE;
use crate::bench::iocost_tune::study::{collect, sels};
use anyhow::Result;
use std::collections::BTreeSet;

/// What the procedure needs from the job.
pub(super) trait Measure {
    /// Measures (or reuses) the grid configuration pinned to `vrate`, picked for `why`.
    /// The implementation records the step first, so that a checkpoint names the one in
    /// progress.
    fn measure(&mut self, vrate: f64, why: &str) -> Result<()>;
    /// The series iocost-tune would fit to the configurations measured so far.
    fn data(&mut self) -> Result<IocostTuneResult>;
}

/// The candidate vrates, ascending: the grid configurations the job would measure.
pub(super) fn candidates(grid: &[Planned]) -> Vec<f64> {
    let mut v: Vec<f64> = grid
        .iter()
        .filter(|p| !p.skip && p.ovr.min == p.ovr.max)
        .filter_map(|p| p.ovr.max)
        .collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// iocost-tune's default rules: the solutions whose intervals the grid narrows.
pub(super) fn default_rules() -> Vec<QosRule> {
    rules(&[]).expect("the default rules read")
}

/// Runs the procedure to its end; why it stopped.
pub(super) fn drive(
    m: &mut impl Measure,
    cands: &[f64],
    plan: Adaptive,
    rules: &[QosRule],
) -> Result<String> {
    let mut measured: Vec<f64> = Vec::new();
    loop {
        let step = match coarse_step(cands, &measured, plan) {
            Some(n) => n,
            None => next(
                cands,
                &measured,
                &m.data()?,
                rules,
                DFL_SCALE,
                plan,
                DFL_BOOT,
            ),
        };
        match step {
            Next::Measure { vrate, why } => {
                ::log::info!(
                    "iocost-qos: adaptive grid, vrate {} next ({} of at most {}): {}",
                    vrate,
                    measured.len() + 1,
                    plan.budget,
                    why
                );
                m.measure(vrate, &why)?;
                measured.push(vrate);
            }
            Next::Stop { why } => {
                let n = measured.len();
                ::log::info!(
                    "iocost-qos: adaptive grid done after {} vrate{}: {}",
                    n,
                    if n == 1 { "" } else { "s" },
                    why
                );
                return Ok(why);
            }
        }
    }
}

/// The series of a job's runs so far: `runs` in record order (baseline first), each with its
/// study (`None` for skipped or failed ones).
pub(super) fn data_of(
    rec: &QosRecord,
    runs: &[Option<(QosRun, RunResult)>],
    rules: &[QosRule],
) -> IocostTuneResult {
    let part = QosRecord {
        runs: runs
            .iter()
            .map(|r| r.as_ref().map(|r| r.0.clone()))
            .collect(),
        base_model: rec.base_model.clone(),
        base_qos: rec.base_qos.clone(),
        upstream_model_jobs: rec.upstream_model_jobs,
        fio_model_engine: rec.fio_model_engine,
        mem_profile: rec.mem_profile,
        ..Default::default()
    };
    let res = IoCostQosResult {
        runs: runs
            .iter()
            .map(|r| r.as_ref().map(|r| r.1.clone()))
            .collect(),
    };
    collect(&part, &res, &sels(&BTreeSet::new(), rules))
}

/// The log a record starts with: none for a fixed grid.
pub(super) fn new_log(adaptive: Option<Adaptive>) -> Option<AdaptiveLog> {
    adaptive.map(|_| AdaptiveLog::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::iocost_tune::model::{DataPoint, DataSeries};
    use crate::bench::iocost_tune::sel::DataSel;
    use crate::system::iocost::QosOverride;

    /// A device whose read p99 climbs from 1 ms at vrate 40 to 3 ms at 70, with a wobble.
    struct Fake {
        measured: Vec<f64>,
        whys: Vec<String>,
        datas: usize,
    }

    impl Measure for Fake {
        fn measure(&mut self, vrate: f64, why: &str) -> Result<()> {
            self.measured.push(vrate);
            self.whys.push(why.to_string());
            Ok(())
        }
        fn data(&mut self) -> Result<IocostTuneResult> {
            self.datas += 1;
            let series = |f: &dyn Fn(f64) -> f64| DataSeries {
                data: self
                    .measured
                    .iter()
                    .map(|&x| DataPoint::new(x, f(x)))
                    .collect(),
                ..Default::default()
            };
            let wobble = |x: f64| 1.0 + 0.15 * (x * 0.9).sin();
            let mut res = IocostTuneResult::default();
            res.data.insert(
                DataSel::RLat("99".into(), "mean".into()),
                series(&|x| (0.001 + 0.002 * ((x - 40.0) / 30.0).clamp(0.0, 1.0)) * wobble(x)),
            );
            res.data.insert(
                DataSel::WLat("99".into(), "mean".into()),
                series(&|_| 0.002),
            );
            res.data.insert(DataSel::Mof, series(&|_| 1.5));
            Ok(res)
        }
    }

    #[test]
    fn the_procedure_measures_coarse_then_refines_and_logs_each_step() {
        let grid: Vec<Planned> = (1..=25)
            .map(|i| Planned {
                ovr: super::super::plan::pinned(i as f64 * 4.0),
                skip: i <= 2,
                adjusted: false,
            })
            .chain([Planned {
                ovr: QosOverride {
                    rpct: Some(90.0),
                    ..Default::default()
                },
                skip: false,
                adjusted: false,
            }])
            .collect();
        let cands = candidates(&grid);
        assert_eq!(cands.len(), 23, "skipped and unpinned ones left out");
        assert_eq!((cands[0], cands[22]), (12.0, 100.0));
        let rules = default_rules();
        assert!(rules.iter().any(|r| r.name == "rlat-99-q2"));
        let plan = Adaptive {
            coarse: 4,
            budget: 7,
            target: 8.0,
        };
        let fresh = || Fake {
            measured: Vec::new(),
            whys: Vec::new(),
            datas: 0,
        };
        let mut fake = fresh();
        let why = drive(&mut fake, &cands, plan, &rules).unwrap();
        let picked = fake.measured.clone();
        assert_eq!(&picked[..4], [100.0, 72.0, 40.0, 12.0]);
        assert!(fake.whys[..4].iter().all(|w| w == "coarse pass"));
        // The coarse pass studies nothing; every later step does once.
        assert_eq!(fake.datas, picked.len() - 4 + 1);
        assert!(picked.len() <= plan.budget, "{:?}", picked);
        // The climb's quartiles are not sure from 4 points 28 apart: it refines in the climb.
        assert!(picked.len() > 4, "{:?} {}", picked, why);
        assert!(fake.whys[4].contains(" wide ("), "{}", fake.whys[4]);
        assert!(picked[4] > 40.0 && picked[4] < 72.0, "{:?}", picked);
        assert!(
            why.starts_with("budget of 7") || why.starts_with("every "),
            "{}",
            why
        );
        // The same data gives the same steps: a resumed job re-drives to the same place.
        let mut again = fresh();
        drive(&mut again, &cands, plan, &rules).unwrap();
        assert_eq!((again.measured, again.whys), (fake.measured, fake.whys));
    }
}
