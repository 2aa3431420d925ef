//! What a job's `passive=` leaves alone: the resources whose requirements are checked but not
//! fixed.
use super::req::Res;

use serde::{Deserialize, Serialize};

/// Which resources we may change; the complement is what `passive=` names. Upstream's layout;
/// a missing field reads as enforced (the header of files without it shows no `passive=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Enforce {
    pub crit_mem_prot: bool,
    pub cpu: bool,
    pub mem: bool,
    pub io: bool,
    pub fs: bool,
    pub oomd: bool,
}

impl Default for Enforce {
    fn default() -> Self {
        Self::all()
    }
}

impl Enforce {
    pub const fn all() -> Self {
        Self {
            crit_mem_prot: true,
            cpu: true,
            mem: true,
            io: true,
            fs: true,
            oomd: true,
        }
    }

    pub const fn none() -> Self {
        Self {
            crit_mem_prot: false,
            cpu: false,
            mem: false,
            io: false,
            fs: false,
            oomd: false,
        }
    }

    /// From a job spec's `passive=` over everything enforced; see [`Enforce::merge_passive`].
    pub fn from_passive(passive: Option<&str>) -> Self {
        Self::all().merge_passive(passive)
    }

    /// A job spec's `passive=` over this (the bench's default): tokens separated by `/`, `ALL`
    /// = nothing enforced, `all` = everything but hostcritical memory protection, `cpu`,
    /// `mem`, `io`, `fs`, `oomd` each one resource, `none` = back to everything enforced (as
    /// upstream merges a spec's tokens into its bench's default). The spec grammar has already
    /// rejected unknown tokens; they are ignored here.
    pub fn merge_passive(self, passive: Option<&str>) -> Self {
        let mut e = self;
        for tok in passive.unwrap_or("").split('/') {
            match tok {
                "ALL" => e = Self::none(),
                "all" => {
                    e = Self {
                        crit_mem_prot: e.crit_mem_prot,
                        ..Self::none()
                    }
                }
                "none" => e = Self::all(),
                "cpu" => e.cpu = false,
                "mem" => e.mem = false,
                "io" => e.io = false,
                "fs" => e.fs = false,
                "oomd" => e.oomd = false,
                _ => {}
            }
        }
        e
    }

    /// How the header shows it: `ALL` (nothing enforced), `all` (only hostcritical memory
    /// protection), the `/`-joined resources not enforced, or empty when everything is.
    pub fn passive(&self) -> String {
        let off: Vec<&str> = [
            ("cpu", self.cpu),
            ("mem", self.mem),
            ("io", self.io),
            ("fs", self.fs),
            ("oomd", self.oomd),
        ]
        .iter()
        .filter(|(_, on)| !on)
        .map(|(name, _)| *name)
        .collect();
        if off.len() == 5 {
            if self.crit_mem_prot { "all" } else { "ALL" }.to_string()
        } else {
            off.join("/")
        }
    }

    pub(super) fn allows(&self, res: Res) -> bool {
        match res {
            Res::Mem => self.mem,
            Res::Io => self.io,
            Res::Oomd => self.oomd,
        }
    }
}
