//! What `run` writes (upstream's field names; benches-doc/iocost-qos.md) plus what this version
//! adds: per run the sub-bench parameters it was measured with (`params`, so a changed
//! `storage-loops` or `isol-pct` is not silently reused) and whether it finished (`done`), and the
//! configurations that failed under `allow-fail`.

use crate::bench::protection::ProtectionRecord;
use crate::bench::protection::ProtectionResult;
use crate::bench::storage::StorageRecord;
use crate::bench::storage::StorageResult;
use crate::study::iolat::IoLat;
use crate::system::iocost::{IoCostModel, IoCostQos, QosOverride};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;

fn yes() -> bool {
    true
}

/// One measured configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QosRun {
    pub period: (u64, u64),
    pub ovr: QosOverride,
    /// The QoS the kernel had while it ran (none for the baseline).
    pub qos: Option<IoCostQos>,
    pub stor: StorageRecord,
    pub prot: ProtectionRecord,
    /// The sub-bench parameters (`storage loops=1 … · protection isol-05>=90% …`); absent in
    /// upstream's records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub params: Option<String>,
    /// False while the configuration is being measured (its checkpoints); upstream's records
    /// hold finished runs only.
    #[serde(default = "yes")]
    pub done: bool,
    /// Ours: the configuration's study as made when it finished; `study` falls back to it when
    /// the configuration's reports are gone (purged, another host), so a finished
    /// configuration doesn't go with them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<KeptResult>,
}

/// A finished configuration's [`RunResult`], kept raw in its run: read only when its reports
/// are gone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeptResult(Box<RawValue>);

impl PartialEq for KeptResult {
    fn eq(&self, o: &Self) -> bool {
        self.0.get() == o.0.get()
    }
}

impl KeptResult {
    pub fn of(r: &RunResult) -> anyhow::Result<Self> {
        Ok(Self(serde_json::value::to_raw_value(r)?))
    }

    pub fn read(&self) -> anyhow::Result<RunResult> {
        use anyhow::Context;
        serde_json::from_str(self.0.get()).context("reading the result kept in the run")
    }
}

/// A finished entry's result with each configuration's study left raw, as [`KeptResult`]s are.
#[derive(Debug, Default, Deserialize)]
pub struct EarlierResults {
    pub runs: Vec<Option<Box<RawValue>>>,
}

/// A configuration that failed under `allow-fail`, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QosFailure {
    pub ovr: QosOverride,
    pub why: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QosRecord {
    pub base_model: IoCostModel,
    pub base_qos: IoCostQos,
    /// Ours: the base model was measured with upstream's fio job shapes (bench.json's
    /// `upstream_jobs`); left out when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub upstream_model_jobs: bool,
    /// Ours: fio's engine measured the base model (bench.json's `fio_engine`); left out
    /// when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fio_model_engine: bool,
    pub mem_profile: u32,
    /// One per configuration of the spec, in order; `null` for skipped or failed ones.
    pub runs: Vec<Option<QosRun>>,
    pub dither_dist: Option<f64>,
    /// The runs of an unfinished job, in the order they finished (the last one may be the
    /// configuration in progress, `done: false`).
    pub inc_runs: Vec<QosRun>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<QosFailure>,
    /// An adaptive grid (`vrate-intvs=auto`): the vrates it picked, in the order measured
    /// (the runs after the baseline and the explicit groups, one per step), and why it stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveLog>,
}

/// How an adaptive grid picked its vrates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdaptiveLog {
    pub steps: Vec<AdaptiveStep>,
    /// Why no vrate was picked after the last (absent while the job runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<String>,
}

/// One vrate the adaptive grid picked, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdaptiveStep {
    pub vrate: f64,
    pub why: String,
}

impl QosRecord {
    /// The memory profile its runs were measured under: the record's, else its first run's.
    pub fn profile(&self) -> Option<u32> {
        if self.mem_profile > 0 {
            return Some(self.mem_profile);
        }
        self.runs
            .iter()
            .flatten()
            .chain(&self.inc_runs)
            .map(|r| r.stor.mem.profile)
            .find(|p| *p > 0)
    }

    /// What a new job of the same base starts its `inc_runs` with: every run this record
    /// holds, finished ones first and the unfinished configuration (if any) last, so that
    /// checkpoints of the new job keep them all (a finished record holds its runs in `runs`,
    /// an interrupted one in `inc_runs`).
    pub fn carry_over(&self) -> Vec<QosRun> {
        let mut v: Vec<QosRun> = self.runs.iter().flatten().cloned().collect();
        v.extend(self.inc_runs.iter().filter(|r| r.done).cloned());
        v.extend(self.inc_runs.iter().filter(|r| !r.done).cloned());
        v
    }

