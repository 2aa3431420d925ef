//! `db import`: one result file checked as the community checks a submission — a finished
//! iocost-tune result, of a version with hwdb solutions, that met its system requirements and
//! that `merge` accepts — and filed under `<major.minor>/<model>/result-<md5>.json.gz` (the md5
//! of the file's bytes as given; a plain file is stored gzipped under its own md5), with a
//! metadata file saying where it came from. Nothing is ever replaced: a file already filed is
//! reported, and of two imports racing for one name the second finds it there.

use crate::result::read;
use anyhow::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What became of one file.
#[derive(Debug)]
pub enum Outcome {
    /// Filed at this path, relative to the database.
    Imported(PathBuf),
    /// The same bytes were already filed there.
    AlreadyThere(PathBuf),
    /// Not filed, and why (one line).
    Refused(String),
}

/// A source's bytes as read and what they hold.
struct Source {
    raw: Vec<u8>,
    json: Vec<u8>,
    gzipped: bool,
}

fn read_source(src: &Path) -> Result<Source, String> {
    let line = |e: anyhow::Error| crate::error::one_line(&format!("{:#}", e));
    let file = match read::open_regular(src, "result file") {
        Ok(Some(f)) => f,
        Ok(None) => return Err("no such file".into()),
        Err(e) => return Err(line(e)),
    };
    let raw = read::read_limited(file, src, "result file", read::MAX_RESULT_BYTES).map_err(line)?;
    // Told by its bytes, not its name: community files are gzip, ours may be either.
    let gzipped = raw.starts_with(&[0x1f, 0x8b]);
    let json = if gzipped {
        let total = raw.len() as u64;
        read::gunzip(
            src,
            std::io::Cursor::new(&raw),
            total,
            read::MAX_RESULT_BYTES,
        )
        .map_err(line)?
    } else {
        raw.clone()
    };
    Ok(Source { raw, json, gzipped })
}

/// Where a checked source goes: `(version folder, model folder, fwrev, bench version)`.
type Filing = (String, String, String, String);

/// The community's checks, in the order a user fixes them.
fn check(src: &Path, s: &Source, now: u64) -> Result<Filing, String> {
    let entries = crate::result::parse_entries(src, &s.json)
        .map_err(|e| crate::error::one_line(&format!("{:#}", e)))?;
    let Some(tune) = entries
        .iter()
        .find(|e| e.spec.kind == "iocost-tune" && e.result.is_some())
    else {
        let kinds: Vec<&str> = entries.iter().map(|e| e.spec.kind.as_str()).collect();
        return Err(format!(
            "no finished iocost-tune result (it holds {}); the database takes results that \
             ran iocost-params, iocost-qos and iocost-tune",
            if kinds.is_empty() {
                "no entry".to_string()
            } else {
                kinds.join(", ")
            }
        ));
    };
    let f = crate::bench::merge::facts(tune);
    let version = super::version_dir(&f.bench_version)
        .ok_or_else(|| format!("its bench version {:?} can't be read", f.bench_version))?;
    if !super::has_hwdb(&version) {
        return Err(format!(
            "made by resctl-bench {}: results before 2.2 give no hwdb solutions; the database \
             takes 2.2 and later",
            f.bench_version.split_whitespace().next().unwrap_or("")
        ));
    }
    if !f.missed.is_empty() {
        return Err(format!(
            "the run missed system requirements ({}); merge refuses such results",
            f.missed.join(", ")
        ));
    }
    let model = super::model_dir(&f.model)?;
    let name = src.display().to_string();
    crate::bench::merge::merge(&[(name, entries)], &Default::default(), now)
        .map_err(|e| crate::error::one_line(&format!("merge refuses it: {:#}", e)))?;
    Ok((version, model, f.fwrev, f.bench_version))
}

/// The hex md5 of some bytes.
fn md5_hex(bytes: &[u8]) -> String {
    use md5::Digest;
    md5::Md5::digest(bytes)
        .iter()
        .map(|b| format!("{:02x}", b))
        .collect()
}

/// What a metadata file holds: the community's `version` and `model_name`, and ours.
fn metadata(src: &Path, filing: &Filing) -> String {
    let source = std::path::absolute(src).unwrap_or_else(|_| src.to_path_buf());
    let v = serde_json::json!({
        "version": filing.0,
        "model_name": filing.1,
        "fwrev": filing.2,
        "bench_version": filing.3,
        "source": source.display().to_string(),
    });
    format!("{}\n", v)
}

/// Files `src` in the database at `db` (an opened one, see `super::open`).
pub fn import(db: &Path, src: &Path, now: u64) -> Outcome {
    match import_checked(db, src, now) {
        Ok(o) => o,
        Err(why) => Outcome::Refused(why),
    }
}

fn import_checked(db: &Path, src: &Path, now: u64) -> Result<Outcome, String> {
    let s = read_source(src)?;
    let filing = check(src, &s, now)?;
    let md5 = md5_hex(&s.raw);
    let rel = Path::new(&filing.0).join(&filing.1);
    let name = format!("result-{}.json.gz", md5);
    let line = |e: anyhow::Error| crate::error::one_line(&format!("{:#}", e));
    let dir = crate::util::create::ensure_dir(&db.join(&rel), "model folder").map_err(line)?;
    let meta_path = dir.join(format!("result-{}.json.metadata", md5));
    let target = dir.join(&name);
    let write_meta = || {
        crate::util::atomic::write_atomic(&meta_path, |w| {
            w.write_all(metadata(src, &filing).as_bytes())
        })
        .map_err(line)
    };
    if std::fs::symlink_metadata(&target).is_ok() {
        // A metadata file lost to a kill between the two writes is made again.
        if std::fs::symlink_metadata(&meta_path).is_err() {
            write_meta()?;
        }
        return Ok(Outcome::AlreadyThere(rel.join(name)));
    }
    let bytes = if s.gzipped {
        s.raw
    } else {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(&s.json)
            .and_then(|_| enc.finish())
            .map_err(|e| format!("compressing it: {}", e))?
    };
    // Created only where nothing is: another import of the same bytes may have won the race.
    match crate::util::atomic::replace_atomic(&target, Some(None), |w| w.write_all(&bytes)) {
        Ok(_) => {}
        Err(e) if e.downcast_ref::<crate::util::atomic::Changed>().is_some() => {
            return Ok(Outcome::AlreadyThere(rel.join(name)))
        }
        Err(e) => return Err(line(e)),
    }
    write_meta()?;
    Ok(Outcome::Imported(rel.join(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_is_the_community_naming() {
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(md5_hex(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
    }
}
