//! Report rendering: the `format` / `summary` commands (entry selection, separator, header,
//! per-bench body) and the helpers benches share to read their stored JSON.

pub mod header;
pub mod text;

use crate::bench::{FormatOpts, ValueKind};
use crate::error::UsageError;
use crate::result::Entry;
use crate::spec::{JobSpec, PropSet};
use anyhow::Result;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

/// Width of the `=` line printed above every entry.
pub const SEPARATOR_WIDTH: usize = 90;

/// `job[KIND:ID]` (`-` without an id), as used in messages.
pub fn job_name(spec: &JobSpec) -> String {
    format!("job[{}:{}]", spec.kind, spec.id.as_deref().unwrap_or("-"))
}

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

/// A numeric property of a stored spec (`what` names the bench for the error message).
pub fn prop_f64(props: &PropSet, key: &str, kind: ValueKind, what: &str) -> Result<Option<f64>> {
    match crate::spec::prop_value(props, key, kind) {
        Ok(v) => Ok(v.and_then(|v| v.as_f64())),
        Err(e) => crate::usage_bail!("{} spec: {}", what, e),
    }
}

/// A string property of a stored spec.
pub fn prop_str(props: &PropSet, key: &str) -> Option<String> {
    props.get(key).cloned()
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
        Some(raw) if raw.get() != "null" => {
            crate::study::rstat::format_table(out, title, raw, level)
        }
        _ => Ok(()),
    }
}

/// Renders the body of one entry with the bench's formatter. `Ok(false)` if this version has
/// no formatter for the entry's bench.
fn format_body(out: &mut String, entry: &Entry, opts: &FormatOpts) -> Result<bool> {
    use crate::bench::{iocost_params, iocost_qos, protection, storage};
    match entry.spec.kind.as_str() {
        "iocost-params" => iocost_params::format(out, entry, opts)?,
        "iocost-qos" => iocost_qos::format(out, entry, opts)?,
        "storage" => storage::format(out, entry, opts)?,
        "protection" => protection::format(out, entry, opts)?,
        kind => match crate::bench::implementation(kind) {
            Some(bench) => bench.format(out, entry, opts)?,
            None => return Ok(false),
        },
    }
    Ok(true)
}

/// Separator, header and body of one entry. `Ok(false)` (nothing written) if this version
/// can't render the entry's bench.
pub fn format_entry(out: &mut String, entry: &Entry, opts: &FormatOpts) -> Result<bool> {
    let mut body = String::new();
    if !has_result(entry) {
        incomplete_body(&mut body, entry);
    } else if !format_body(&mut body, entry, opts)? {
        return Ok(false);
    }
    let sysinfo = header::HeaderSysInfo::parse(entry)?;
    out.push_str(&"=".repeat(SEPARATOR_WIDTH));
    out.push_str("\n\n");
    header::format_header(out, entry, &sysinfo);
    out.push_str(&body);
    Ok(true)
}

fn has_result(e: &Entry) -> bool {
    e.result.as_ref().is_some_and(|r| r.get() != "null")
}

/// A record without a result: a run killed midway (checkpointed), or one whose study failed.
fn has_record_only(e: &Entry) -> bool {
    !has_result(e) && e.record.as_ref().is_some_and(|r| r.get() != "null")
}

/// What `summary`/`format` print for an entry without a result: how far it got and how to go
/// on, instead of nothing.
fn incomplete_body(out: &mut String, entry: &Entry) {
    let progress = match (
        &entry.record,
        crate::bench::implementation(&entry.spec.kind),
    ) {
        (Some(rec), Some(bench)) => bench.progress(&entry.spec, rec),
        _ => None,
    };
    let how = if entry.incomplete {
        "re-run the same command to resume it"
    } else {
        "the run finished but has no result; `study` with the same spec re-derives it"
    };
    out.push_str(&format!(
        "Incomplete: {}: {}; {}\n\n",
        job_name(&entry.spec),
        progress.as_deref().unwrap_or("checkpointed"),
        how
    ));
}

/// Picks the entries a `format`/`summary` invocation prints: every entry with a result or a
/// record (an unfinished run) in file order without specs; otherwise, per spec, the first not
/// yet picked entry with a result and the same kind and id, else such an entry with a record.
pub fn select<'a>(entries: &'a [Entry], specs: &[JobSpec]) -> Result<Vec<(&'a Entry, PropSet)>> {
    if specs.is_empty() {
        return Ok(entries
            .iter()
            .filter(|e| has_result(e) || has_record_only(e))
            .map(|e| (e, PropSet::new()))
            .collect());
    }
    let mut taken = vec![false; entries.len()];
    let mut picked = Vec::new();
    for spec in specs {
        let pick = |usable: fn(&Entry) -> bool| {
            entries.iter().enumerate().position(|(i, e)| {
                !taken[i] && usable(e) && e.spec.kind == spec.kind && e.spec.id == spec.id
            })
        };
        let found = pick(has_result).or_else(|| pick(has_record_only));
        match found {
            Some(i) => {
                taken[i] = true;
                picked.push((&entries[i], spec.first_group()));
            }
            None => crate::usage_bail!("no matching result for {}", job_name(spec)),
        }
    }
    Ok(picked)
}

/// The text of `format` (`full`) or `summary` for `entries`. Entries whose bench this version
/// can't render are skipped with a note on stderr.
pub fn format_entries(
    entries: &[Entry],
    specs: &[JobSpec],
    full: bool,
    rstat: u8,
) -> Result<String> {
    let mut out = String::new();
    for (entry, props) in select(entries, specs)? {
        let opts = FormatOpts { full, rstat, props };
        if !format_entry(&mut out, entry, &opts)? {
            eprintln!(
                "note: {}: this version can't format {} results yet; skipped",
                job_name(&entry.spec),
                entry.spec.kind
            );
        }
    }
    Ok(out)
}
