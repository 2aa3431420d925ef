//! `db`: a database of io.cost results laid out as the iocost-benchmark community lays out
//! theirs — `DB/<major.minor>/<device model>/result-<md5>.json.gz`, each with a
//! `result-<md5>.json.metadata` beside it — filled by `db import` (`import.rs`) and built by
//! `db build` into per-model merges, hwdb inputs, pictures and the final hwdb file
//! (`pipeline.rs` from end to end, `build.rs` one model folder and the picks, `out.rs` the output
//! folder swapped in whole). This file holds the layout: which folder a result goes to and what a
//! database folder may hold.

pub mod build;
pub mod import;
pub mod out;
pub mod pipeline;

use crate::error::UsageError;
use std::path::{Path, PathBuf};

/// The version folder of a bench version string (`2.2.4-g6d013b1 x86_64-…` → `2.2`).
pub fn version_dir(bench_version: &str) -> Option<String> {
    crate::bench::merge::major_minor(bench_version).map(|(a, b)| format!("{}.{}", a, b))
}

/// Whether results of a version folder give hwdb solutions: upstream's from 2.2 on (2.0 and
/// 2.1 predate them), and this tool's own (its versions start at 0).
pub fn has_hwdb(version: &str) -> bool {
    match crate::bench::merge::major_minor(version) {
        Some((0, _)) => true,
        Some(v) => v >= (2, 2),
        None => false,
    }
}

/// The model folder of a device model: its words joined with `_`, as the community names them
/// (`Samsung SSD 970 PRO 512GB` → `Samsung_SSD_970_PRO_512GB`). A name that can't be one
/// folder (empty, a `/`, a leading dot, a control character) is refused with why.
pub fn model_dir(model: &str) -> Result<String, String> {
    let name = model.split_whitespace().collect::<Vec<_>>().join("_");
    if name.is_empty() {
        return Err("its device model is empty (sysinfo.sysreqs_report.scr_dev_model)".into());
    }
    if name.contains('/') || name.starts_with('.') || name.chars().any(char::is_control) {
        return Err(format!(
            "its device model {:?} can't name a folder (a `/`, a leading dot or a control \
             character)",
            model
        ));
    }
    Ok(name)
}

/// Whether a folder name is a version folder (`2.2`).
fn is_version_name(name: &str) -> bool {
    let mut parts = name.split('.');
    let num =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    num(parts.next()) && num(parts.next()) && parts.next().is_none()
}

/// The version folders of a database, sorted.
pub fn versions(db: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(db)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type()?.is_dir() && is_version_name(&name) {
            out.push(name);
        }
    }
    out.sort_by_key(|v| crate::bench::merge::major_minor(v));
    Ok(out)
}

/// Checks that `db` is a database folder, or one to start (missing, when `create`, or empty),
/// and returns where it is (a symlink followed only when trusted). A folder holding other
/// things and no version folder is refused; one holding `database/` (the community's
/// repository) says so.
pub fn open(db: &Path, create: bool) -> anyhow::Result<PathBuf> {
    let not_db = |why: String| -> anyhow::Error {
        UsageError::new(format!(
            "{}: {}; give the database folder (it holds version folders such as 2.2)",
            db.display(),
            why
        ))
        .into()
    };
    if create {
        crate::util::create::ensure_dir(db, "database folder")?;
    }
    let dir = crate::util::create::resolve_trusted(db)?;
    let entries: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(not_db("no such folder".into()))
        }
        Err(e) => return Err(not_db(format!("can't be read ({})", e))),
    };
    if entries.is_empty()
        || !versions(&dir)
            .map_err(|e| not_db(e.to_string()))?
            .is_empty()
    {
        return Ok(dir);
    }
    if dir.join("database").is_dir() {
        return Err(not_db(format!(
            "is not a database, but holds one: give {}",
            db.join("database").display()
        )));
    }
    Err(not_db(format!(
        "is not a database (it holds {} other entr{} and no version folder)",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_become_one_folder_or_are_refused() {
        assert_eq!(
            model_dir("Samsung SSD 970 PRO 512GB").unwrap(),
            "Samsung_SSD_970_PRO_512GB"
        );
        assert_eq!(
            model_dir(" WD_BLACK  SN850X 1000GB ").unwrap(),
            "WD_BLACK_SN850X_1000GB"
        );
        assert_eq!(
            model_dir("Patriot M.2 P300 1024GB").unwrap(),
            "Patriot_M.2_P300_1024GB"
        );
        for bad in ["", "  ", "../etc", "a/b", ".hidden", "x\u{1b}y"] {
            assert!(model_dir(bad).is_err(), "{:?} accepted", bad);
        }
    }

    #[test]
    fn versions_with_hwdb() {
        assert_eq!(
            version_dir("2.2.4-g6d013b1 x86_64-unknown-linux-gnu").as_deref(),
            Some("2.2")
        );
        assert!(has_hwdb("2.2") && has_hwdb("2.3") && has_hwdb("3.0") && has_hwdb("0.1"));
        assert!(!has_hwdb("2.1") && !has_hwdb("2.0") && !has_hwdb("1.9") && !has_hwdb("x"));
        assert!(is_version_name("2.2") && is_version_name("10.12"));
        assert!(!is_version_name("2") && !is_version_name("2.2.1") && !is_version_name("a.b"));
    }
}
