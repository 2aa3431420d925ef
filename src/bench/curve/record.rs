//! What a curve stores: per repetition the max run and the points, each a summary of one
//! engine job (rates, latency percentiles over both directions, queue depths, CPU), and the
//! latency-target probes. The record is what the run checkpoints after every job, so a
//! killed curve resumes at its next unfinished point.

use super::points::little_depth;
use crate::workload::ioengine::hist::LatHist;
use crate::workload::ioengine::job::Rate;
use crate::workload::ioengine::result::IoResult;
use crate::workload::ioengine::steady::SteadyOut;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The latency percentiles every point keeps.
pub const POINT_PCTS: &[f64] = &[50.0, 90.0, 99.0, 99.9];

/// An achieved rate within this share of the target counts as reaching it.
pub const REACHED: f64 = 0.98;

/// One engine job, summarized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointOut {
    /// The open-loop rate asked for (`None`: a closed loop — the max run, or mode=qd).
    pub target_iops: Option<f64>,
    pub qd: u32,
    pub iops: f64,
    /// Bytes per second.
    pub bps: f64,
    /// Total latency (from when the IO was due to its completion) over reads and writes, ns.
    pub lat_mean_ns: f64,
    pub lat_max_ns: u64,
    /// `[percentile, ns]`: `POINT_PCTS` and the latency target's.
    pub lat_pcts: Vec<(f64, u64)>,
    /// Completion latency's mean, ns: the time an IO spent past the submission call.
    pub clat_mean_ns: f64,
    /// `[percentile, ns]` of the completion latency, `POINT_PCTS` (empty in records from
    /// before it was kept): what fio's `clat` percentiles are.
    #[serde(default)]
    pub clat_pcts: Vec<(f64, u64)>,
    /// IOs in flight by Little's law (IOPS × mean completion latency).
    pub depth_little: f64,
    /// Mean queue depth the block device reported over the job (`None`: no device stats).
    pub depth_device: Option<f64>,
    /// CPU time of the workers as a share of the run time (1.0 = one CPU busy).
    pub cpu: f64,
    pub runtime_s: f64,
    pub steady: Option<SteadyOut>,
}

impl PointOut {
    /// The summary of `r`; `extra_pct` (the latency target's) is kept beside `POINT_PCTS`.
    pub fn of(r: &IoResult, extra_pct: Option<f64>, depth_device: Option<f64>) -> PointOut {
        let hist = |f: fn(&crate::workload::ioengine::stats::DirOut) -> &_| {
            let mut h = LatHist::new();
            for d in [&r.read, &r.write] {
                if let Ok(x) = LatHist::from_out(f(d)) {
                    h.merge(&x);
                }
            }
            h
        };
        let lat = hist(|d| &d.lat);
        let clat = hist(|d| &d.clat);
        let mut pcts: Vec<f64> = POINT_PCTS.to_vec();
        if let Some(p) = extra_pct.filter(|p| !POINT_PCTS.contains(p)) {
            pcts.push(p);
        }
        let iops = r.read.iops + r.write.iops;
        let runtime_s = r.runtime_ns as f64 / 1e9;
        let empty = lat.count() == 0;
        PointOut {
            target_iops: match r.job.rate {
                Some(Rate::Iops(v)) => Some(v),
                Some(Rate::Bps(b)) => Some(b / r.job.bs as f64),
                None => None,
            },
            qd: r.job.qd,
            iops,
            bps: r.read.bw_bytes + r.write.bw_bytes,
            lat_mean_ns: if empty { 0.0 } else { lat.mean() },
            lat_max_ns: if empty { 0 } else { lat.max() },
            lat_pcts: pcts
                .iter()
                .map(|&p| (p, if empty { 0 } else { lat.percentile(p) }))
                .collect(),
            clat_mean_ns: if empty { 0.0 } else { clat.mean() },
            clat_pcts: POINT_PCTS
                .iter()
                .map(|&p| (p, if empty { 0 } else { clat.percentile(p) }))
                .collect(),
            depth_little: little_depth(iops, if empty { 0.0 } else { clat.mean() }),
            depth_device,
            cpu: if runtime_s > 0.0 {
                (r.cpu.usr_ns + r.cpu.sys_ns) as f64 / 1e9 / runtime_s
            } else {
                0.0
            },
            runtime_s,
            steady: r.steady.clone(),
        }
    }

    /// The completion latency at `pct`, ns, when this point kept it.
    pub fn clat(&self, pct: f64) -> Option<f64> {
        self.clat_pcts
            .iter()
            .find(|(q, _)| (q - pct).abs() < 1e-9)
            .map(|(_, v)| *v as f64)
    }

    /// The latency at `pct` (`None`: the mean), ns, when this point kept it.
    pub fn lat(&self, pct: Option<f64>) -> Option<f64> {
        match pct {
            None => Some(self.lat_mean_ns),
            Some(p) => self
                .lat_pcts
                .iter()
                .find(|x| (x.0 - p).abs() < 1e-9)
                .map(|x| x.1 as f64),
        }
    }

    /// An open-loop point reached its rate (closed loops always do).
    pub fn reached(&self) -> bool {
        self.target_iops.is_none_or(|t| self.iops >= REACHED * t)
    }
}

/// One pass over the curve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CurveRun {
    /// The closed-loop run at the job's queue depth whose IOPS the rate points are shares of
    /// (mode=rate only).
    pub max: Option<PointOut>,
    /// In the order of the spec's points; as many as have finished.
    pub points: Vec<PointOut>,
}

/// One bisection probe of the latency-target search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// The rate (mode=rate) or queue depth probed.
    pub x: f64,
    pub point: PointOut,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CurveRecord {
    pub period: (u64, u64),
    /// What the jobs ran on.
    pub target: PathBuf,
    pub testfile_written: bool,
    /// `rate` or `qd`.
    pub mode: String,
    /// The job every run started from (no rate; the max run's queue depth).
    #[serde(default)]
    pub job: Option<crate::workload::ioengine::job::IoJob>,
    /// The spec's points (percentages or queue depths), rising.
    pub points: Vec<f64>,
    /// The knee's factor and the latency target (`p99/2ms`) the run was asked for.
    pub knee: f64,
    #[serde(default)]
    pub lat_target: Option<String>,
    pub runs: Vec<CurveRun>,
    /// The latency-target search's probes, in the order they ran.
    #[serde(default)]
    pub probes: Vec<Probe>,
    /// The search ran to its end (or had nothing to search).
    #[serde(default)]
    pub search_done: bool,
}
