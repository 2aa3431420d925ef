//! One entry of the result file, and reading a file's entries.

use super::read;
use crate::error::UsageError;
use crate::spec::JobSpec;
use crate::util::create::FileId;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone)]
pub struct Entry {
    pub spec: JobSpec,
    pub period: (u64, u64),
    pub sysinfo: Box<RawValue>,
    pub record: Option<Box<RawValue>>,
    pub result: Option<Box<RawValue>>,
    /// Our addition: `record` is a checkpoint of a run that hasn't finished (kept only while
    /// true, so finished entries have exactly upstream's keys).
    pub incomplete: bool,
    /// Keys this version doesn't know, kept as they were so that a save doesn't drop what a
    /// newer (or older) writer stored.
    pub unknown: Unknown,
}

/// An entry's keys this version doesn't read: at the top level and inside `spec`.
#[derive(Debug, Clone, Default)]
pub struct Unknown {
    top: BTreeMap<String, Box<RawValue>>,
    spec: serde_json::Map<String, serde_json::Value>,
}

const SPEC_KEYS: [&str; 4] = ["kind", "id", "passive", "props"];

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut m = BTreeMap::<String, Box<RawValue>>::deserialize(d)?;
        let mut take = |k: &'static str| m.remove(k);
        let field = |k: &'static str, raw: Option<Box<RawValue>>| {
            raw.ok_or_else(|| D::Error::missing_field(k))
        };
        fn parse<T: serde::de::DeserializeOwned, E: serde::de::Error>(
            k: &str,
            raw: &RawValue,
        ) -> Result<T, E> {
            serde_json::from_str(raw.get()).map_err(|e| E::custom(format!("{}: {}", k, e)))
        }
        let mut spec: serde_json::Map<String, serde_json::Value> =
            parse::<_, D::Error>("spec", &field("spec", take("spec"))?)?;
        let spec_unknown: serde_json::Map<String, serde_json::Value> = spec
            .iter()
            .filter(|(k, _)| !SPEC_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        spec.retain(|k, _| SPEC_KEYS.contains(&k.as_str()));
        let spec: JobSpec = serde_json::from_value(serde_json::Value::Object(spec))
            .map_err(|e| D::Error::custom(format!("spec: {}", e)))?;
        let period = parse::<_, D::Error>("period", &field("period", take("period"))?)?;
        let sysinfo = field("sysinfo", take("sysinfo"))?;
        let opt = |raw: Option<Box<RawValue>>| raw.filter(|r| r.get().trim() != "null");
        let record = opt(take("record"));
        let result = opt(take("result"));
        let incomplete = match take("incomplete") {
            Some(raw) => parse::<_, D::Error>("incomplete", &raw)?,
            None => false,
        };
        Ok(Entry {
            spec,
            period,
            sysinfo,
            record,
            result,
            incomplete,
            unknown: Unknown {
                top: m,
                spec: spec_unknown,
            },
        })
    }
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let mut m = s.serialize_map(None)?;
        if self.unknown.spec.is_empty() {
            m.serialize_entry("spec", &self.spec)?;
        } else {
            let mut spec = match serde_json::to_value(&self.spec).map_err(S::Error::custom)? {
                serde_json::Value::Object(o) => o,
                _ => return Err(S::Error::custom("a spec that isn't an object")),
            };
            spec.extend(self.unknown.spec.clone());
            m.serialize_entry("spec", &spec)?;
        }
        m.serialize_entry("period", &self.period)?;
        m.serialize_entry("sysinfo", &self.sysinfo)?;
        m.serialize_entry("record", &self.record)?;
        m.serialize_entry("result", &self.result)?;
        if self.incomplete {
            m.serialize_entry("incomplete", &true)?;
        }
        for (k, v) in &self.unknown.top {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

pub fn is_gz(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// Reads the raw bytes of a result file, decompressing `.gz` (see [`read`]). `Ok(None)` if it
/// doesn't exist.
pub fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>> {
    Ok(read_bytes_id(path)?.map(|(b, _)| b))
}

/// [`read_bytes`] with the identity of the file read (for a save to check that it replaces the
/// same file).
pub fn read_bytes_id(path: &Path) -> Result<Option<(Vec<u8>, FileId)>> {
    let Some(file) = read::open_regular(path, "result file")? else {
        return Ok(None);
    };
    let id = FileId::of(
        &file
            .metadata()
            .with_context(|| format!("reading the metadata of {}", path.display()))?,
    );
    let bytes = if !is_gz(path) {
        read::read_limited(file, path, "result file", read::MAX_RESULT_BYTES)?
    } else {
        let size = read::checked_size(&file, path, "result file", read::MAX_RESULT_BYTES)?;
        read::gunzip(path, file, size, read::MAX_RESULT_BYTES)?
    };
    Ok(Some((bytes, id)))
}

/// Parses result-file bytes into entries; a malformed file is a usage error naming the file.
/// Arrays one after another (files joined with `cat`, plain or gzip) are all read, with a
/// warning, so the next save keeps every entry; bytes after the last array are ignored with a
/// warning.
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
    let mut entries = match stream.next() {
        Some(Ok(entries)) => entries,
        Some(Err(e)) => return Err(bad(&e)),
        None => return Err(bad(&"the file is empty")),
    };
    let mut arrays = 1;
    let mut end = stream.byte_offset();
    while let Some(Ok(more)) = stream.next() {
        entries.extend(more);
        arrays += 1;
        end = stream.byte_offset();
    }
    if arrays > 1 {
        log::warn!(
            "{}: holds {} JSON arrays one after another (files joined together?); reading the \
             entries of all {} ({} in all), which a save writes as one",
            path.display(),
            arrays,
            arrays,
            entries.len()
        );
    }
    read::warn_trailing(path, bytes, end, "JSON array");
    Ok(entries)
}

/// Loads all entries of a result file; a missing file has no entries.
pub fn load_entries(path: &Path) -> Result<Vec<Entry>> {
    match read_bytes(path)? {
        Some(bytes) => parse_entries(path, &bytes),
        None => Ok(Vec::new()),
    }
}

/// Loads all entries of a result file that must exist: `<path>: no such result file` (a usage
/// error) when it doesn't — what the commands that only read a result file want.
pub fn load_existing(path: &Path) -> Result<Vec<Entry>> {
    let Some(bytes) = read_bytes(path)? else {
        crate::usage_bail!("{}: no such result file", path.display());
    };
    parse_entries(path, &bytes)
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
            unknown: Unknown::default(),
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
