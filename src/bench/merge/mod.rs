//! `merge`: combines the results of many hosts into one file, as upstream does. Every entry of
//! a mergeable bench in the sources is grouped by its merge id — kind, the id with `--by-id`,
//! the major.minor versions of the bench, agent and hashd (unless `--ignore-versions`), the
//! memory profile, the device model and firmware where the bench asks, and the bench's own
//! classifier (iocost-tune: the iocost-qos properties but `vrate-intvs`). Sources that missed
//! system requirements are rejected (unless `--ignore-sysreqs`). Each group is merged by its
//! bench; without `--multiple` only the group with the most accepted sources per kind and id
//! is kept. The output starts with a `merge-info` entry that says all of this.
//!
//! The folder's files are of three ranks of `bench/` (ARCHITECTURE.md): `src.rs`, what a
//! bench's own merge gets, is part of the contract; `info.rs`, the hidden `merge-info` bench
//! that owns the record written first, is a bench; this procedure, over the registry, sits
//! with the runner.

pub mod info;
pub mod src;

use crate::result::Entry;
use crate::spec::JobSpec;
use anyhow::{Context, Result};
use info::{MergeEntry, MergeId, MergeInfo};
pub use src::MergeOpts;
use src::MergeSrc;
use std::collections::btree_map::Entry as Entry_;
use std::collections::{BTreeMap, BTreeSet};

/// `major.minor` of a version string such as `2.2.4-g6d013b1 x86_64-unknown-linux-gnu`: the
/// first word's numbers before any `-`/`+` suffix; `None` when they aren't numbers.
pub fn major_minor(v: &str) -> Option<(u64, u64)> {
    let sem = v.split_whitespace().next()?;
    let core = sem.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
}

/// [`major_minor`] as the merge id holds it (`0.0` when unreadable).
fn maj_min(v: &str) -> String {
    let (major, minor) = major_minor(v).unwrap_or((0, 0));
    format!("{}.{}", major, minor)
}

/// The host facts of a source's sysinfo the merge id uses (and `db import` files it by).
pub struct Facts {
    pub bench_version: String,
    pub agent_version: String,
    pub hashd_version: String,
    pub mem_profile: u32,
    pub model: String,
    pub fwrev: String,
    /// The system requirements the run missed, by name.
    pub missed: Vec<String>,
}

pub fn facts(e: &Entry) -> Facts {
    let si: serde_json::Value = serde_json::from_str(e.sysinfo.get()).unwrap_or_default();
    let s = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    let rep = &si["sysreqs_report"];
    // Upstream wrote the misses as a map (older files: `{"map": {...}}`) or a list.
    let missed = match &si["sysreqs_missed"] {
        serde_json::Value::Object(m) => match m.get("map").and_then(|m| m.as_object()) {
            Some(inner) => inner.keys().cloned().collect(),
            None => m.keys().cloned().collect(),
        },
        serde_json::Value::Array(a) => a
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect(),
        _ => Vec::new(),
    };
    Facts {
        bench_version: s(&si["bench_version"]),
        agent_version: s(&rep["agent_version"]),
        hashd_version: s(&rep["hashd_version"]),
        mem_profile: si["mem"]["profile"].as_u64().unwrap_or(0) as u32,
        model: s(&rep["scr_dev_model"]),
        fwrev: s(&rep["scr_dev_fwrev"]),
        missed,
    }
}

fn merge_id(bench: &dyn crate::bench::AnyBench, e: &Entry, opts: &MergeOpts) -> MergeId {
    let f = facts(e);
    let how = bench
        .merging()
        .unwrap_or(crate::bench::merge::src::Merging {
            by_storage_model: false,
            by_storage_fwrev: false,
        });
    MergeId {
        kind: e.spec.kind.clone(),
        id: if opts.by_id { e.spec.id.clone() } else { None },
        versions: (!opts.ignore_versions).then(|| {
            (
                maj_min(&f.bench_version),
                maj_min(&f.agent_version),
                maj_min(&f.hashd_version),
            )
        }),
        mem_profile: f.mem_profile,
        storage_model: how.by_storage_model.then_some(f.model),
        storage_fwver: how.by_storage_fwrev.then_some(f.fwrev),
        classifier: bench.merge_classifier(e, opts),
    }
}

/// The merge-info entry's sysinfo: no host, but every key upstream requires (an `iocost` of
/// zeros, as its default).
fn info_sysinfo() -> crate::result::sysinfo::Sysinfo {
    use crate::system::iocost::{IoCostModel, IoCostQos};
    crate::result::sysinfo::Sysinfo {
        bench_version: env!("CARGO_PKG_VERSION").to_string(),
        iocost: Some(serde_json::json!({
            "vrate": 0.0,
            "model": IoCostModel::default(),
            "qos": IoCostQos::default(),
        })),
        ..Default::default()
    }
}

/// What makes two entries the same run: the SHA-1 of the entry without whitespace.
fn content_key(e: &Entry) -> Result<[u8; 20]> {
    use sha1::Digest;
    let json = serde_json::to_vec(e).context("serializing an entry")?;
    Ok(sha1::Sha1::digest(crate::result::save::minify(&json)).into())
}

/// A bench and entry id: without `--multiple`, one merged group each.
type KindId = (String, Option<String>);

