//! Running `iocost-qos` (benches-doc/iocost-qos.md): the job's base (io.cost model, memory
//! profile), the plan of configurations and what an earlier record already has of them, then
//! the configurations one after another (`config`), each checkpointing into this job's record,
//! so a killed job resumes inside a configuration and a re-run skips the finished ones.

use super::adaptive;
use super::config::{config_of, run_config, Base, TUNE_INTVS, TUNE_SPEED};
use super::plan::{self, Planned};
use super::props::{Dither, IocostQosProps};
use super::record::{AdaptiveStep, QosFailure, QosRecord, QosRun, RunResult};
use crate::bench::contract::ctx::RunCtx;
use crate::bench::iocost_tune::model::IocostTuneResult;
use crate::logging::progress;
use crate::system::iocost::{self, QosOverride};
use crate::units::format_pct;
use crate::util::now;
use anyhow::{Context, Result};

pub(super) fn run(ctx: &mut RunCtx, props: &IocostQosProps) -> Result<QosRecord> {
    ctx.revert_knobs_at_end();
    let started = now();
    let quick = ctx.quick();
    let base = base_of(ctx)?;
    let mut prev: Option<QosRecord> = ctx.prev_record();
    // Extending a finished job: its runs get the studies its result holds, as runs carried from
    // an interrupted job keep theirs (their reports may be gone by now).
    let seeded = match (&mut prev, ctx.prev_result()) {
        (Some(p), Some(earlier)) => p.seed_kept(earlier),
        _ => Vec::new(),
    };
    let plan = plan(props, &base, prev.as_ref(), quick)?;
    let nr_fixed = match props.adaptive {
        Some(_) => 1 + props.groups.len(),
        None => plan.planned.len(),
    };
    let rec = QosRecord {
        base_model: base.knobs.model.clone(),
        base_qos: base.knobs.qos.clone(),
        upstream_model_jobs: base.knobs.upstream_jobs,
        fio_model_engine: base.knobs.fio_engine,
        mem_profile: base.profile,
        runs: Vec::new(),
        dither_dist: plan.dither_dist,
        inc_runs: plan.reuse.carried.clone(),
        failed: Vec::new(),
        adaptive: adaptive::new_log(props.adaptive),
    };
    let mut job = Job {
        ctx,
        props,
        base: &base,
        plan: &plan,
        rec,
        nr: nr_fixed + props.adaptive.map_or(0, |a| a.budget),
    };
    let mut runs: Vec<Option<QosRun>> = Vec::with_capacity(job.nr);
    for i in 0..nr_fixed {
        let left = remaining_secs(&job.rec, &plan.planned[i + 1..], &plan.reuse.runs[i + 1..]);
        let run = job.one(i, i, &runs, left)?;
        runs.push(run);
    }
    if let Some(a) = props.adaptive {
        let mut live = Live {
            job: &mut job,
            runs,
            studies: Vec::new(),
            nr_fixed,
            budget: a.budget,
        };
        let cands = adaptive::candidates(&plan.planned[nr_fixed..]);
        let stop = adaptive::drive(&mut live, &cands, a, &adaptive::default_rules())?;
        runs = live.runs;
        if let Some(log) = &mut job.rec.adaptive {
            log.stop = Some(stop);
        }
    }
    progress::context("", 0.0);
    let mut rec = job.rec;
    rec.runs = runs;
    rec.inc_runs.clear();
    drop_fresh_kept(&mut rec.runs, started);
    if let Some(p) = &prev {
        unseed_if_unchanged(&mut rec.runs, &seeded, &p.runs);
    }
    Ok(rec)
}

