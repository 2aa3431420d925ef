//! `merge-info`: the entry `merge` puts first in its output, saying which sources each merged
//! result came from, which were rejected and why, and which groups lost to it. Hidden: it is
//! never run, only printed. Its record is the model below, which `merge`'s procedure
//! (this folder's `mod.rs`) fills.

use super::src::MergeSrc;
use crate::bench::contract::api::{Bench, BenchDesc, FormatOpts, SpecError, Stored, NO_PROPS};
use crate::spec::JobSpec;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::fmt::Write;

pub struct MergeInfoBench;

pub static DESC: BenchDesc = BenchDesc {
    kind: "merge-info",
    about: "How a merged result file came to be",
    hidden: true,
    incremental: false,
    runnable: false,
    runs_first: None,
    shape: NO_PROPS,
    doc: None,
    system: None,
};

impl Bench for MergeInfoBench {
    type Props = ();
    type Record = MergeInfo;
    /// Upstream stores `true`.
    type Result = serde_json::Value;

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, _spec: &JobSpec) -> Result<(), SpecError> {
        Ok(())
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, _opts: &FormatOpts) -> Result<()> {
        stored.record()?.unwrap_or_default().format(out);
        out.push('\n');
        Ok(())
    }
}

/// What keeps results apart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MergeId {
    pub kind: String,
    pub id: Option<String>,
    pub versions: Option<(String, String, String)>,
    pub mem_profile: u32,
    pub storage_model: Option<String>,
    pub storage_fwver: Option<String>,
    pub classifier: Option<String>,
}

/// A source as `merge-info` names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeSrcName {
    pub file: String,
    pub kind: String,
    pub id: Option<String>,
}

impl MergeSrcName {
    pub fn of(s: &MergeSrc) -> Self {
        MergeSrcName {
            file: s.file.clone(),
            kind: s.entry.spec.kind.clone(),
            id: s.entry.spec.id.clone(),
        }
    }

    fn shown(&self) -> String {
        match &self.id {
            Some(id) => format!("{}[{}]", self.file, id),
            None => self.file.clone(),
        }
    }
}

/// One merged group: its id, its sources, those rejected and why, and the groups that lost
/// to it (without `--multiple`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergeEntry {
    pub mid: MergeId,
    pub srcs: Vec<MergeSrcName>,
    pub rejects: Vec<(MergeSrcName, String)>,
    pub dropped: Vec<MergeEntry>,
}

impl MergeEntry {
    pub fn of(mid: &MergeId, srcs: &[MergeSrc]) -> Self {
        MergeEntry {
            mid: mid.clone(),
            srcs: MergeSrc::accepted(srcs).map(MergeSrcName::of).collect(),
            rejects: srcs
                .iter()
                .filter_map(|s| {
                    s.rejected
                        .as_ref()
                        .map(|r| (MergeSrcName::of(s), r.clone()))
                })
                .collect(),
            dropped: Vec::new(),
        }
    }

    pub fn format(&self, out: &mut String, seq: Option<usize>) {
        match seq {
            Some(i) => {
                let _ = write!(out, "[{}] ", i);
            }
            None => out.push_str("[-] "),
        }
        out.push_str(&self.mid.kind);
        if let Some(id) = &self.mid.id {
            let _ = write!(out, "[{}]", id);
        }
        out.push('\n');
        if let Some((b, a, h)) = &self.mid.versions {
            if b == a && a == h {
                let _ = writeln!(out, "  version: {}", b);
            } else {
                let _ = writeln!(out, "  bench-version: {}", b);
                let _ = writeln!(out, "  agent-version: {}", a);
                let _ = writeln!(out, "  hashd-version: {}", h);
            }
        }
        let _ = writeln!(out, "  memory-profile: {}", self.mid.mem_profile);
        if let Some(m) = &self.mid.storage_model {
            let _ = writeln!(out, "  storage: {}", m);
        }
        if let Some(f) = &self.mid.storage_fwver {
            let _ = writeln!(out, "  fwver: {}", f);
        }
        if let Some(c) = &self.mid.classifier {
            let _ = writeln!(out, "  classifier: {}", c);
        }
        out.push_str("  sources:\n");
        for s in &self.srcs {
            let _ = writeln!(out, "    + {}", s.shown());
        }
        for (s, why) in &self.rejects {
            let _ = writeln!(out, "    - {} ({})", s.shown(), why);
        }
        for d in &self.dropped {
            d.format(out, None);
        }
    }
}

/// The `merge-info` record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MergeInfo {
    pub merges: Vec<MergeEntry>,
}

impl MergeInfo {
    pub fn format(&self, out: &mut String) {
        for (i, m) in self.merges.iter().enumerate() {
            m.format(out, Some(i));
        }
    }
}