/// The sources' mergeable entries grouped by merge id, each run once (a duplicate is told
/// with a warning); a usage error when there is none.
fn group_sources(
    files: &[(String, Vec<Entry>)],
    opts: &MergeOpts,
) -> Result<BTreeMap<MergeId, Vec<MergeSrc>>> {
    let mut sets: BTreeMap<MergeId, Vec<MergeSrc>> = BTreeMap::new();
    // The same run given twice (`merge X X`, a copy under another name) counts once: entries
    // are told apart by content, whitespace aside.
    let mut seen: BTreeMap<[u8; 20], &str> = BTreeMap::new();
    let mut dups: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (file, entries) in files {
        for e in entries {
            let Some(bench) = crate::bench::find(&e.spec.kind) else {
                continue;
            };
            if bench.merging().is_none() || e.result.is_none() {
                continue;
            }
            match seen.entry(content_key(e)?) {
                Entry_::Occupied(first) => {
                    *dups.entry((file, first.get())).or_default() += 1;
                    continue;
                }
                Entry_::Vacant(v) => {
                    v.insert(file);
                }
            }
            let mut src = MergeSrc {
                entry: e.clone(),
                file: file.clone(),
                rejected: None,
            };
            let f = facts(e);
            if !opts.ignore_sysreqs && !f.missed.is_empty() {
                src.rejected = Some(format!("{} missed sysreqs", f.missed.len()));
            }
            sets.entry(merge_id(bench, e, opts)).or_default().push(src);
        }
    }
    for ((file, first), n) in &dups {
        log::warn!(
            "merge: {} holds {} mergeable {} already read from {}; counted once",
            file,
            n,
            if *n == 1 { "entry" } else { "entries" },
            if file == first {
                "the same file given before".to_string()
            } else {
                first.to_string()
            }
        );
    }
    if sets.is_empty() {
        let kinds: Vec<&str> = crate::bench::BENCHES
            .iter()
            .filter(|b| b.merging().is_some())
            .map(|b| b.desc().kind)
            .collect();
        crate::usage_bail!(
            "merge: nothing to merge: none of the {} source(s) holds a finished result of {} \
             (the output is left as it is)",
            files.len(),
            kinds.join(" or ")
        );
    }
    Ok(sets)
}

/// Merges the sources' entries; returns the output file's entries (`merge-info` first) and the
/// merge-info entry's index (0).
pub fn merge(files: &[(String, Vec<Entry>)], opts: &MergeOpts, now: u64) -> Result<Vec<Entry>> {
    let mut sets = group_sources(files, opts)?;
    let mut merged: BTreeMap<MergeId, (Entry, BTreeSet<MergeId>)> = BTreeMap::new();
    for (mid, srcs) in sets.iter_mut() {
        let bench = crate::bench::find(&mid.kind).context("a merged bench vanished")?;
        let entry = bench.merge(srcs).with_context(|| {
            // The sources are a table: logged before the error, which stays one line.
            let mut dump = String::new();
            MergeEntry::of(mid, srcs).format(&mut dump, None);
            log::error!(
                "the sources of the failed {} merge:\n{}",
                mid.kind,
                dump.trim_end()
            );
            format!("merging {} failed (its sources are listed above)", mid.kind)
        })?;
        merged.insert(mid.clone(), (entry, BTreeSet::new()));
    }
    if !opts.multiple {
        // Per kind and id, the group with the most accepted sources (the first on a tie).
        let mut best: BTreeMap<KindId, (usize, MergeId, BTreeSet<MergeId>)> = BTreeMap::new();
        for (mid, srcs) in &sets {
            let key = (mid.kind.clone(), mid.id.clone());
            let n = MergeSrc::accepted(srcs).count();
            match best.get_mut(&key) {
                None => {
                    best.insert(key, (n, mid.clone(), BTreeSet::new()));
                }
                Some((bn, bmid, lost)) => {
                    if n > *bn {
                        *bn = n;
                        lost.insert(std::mem::replace(bmid, mid.clone()));
                    } else {
                        lost.insert(mid.clone());
                    }
                }
            }
        }
        merged = merged
            .into_iter()
            .filter_map(|(mid, (e, _))| {
                let (_, bmid, lost) = &best[&(mid.kind.clone(), mid.id.clone())];
                (*bmid == mid).then(|| (mid, (e, lost.clone())))
            })
            .collect();
    }
    let mut info = MergeInfo::default();
    let mut out = Vec::new();
    for (mid, (entry, lost)) in merged {
        let mut me = MergeEntry::of(&mid, &sets[&mid]);
        for l in &lost {
            me.dropped.push(MergeEntry::of(l, &sets[l]));
        }
        info.merges.push(me);
        out.push(entry);
    }
    let raw = |v: serde_json::Value| serde_json::value::to_raw_value(&v);
    let info_entry = Entry {
        spec: JobSpec {
            kind: "merge-info".into(),
            id: None,
            passive: None,
            props: vec![Default::default()],
        },
        period: (now, now),
        sysinfo: raw(serde_json::to_value(info_sysinfo())?)?,
        record: Some(raw(serde_json::to_value(&info)?)?),
        result: Some(raw(serde_json::Value::Bool(true))?),
        incomplete: false,
        unknown: Default::default(),
    };
    out.insert(0, info_entry);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_major_minor() {
        assert_eq!(maj_min("2.2.4-g6d013b1 x86_64-unknown-linux-gnu"), "2.2");
        assert_eq!(maj_min("0.1.0"), "0.1");
        assert_eq!(maj_min(""), "0.0");
        assert_eq!(major_minor("2.1.2"), Some((2, 1)));
        assert_eq!(major_minor("x.y"), None);
    }
}
