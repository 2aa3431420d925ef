//! The `sysreqs_report` layout upstream stores in sysinfo (and our additions), read leniently
//! from older files and written with upstream's field names.
use super::checks::Host;
use super::passive::Enforce;
use super::req::{Check, SysReq};
use crate::error::UsageError;
use std::collections::BTreeMap;

use crate::system::blockdev::{self};
use crate::system::sysinfo::HostInfo;
use anyhow::Result;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// `sysreqs_report` in upstream's layout. The one definition for writing ours and reading
/// anybody's: every field defaults and requirement names stay strings, since upstream files
/// name requirements this version doesn't check (`Oomd`, `Btrfs`, `DepsBase`, …).
///
/// In memory `satisfied`/`missed` hold every requirement. In the file, the ones upstream's
/// enum doesn't know ([`upstream_knows`]) go to `ext_satisfied`/`ext_missed`: upstream rejects
/// unknown names but ignores unknown fields, so it can still load what we write.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "ReportWire", into = "ReportWire")]
pub struct SysReqsReport {
    pub satisfied: Vec<String>,
    pub missed: MissedReqs,
    pub kernel_version: String,
    /// The versions of the agent and hashd the report came from: ours, both bundled.
    pub agent_version: String,
    pub hashd_version: String,
    pub nr_cpus: usize,
    pub total_memory: u64,
    pub total_swap: u64,
    pub scr_dev: String,
    pub scr_devnr: (u32, u32),
    pub scr_dev_model: String,
    pub scr_dev_fwrev: String,
    pub scr_dev_size: u64,
    pub scr_dev_iosched: String,
    pub enforce: Enforce,
}

/// Records the system requirements of a job in its sysinfo: which were required, which of those
/// were missed (with their messages), and the full report — the ones upstream's list lacks in
/// the `ext_*` fields, so upstream can load the entry.
pub fn record_in(
    si: &mut crate::result::sysinfo::Sysinfo,
    required: &[SysReq],
    eval: &Evaluation,
) -> Result<()> {
    (si.sysreqs, si.ext_sysreqs) = required
        .iter()
        .map(|r| r.name().to_string())
        .partition(|n| upstream_knows(n));
    (si.sysreqs_missed, si.ext_sysreqs_missed) = eval
        .missed_of(required)
        .into_iter()
        .map(|(r, m)| (r.name().to_string(), m))
        .partition(|(n, _)| upstream_knows(n));
    si.sysreqs_report = Some(serde_json::to_value(&eval.report)?);
    Ok(())
}

/// Whether upstream's requirement enum has `name` (so upstream can read a report naming it).
pub fn upstream_knows(name: &str) -> bool {
    !matches!(name, "NoZswap" | "Psi")
}

/// [`SysReqsReport`] as stored, field order as upstream writes it.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct ReportWire {
    satisfied: Vec<String>,
    missed: MissedReqs,
    kernel_version: String,
    agent_version: String,
    hashd_version: String,
    nr_cpus: usize,
    #[serde(deserialize_with = "lenient_u64")]
    total_memory: u64,
    #[serde(deserialize_with = "lenient_u64")]
    total_swap: u64,
    scr_dev: String,
    scr_devnr: (u32, u32),
    scr_dev_model: String,
    scr_dev_fwrev: String,
    #[serde(deserialize_with = "lenient_u64")]
    scr_dev_size: u64,
    scr_dev_iosched: String,
    enforce: Enforce,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ext_satisfied: Vec<String>,
    #[serde(skip_serializing_if = "MissedReqs::is_empty")]
    ext_missed: MissedReqs,
}

impl From<ReportWire> for SysReqsReport {
    fn from(w: ReportWire) -> Self {
        let mut satisfied = w.satisfied;
        satisfied.extend(w.ext_satisfied);
        let mut missed = w.missed;
        missed.0.extend(w.ext_missed.0);
        Self {
            satisfied,
            missed,
            kernel_version: w.kernel_version,
            agent_version: w.agent_version,
            hashd_version: w.hashd_version,
            nr_cpus: w.nr_cpus,
            total_memory: w.total_memory,
            total_swap: w.total_swap,
            scr_dev: w.scr_dev,
            scr_devnr: w.scr_devnr,
            scr_dev_model: w.scr_dev_model,
            scr_dev_fwrev: w.scr_dev_fwrev,
            scr_dev_size: w.scr_dev_size,
            scr_dev_iosched: w.scr_dev_iosched,
            enforce: w.enforce,
        }
    }
}

