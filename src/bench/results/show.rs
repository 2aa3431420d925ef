//! What `summary` and `format` print for a set of entries: per picked entry the separator, the
//! common header and the bench's body (or how far an unfinished run got).

use crate::format::{has_result, header, job_name, select, FormatOpts, SEPARATOR_WIDTH};
use crate::result::Entry;
use crate::spec::JobSpec;
use anyhow::Result;

/// Renders the body of one entry with its bench's formatter. `Ok(false)` if this version
/// can't render the entry's bench.
fn format_body(out: &mut String, entry: &Entry, opts: &FormatOpts) -> Result<bool> {
    match crate::bench::find(&entry.spec.kind) {
        Some(bench) => bench.format(out, entry, opts).map(|()| true),
        None => Ok(false),
    }
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
    if opts.undecorated() {
        out.push_str(&body);
        return Ok(true);
    }
    let sysinfo = header::HeaderSysInfo::parse(entry)?;
    out.push_str(&"=".repeat(SEPARATOR_WIDTH));
    out.push_str("\n\n");
    header::format_header(out, entry, &sysinfo);
    out.push_str(&body);
    Ok(true)
}

/// What `summary`/`format` print for an entry without a result: how far it got and how to go
/// on, instead of nothing.
fn incomplete_body(out: &mut String, entry: &Entry) {
    let progress = match (&entry.record, crate::bench::find(&entry.spec.kind)) {
        (Some(rec), Some(bench)) => bench.progress(&entry.spec, rec),
        _ => None,
    };
    let has_record = entry.record.as_ref().is_some_and(|r| r.get() != "null");
    let (done, how) = if !has_record {
        (
            "nothing recorded",
            "the run stopped before its first checkpoint; re-run the same command to start it again",
        )
    } else if entry.incomplete {
        (
            progress.as_deref().unwrap_or("checkpointed"),
            "re-run the same command to resume it",
        )
    } else {
        (
            progress.as_deref().unwrap_or("checkpointed"),
            "the run finished but has no result; `study` with the same spec re-derives it from its reports",
        )
    };
    out.push_str(&format!(
        "Incomplete: {}: {}; {}\n\n",
        job_name(&entry.spec),
        done,
        how
    ));
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
            crate::errln!(
                "note: {}: this version can't format {} results yet; skipped",
                job_name(&entry.spec),
                entry.spec.kind
            );
        }
    }
    Ok(out)
}

/// Creates `format --plot`'s directory if needed and checks that files can be written there —
/// before the report is printed, not after.
pub fn prepare_plot_dir(dir: &std::path::Path) -> Result<(), crate::error::UsageError> {
    let bad = |why: String| {
        crate::error::UsageError::new(format!(
            "--plot {}: {}; give a writable directory",
            dir.display(),
            why
        ))
    };
    // A link at the name is followed only when trusted (`util::create`).
    let dir = crate::util::create::resolve_trusted(dir)
        .map_err(|e| crate::error::UsageError::new(format!("--plot {:#}", e)))?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| bad(format!("can't create the directory ({})", e)))?;
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| bad("a NUL byte in the path".into()))?;
    // SAFETY: a NUL-terminated path; access(2) only checks.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(bad(format!(
            "not writable ({})",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// `format --plot DIR`: writes the pictures of each selected entry whose bench draws some, as
/// `DIR/<stem>-<kind>[-<id>]<suffix>.<ext>` (`-2`, `-3`… for further entries of the same name);
/// returns the files written. An entry with nothing to draw is noted on stderr.
pub fn plot_entries(
    entries: &[Entry],
    specs: &[JobSpec],
    dir: &std::path::Path,
    stem: &str,
) -> Result<Vec<std::path::PathBuf>> {
    prepare_plot_dir(dir)?;
    let mut written: Vec<std::path::PathBuf> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (entry, _) in select(entries, specs)? {
        let files = match crate::bench::find(&entry.spec.kind) {
            Some(bench) if has_result(entry) => bench.plot(entry)?,
            _ => Vec::new(),
        };
        if files.is_empty() {
            crate::errln!(
                "note: {}: nothing to plot (results of storage (this version), iocost-tune, \
                 curve and qos-study have pictures)",
                job_name(&entry.spec)
            );
            continue;
        }
        let mut base = match &entry.spec.id {
            Some(id) => format!("{}-{}-{}", stem, entry.spec.kind, id),
            None => format!("{}-{}", stem, entry.spec.kind),
        };
        // A second entry of the same name gets -2, -3…
        let mut n = 2;
        let first = base.clone();
        while names.contains(&base) {
            base = format!("{}-{}", first, n);
            n += 1;
        }
        names.push(base.clone());
        for f in files {
            let path = dir.join(format!("{}{}.{}", base, f.suffix, f.ext));
            crate::util::atomic::write_atomic(&path, |w| w.write_all(f.text.as_bytes()))?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream hashd-params entry holding only the knobs, as record and as result, prints
    /// with the header and then the bench's result line.
    #[test]
    fn an_upstream_hashd_params_entry_prints_with_its_header() {
        let knobs = serde_json::value::RawValue::from_string(
            r#"{"hash_size":1258291,"rps_max":1029,"mem_size":51539607552,"mem_frac":0.33625,"chunk_pages":25,"fake_cpu_load":false}"#
                .to_string(),
        )
        .unwrap();
        let e = Entry {
            spec: crate::spec::JobSpec::parse("hashd-params").unwrap(),
            period: (1700000000, 1700001200),
            sysinfo: serde_json::value::to_raw_value(&serde_json::json!({})).unwrap(),
            record: Some(knobs.clone()),
            result: Some(knobs),
            incomplete: false,
            unknown: Default::default(),
        };
        let mut out = String::new();
        assert!(format_entry(&mut out, &e, &FormatOpts::default()).unwrap());
        assert!(out.contains("[hashd-params "), "{}", out);
        assert!(out.ends_with("chunk_pages=25\n\n"), "{}", out);
    }
}
