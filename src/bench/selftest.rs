//! `selftest`: a hidden bench that exercises the run machinery without touching the system.
//! It runs `steps` steps of `step-time` each, computes a deterministic checksum per step,
//! checkpoints after every step and, being incremental, resumes after the last checkpointed step
//! when re-run. `fail-at=N` makes step N fail, to test failure handling.

use super::contract::api::{
    prop, Bench, BenchDesc, FormatOpts, Shape, SpecError, Stored, ValueKind,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::spec::JobSpec;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

pub struct SelfTest;

const DFL_STEPS: u64 = 5;
const DFL_STEP_TIME: f64 = 0.1;

#[derive(Debug, Clone, PartialEq)]
pub struct SelfTestProps {
    steps: u64,
    step_time: f64,
    fail_at: Option<u64>,
}

pub static DESC: BenchDesc = BenchDesc {
    kind: "selftest",
    about: "Internal bench exercising run, checkpoint, resume and study",
    hidden: true,
    incremental: true,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &[
            prop("steps", ValueKind::Int, "number of steps"),
            prop("step-time", ValueKind::Duration, "time each step takes"),
            prop("fail-at", ValueKind::Int, "fail at this step (for testing)"),
        ],
        forward: &[],
        group_props: None,
        open_keys: None,
        format_props: &[],
    },
    doc: None,
    system: None,
};

impl SelfTestProps {
    fn read(spec: &JobSpec) -> Result<Self, SpecError> {
        let g = spec.group(0);
        Ok(SelfTestProps {
            steps: g.u64("steps", ValueKind::Int)?.unwrap_or(DFL_STEPS),
            step_time: g
                .f64("step-time", ValueKind::Duration)?
                .unwrap_or(DFL_STEP_TIME),
            fail_at: g.u64("fail-at", ValueKind::Int)?,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// 1-based step number.
    step: u64,
    /// Unix time the step finished.
    at: u64,
    /// How long the step took in seconds.
    secs: f64,
    /// Deterministic checksum computed by the step.
    value: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SelfTestRecord {
    steps_total: u64,
    step_time: f64,
    steps: Vec<Step>,
    /// Step numbers at which a run resumed from a checkpoint.
    resumed_at: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfTestResult {
    steps: u64,
    checksum: u64,
    mean_step_secs: f64,
    resumed_at: Vec<u64>,
}

/// The work of one step: a fixed-length FNV-style mix of the step number.
fn step_value(step: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for k in 0..100_000u64 {
        h ^= k.wrapping_mul(step);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h % 1_000_000_007
}

impl Bench for SelfTest {
    type Props = SelfTestProps;
    type Record = SelfTestRecord;
    type Result = SelfTestResult;

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<SelfTestProps, SpecError> {
        SelfTestProps::read(spec)
    }

    fn progress(&self, props: &SelfTestProps, rec: &SelfTestRecord) -> Option<String> {
        Some(format!("{} of {} steps done", rec.steps.len(), props.steps))
    }

    fn run(&self, ctx: &mut RunCtx, props: &SelfTestProps) -> Result<SelfTestRecord> {
        let mut rec: SelfTestRecord = ctx.prev_record().unwrap_or_default();
        rec.steps_total = props.steps;
        rec.step_time = props.step_time;
        rec.steps.truncate(props.steps as usize);
        let done = rec.steps.len() as u64;
        if done > 0 && done < props.steps {
            log::info!("selftest: resuming at step {} of {}", done + 1, props.steps);
            rec.resumed_at.push(done + 1);
        }
        let run_started = Instant::now();
        for step in done + 1..=props.steps {
            let ran = step - done - 1;
            if ran > 0 {
                let per_step = run_started.elapsed().as_secs_f64() / ran as f64;
                crate::logging::progress::eta(Some(per_step * (props.steps - step + 1) as f64));
            }
            crate::logging::progress::phase(format!("step {}/{}", step, props.steps));
            if props.fail_at == Some(step) {
                anyhow::bail!("selftest: step {} failed as requested by fail-at", step);
            }
            let started = Instant::now();
            std::thread::sleep(Duration::from_secs_f64(props.step_time));
            let value = step_value(step);
            rec.steps.push(Step {
                step,
                at: crate::util::now(),
                secs: started.elapsed().as_secs_f64(),
                value,
            });
            ctx.checkpoint(&rec)?;
            log::info!("selftest: step {}/{} done", step, props.steps);
        }
        Ok(rec)
    }

    fn study(&self, _ctx: &StudyCtx, rec: &SelfTestRecord) -> Result<SelfTestResult> {
        let n = rec.steps.len() as u64;
        let res = SelfTestResult {
            steps: n,
            checksum: rec
                .steps
                .iter()
                .fold(0u64, |acc, s| (acc + s.value) % 1_000_000_007),
            mean_step_secs: if n > 0 {
                rec.steps.iter().map(|s| s.secs).sum::<f64>() / n as f64
            } else {
                0.0
            },
            resumed_at: rec.resumed_at.clone(),
        };
        Ok(res)
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, _opts: &FormatOpts) -> Result<()> {
        let res = &stored.result;
        out.push_str(&format!(
            "Selftest: {} steps, checksum {}, mean step time {}\n",
            res.steps,
            res.checksum,
            crate::units::format_duration(res.mean_step_secs)
        ));
        if res.resumed_at.is_empty() {
            out.push_str("Resumed: never\n");
        } else {
            let at: Vec<String> = res.resumed_at.iter().map(|s| s.to_string()).collect();
            out.push_str(&format!("Resumed: at step {}\n", at.join(", ")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_values_are_deterministic_and_distinct() {
        assert_eq!(step_value(3), step_value(3));
        assert_ne!(step_value(1), step_value(2));
    }

    #[test]
    fn study_summarizes_the_record() {
        let rec = SelfTestRecord {
            steps_total: 2,
            step_time: 0.1,
            steps: vec![
                Step {
                    step: 1,
                    at: 10,
                    secs: 0.1,
                    value: 5,
                },
                Step {
                    step: 2,
                    at: 11,
                    secs: 0.3,
                    value: 7,
                },
            ],
            resumed_at: vec![2],
        };
        let ctx = StudyCtx::new(Default::default(), (10, 11));
        let res = SelfTest.study(&ctx, &rec).unwrap();
        assert_eq!(res.steps, 2);
        assert_eq!(res.checksum, 12);
        assert!((res.mean_step_secs - 0.2).abs() < 1e-9);
        assert_eq!(res.resumed_at, vec![2]);
    }
}
