//! The steps of the sizing bench, as probes, reports and the progress display name them.

use serde::{Deserialize, Serialize};

/// Which step of the bench a probe belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    CpuSat,
    /// Warming up before the memory search (not judged).
    MemPrep,
    MemUp,
    MemBisect,
    /// A repeated, longer probe of a measurement too close to the threshold.
    MemRecheck,
    MemConfirm,
    /// The long first probe one tolerance below a ceiling (see `mem`).
    MemCeiling,
    /// Upstream's phases (its search, `search=upstream`): bisection's re-probe of the
    /// opposite end, and the long probes stepping down to the result.
    MemVerify,
    MemRefine,
}

impl Phase {
    /// The short name reports and status lines show.
    pub fn name(self) -> &'static str {
        match self {
            Phase::CpuSat => "cpu-sat",
            Phase::MemPrep => "mem-prep",
            Phase::MemUp => "mem-up",
            Phase::MemBisect => "mem-bisect",
            Phase::MemRecheck => "mem-recheck",
            Phase::MemConfirm => "mem-confirm",
            Phase::MemCeiling => "mem-ceiling",
            Phase::MemVerify => "mem-verify",
            Phase::MemRefine => "mem-refine",
        }
    }

    /// What the phase is doing, in words, for the progress display.
    pub fn doing(self) -> &'static str {
        match self {
            Phase::CpuSat => "CPU saturation",
            Phase::MemPrep => "warm-up",
            Phase::MemUp => "going up",
            Phase::MemBisect => "narrowing",
            Phase::MemRecheck => "re-checking",
            Phase::MemConfirm => "confirming",
            Phase::MemCeiling => "below the ceiling",
            Phase::MemVerify => "verifying",
            Phase::MemRefine => "refining",
        }
    }
}