    /// Gives each finished run without a kept study the one the finished entry's result holds
    /// for it (`earlier`, index by index as the study wrote it), so that a job extending a
    /// finished one still has them when their reports are gone. Returns the periods of the
    /// runs it gave one.
    pub fn seed_kept(&mut self, earlier: EarlierResults) -> Vec<(u64, u64)> {
        let mut seeded = Vec::new();
        let pairs = self.runs.iter_mut().zip(earlier.runs);
        for (run, raw) in pairs.filter_map(|(r, e)| Some((r.as_mut()?, e?))) {
            if run.done && run.result.is_none() {
                run.result = Some(KeptResult(raw));
                seeded.push(run.period);
            }
        }
        seeded
    }

    /// Every finished run it holds.
    pub fn finished(&self) -> impl Iterator<Item = &QosRun> {
        self.runs
            .iter()
            .flatten()
            .chain(&self.inc_runs)
            .filter(|r| r.done)
    }
}

/// The study of one configuration: its storage and protection studies, the adjusted MOF from
/// the size the tune protected, and over the configuration's period vrate and IO latencies
/// (raw JSON as the study wrote them, read by [`RunResult::iolat`]).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct RunResult {
    pub stor: StorageResult,
    pub prot: ProtectionResult,
    pub adjusted_mem_size: Option<f64>,
    pub adjusted_mem_offload_factor: Option<f64>,
    pub adjusted_mem_offload_delta: Option<f64>,
    pub vrate: BTreeMap<String, f64>,
    pub iolat: Option<Box<RawValue>>,
    pub nr_reports: (u64, u64),
}

impl RunResult {
    /// The configuration's IO latency distributions (empty when the result has none).
    pub fn iolat(&self) -> anyhow::Result<IoLat> {
        IoLat::from_raw(self.iolat.as_deref(), "iocost-qos IO latencies")
    }
}

/// One study per configuration of the plan; `None` for a skipped one. `runs` is required: a
/// result without it is another bench's (this model is read for every iocost-qos report, so
/// it checks that itself rather than through `RESULT_KEYS`, which would read the megabytes
/// twice).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct IoCostQosResult {
    pub runs: Vec<Option<RunResult>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_job_carries_every_run_over_with_the_unfinished_one_last() {
        let run = |max: f64, done: bool| QosRun {
            ovr: QosOverride {
                max: Some(max),
                ..Default::default()
            },
            done,
            ..Default::default()
        };
        // A finished job, then more configurations added: its runs must survive the new
        // job's checkpoints.
        let fin = QosRecord {
            runs: vec![Some(run(100.0, true)), None, Some(run(60.0, true))],
            ..Default::default()
        };
        let c = fin.carry_over();
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|r| r.done));
        // An interrupted one: its finished runs, then the one in progress.
        let int = QosRecord {
            inc_runs: vec![run(100.0, true), run(80.0, false), run(60.0, true)],
            ..Default::default()
        };
        let c = int.carry_over();
        assert_eq!(c.len(), 3);
        assert!(!c[2].done && c[2].ovr.max == Some(80.0));
    }

    #[test]
    fn a_finished_entry_s_studies_seed_the_runs_without_one() {
        let run = |t: u64, kept: Option<&str>| QosRun {
            period: (t, t + 1),
            done: true,
            result: kept.map(|k| KeptResult(RawValue::from_string(k.into()).unwrap())),
            ..Default::default()
        };
        let mut rec = QosRecord {
            runs: vec![
                Some(run(10, None)),
                None,
                Some(run(30, Some("{}"))),
                Some(run(40, None)),
            ],
            ..Default::default()
        };
        // Index by index; a run keeps its own, a skipped one and a missing study give nothing.
        let earlier: EarlierResults =
            serde_json::from_str(r#"{"runs":[{"a":1},{"b":2},{"c":3},null]}"#).unwrap();
        assert_eq!(rec.seed_kept(earlier), vec![(10, 11)]);
        let kept = |i: usize| {
            rec.runs[i]
                .as_ref()
                .unwrap()
                .result
                .as_ref()
                .map(|k| k.0.get())
        };
        assert_eq!(kept(0), Some(r#"{"a":1}"#));
        assert_eq!(kept(2), Some("{}"));
        assert_eq!(kept(3), None);
    }

    #[test]
    fn upstream_runs_read_as_finished_and_ours_round_trip() {
        let up: QosRun = serde_json::from_str(r#"{"period":[1,2],"ovr":{"off":true}}"#).unwrap();
        assert!(up.done);
        assert_eq!(up.params, None);
        let ours = QosRun {
            params: Some("x".into()),
            done: false,
            ..Default::default()
        };
        let back: QosRun = serde_json::from_value(serde_json::to_value(&ours).unwrap()).unwrap();
        assert_eq!(back, ours);
    }
}