/// A re-run of a finished job that measured nothing and kept its configurations hands its
/// record back as it was (the runner then keeps the entry untouched): without the seeded studies.
fn unseed_if_unchanged(
    runs: &mut Vec<Option<QosRun>>,
    seeded: &[(u64, u64)],
    prev: &[Option<QosRun>],
) {
    let bare = |v: &[Option<QosRun>]| -> Vec<Option<QosRun>> {
        let mut v = v.to_vec();
        for r in v
            .iter_mut()
            .flatten()
            .filter(|r| seeded.contains(&r.period))
        {
            r.result = None;
        }
        v
    };
    let unseeded = bare(runs);
    if unseeded == bare(prev) {
        *runs = unseeded;
    }
}

/// Drops the kept results of the runs this job measured from their start: their reports are
/// here for the study, and keeping both would double the file. Runs begun by an earlier job keep
/// theirs: their reports may be gone.
fn drop_fresh_kept(runs: &mut [Option<QosRun>], started: u64) {
    for r in runs.iter_mut().flatten().filter(|r| r.period.0 >= started) {
        r.result = None;
    }
}

/// A job while it runs: what it measures with, its plan and its record.
struct Job<'a, 'c> {
    ctx: &'a mut RunCtx<'c>,
    props: &'a IocostQosProps,
    base: &'a Base,
    plan: &'a Plan,
    rec: QosRecord,
    /// Configurations in all (at most, for an adaptive grid).
    nr: usize,
}

impl Job<'_, '_> {
    /// Configuration `i` of the record, the plan's `k`: skipped, reused or measured, with what
    /// the runs `before` it hand on; `None` when skipped or failed under `allow-fail`.
    fn one(
        &mut self,
        i: usize,
        k: usize,
        before: &[Option<QosRun>],
        left: f64,
    ) -> Result<Option<QosRun>> {
        let (plan, props) = (self.plan, self.props);
        let p = &plan.planned[k];
        if p.skip {
            log::info!(
                "iocost-qos[{:02}]: skipped (below the device's minimum vrate {})",
                i,
                iocost::abs_min_vrate(&self.base.knobs.model)
            );
            return Ok(None);
        }
        if let Some(r) = &plan.reuse.runs[k] {
            return Ok(Some(r.clone()));
        }
        let what = format!("config {}/{} {}", i, self.nr - 1, short(&p.ovr));
        progress::context(what, left);
        log::info!(
            "iocost-qos[{:02}]: QoS: {}",
            i,
            p.ovr.describe(&self.base.knobs.qos)
        );
        let off = plan.planned[0].ovr.off;
        let c = config_of(props, p, i, off, &plan.params[k], before);
        match run_config(self.ctx, props, self.base, &mut self.rec, c) {
            Ok(run) => Ok(Some(run)),
            Err(e) if props.allow_fail => {
                log::warn!(
                    "iocost-qos[{:02}]: failed, going on (allow-fail): {:#}",
                    i,
                    e
                );
                self.rec.inc_runs.retain(|r| r.done);
                self.rec.failed.push(QosFailure {
                    ovr: p.ovr,
                    why: format!("{:#}", e),
                });
                self.ctx.checkpoint(&self.rec)?;
                Ok(None)
            }
            Err(e) => Err(e.context(format!("iocost-qos[{:02}]", i))),
        }
    }
}

/// An adaptive grid as it runs: the job, its runs in record order and their studies.
struct Live<'j, 'a, 'c> {
    job: &'j mut Job<'a, 'c>,
    runs: Vec<Option<QosRun>>,
    /// The studies of `runs`, as far as made.
    studies: Vec<Option<RunResult>>,
    nr_fixed: usize,
    budget: usize,
}

