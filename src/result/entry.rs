//! One entry of the result file, and reading a file's entries.

use super::read;
use crate::error::UsageError;
use crate::spec::JobSpec;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::path::Path;

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
