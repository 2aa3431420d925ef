//! The result file: a JSON array of entries `{spec, period, sysinfo, record, result}` in
//! upstream's layout, gzip-compressed when the name ends in `.gz`.
//!
//! `sysinfo`, `record` and `result` are kept as raw JSON so entries we don't touch are written
//! back byte-for-byte equivalent (including fields we don't model), and so loading a large file
//! doesn't build a tree of every value; benches parse them into their own types on demand.

pub mod lock;
pub mod matching;
pub mod pack;
pub mod read;
pub mod save;
pub mod sysinfo;

pub use save::{save_entries, write_atomic};

use crate::error::UsageError;
use crate::spec::JobSpec;
use anyhow::{Context, Result};
use matching::TouchOrder;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub spec: JobSpec,
    pub period: (u64, u64),
    pub sysinfo: Box<RawValue>,
    pub record: Option<Box<RawValue>>,
    pub result: Option<Box<RawValue>>,
    /// Our addition: `record` is a checkpoint of a run that hasn't finished (kept only while
    /// true, so finished entries have exactly upstream's keys).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub incomplete: bool,
}

pub fn is_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// Reads the raw bytes of a result file, decompressing `.gz` (see [`read`]). `Ok(None)` if it
/// doesn't exist.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    let Some(file) = read::open_regular(path, "result file")? else {
        return Ok(None);
    };
    if !is_gz(path) {
        return read::read_limited(file, path, "result file", read::MAX_RESULT_BYTES).map(Some);
    }
    let size = read::checked_size(&file, path, "result file", read::MAX_RESULT_BYTES)?;
    read::gunzip(path, file, size, read::MAX_RESULT_BYTES).map(Some)
}

/// Parses result-file bytes into entries; a malformed file is a usage error naming the file.
/// Bytes after the array are ignored with a warning.
pub fn parse_entries(path: &Path, bytes: &[u8]) -> Result<Vec<Entry>> {
    let bad = |e: &dyn std::fmt::Display| -> anyhow::Error {
        UsageError::new(format!(
            "{}: not a resctl-bench result file ({}); expected a JSON array of entries",
            path.display(),
            e
        ))
        .into()
    };
    let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<Vec<Entry>>();
    let entries = match stream.next() {
        Some(Ok(entries)) => entries,
        Some(Err(e)) => return Err(bad(&e)),
        None => return Err(bad(&"the file is empty")),
    };
    read::warn_trailing(path, bytes, stream.byte_offset(), "JSON array");
    Ok(entries)
}

/// Loads all entries of a result file; a missing file has no entries.
pub fn load_entries(path: &Path) -> Result<Vec<Entry>> {
    match read_bytes(path)? {
        Some(bytes) => parse_entries(path, &bytes),
        None => Ok(Vec::new()),
    }
}

impl Entry {
    /// A fresh entry for a spec that matched nothing in the file; it is saved once it has a
    /// record or a result.
    pub fn placeholder(spec: JobSpec) -> Self {
        Self {
            spec,
            period: (0, 0),
            sysinfo: empty_object(),
            record: None,
            result: None,
            incomplete: false,
        }
    }
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// Serializes a value for storage in an entry field (`sysinfo`, `record`, `result`),
/// pretty-printed and indented to the depth those fields have in the file so that the saved
/// file reads like one consistently pretty-printed document.
pub fn to_raw<T: Serialize + ?Sized>(value: &T) -> Result<Box<RawValue>> {
    let pretty = serde_json::to_string_pretty(value).context("serializing entry data")?;
    // JSON strings can't contain raw newlines, so every newline is structural.
    let indented = pretty.replace('\n', "\n    ");
    RawValue::from_string(indented).context("serializing entry data")
}

/// A loaded result file with the bookkeeping of one invocation: which entries were completed in
/// what order, and which were created by it.
#[derive(Debug)]
pub struct ResultFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    nr_loaded: usize,
    touched: TouchOrder,
    reorder: bool,
}

impl ResultFile {
    /// Loads `path`; a missing file is an empty result file.
    pub fn load(path: &Path) -> Result<Self> {
        let entries = load_entries(path)?;
        save::remove_stale_temps(path);
        let nr = entries.len();
        Ok(Self {
            path: path.to_path_buf(),
            entries,
            nr_loaded: nr,
            touched: TouchOrder::new(nr),
            reorder: true,
        })
    }

    /// Whether saves put completed entries first (`run`, the default) or keep the file order
    /// (`study`, `solve`).
    pub fn set_reorder(&mut self, reorder: bool) {
        self.reorder = reorder;
    }

    /// Links each spec to an existing entry (see `matching::link_specs`), appending a placeholder
    /// for every spec that matched none. Returns the entry index of each spec.
    pub fn link(&mut self, specs: &[JobSpec], incremental: impl Fn(&str) -> bool) -> Vec<usize> {
        let links = {
            let specs_in_file: Vec<&JobSpec> = self.entries.iter().map(|e| &e.spec).collect();
            matching::link_specs(&specs_in_file, specs, incremental)
        };
        links
            .into_iter()
            .zip(specs)
            .map(|(link, spec)| match link {
                Some(i) => i,
                None => self.push(Entry::placeholder(spec.clone())),
            })
            .collect()
    }

    /// Appends an entry, returning its index.
    pub fn push(&mut self, entry: Entry) -> usize {
        self.entries.push(entry);
        self.touched.push()
    }

    /// Marks an entry completed (or checkpointed) now.
    pub fn touch(&mut self, idx: usize) {
        self.touched.touch(idx);
    }

    pub fn is_touched(&self, idx: usize) -> bool {
        self.touched.is_touched(idx)
    }

    /// Entries in the order a save writes them; placeholders that never got data are left out.
    pub fn save_order(&self) -> Vec<usize> {
        let order = if self.reorder {
            self.touched.order(self.entries.len())
        } else {
            (0..self.entries.len()).collect()
        };
        order
            .into_iter()
            .filter(|&i| {
                let e = &self.entries[i];
                i < self.nr_loaded || e.record.is_some() || e.result.is_some()
            })
            .collect()
    }

    /// Saves atomically (see `save`).
    pub fn save(&self) -> Result<()> {
        save_entries(
            &self.path,
            self.save_order().into_iter().map(|i| &self.entries[i]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_raw_indents_nested_lines() {
        let raw = to_raw(&serde_json::json!({"a": [1]})).unwrap();
        assert_eq!(raw.get(), "{\n      \"a\": [\n        1\n      ]\n    }");
    }

    #[test]
    fn placeholders_are_saved_only_with_data_and_touched_entries_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let spec = |kind: &str| JobSpec {
            kind: kind.into(),
            id: None,
            passive: None,
            props: vec![Default::default()],
        };
        let mut f = ResultFile::load(&path).unwrap();
        assert!(f.entries.is_empty());
        let idx = f.link(&[spec("a"), spec("b")], |_| false);
        assert_eq!(idx, vec![0, 1]);
        f.entries[1].record = Some(to_raw(&1).unwrap());
        f.touch(1);
        f.save().unwrap();
        let mut f = ResultFile::load(&path).unwrap();
        assert_eq!(f.entries.len(), 1);
        let idx = f.link(&[spec("c"), spec("b")], |_| false);
        assert_eq!(idx, vec![1, 0]);
        f.entries[1].result = Some(to_raw(&true).unwrap());
        f.touch(1);
        f.save().unwrap();
        let kinds: Vec<String> = load_entries(&path)
            .unwrap()
            .into_iter()
            .map(|e| e.spec.kind)
            .collect();
        assert_eq!(kinds, vec!["c", "b"]);
    }
}