impl adaptive::Measure for Live<'_, '_, '_> {
    fn measure(&mut self, vrate: f64, why: &str) -> Result<()> {
        let plan = self.job.plan;
        let k = (self.nr_fixed..plan.planned.len())
            .find(|k| {
                let p = &plan.planned[*k];
                !p.skip && p.ovr == plan::pinned(vrate)
            })
            .with_context(|| format!("iocost-qos: vrate {} is not on the grid", vrate))?;
        if let Some(log) = &mut self.job.rec.adaptive {
            log.steps.push(AdaptiveStep {
                vrate,
                why: why.to_string(),
            });
        }
        // What a grid walked from the top hands on: the configurations above this one, the
        // nearest last.
        let mut before = self.runs[..self.nr_fixed].to_vec();
        let mut above: Vec<&QosRun> = self.runs[self.nr_fixed..]
            .iter()
            .flatten()
            .filter(|r| r.ovr.max.is_some_and(|m| m > vrate))
            .collect();
        above.sort_by(|a, b| {
            b.ovr
                .max
                .unwrap_or(0.0)
                .total_cmp(&a.ovr.max.unwrap_or(0.0))
        });
        before.extend(above.into_iter().map(|r| Some(r.clone())));
        let steps = self.runs.len() - self.nr_fixed;
        let left = mean_secs(&self.job.rec) * self.budget.saturating_sub(steps + 1) as f64;
        let i = self.runs.len();
        let run = self.job.one(i, k, &before, left)?;
        self.runs.push(run);
        Ok(())
    }

    fn data(&mut self) -> Result<IocostTuneResult> {
        let dir = self.job.ctx.reports_dir();
        for (j, r) in self.runs.iter().enumerate().skip(self.studies.len()) {
            let res = match r {
                // The study kept when it finished, made moments ago, else one from the reports.
                Some(r) => Some(
                    match &r.result {
                        Some(kept) => kept.read(),
                        None => super::study::study_or_kept(&dir, j, r),
                    }
                    .with_context(|| format!("iocost-qos[{:02}]: studying it", j))?,
                ),
                None => None,
            };
            self.studies.push(res);
        }
        let both: Vec<Option<(QosRun, RunResult)>> = self
            .runs
            .iter()
            .zip(&self.studies)
            .map(|(r, s)| Some((r.clone()?, s.clone()?)))
            .collect();
        Ok(adaptive::data_of(
            &self.job.rec,
            &both,
            &adaptive::default_rules(),
        ))
    }
}

/// The io.cost model the configurations are relative to (measured first if bench.json has
/// none) and the memory profile.
fn base_of(ctx: &mut RunCtx) -> Result<Base> {
    let (quick, dir) = (ctx.quick(), ctx.dir().to_path_buf());
    let mut host = ctx.session().context("iocost-qos needs the host session")?;
    let (knobs, _) =
        crate::bench::iocost_params::ensure_model(&mut host, &dir, quick, "iocost-qos")?;
    let profile = host
        .mem()
        .map(|m| m.profile)
        .context("iocost-qos runs under the memory profile")?;
    Ok(Base { knobs, profile })
}

/// The configurations to measure and what an earlier record already has of them.
struct Plan {
    dither_dist: Option<f64>,
    planned: Vec<Planned>,
    /// Per configuration, the sub-bench parameters (the reuse key).
    params: Vec<String>,
    reuse: plan::Reuse,
}

