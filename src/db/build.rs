//! `db build`: the community's weekly pipeline over a database, in one process. Per model
//! folder of each version with hwdb solutions (2.2 on; ours): `merge` of all its results; the
//! results of its newest firmware revision (the greatest `fwrev` string) merged apart, kept
//! when that merge has at least [`FW_MIN_POINTS`] data points and a count other than the whole
//! model's; the folder's hwdb input (the merge's `hwdb` lines, then a blank line and the
//! firmware merge's `hwdb-fwrev` lines); its pictures (SVGs and a page, where upstream made a
//! PDF). Per model, the version whose merge has the most data points is picked (the newest on a
//! tie; `--pick` names another), and the picks, in model order, make `90-iocost-tune.hwdb`.
//! Folders are built in parallel; one that fails is reported and the others go on.

use crate::result::Entry;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The fewest data points a firmware revision's own merge needs to be kept.
pub const FW_MIN_POINTS: usize = 4;

/// One model folder of one version.
#[derive(Debug, Clone)]
pub struct Folder {
    pub version: String,
    pub model: String,
    pub dir: PathBuf,
}

/// What one folder's merges gave.
#[derive(Debug)]
pub struct Built {
    pub files: usize,
    pub points: usize,
    /// The newest firmware revision and its merge's data points.
    pub fw: Option<(String, usize)>,
    /// Whether that merge was kept, or why not.
    pub fw_kept: Result<(), String>,
    pub hwdb: String,
}

/// The model folders to build (sorted by version, then model) and the version folders left
/// out with why.
pub fn folders(db: &Path) -> Result<(Vec<Folder>, Vec<String>)> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for v in super::versions(db).with_context(|| format!("reading {}", db.display()))? {
        if !super::has_hwdb(&v) {
            skipped.push(format!(
                "{}: results before 2.2 give no hwdb solutions; not built",
                v
            ));
            continue;
        }
        let vdir = db.join(&v);
        let mut models: Vec<String> = std::fs::read_dir(&vdir)
            .with_context(|| format!("reading {}", vdir.display()))?
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        models.sort();
        out.extend(models.into_iter().map(|m| Folder {
            version: v.clone(),
            dir: vdir.join(&m),
            model: m,
        }));
    }
    Ok((out, skipped))
}

/// The data points of a merge: its iocost-tune entry's MOF points, outliers included (the
/// count the community's pipeline picks by).
pub fn data_points(entries: &[Entry]) -> usize {
    let Some(tune) = entries.iter().find(|e| e.spec.kind == "iocost-tune") else {
        return 0;
    };
    let Some(res) = &tune.result else { return 0 };
    let v: serde_json::Value = serde_json::from_str(res.get()).unwrap_or_default();
    let n = |k: &str| v["data"]["MOF"][k].as_array().map_or(0, |a| a.len());
    n("data") + n("outliers")
}

/// A firmware revision as part of a file name.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The hwdb lines of a merge (`format iocost-tune:hwdb` or `:hwdb-fwrev`).
fn hwdb_lines(entries: &[Entry], which: &str) -> Result<String> {
    let specs = crate::bench::parse_format_specs(&[format!("iocost-tune:{}", which)])?;
    crate::bench::results::show::format_entries(entries, &specs, true, 0)
}

/// Merges, hwdb input and pictures of one folder into `out` (the staging folder).
pub fn build_folder(f: &Folder, out: &Path, now: u64) -> Result<Built> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&f.dir)
        .with_context(|| format!("reading {}", f.dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            n.starts_with("result-") && n.ends_with(".json.gz")
        })
        .collect();
    paths.sort();
    if paths.is_empty() {
        crate::usage_bail!("no result-*.json.gz files");
    }
    let mut files = Vec::new();
    for p in &paths {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let entries = crate::result::load_existing(p).with_context(|| name.clone())?;
        files.push((name, entries));
    }
    let opts = crate::bench::merge::MergeOpts::default();
    let stem = format!("{}-{}", f.version, f.model);
    let merged = crate::bench::merge::merge(&files, &opts, now)?;
    let points = data_points(&merged);
    let merged_dir = out.join("merged-results");
    crate::result::save::save_entries(
        &merged_dir.join(format!("{}-merged-results.json.gz", stem)),
        &merged,
    )?;
    let mut hwdb = hwdb_lines(&merged, "hwdb")?;
    let (fw, fw_kept) = fw_merge(f, &files, points, now, &merged_dir, &mut hwdb)?;
    let plots = out.join("plots");
    let specs = crate::bench::parse_format_specs(&["iocost-tune".to_string()])?;
    crate::bench::results::show::plot_entries(&merged, &specs, &plots, &stem)?;
    crate::util::atomic::write_atomic(
        &out.join("hwdb-inputs")
            .join(format!("iocost-tune-{}.hwdb", stem)),
        |w| w.write_all(hwdb.as_bytes()),
    )?;
    Ok(Built {
        files: files.len(),
        points,
        fw,
        fw_kept,
        hwdb,
    })
}

