//! Atomic saving of the result file.
//!
//! The whole entry list is serialized (pretty-printed, gzip when the name ends in `.gz`) into a
//! temporary file next to the target, which is flushed to disk and then renamed over the target;
//! finally the directory is synced so the rename itself is durable. A crash or kill at any point
//! leaves either the complete old file or the complete new one, never a torn mix.

use super::entry::{is_gz, Entry};
use super::read::MAX_RESULT_BYTES;
pub use crate::util::atomic::{
    check_dir_writable, remove_stale_temps, replace_atomic, resolve_trusted, temp_path,
    write_atomic, Changed, FileId,
};
use crate::util::create::{create_new, parent_dir};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Serializes entries as the pretty-printed JSON array stored in result files.
pub fn serialize_entries<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Result<Vec<u8>> {
    let refs: Vec<&Entry> = entries.into_iter().collect();
    let mut buf = Vec::with_capacity(
        refs.iter()
            .map(|e| {
                e.sysinfo.get().len()
                    + e.record.as_ref().map_or(0, |r| r.get().len())
                    + e.result.as_ref().map_or(0, |r| r.get().len())
                    + 256
            })
            .sum(),
    );
    serde_json::to_writer_pretty(&mut buf, &refs).context("serializing result entries")?;
    Ok(buf)
}

/// `json` without the whitespace between tokens (strings are kept as they are).
pub fn minify(json: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_str, mut esc) = (false, false);
    for &b in json {
        if in_str {
            out.push(b);
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
        } else if !b.is_ascii_whitespace() {
            in_str = b == b'"';
            out.push(b);
        }
    }
    out
}

/// What a save writes: the pretty-printed array, or, where that would be more than the reader
/// takes (`limit`, `MAX_RESULT_BYTES`), the same without whitespace. The inner `Err` holds
/// those bytes if even they are too large: the tool never writes a result file it would
/// refuse to read.
fn save_bytes<'a>(
    entries: impl IntoIterator<Item = &'a Entry>,
    limit: u64,
) -> Result<Result<Vec<u8>, Vec<u8>>> {
    let json = serialize_entries(entries)?;
    if json.len() as u64 <= limit {
        return Ok(Ok(json));
    }
    let small = minify(&json);
    drop(json);
    if small.len() as u64 <= limit {
        log::warn!(
            "the result file would be more than {} MiB pretty-printed; saving it without \
             whitespace ({} MiB)",
            limit >> 20,
            small.len() >> 20
        );
        Ok(Ok(small))
    } else {
        Ok(Err(small))
    }
}

/// Writes `json` (compressed for a `.gz` path) through `w`.
fn encode(w: &mut dyn Write, json: &[u8], gz: bool) -> std::io::Result<()> {
    if gz {
        // Level 1: a third of the default's time on a 12 MB result, a quarter larger;
        // saves come at every checkpoint and after every solve.
        let mut enc = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
        enc.write_all(json)?;
        enc.finish()?;
    } else {
        w.write_all(json)?;
    }
    Ok(())
}

/// Writes `entries` to `path` atomically (see the module doc), whatever file is there now.
pub fn save_entries<'a>(path: &Path, entries: impl IntoIterator<Item = &'a Entry>) -> Result<()> {
    let json = serialize_entries(entries)?;
    let gz = is_gz(path);
    write_atomic(path, |w| encode(w, &json, gz))
        .with_context(|| format!("saving result file {}", path.display()))
}