/// Plans the configurations (dither, minimum performance, reuse) and lists them in the log.
fn plan(
    props: &IocostQosProps,
    base: &Base,
    prev: Option<&QosRecord>,
    quick: bool,
) -> Result<Plan> {
    let dither_dist = match props.dither {
        Dither::Off => None,
        Dither::By(v) => Some(v),
        Dither::Random => match prev.and_then(|p| p.dither_dist) {
            Some(d) => Some(d),
            None => Some(plan::draw_dither(props, &mut rand::thread_rng())),
        },
    };
    let cfgs = plan::configs_of(props, dither_dist);
    let planned = plan::apply_min_perf(
        &cfgs,
        &base.knobs.model,
        base.knobs.qos.min,
        props.ignore_min_perf,
    );
    let params: Vec<String> = (0..planned.len())
        .map(|i| params_text(props, i == 0, quick))
        .collect();
    let reuse = plan::reuse(prev, &base.plan_base(), &planned, &params)
        .map_err(crate::error::UsageError::new)?;
    // An adaptive grid lists its candidates in one line: which of them run is decided as it goes.
    let listed = match props.adaptive {
        Some(_) => 1 + props.groups.len(),
        None => planned.len(),
    };
    for (i, p) in planned.iter().enumerate().take(listed) {
        log::info!(
            "{}",
            plan::listing_line(
                i,
                p,
                reuse.runs[i].is_some(),
                &p.ovr.describe(&base.knobs.qos)
            )
        );
    }
    let to_run = planned
        .iter()
        .zip(&reuse.runs)
        .take(listed)
        .filter(|(p, r)| !p.skip && r.is_none())
        .count();
    if let Some(why) = &reuse.dropped {
        log::info!(
            "iocost-qos: the earlier runs were measured with {}; starting over",
            why
        );
    }
    if let Some(a) = props.adaptive {
        let cands = adaptive::candidates(&planned[listed..]);
        log::info!(
            "iocost-qos: adaptive grid: at most {} of {} vrates ({}-{}), until every solution's \
             interval is at most {:.1} wide",
            a.budget.min(cands.len()),
            cands.len(),
            cands.first().copied().unwrap_or(0.0),
            cands.last().copied().unwrap_or(0.0),
            a.target
        );
    } else if to_run > 0 {
        log::info!(
            "iocost-qos: {} storage and protection bench sets to run, isol-{} >= {}%",
            to_run,
            props.isol_pct(),
            format_pct(props.isol_thr)
        );
    } else {
        log::info!("iocost-qos: all results are available");
    }
    Ok(Plan {
        dither_dist,
        planned,
        params,
        reuse,
    })
}

/// `off`, `vrate=60`, or the overridden keys.
fn short(o: &QosOverride) -> String {
    if o.off {
        return "iocost=off".into();
    }
    if let (Some(a), Some(b)) = (o.min, o.max) {
        if a == b && o.rpct.is_none() && o.rlat.is_none() && o.wpct.is_none() && o.wlat.is_none() {
            return format!("vrate={}", a);
        }
    }
    let mut v = Vec::new();
    for (k, x) in [
        ("rpct", o.rpct),
        ("wpct", o.wpct),
        ("min", o.min),
        ("max", o.max),
    ] {
        if let Some(x) = x {
            v.push(format!("{}={}", k, x));
        }
    }
    for (k, x) in [("rlat", o.rlat), ("wlat", o.wlat)] {
        if let Some(x) = x {
            v.push(format!("{}={}", k, x));
        }
    }
    v.join(",")
}

/// The sub-bench parameters a configuration is measured with: a finished run is only reused
/// when they are the same.
fn params_text(p: &IocostQosProps, baseline: bool, quick: bool) -> String {
    let s = &p.storage;
    format!(
        "storage loops={} rps-max={} hash-size={} chunk-pages={} log-bps={} err-max={} \
         retries={}/{} · protection mem-hog-tune speed={} intvs={} isol-{}>={}{}{}{}{}{}",
        if baseline {
            p.storage_base_loops
        } else {
            p.storage_loops
        },
        s.rps_max.map_or("auto".to_string(), |v| v.to_string()),
        s.hash_size,
        s.chunk_pages,
        s.log_bps,
        s.err_max,
        s.inner_retries,
        s.outer_retries,
        TUNE_SPEED,
        TUNE_INTVS,
        p.isol_pct(),
        p.isol_thr,
        match (p.mof_hint, p.tune_hint) {
            (true, true) => " · hints",
            (true, false) => " · mof-hint",
            (false, true) => " · tune-hint",
            (false, false) => "",
        },
        // The baseline sets the ceiling, it is never bounded by one.
        if p.mof_ceiling && !baseline {
            " · mof-ceiling"
        } else {
            ""
        },
        if p.tune_bisect { " · tune-bisect" } else { "" },
        match p.early_stop {
            Some(t) => format!(" · early-stop={}%", (t * 1e4).round() / 100.0),
            None => String::new(),
        },
        if quick { " · quick" } else { "" }
    )
}

