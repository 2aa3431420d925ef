//! The bench slice layout and its memory protection policy.

use crate::system::systemd::UnitProp;
use std::path::PathBuf;

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4 << 10;

/// A memory knob: `None` is 0 for protections (memory.min/low) and `max` for limits
/// (memory.high, memory.swap.max).
pub type MemKnob = Option<u64>;

/// The slices the benches use, directly below the cgroup2 root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Slice {
    HostCritical,
    Workload,
    System,
    Balloon,
    Sideload,
}

impl Slice {
    pub fn name(self) -> &'static str {
        match self {
            Slice::HostCritical => "hostcritical.slice",
            Slice::Workload => "workload.slice",
            Slice::System => "system.slice",
            Slice::Balloon => "balloon.slice",
            Slice::Sideload => "sideload.slice",
        }
    }
}

/// Turns a knob file's text into the form we compare against (and journal).
pub(super) type Normalize = fn(&str) -> String;

/// Target knobs of one slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceConfig {
    pub slice: Slice,
    pub cpu_weight: u32,
    pub io_weight: u32,
    pub mem_min: MemKnob,
    pub mem_low: MemKnob,
    pub mem_high: MemKnob,
    /// `memory.swap.max`; `None` leaves the knob alone.
    pub swap_max: Option<MemKnob>,
}

/// The memory protection upstream gives hostcritical.slice (768 MiB).
pub const HOSTCRITICAL_MEM_MIN: u64 = 768 * MIB;

/// workload.slice memory.low for a memory profile: `mem_share × (1 − mem_margin)`.
pub fn workload_mem_low(mem_share: u64, mem_margin: f64) -> u64 {
    (mem_share as f64 * (1.0 - mem_margin.clamp(0.0, 1.0))).round() as u64
}

/// The bench slice layout (hostcritical, workload, system, balloon) with upstream's weights and
/// protections; `workload_mem_low` usually from [`workload_mem_low`]. The balloon slice gets no
/// swap so the memory it holds stays resident.
pub fn bench_slices(workload_mem_low: u64) -> Vec<SliceConfig> {
    let cfg = |slice, cpu_weight, io_weight, mem_min, mem_low| SliceConfig {
        slice,
        cpu_weight,
        io_weight,
        mem_min,
        mem_low,
        mem_high: None,
        swap_max: None,
    };
    vec![
        cfg(
            Slice::HostCritical,
            10,
            100,
            Some(HOSTCRITICAL_MEM_MIN),
            None,
        ),
        cfg(Slice::Workload, 100, 500, None, Some(workload_mem_low)),
        cfg(Slice::System, 10, 50, None, None),
        SliceConfig {
            swap_max: Some(Some(0)),
            ..cfg(Slice::Balloon, 100, 100, None, None)
        },
    ]
}

impl SliceConfig {
    /// The knobs as systemd unit properties (protections of 0, limits of "no limit", as the
    /// cgroup files would say).
    pub fn unit_props(&self) -> Vec<UnitProp> {
        let page = |v: MemKnob| v.map(|b| b / PAGE * PAGE);
        let mut p = vec![
            UnitProp::new("CPUWeight", Some(self.cpu_weight as u64)),
            UnitProp::new("IOWeight", Some(self.io_weight as u64)),
            UnitProp::new("MemoryMin", Some(page(self.mem_min).unwrap_or(0))),
            UnitProp::new("MemoryLow", Some(page(self.mem_low).unwrap_or(0))),
            UnitProp::new("MemoryHigh", page(self.mem_high)),
        ];
        if let Some(swap) = self.swap_max {
            p.push(UnitProp::new("MemorySwapMax", page(swap)));
        }
        p
    }
}

/// sideload.slice, for when sideloads arrive.
pub fn sideload_slice() -> SliceConfig {
    SliceConfig {
        slice: Slice::Sideload,
        cpu_weight: 1,
        io_weight: 1,
        mem_min: None,
        mem_low: None,
        mem_high: None,
        swap_max: None,
    }
}

/// What [`CgroupFs::setup_slices`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SliceSetup {
    /// Cgroups we created (remove them to undo).
    pub created: Vec<PathBuf>,
    /// Knob files whose value we changed.
    pub written: Vec<PathBuf>,
}

pub(super) fn mem_text(v: MemKnob, unset: &str) -> String {
    match v {
        // The kernel keeps whole pages; write what it will show so re-checks compare equal.
        Some(b) => (b / PAGE * PAGE).to_string(),
        None => unset.to_string(),
    }
}
