//! The result file: a JSON array of entries `{spec, period, sysinfo, record, result}` in
//! upstream's layout, gzip-compressed when the name ends in `.gz`.
//!
//! `sysinfo`, `record` and `result` are kept as raw JSON so entries we don't touch are written
//! back byte-for-byte equivalent (including fields we don't model), and so loading a large file
//! doesn't build a tree of every value; benches parse them into their own types on demand.

use crate::error::UsageError;
use crate::spec::JobSpec;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::io::Read;
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub spec: JobSpec,
    pub period: (u64, u64),
    pub sysinfo: Box<RawValue>,
    pub record: Option<Box<RawValue>>,
    pub result: Option<Box<RawValue>>,
}

pub fn is_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// Reads the raw bytes of a result file, decompressing `.gz`. `Ok(None)` if it doesn't exist.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let size = file.metadata().map(|m| m.len() as usize).unwrap_or(0);
    let mut buf = Vec::new();
    if is_gz(path) {
        buf.reserve(size * 8);
        flate2::read::GzDecoder::new(std::io::BufReader::new(file))
            .read_to_end(&mut buf)
            .map_err(|e| UsageError::new(format!("{}: not a valid gzip file ({})", path.display(), e)))?;
    } else {
        buf.reserve(size);
        std::io::BufReader::new(file)
            .read_to_end(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
    }
    Ok(Some(buf))
}

/// Parses result-file bytes into entries; a malformed file is a usage error naming the file.
pub fn parse_entries(path: &Path, bytes: &[u8]) -> Result<Vec<Entry>> {
    serde_json::from_slice(bytes).map_err(|e| {
        UsageError::new(format!(
            "{}: not a resctl-bench result file ({}); expected a JSON array of entries",
            path.display(),
            e
        ))
        .into()
    })
}

/// Loads all entries of a result file; a missing file has no entries.
pub fn load_entries(path: &Path) -> Result<Vec<Entry>> {
    match read_bytes(path)? {
        Some(bytes) => parse_entries(path, &bytes),
        None => Ok(Vec::new()),
    }
}