/// Seconds a configuration took on average so far (0 when none has finished yet).
fn mean_secs(rec: &QosRecord) -> f64 {
    let done: Vec<f64> = rec
        .inc_runs
        .iter()
        .filter(|r| r.done && r.period.1 > r.period.0)
        .map(|r| (r.period.1 - r.period.0) as f64)
        .collect();
    if done.is_empty() {
        return 0.0;
    }
    done.iter().sum::<f64>() / done.len() as f64
}

/// Seconds the configurations after the current one will take, from the runs finished so
/// far (0 when none has finished yet).
fn remaining_secs(rec: &QosRecord, after: &[Planned], reused: &[Option<QosRun>]) -> f64 {
    let per = mean_secs(rec);
    let n = after
        .iter()
        .zip(reused)
        .filter(|(p, r)| !p.skip && r.is_none())
        .count();
    per * n as f64
}

#[cfg(test)]
mod tests {
    use super::super::config::{tune_hint, tune_props, TuneHint};
    use super::*;
    use crate::bench::protection::search::Search;
    use crate::spec::JobSpec;

    fn props(s: &str) -> IocostQosProps {
        super::super::props::check(&JobSpec::parse(s).unwrap()).unwrap()
    }

    #[test]
    fn time_savers_default_on_and_are_part_of_the_reuse_key() {
        let on = props("iocost-qos");
        assert!(on.mof_hint && on.mof_ceiling && on.tune_hint && !on.tune_bisect);
        assert_eq!(on.early_stop, Some(0.10));
        let text = params_text(&on, false, false);
        assert!(
            text.ends_with(" · hints · mof-ceiling · early-stop=10%"),
            "{}",
            text
        );
        // The baseline is measured the same either way: a run with mof-ceiling=false reuses it.
        let text = params_text(&on, true, false);
        assert!(text.ends_with(" · hints · early-stop=10%"), "{}", text);
        let bisect = props("iocost-qos:tune-bisect,mof-ceiling=false,early-stop=5%");
        let text = params_text(&bisect, true, false);
        assert!(
            text.ends_with(" · hints · tune-bisect · early-stop=5%"),
            "{}",
            text
        );
        let off = props(
            "iocost-qos:mof-hint=false,mof-ceiling=false,tune-hint=false,tune-bisect=false,\
             early-stop=false",
        );
        assert!(
            !off.mof_hint
                && !off.mof_ceiling
                && !off.tune_hint
                && !off.tune_bisect
                && off.early_stop.is_none()
        );
        // Upstream's behaviour: no saver named, so a faithful run never reuses a saver's.
        let text = params_text(&off, true, true);
        assert!(text.ends_with("isol-05>=0.9 · quick"), "{}", text);
        let stop =
            props("iocost-qos:mof-hint=false,mof-ceiling=false,tune-hint=false,tune-bisect=false");
        assert!(params_text(&stop, false, false).ends_with(">=0.9 · early-stop=10%"));
        for (text, want) in [
            ("", Some(0.10)),
            ("=true", Some(0.10)),
            ("=0.07", Some(0.07)),
        ] {
            let p = props(&format!("iocost-qos:early-stop{}", text));
            assert_eq!(p.early_stop, want, "early-stop{}", text);
        }
        for bad in ["0%", "150%", "often"] {
            let spec = JobSpec::parse(&format!("iocost-qos:early-stop={}", bad)).unwrap();
            let e = format!("{:?}", super::super::props::check(&spec).unwrap_err());
            assert!(e.contains("early-stop=") && e.contains(bad), "{}", e);
        }
        // What the tunes get: upstream's linear walk down unless bisect is asked for.
        assert_eq!(tune_props(&bisect, 1.0, 2.0, None).search, Search::Bisect);
        assert_eq!(tune_props(&on, 1.0, 2.0, None).search, Search::Linear);
        assert_eq!(tune_props(&off, 1.0, 2.0, None).search, Search::Linear);
    }