/// Writes `entries` to `path` atomically, replacing only the file this command read (`expect`:
/// its identity, `None` if there was none; see `util::atomic::replace_atomic`). Whatever stops
/// the save — a changed file, a full disk, a directory in the file's place, a result too large
/// to read back — the entries are kept in a file of their own ([`keep_unsaved`]) and the error
/// says where. Returns the identity of the file written.
pub fn save_entries_over<'a>(
    path: &Path,
    expect: Option<FileId>,
    entries: impl IntoIterator<Item = &'a Entry>,
) -> Result<FileId> {
    let gz = is_gz(path);
    let json = match save_bytes(entries, MAX_RESULT_BYTES)? {
        Ok(j) => j,
        Err(big) => {
            let err = anyhow::anyhow!(
                "{}: the result would be {} MiB, more than the {} MiB a result file may have \
                 to be read back",
                path.display(),
                big.len() >> 20,
                MAX_RESULT_BYTES >> 20
            );
            return Err(kept_or_lost(err, keep_unsaved(path, &big)));
        }
    };
    match replace_atomic(path, Some(expect), |w| encode(w, &json, gz)) {
        Ok(id) => Ok(id),
        Err(e) => {
            let e = e.context(format!("saving result file {}", path.display()));
            Err(kept_or_lost(e, keep_unsaved(path, &json)))
        }
    }
}

/// The error of a failed save, saying where its entries went.
fn kept_or_lost(err: anyhow::Error, kept: Result<PathBuf>) -> anyhow::Error {
    match kept {
        Ok(p) => err.context(format!(
            "this command's entries are kept in {}: resume with -r {}, or move it into place",
            p.display(),
            p.display()
        )),
        Err(k) => err.context(format!(
            "this command's entries could not be kept elsewhere either ({:#})",
            k
        )),
    }
}