impl From<SysReqsReport> for ReportWire {
    fn from(r: SysReqsReport) -> Self {
        let (satisfied, ext_satisfied) = r.satisfied.into_iter().partition(|n| upstream_knows(n));
        let (missed, ext_missed) = r.missed.0.into_iter().partition(|(n, _)| upstream_knows(n));
        Self {
            satisfied,
            missed: MissedReqs(missed),
            kernel_version: r.kernel_version,
            agent_version: r.agent_version,
            hashd_version: r.hashd_version,
            nr_cpus: r.nr_cpus,
            total_memory: r.total_memory,
            total_swap: r.total_swap,
            scr_dev: r.scr_dev,
            scr_devnr: r.scr_devnr,
            scr_dev_model: r.scr_dev_model,
            scr_dev_fwrev: r.scr_dev_fwrev,
            scr_dev_size: r.scr_dev_size,
            scr_dev_iosched: r.scr_dev_iosched,
            enforce: r.enforce,
            ext_satisfied,
            ext_missed: MissedReqs(ext_missed),
        }
    }
}

/// A byte count written as an integer (or, by other writers, as a float or `null`).
fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .unwrap_or(0),
        _ => 0,
    })
}

/// Missed requirements by name with their messages, in file order (a JSON object; a list of
/// names or `null` also reads).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MissedReqs(pub Vec<(String, Vec<String>)>);

impl MissedReqs {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names().any(|k| k == name)
    }

    /// The messages of `name`, if it is missed.
    pub fn get(&self, name: &str) -> Option<&[String]> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, m)| m.as_slice())
    }
}

impl Serialize for MissedReqs {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for MissedReqs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MissedReqs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of requirement names to messages, or a list of names")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<MissedReqs, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                    // Messages are strings; anything else in their place is dropped, not fatal.
                    let msgs = match v {
                        serde_json::Value::Array(a) => a
                            .into_iter()
                            .filter_map(|m| m.as_str().map(str::to_string))
                            .collect(),
                        serde_json::Value::String(m) => vec![m],
                        _ => Vec::new(),
                    };
                    out.push((k, msgs));
                }
                Ok(MissedReqs(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<MissedReqs, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = seq.next_element::<String>()? {
                    out.push((k, Vec::new()));
                }
                Ok(MissedReqs(out))
            }
            fn visit_unit<E>(self) -> std::result::Result<MissedReqs, E> {
                Ok(MissedReqs::default())
            }
        }
        d.deserialize_any(V)
    }
}

pub(super) fn build_report(
    host: &Host,
    checks: &[Check],
    enforce: Enforce,
) -> Result<SysReqsReport> {
    let hi = HostInfo::read(host.hp)?;
    let dev = match &host.scratch {
        // Re-read: the fix pass may have changed the scheduler.
        Ok(s) => blockdev::DevInfo::read(host.hp, &s.dev.name).unwrap_or_else(|_| s.dev.clone()),
        Err(_) => blockdev::DevInfo {
            name: String::new(),
            devnr: (0, 0),
            model: String::new(),
            fwrev: String::new(),
            size: 0,
            scheduler: String::new(),
            wbt_lat_usec: None,
            rotational: false,
        },
    };
    Ok(SysReqsReport {
        satisfied: checks
            .iter()
            .filter(|c| c.satisfied())
            .map(|c| c.req.name().to_string())
            .collect(),
        missed: MissedReqs(
            checks
                .iter()
                .filter(|c| !c.satisfied())
                .map(|c| (c.req.name().to_string(), c.missed.clone()))
                .collect(),
        ),
        kernel_version: hi.kernel_version,
        agent_version: env!("CARGO_PKG_VERSION").into(),
        hashd_version: env!("CARGO_PKG_VERSION").into(),
        nr_cpus: hi.nr_cpus,
        total_memory: hi.total_memory,
        total_swap: hi.total_swap,
        scr_dev: dev.name,
        scr_devnr: dev.devnr,
        scr_dev_model: dev.model,
        scr_dev_fwrev: dev.fwrev,
        scr_dev_size: dev.size,
        scr_dev_iosched: dev.scheduler,
        enforce,
    })
}

/// What the fix pass changed and how each requirement stands afterwards.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub checks: Vec<Check>,
    /// `(requirement, what was done)` for each fix applied.
    pub fixed: Vec<(SysReq, String)>,
    pub report: SysReqsReport,
}

impl Evaluation {
    pub fn missed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.satisfied())
    }

    /// The misses among `required`, as stored in an entry's `sysreqs_missed`.
    pub fn missed_of(&self, required: &[SysReq]) -> BTreeMap<SysReq, Vec<String>> {
        self.missed()
            .filter(|c| required.contains(&c.req))
            .map(|c| (c.req, c.missed.clone()))
            .collect()
    }

    /// Fails (usage error, exit 2) when any of `required` is missed, unless `force`, in which
    /// case the misses are logged as warnings.
    pub fn enforce_required(&self, required: &[SysReq], force: bool) -> Result<()> {
        let missed = self.missed_of(required);
        if missed.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = missed
            .iter()
            .map(|(r, m)| format!("{} ({})", r, m.join("; ")))
            .collect();
        if force {
            for l in &list {
                log::warn!(
                    "missed system requirement {}; continuing because of --force",
                    l
                );
            }
            return Ok(());
        }
        Err(UsageError::new(format!(
            "system requirements missed: {}; fix them (`resctl-bench deps` lists all) or pass --force",
            list.join(", ")
        ))
        .into())
    }
}