    #[test]
    fn only_runs_begun_by_an_earlier_job_keep_their_results() {
        use super::super::record::{KeptResult, RunResult};
        let kept = KeptResult::of(&RunResult::default()).unwrap();
        let run = |start: u64| QosRun {
            period: (start, start + 60),
            result: Some(kept.clone()),
            ..Default::default()
        };
        let mut runs = vec![Some(run(900)), None, Some(run(1000)), Some(run(1100))];
        drop_fresh_kept(&mut runs, 1000);
        let has: Vec<bool> = runs
            .iter()
            .map(|r| r.as_ref().is_some_and(|r| r.result.is_some()))
            .collect();
        assert_eq!(has, vec![true, false, false, false]);
        assert_eq!(
            runs[0]
                .as_ref()
                .unwrap()
                .result
                .as_ref()
                .unwrap()
                .read()
                .unwrap()
                .nr_reports,
            (0, 0)
        );
    }

    #[test]
    fn a_re_run_that_changed_nothing_drops_the_seeded_studies() {
        use super::super::record::{KeptResult, RunResult};
        let kept = KeptResult::of(&RunResult::default()).unwrap();
        let run = |start: u64, k: bool| QosRun {
            period: (start, start + 60),
            result: k.then(|| kept.clone()),
            ..Default::default()
        };
        let prev = vec![Some(run(100, false)), Some(run(200, true))];
        let seeded = [(100, 160)];
        // The same runs, one seeded: handed back as they were.
        let mut runs = vec![Some(run(100, true)), Some(run(200, true))];
        unseed_if_unchanged(&mut runs, &seeded, &prev);
        assert_eq!(runs, prev);
        // A configuration added: the seeded study stays with its run.
        let mut runs = vec![
            Some(run(100, true)),
            Some(run(200, true)),
            Some(run(900, false)),
        ];
        unseed_if_unchanged(&mut runs, &seeded, &prev);
        assert!(runs[0].as_ref().unwrap().result.is_some());
    }

    #[test]
    fn the_tune_hint_is_the_size_protected_else_the_smallest_failed() {
        use crate::bench::protection::record::{ProbeOutcome, TuneProbe};
        use crate::bench::protection::{MemHogTuneRecord, ScenarioRecord};
        let probe = |size: f64, outcome| TuneProbe {
            size,
            outcome,
            isol: 0.0,
            period: (0, 0),
            why: String::new(),
        };
        let run = |t: MemHogTuneRecord| {
            let mut r = QosRun::default();
            r.prot.scenarios.push(ScenarioRecord::MemHogTune(t));
            r
        };
        let walked = MemHogTuneRecord {
            probes: vec![
                probe(3e9, ProbeOutcome::EarlyFail),
                probe(1e9, ProbeOutcome::Fail),
                probe(2e9, ProbeOutcome::EarlyFail),
            ],
            done: true,
            ..Default::default()
        };
        let none = TuneHint {
            size: 1e9,
            protected: false,
        };
        assert_eq!(tune_hint(&run(walked.clone())), Some(none));
        let mut passed = walked.clone();
        passed.probes.push(probe(1.5e9, ProbeOutcome::Pass));
        passed.final_size = Some(1.5e9);
        let found = TuneHint {
            size: 1.5e9,
            protected: true,
        };
        assert_eq!(tune_hint(&run(passed)), Some(found));
        // A tune that did not end says nothing about the sizes it did not reach.
        let cut = MemHogTuneRecord {
            done: false,
            ..walked
        };
        assert_eq!(tune_hint(&run(cut)), None);
        assert_eq!(tune_hint(&QosRun::default()), None);
    }
}
