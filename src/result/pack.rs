//! `pack`: one tarball holding the result file and the per-second reports its entries cover, so
//! the results can be studied elsewhere. The reports are looked for where runs put them:
//! `<dir>/report.d/` (a `run` on the host) and `<stem>-report.d/` beside the result file (a run
//! in `resctl-bench vm`, or an unpacked tarball). Unpacked, the reports sit in `<stem>-report.d/`,
//! which is where `study` looks by default.

use super::entry::{parse_entries, read_bytes, Entry};
use super::save::write_atomic;
use crate::error::UsageError;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `x.json.gz` → `x`, `x.json` → `x`, `x` → `x`.
pub fn stem(result: &Path) -> String {
    let name = result
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    name.strip_suffix(".json").unwrap_or(name).to_string()
}

/// The default per-second report directory of a result file: `<dir of result>/<stem>-report.d`.
pub fn default_reports_dir(result: &Path) -> PathBuf {
    result.with_file_name(format!("{}-report.d", stem(result)))
}

/// The entries' periods (start < end only), sorted and merged where they overlap or touch.
/// Each range is half-open: `[start, end)`.
pub fn merged_periods(entries: &[Entry]) -> Vec<(u64, u64)> {
    let mut periods: Vec<(u64, u64)> = entries
        .iter()
        .map(|e| e.period)
        .filter(|(a, b)| a < b)
        .collect();
    periods.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (a, b) in periods {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackStats {
    pub tarball: PathBuf,
    pub packed: u64,
    pub missing: u64,
}

/// Where the per-second reports of `result`'s runs may be, in the order they are searched.
pub fn report_dirs(result: &Path, dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![dir.join("report.d"), default_reports_dir(result)];
    dirs.dedup();
    dirs
}

/// The reports in `dirs` by second (`<t>.json`), each from the first dir that has it. Listed
/// once: walking an entry's period second by second would take as long as the period is (a
/// damaged file's can be centuries).
fn list_reports(dirs: &[PathBuf]) -> BTreeMap<u64, PathBuf> {
    let mut found = BTreeMap::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(t) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if e.path().is_file() {
                found.entry(t).or_insert_with(|| e.path());
            }
        }
    }
    found
}

/// Entries with a period of which no second has a report in `reports`: their runs' reports
/// are gone, or somewhere we don't look.
fn entries_without_reports(entries: &[Entry], reports: &BTreeMap<u64, PathBuf>) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.period.0 < e.period.1)
        .filter(|e| reports.range(e.period.0..e.period.1).next().is_none())
        .map(|e| {
            format!(
                "{} ({} s from {})",
                crate::spec::job_name(&e.spec),
                e.period.1 - e.period.0,
                e.period.0
            )
        })
        .collect()
}

/// Writes `<out_dir>/<stem>.tar.gz` (atomically) with the result file and the reports found (see
/// [`report_dirs`]) for every second of the merged periods of the entries whose bench writes
/// per-second reports (`reported`, by kind: those that run with the host set up). Such an entry
/// none of whose seconds has a report is a usage error unless `allow_missing`.
pub fn pack(
    result: &Path,
    dir: &Path,
    out_dir: &Path,
    allow_missing: bool,
    reported: &dyn Fn(&str) -> bool,
) -> Result<PackStats> {
    let stem = stem(result);
    let tarball = out_dir.join(format!("{}.tar.gz", stem));
    super::save::check_dir_writable(&tarball, "tarball")?;
    let Some(bytes) = read_bytes(result)? else {
        crate::usage_bail!(
            "{}: result file doesn't exist; pack needs an existing --result file",
            result.display()
        );
    };
    let mut entries = parse_entries(result, &bytes)?;
    drop(bytes);
    entries.retain(|e| reported(&e.spec.kind));
    let base = result
        .file_name()
        .ok_or_else(|| UsageError::new(format!("{}: not a file name", result.display())))?;
    let dirs = report_dirs(result, dir);
    let reports = list_reports(&dirs);
    let bare = entries_without_reports(&entries, &reports);
    if !bare.is_empty() {
        let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let msg = format!(
            "pack: no per-second reports for {} in {}",
            bare.join(", "),
            looked.join(" or ")
        );
        if !allow_missing {
            crate::usage_bail!(
                "{}; give the run's --dir, or --allow-missing to pack without them",
                msg
            );
        }
        log::warn!("{}", msg);
    }
    let periods = merged_periods(&entries);
    for (a, b) in &periods {
        log::info!("pack: period {} - {} ({} secs)", a, b, b - a);
    }
    let (mut packed, mut missing) = (0u64, 0u64);

    write_atomic(&tarball, |w| {
        let enc = flate2::write::GzEncoder::new(w, flate2::Compression::default());
        let mut tar = tar::Builder::new(enc);
        tar.mode(tar::HeaderMode::Deterministic);
        tar.append_path_with_name(result, base)?;
        for &(a, b) in &periods {
            let mut here = 0;
            for (t, src) in reports.range(a..b) {
                tar.append_path_with_name(src, format!("{}-report.d/{}.json", stem, t))?;
                here += 1;
            }
            packed += here;
            missing += (b - a) - here;
        }
        tar.into_inner()?.finish()?;
        Ok(())
    })
    .with_context(|| format!("packing {}", tarball.display()))?;

    log::info!(
        "pack: wrote {} ({} reports packed, {} missing)",
        tarball.display(),
        packed,
        missing
    );
    Ok(PackStats {
        tarball,
        packed,
        missing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stem_strips_gz_then_json() {
        assert_eq!(stem(Path::new("/a/b/x.json.gz")), "x");
        assert_eq!(stem(Path::new("x.json")), "x");
        assert_eq!(stem(Path::new("x.gz")), "x");
        assert_eq!(stem(Path::new("x.txt")), "x.txt");
        assert_eq!(
            default_reports_dir(Path::new("/a/x.json.gz")),
            Path::new("/a/x-report.d")
        );
    }

    #[test]
    fn periods_merge_when_overlapping_or_touching() {
        let e = |a: u64, b: u64| -> Entry {
            let mut e = Entry::placeholder(crate::spec::JobSpec {
                kind: "k".into(),
                id: None,
                passive: None,
                props: vec![Default::default()],
            });
            e.period = (a, b);
            e
        };
        let entries = [
            e(30, 40),
            e(10, 20),
            e(20, 25),
            e(5, 5),
            e(35, 50),
            e(60, 61),
        ];
        assert_eq!(merged_periods(&entries), vec![(10, 25), (30, 50), (60, 61)]);
    }
}