type FwMerge = (Option<(String, usize)>, Result<(), String>);

/// The newest firmware revision's merge: kept (saved, its `hwdb-fwrev` lines appended to
/// `hwdb`) when it has enough data points and a count other than the whole merge's.
fn fw_merge(
    f: &Folder,
    files: &[(String, Vec<Entry>)],
    points: usize,
    now: u64,
    merged_dir: &Path,
    hwdb: &mut String,
) -> Result<FwMerge> {
    let fwrev_of = |entries: &[Entry]| entries.first().map(|e| crate::bench::merge::facts(e).fwrev);
    let Some(newest) = files.iter().filter_map(|(_, e)| fwrev_of(e)).max() else {
        return Ok((None, Err("no firmware revision".into())));
    };
    let mine: Vec<(String, Vec<Entry>)> = files
        .iter()
        .filter(|(_, e)| fwrev_of(e).as_ref() == Some(&newest))
        .cloned()
        .collect();
    let merged = match crate::bench::merge::merge(&mine, &Default::default(), now) {
        Ok(m) => m,
        Err(e) => {
            return Ok((
                None,
                Err(format!("firmware {} doesn't merge: {:#}", newest, e)),
            ))
        }
    };
    let n = data_points(&merged);
    let kept = if n < FW_MIN_POINTS {
        Err(format!(
            "firmware {}: {} data points, fewer than {}",
            newest, n, FW_MIN_POINTS
        ))
    } else if n == points {
        Err(format!(
            "firmware {}: as many data points as the whole model's",
            newest
        ))
    } else {
        let name = format!(
            "{}-{}-{}-merged-results.json.gz",
            f.version,
            f.model,
            file_safe(&newest)
        );
        crate::result::save::save_entries(&merged_dir.join(name), &merged)?;
        hwdb.push('\n');
        hwdb.push_str(&hwdb_lines(&merged, "hwdb-fwrev")?);
        Ok(())
    };
    Ok((Some((newest, n)), kept))
}

/// Per model, the version picked among its built folders and why: `pick` (model → version)
/// first, else the most data points (the newest version on a tie). `Err`: the model's pick
/// names a version that wasn't built.
pub fn pick<'a>(
    model: &str,
    built: &[(&'a Folder, usize)],
    picks: &BTreeMap<String, String>,
) -> Result<(&'a Folder, String), String> {
    if let Some(v) = picks.get(model) {
        return match built.iter().find(|(f, _)| &f.version == v) {
            Some((f, _)) => Ok((f, format!("--pick {}={}", model, v))),
            None => Err(format!(
                "--pick {}={}: that version wasn't built for it",
                model, v
            )),
        };
    }
    let most = built.iter().map(|(_, n)| *n).max().unwrap_or(0);
    // Sorted by version: the last with the most is the newest.
    let best = built
        .iter()
        .rev()
        .find(|(_, n)| *n == most)
        .map(|(f, _)| *f);
    match best {
        Some(f) if built.len() == 1 => Ok((f, "the only version".into())),
        Some(f) => Ok((f, format!("most data points ({})", most))),
        None => Err("nothing built".into()),
    }
}

/// The final hwdb file: a header saying when and from what, then each pick's hwdb input.
pub fn final_hwdb(now: u64, from: &str, picks: &[(&str, &str)]) -> String {
    let date = chrono::DateTime::from_timestamp(now as i64, 0)
        .map(|d| d.to_rfc2822())
        .unwrap_or_default();
    let mut s = format!(
        "# This file is auto-generated on {}.\n# Built by resctl-bench {} db build from {}\n#\n\
         # Match key format:\n# block:<devpath>:name:<model name>:fwrev:<firmware revision>:\n\n",
        date,
        env!("CARGO_PKG_VERSION"),
        from
    );
    for (_, text) in picks {
        s.push_str(text);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_is_the_most_points_then_the_newest_unless_named() {
        let f = |v: &str| Folder {
            version: v.into(),
            model: "M".into(),
            dir: PathBuf::new(),
        };
        let (a, b, c) = (f("2.2"), f("2.3"), f("2.4"));
        let built = [(&a, 30), (&b, 40), (&c, 40)];
        let none = BTreeMap::new();
        assert_eq!(pick("M", &built, &none).unwrap().0.version, "2.4");
        let named: BTreeMap<_, _> = [("M".to_string(), "2.2".to_string())].into();
        assert_eq!(pick("M", &built, &named).unwrap().0.version, "2.2");
        let bad: BTreeMap<_, _> = [("M".to_string(), "2.9".to_string())].into();
        assert!(pick("M", &built, &bad).is_err());
        assert_eq!(file_safe("1B2Q/EXP 7"), "1B2Q_EXP_7");
    }
}
