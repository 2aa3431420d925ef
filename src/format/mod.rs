//! Report rendering shared by the benches' text reports: the options, which entries a
//! `format` / `summary` prints, the header, tables, and reading an entry's stored JSON into a
//! bench's typed model. The per-bench bodies are the benches' own (`bench::results::show` puts an entry
//! together).

pub mod header;
pub mod rstat;
pub mod text;
pub mod textplot;

use crate::error::UsageError;
use crate::result::Entry;
use crate::spec::{JobSpec, PropSet};
use anyhow::Result;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

/// Options of a `format`/`summary` invocation for one entry.
#[derive(Debug, Clone, Default)]
pub struct FormatOpts {
    /// `format` (true) or `summary` (false).
    pub full: bool,
    /// Number of `--rstat` flags.
    pub rstat: u8,
    /// Format props from the spec's first group (e.g. `sub-full`).
    pub props: PropSet,
}

impl FormatOpts {
    /// A boolean format prop: given bare, or as `true`/`1`.
    pub fn flag(&self, key: &str) -> bool {
        self.props
            .get(key)
            .is_some_and(|v| v.is_empty() || v == "true" || v == "1")
    }

    /// The digests that print alone, without the separator and the common header (as
    /// upstream: iocost-tune's `high-level`, `hwdb` and `hwdb-fwrev`).
    pub fn undecorated(&self) -> bool {
        ["high-level", "hwdb", "hwdb-fwrev"]
            .iter()
            .any(|k| self.flag(k))
    }
}

/// Width of the `=` line printed above every entry.
pub const SEPARATOR_WIDTH: usize = 90;

pub use crate::spec::job_name;

fn layout_error(entry: &Entry, what: &str, err: serde_json::Error) -> anyhow::Error {
    UsageError::new(format!(
        "{}: the stored {} is not in a layout this version can read ({})",
        job_name(&entry.spec),
        what,
        err
    ))
    .into()
}

/// The entry's `result` parsed into a bench's typed model.
pub fn parse_result<T: DeserializeOwned>(entry: &Entry) -> Result<T> {
    let Some(res) = parse_result_opt(entry)? else {
        crate::usage_bail!("{}: the entry has no result", job_name(&entry.spec));
    };
    Ok(res)
}

/// The entry's `result` parsed into a bench's typed model; `None` if there is none.
pub fn parse_result_opt<T: DeserializeOwned>(entry: &Entry) -> Result<Option<T>> {
    entry
        .result
        .as_ref()
        .map(|raw| serde_json::from_str(raw.get()).map_err(|e| layout_error(entry, "result", e)))
        .transpose()
}

/// The entry's `record` parsed into a bench's typed model; `None` if there is none.
pub fn parse_record<T: DeserializeOwned>(entry: &Entry) -> Result<Option<T>> {
    match &entry.record {
        Some(raw) if raw.get() != "null" => serde_json::from_str(raw.get())
            .map(Some)
            .map_err(|e| layout_error(entry, "record", e)),
        _ => Ok(None),
    }
}

/// One resource-stat table block (with its memory.stat/io.stat/vmstat tables from level 1)
/// for `[title]`; nothing when the study didn't store one.
pub fn rstat_section(
    out: &mut String,
    title: &str,
    raw: Option<&RawValue>,
    level: u8,
) -> Result<()> {
    match raw {
        Some(raw) if raw.get() != "null" => rstat::format_table(out, title, raw, level),
        _ => Ok(()),
    }
}

pub fn has_result(e: &Entry) -> bool {
    e.result.as_ref().is_some_and(|r| r.get() != "null")
}

/// A record without a result: a run killed midway (checkpointed), or one whose study failed.
fn has_record_only(e: &Entry) -> bool {
    !has_result(e) && e.record.as_ref().is_some_and(|r| r.get() != "null")
}

/// Picks the entries a `format`/`summary` invocation prints: every entry in file order
/// without specs (those without a result show as incomplete); otherwise, per spec, the first
/// not yet picked entry with a result and the same kind and id, else such an entry with a
/// record, else one with neither.
pub fn select<'a>(entries: &'a [Entry], specs: &[JobSpec]) -> Result<Vec<(&'a Entry, PropSet)>> {
    if specs.is_empty() {
        return Ok(entries.iter().map(|e| (e, PropSet::new())).collect());
    }
    let mut taken = vec![false; entries.len()];
    let mut picked = Vec::new();
    for spec in specs {
        let pick = |usable: fn(&Entry) -> bool| {
            entries.iter().enumerate().position(|(i, e)| {
                !taken[i] && usable(e) && e.spec.kind == spec.kind && e.spec.id == spec.id
            })
        };
        let found = pick(has_result)
            .or_else(|| pick(has_record_only))
            .or_else(|| pick(|_| true));
        match found {
            Some(i) => {
                taken[i] = true;
                picked.push((&entries[i], spec.first_group()));
            }
            None => {
                let same = |e: &Entry| e.spec.kind == spec.kind && e.spec.id == spec.id;
                let n = entries
                    .iter()
                    .zip(&taken)
                    .filter(|(e, t)| **t && same(e))
                    .count();
                if n > 0 {
                    crate::usage_bail!(
                        "no further result for {}: the file's {} {} picked by the specs before \
                         it (each spec picks one entry of its own)",
                        job_name(spec),
                        n,
                        if n == 1 {
                            "matching entry is"
                        } else {
                            "matching entries are"
                        }
                    );
                }
                crate::usage_bail!("no matching result for {}", job_name(spec))
            }
        }
    }
    Ok(picked)
}

/// Larger than any real measurement a picture shows (seconds, bytes in GiB, %, ms, vrates);
/// beyond it a value is damage, and the plotting library's axis ticks would never end.
pub const PLOTTABLE_MAX: f64 = 1e12;

/// Whether `v` can go on a plot's axis (see [`PLOTTABLE_MAX`]).
pub fn plottable(v: f64) -> bool {
    v.is_finite() && v.abs() <= PLOTTABLE_MAX
}
