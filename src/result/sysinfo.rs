//! The `sysinfo` object of the entries we write. Keys follow upstream's layout where they exist,
//! so tools reading upstream files can read ours; what we don't know yet (no agent, no iocost
//! setup for benches that don't touch it) is `null` or empty rather than made up.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemProfile {
    pub profile: u32,
    pub avail: u64,
    pub share: u64,
    pub target: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sysinfo {
    pub bench_version: String,
    /// The required set, as far as upstream's requirement enum has them (so upstream can load
    /// the entry); ours beyond it are in `ext_sysreqs`.
    pub sysreqs: Vec<String>,
    pub sysreqs_missed: BTreeMap<String, Vec<String>>,
    pub sysreqs_report: Option<serde_json::Value>,
    /// Our addition: required requirements upstream doesn't know (`NoZswap`, `Psi`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ext_sysreqs: Vec<String>,
    /// Our addition: which of `ext_sysreqs` were missed, with their messages.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ext_sysreqs_missed: BTreeMap<String, Vec<String>>,
    /// Left out until we know the io.cost configuration (readers default it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iocost: Option<serde_json::Value>,
    pub hashd: Option<serde_json::Value>,
    pub mem: MemProfile,
    pub swappiness: u32,
    pub zswap_enabled: bool,
    /// Our addition: the validated global options the job ran with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bench_args: Option<serde_json::Value>,
    /// Our addition: the job ran with `--quick` (shortened phases). Left out when false, so
    /// entries without it read the same as upstream's.
    #[serde(skip_serializing_if = "is_false")]
    pub quick: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Sysinfo {
    /// Sysinfo for a job run by this binary now: our version, the host's current swappiness and
    /// zswap state, the global options it ran with and whether with `--quick`.
    pub fn current(bench_args: Option<serde_json::Value>, quick: bool) -> Self {
        Self {
            bench_version: env!("CARGO_PKG_VERSION").to_string(),
            swappiness: crate::util::fs::read_trim(std::path::Path::new("/proc/sys/vm/swappiness"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(60),
            zswap_enabled: crate::util::fs::read_trim(std::path::Path::new(
                "/sys/module/zswap/parameters/enabled",
            ))
            .is_some_and(|s| s == "Y" || s == "1"),
            bench_args,
            quick,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_with_upstream_keys() {
        let v = serde_json::to_value(Sysinfo::current(None, false)).unwrap();
        for key in [
            "bench_version",
            "sysreqs",
            "sysreqs_missed",
            "sysreqs_report",
            "hashd",
            "mem",
            "swappiness",
            "zswap_enabled",
        ] {
            assert!(v.get(key).is_some(), "missing {}", key);
        }
        assert!(v.get("bench_args").is_none());
        assert!(v.get("quick").is_none(), "no mark unless quick");
        assert!(v.get("iocost").is_none());
        assert_eq!(v["bench_version"], env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn reads_upstream_sysinfo() {
        let s: Sysinfo = serde_json::from_str(
            r#"{"bench_version":"2.2.4","sysreqs":["DepsBase"],"sysreqs_missed":{},
                "sysreqs_report":null,"iocost":{"vrate":0.0},"hashd":null,
                "mem":{"profile":16,"avail":0,"share":0,"target":0},"swappiness":60,
                "zswap_enabled":false}"#,
        )
        .unwrap();
        assert_eq!(s.mem.profile, 16);
        assert_eq!(s.sysreqs, vec!["DepsBase"]);
        assert!(!s.quick);
    }

    #[test]
    fn quick_runs_are_marked() {
        let si = Sysinfo::current(Some(serde_json::json!({"test": false})), true);
        assert!(si.quick);
        let v = serde_json::to_value(&si).unwrap();
        assert_eq!(v["quick"], true);
        let back: Sysinfo = serde_json::from_value(v).unwrap();
        assert!(back.quick);
        assert!(!Sysinfo::current(None, false).quick);
    }
}
