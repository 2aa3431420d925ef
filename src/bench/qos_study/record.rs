//! What a qos-study run stores: the services alone (the device's capacity), then per profile
//! and repetition the mixed run — the knobs each service's cgroup had and what each service
//! did, with its per-second series for the time plots.

use super::profiles::{Capacity, Knobs, Profile, Service};
use crate::workload::ioengine::hist::LatHist;
use crate::workload::ioengine::result::IoResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The latency percentiles a service's figures keep (the seed's 95/99/99.5 among them).
pub const STUDY_PCTS: [f64; 6] = [50.0, 90.0, 95.0, 99.0, 99.5, 99.9];

/// One second of a service: IOs and bytes completed and their mean latency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SecondOut {
    pub iops: f64,
    pub bps: f64,
    pub lat_mean_us: f64,
}

/// One service's figures in one run (latency from when each IO was due, so with the time it
/// waited to be submitted: io.cost holds a throttled cgroup's IOs in its submission calls;
/// both directions together).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceOut {
    pub ios: u64,
    pub bytes: u64,
    pub runtime_s: f64,
    pub iops: f64,
    pub bps: f64,
    pub lat_mean_us: f64,
    /// `(percentile, µs)` for [`STUDY_PCTS`].
    pub lat_pcts_us: Vec<(f64, f64)>,
    pub lat_max_us: f64,
    pub seconds: Vec<SecondOut>,
}

impl ServiceOut {
    pub fn of(r: &IoResult) -> ServiceOut {
        let mut h = LatHist::new();
        for d in [&r.read, &r.write] {
            if let Ok(x) = LatHist::from_out(&d.lat) {
                h.merge(&x);
            }
        }
        let empty = h.count() == 0;
        let us = |ns: f64| ns / 1e3;
        let n = r.read.seconds.len().max(r.write.seconds.len());
        let seconds = (0..n)
            .map(|i| {
                let (rd, wr) = (r.read.seconds.get(i), r.write.seconds.get(i));
                let ios = rd.map_or(0, |s| s.ios) + wr.map_or(0, |s| s.ios);
                let bytes = rd.map_or(0, |s| s.bytes) + wr.map_or(0, |s| s.bytes);
                let lat = rd.map_or(0, |s| s.lat_sum_ns) + wr.map_or(0, |s| s.lat_sum_ns);
                SecondOut {
                    iops: ios as f64,
                    bps: bytes as f64,
                    lat_mean_us: if ios > 0 {
                        us(lat as f64 / ios as f64)
                    } else {
                        0.0
                    },
                }
            })
            .collect();
        ServiceOut {
            ios: r.ios(),
            bytes: r.read.bytes + r.write.bytes,
            runtime_s: r.runtime_ns as f64 / 1e9,
            iops: r.read.iops + r.write.iops,
            bps: r.read.bw_bytes + r.write.bw_bytes,
            lat_mean_us: if empty { 0.0 } else { us(h.mean()) },
            lat_pcts_us: STUDY_PCTS
                .iter()
                .map(|&p| {
                    (
                        p,
                        if empty {
                            0.0
                        } else {
                            us(h.percentile(p) as f64)
                        },
                    )
                })
                .collect(),
            lat_max_us: if empty { 0.0 } else { us(h.max() as f64) },
            seconds,
        }
    }

    /// The latency at `pct` (`None`: the mean), µs.
    pub fn lat(&self, pct: Option<f64>) -> Option<f64> {
        match pct {
            None => Some(self.lat_mean_us),
            Some(p) => self
                .lat_pcts_us
                .iter()
                .find(|(q, _)| (q - p).abs() < 1e-9)
                .map(|(_, v)| *v),
        }
    }
}

/// One profile's run with the services side by side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MixedRun {
    pub profile: String,
    /// 0 for the first repetition.
    pub rep: u32,
    /// What each service's cgroup had.
    pub knobs: BTreeMap<Service, Knobs>,
    pub services: BTreeMap<Service, ServiceOut>,
    /// Seconds until the background finished its work (or the run's cap, if it didn't).
    pub bg_secs: f64,
    pub bg_done: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct QosStudyRecord {
    pub period: (u64, u64),
    /// The device under test (`MAJ:MIN`) and whether it rotates.
    pub dev: String,
    pub rotational: bool,
    /// The profiles as run, in order, and how often each.
    pub profiles: Vec<Profile>,
    pub repeat: u32,
    /// The background's work (bytes) and the cap of a mixed run (s).
    pub bg_size: u64,
    pub dur_s: f64,
    /// Each service alone.
    pub alone: BTreeMap<Service, ServiceOut>,
    /// What the percentages of the profiles are of: the client's IOPS and the background's
    /// bytes/s alone.
    pub capacity: Option<Capacity>,
    /// The io.cost model and QoS the iocost profiles ran with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iocost: Option<String>,
    pub runs: Vec<MixedRun>,
}

impl QosStudyRecord {
    /// Whether `profile`'s repetition `rep` has run.
    pub fn has_run(&self, profile: &str, rep: u32) -> bool {
        self.runs
            .iter()
            .any(|r| r.profile == profile && r.rep == rep)
    }
}
