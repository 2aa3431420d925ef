//! Atomic saving of the result file.
//!
//! The whole entry list is serialized (pretty-printed, gzip when the name ends in `.gz`) into a
//! temporary file next to the target, which is flushed to disk and then renamed over the target;
//! finally the directory is synced so the rename itself is durable. A crash or kill at any point
//! leaves either the complete old file or the complete new one, never a torn mix.

use super::entry::{is_gz, Entry};
pub use crate::util::atomic::{
    check_dir_writable, remove_stale_temps, resolve_symlinks, temp_path, write_atomic,
};
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

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

/// Writes `entries` to `path` atomically (see the module doc).
pub fn save_entries<'a>(path: &Path, entries: impl IntoIterator<Item = &'a Entry>) -> Result<()> {
    let json = serialize_entries(entries)?;
    let gz = is_gz(path);
    write_atomic(path, |w| {
        if gz {
            // Level 1: a third of the default's time on a 12 MB result, a quarter larger;
            // saves come at every checkpoint and after every solve.
            let mut enc = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
            enc.write_all(&json)?;
            enc.finish()?;
        } else {
            w.write_all(&json)?;
        }
        Ok(())
    })
    .with_context(|| format!("saving result file {}", path.display()))
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
        assert!(!temp_path(&path).exists());
    }
}
