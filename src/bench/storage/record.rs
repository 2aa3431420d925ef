//! What `storage` writes and what its study makes of it: the record of its loops (with the
//! ceiling iocost-qos takes from it) and the result.

use crate::result::sysinfo::MemProfile;
use crate::study::iolat::IoLat;
use crate::system::bench_json::HashdKnobs;
use crate::workload::hashd::sizing::mem::lowest_fail_above;
use crate::workload::hashd::sizing::probe::ProbeRecord;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// One successful measurement, beyond upstream's fields: what the search found and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopInfo {
    pub mem_frac: f64,
    pub probes: u32,
    pub secs: u64,
    pub quick: bool,
    /// hashd's size the footprints are shares of (bytes; 0 in older records).
    #[serde(default)]
    pub size: u64,
    /// The memory search's probes (empty in older records): what `format --plot` draws.
    #[serde(default)]
    pub mem_probes: Vec<ProbeRecord>,
    /// Where this loop's memory search started (mem_frac), when it had a hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<f64>,
}

/// The storage record (benches-doc/storage.md), with upstream's field names; `loops` and `retries`
/// are ours.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageRecord {
    pub period: (u64, u64),
    pub final_mem_probe_periods: Vec<(u64, u64)>,
    pub base_hashd_knobs: HashdKnobs,
    pub mem: MemProfile,
    pub mem_usages: Vec<f64>,
    pub mem_sizes: Vec<f64>,
    pub loops: Vec<LoopInfo>,
    /// Inner and outer retries taken.
    pub retries: (u32, u32),
    /// Ours: where the memory searches started (iocost-qos's `mof-hint`), mem_frac.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<f64>,
    /// Ours: the loops stopped once two agreed within this fraction (iocost-qos's
    /// `early-stop`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_agree: Option<f64>,
    /// Ours: the footprint (mem_frac) the memory searches took as failing from the start
    /// (iocost-qos's `mof-ceiling`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<f64>,
}

/// How far above a loop's failing footprint another loop must have passed to refute it as a
/// ceiling: iocost-qos's default early-stop tolerance, beyond which loops disagree more than
/// TCG's noise explains (two loops of one baseline were 7.4 % apart on sata-ssd, the fail of
/// one 2.6 % below the other's answer).
pub const REFUTED_BY: f64 = 0.10;

/// A footprint another configuration's storage measurement judged failing (iocost-qos's
/// `mof-ceiling`): a search on a setup no more capable may take it as its bracket's upper
/// end, when it measures with the same memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Ceiling {
    pub mem_frac: f64,
    /// The RPS share measured there.
    pub ratio: f64,
    pub mem: MemProfile,
}

impl StorageRecord {
    /// The lowest footprint above each loop's answer that its search judged failing, the
    /// lowest of those over the loops that another loop's answer does not refute; `None` when
    /// a loop found no failing footprint above its answer (or recorded no probes). Each loop's
    /// fail is its bracket's upper end, within a tolerance of its answer. A search starts one
    /// tolerance below the ceiling, and a pass there is its answer, so the lowest fail puts
    /// that start near the lowest loop's answer, which configurations with io.cost on rarely
    /// beat. Below the highest, the start sat on the boundary in the sata-ssd compares: from
    /// 40.9 % every search took five or six probes, from 40.0 % two to four (see
    /// iocost-qos.md, runs 6 and 7). A fail that another loop passed more than
    /// [`REFUTED_BY`] above was the loop's trouble, not the device's limit (in an hdd
    /// baseline one loop failed 20 % while the next two sustained 27 %): as the ceiling it
    /// would hold every configuration below it.
    pub fn ceiling(&self) -> Option<Ceiling> {
        let fails = self
            .loops
            .iter()
            .map(|l| lowest_fail_above(&l.mem_probes, l.mem_frac))
            .collect::<Option<Vec<_>>>()?;
        let top = self.loops.iter().map(|l| l.mem_frac).fold(0.0, f64::max);
        let low = fails
            .into_iter()
            .filter(|(f, _)| top <= f * (1.0 + REFUTED_BY))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        low.map(|(mem_frac, ratio)| Ceiling {
            mem_frac,
            ratio,
            mem: self.mem.clone(),
        })
    }

    /// The fake-CPU RPS the bench ran with: the recorded hashd knob, else derived from the
    /// memory share like the bench does (`round(share_GiB × 166.67)`).
    pub fn rps_max(&self) -> u64 {
        if self.base_hashd_knobs.rps_max > 0 {
            self.base_hashd_knobs.rps_max
        } else {
            (self.mem.share as f64 / (1u64 << 30) as f64 * 166.67).round() as u64
        }
    }
}

/// The storage result (benches-doc/storage.md): written by the study, read by the reports
/// (standalone and nested in iocost-qos). The study's distributions stay raw JSON: they are large,
/// only read when printed, and stored as the study wrote them. Sizes read as any number (2.1-layout
/// files store floats) and are written as integers, as upstream writes them.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct StorageResult {
    pub mem_offload_factor: f64,
    #[serde(serialize_with = "as_integer")]
    pub mem_usage: f64,
    #[serde(serialize_with = "as_integer")]
    pub mem_usage_stdev: f64,
    #[serde(serialize_with = "as_integer")]
    pub mem_size: f64,
    #[serde(serialize_with = "as_integer")]
    pub mem_size_stdev: f64,
    pub all_rstat: Option<Box<RawValue>>,
    pub final_rstat: Option<Box<RawValue>>,
    pub iolat: Option<Box<RawValue>>,
    pub nr_reports: (u64, u64),
}

fn as_integer<S: serde::Serializer>(v: &f64, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(v.round().max(0.0) as u64)
}

impl StorageResult {
    /// The IO latency distributions (empty when the result has none).
    pub fn iolat(&self) -> Result<IoLat> {
        IoLat::from_raw(self.iolat.as_deref(), "storage IO latencies")
    }
}