/// Keeps the entries a save couldn't write (`json`, compressed if `path` is a `.gz`) in a new
/// file: `NAME.unsaved-PID` beside the result file (`STEM.unsaved-PID.gz` for a `.gz`), else
/// in the temporary directory or `/var/tmp`. Never replaces anything; returns where it went.
pub fn keep_unsaved(path: &Path, json: &[u8]) -> Result<PathBuf> {
    let gz = is_gz(path);
    let target = resolve_trusted(path).unwrap_or_else(|_| path.to_path_buf());
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "result".into());
    let base = if gz {
        name.strip_suffix(".gz").unwrap_or(&name).to_string()
    } else {
        name
    };
    let dirs = [
        parent_dir(&target).to_path_buf(),
        std::env::temp_dir(),
        PathBuf::from("/var/tmp"),
    ];
    let mut why = Vec::new();
    for dir in &dirs {
        for n in 0..8 {
            let mut fname = format!("{}.unsaved-{}", base, std::process::id());
            if n > 0 {
                fname += &format!("-{}", n);
            }
            if gz {
                fname += ".gz";
            }
            let p = dir.join(fname);
            let res = create_new(&p, 0o644).and_then(|f| {
                let mut w = std::io::BufWriter::new(f);
                encode(&mut w, json, gz)?;
                w.into_inner().map_err(|e| e.into_error())?.sync_all()
            });
            match res {
                Ok(()) => return Ok(p),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    let _ = std::fs::remove_file(&p);
                    why.push(format!("{}: {}", dir.display(), e));
                    break;
                }
            }
        }
    }
    anyhow::bail!("{}", why.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{load_entries, Entry};

    fn entry(kind: &str, record: &str) -> Entry {
        serde_json::from_str(&format!(
            r#"{{"spec":{{"kind":"{kind}","id":null,"passive":null,"props":[{{}}]}},
               "period":[1,2],"sysinfo":{{}},"record":{record},"result":null}}"#
        ))
        .unwrap()
    }

    #[test]
    fn save_roundtrips_plain_and_gz_without_leaving_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["r.json", "r.json.gz"] {
            let path = dir.path().join(name);
            let entries = vec![entry("a", r#"{"x":[1,2]}"#), entry("b", "null")];
            save_entries(&path, &entries).unwrap();
            let back = load_entries(&path).unwrap();
            assert_eq!(back.len(), 2);
            assert_eq!(back[0].spec.kind, "a");
            assert_eq!(back[0].record.as_ref().unwrap().get(), r#"{"x":[1,2]}"#);
            assert!(back[1].record.is_none());
            // Overwrite with different content.
            save_entries(&path, &entries[1..]).unwrap();
            assert_eq!(load_entries(&path).unwrap().len(), 1);
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "leftover files: {:?}", names);
    }

    #[test]
    fn stale_temps_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let dead = dir.path().join(".r.json.tmp.4000000000");
        let mine = temp_path(&path);
        let other = dir.path().join(".x.json.tmp.4000000000");
        for p in [&dead, &mine, &other] {
            std::fs::write(p, "x").unwrap();
        }
        remove_stale_temps(&path);
        assert!(!dead.exists());
        assert!(mine.exists() && other.exists());
    }

    #[test]
    fn upstream_file_is_saved_back_byte_for_byte() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/results/INTEL_SSDPEKKA256G7.json.gz");
        let orig = crate::result::read_bytes(&fixture).unwrap().unwrap();
        let entries = crate::result::parse_entries(&fixture, &orig).unwrap();
        assert_eq!(serialize_entries(&entries).unwrap(), orig);
    }

    #[test]
    fn keys_this_version_does_not_read_survive_a_save() {
        let text = r#"[{"spec":{"kind":"k","id":null,"passive":null,"props":[{}],
            "forward_results_from":[0]},"period":[1,2],"sysinfo":{},"record":null,
            "result":null,"comment":{"by":"a newer writer"},"x":[1,2]}]"#;
        let entries = crate::result::parse_entries(Path::new("r.json"), text.as_bytes()).unwrap();
        let saved: serde_json::Value =
            serde_json::from_slice(&serialize_entries(&entries).unwrap()).unwrap();
        assert_eq!(
            saved[0]["spec"]["forward_results_from"],
            serde_json::json!([0])
        );
        assert_eq!(saved[0]["comment"]["by"], "a newer writer");
        assert_eq!(saved[0]["x"], serde_json::json!([1, 2]));
        assert_eq!(saved[0]["spec"]["kind"], "k");
        assert!(saved[0]["record"].is_null());
    }

    #[test]
    fn failed_save_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, "[]").unwrap();
        let err = write_atomic(&path, |_| Err(std::io::Error::other("boom")));
        assert!(err.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[]");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "a temp file left"
        );
    }

    #[test]
    fn a_result_too_large_pretty_is_saved_without_whitespace_or_refused() {
        let entries = vec![entry("a", r#"{"x": [1, 2, "a b"]}"#)];
        let pretty = serialize_entries(&entries).unwrap();
        let small = minify(&pretty);
        assert!(small.len() < pretty.len());
        let back: serde_json::Value = serde_json::from_slice(&small).unwrap();
        assert_eq!(
            back,
            serde_json::from_slice::<serde_json::Value>(&pretty).unwrap()
        );
        assert_eq!(back[0]["record"]["x"][2], "a b");
        let save = |limit: usize| save_bytes(&entries, limit as u64).unwrap();
        assert_eq!(save(pretty.len()), Ok(pretty.clone()));
        assert_eq!(save(small.len()), Ok(small.clone()));
        assert_eq!(save(small.len() - 1), Err(small));
    }

    #[test]
    fn what_a_save_cannot_write_is_kept_beside_it_or_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["r.json", "r.json.gz"] {
            let kept = keep_unsaved(&dir.path().join(name), b"[]").unwrap();
            assert_eq!(kept.parent(), Some(dir.path()));
            assert!(load_entries(&kept).unwrap().is_empty());
            let again = keep_unsaved(&dir.path().join(name), b"[]").unwrap();
            assert_ne!(kept, again, "nothing is replaced");
        }
        // A directory that can't take files: the temporary directory does.
        let gone = dir.path().join("gone/r.json");
        let kept = keep_unsaved(&gone, b"[]").unwrap();
        assert!(!kept.starts_with(dir.path()), "{}", kept.display());
        std::fs::remove_file(kept).unwrap();
    }
}
