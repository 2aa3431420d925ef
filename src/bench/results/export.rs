//! `summary --output-format json|yaml|csv`: each entry's headline numbers as flat records a fleet can
//! collect with `jq` or a spreadsheet. Every record starts with the entry's identity (`kind`,
//! `id`, `spec`, `start`, `end`, `complete`); the bench adds its numbers ([`crate::bench::Bench::
//! headline`]), one record per entry, or one per configuration for `iocost-qos`. The keys are
//! documented in `doc results` and only ever added to; `export_version` changes if one changes
//! meaning or goes away.

use crate::bench::contract::headline::Row;
use crate::format::{has_result, select};
use crate::result::Entry;
use crate::spec::JobSpec;
use anyhow::{Context, Result};
use serde_json::{json, Value};

/// The version of the record layout.
pub const EXPORT_VERSION: u32 = 1;

/// What `summary` prints: the report, or the records as json, yaml or csv.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
    Yaml,
    Csv,
}

/// The entry's identity, the first keys of each of its records.
fn identity(entry: &Entry) -> Row {
    vec![
        ("kind", json!(entry.spec.kind)),
        ("id", json!(entry.spec.id)),
        ("spec", json!(entry.spec.canonical())),
        ("start", json!(entry.period.0)),
        ("end", json!(entry.period.1)),
        ("complete", json!(has_result(entry) && !entry.incomplete)),
    ]
}

/// The records of the entries `summary` would print for `specs`.
pub fn records(entries: &[Entry], specs: &[JobSpec]) -> Result<Vec<Row>> {
    let mut out = Vec::new();
    for (entry, _) in select(entries, specs)? {
        let rows = match (has_result(entry), crate::bench::find(&entry.spec.kind)) {
            (true, Some(bench)) => bench.headline(entry)?,
            _ => Vec::new(),
        };
        if rows.is_empty() {
            out.push(identity(entry));
        }
        for row in rows {
            let mut r = identity(entry);
            r.extend(row);
            out.push(r);
        }
    }
    Ok(out)
}

/// A record as a JSON object with its keys in their order.
struct Ordered<'a>(&'a Row);

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(serde::Serialize)]
struct Document<'a> {
    export_version: u32,
    tool_version: &'static str,
    records: Vec<Ordered<'a>>,
}

/// `{"export_version": 1, "tool_version": …, "records": [{…}, …]}`, pretty-printed.
pub fn to_json(records: &[Row]) -> String {
    let doc = Document {
        export_version: EXPORT_VERSION,
        tool_version: env!("CARGO_PKG_VERSION"),
        records: records.iter().map(Ordered).collect(),
    };
    let mut text = serde_json::to_string_pretty(&doc).expect("JSON values serialize");
    text.push('\n');
    text
}

/// The JSON document's content as YAML (the same keys, in the same order).
pub fn to_yaml(records: &[Row]) -> Result<String> {
    let doc = Document {
        export_version: EXPORT_VERSION,
        tool_version: env!("CARGO_PKG_VERSION"),
        records: records.iter().map(Ordered).collect(),
    };
    yaml_serde::to_string(&doc).context("writing the records as YAML")
}

/// One CSV field: numbers and booleans as they are, `null` empty, strings quoted when needed.
fn csv_field(v: &Value) -> String {
    let s = match v {
        Value::Null => return String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// A header of every key in order of first appearance, then a line per record (RFC 4180).
/// Lists and objects (an io job's `per_worker`) are left out: a cell holds one value.
pub fn to_csv(records: &[Row]) -> String {
    let mut keys: Vec<&str> = Vec::new();
    for r in records {
        for (k, v) in r {
            if !keys.contains(k) && !v.is_array() && !v.is_object() {
                keys.push(k);
            }
        }
    }
    let mut out = keys.join(",");
    out.push_str("\r\n");
    for r in records {
        let line: Vec<String> = keys
            .iter()
            .map(|k| {
                r.iter()
                    .find(|(rk, _)| rk == k)
                    .map_or(String::new(), |(_, v)| csv_field(v))
            })
            .collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

/// Adds `records` to the CSV file `path`: with the header when the file is new or empty,
/// else under its header, which must be this one (a table keeps its columns; a run whose
/// columns differ goes to another file).
pub fn append_csv(path: &std::path::Path, records: &[Row]) -> Result<()> {
    use std::io::{BufRead, Write};
    if records.is_empty() {
        crate::usage_bail!("summary: no records to add to {}", path.display());
    }
    let text = to_csv(records);
    let (header, body) = text.split_once("\r\n").unwrap_or((&text, ""));
    crate::util::atomic::check_dir_writable(path, "CSV file")?;
    let first = match crate::util::fs::open_regular(path, "CSV file")? {
        Some(f) => {
            let mut line = String::new();
            std::io::BufReader::new(f)
                .read_line(&mut line)
                .with_context(|| format!("reading {}", path.display()))?;
            line.trim_end_matches(['\r', '\n']).to_string()
        }
        None => String::new(),
    };
    if !first.is_empty() && first != header {
        crate::usage_bail!(
            "{}: its columns are {}, these records' are {} (a CSV file keeps one set of \
             columns: add these to another file)",
            path.display(),
            first,
            header
        );
    }
    let add = if first.is_empty() {
        text.as_str()
    } else {
        body
    };
    crate::util::create::open_append(path)?
        .write_all(add.as_bytes())
        .with_context(|| format!("appending to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::contract::headline::num;

    #[test]
    fn csv_quotes_only_what_needs_it_and_fills_missing_keys() {
        let recs = vec![
            vec![("kind", json!("storage")), ("mof", json!(1.5))],
            vec![
                ("kind", json!("iocost-qos")),
                ("qos", json!("rpct=95, \"x\"")),
                ("mof", Value::Null),
            ],
        ];
        assert_eq!(
            to_csv(&recs),
            "kind,mof,qos\r\nstorage,1.5,\r\niocost-qos,,\"rpct=95, \"\"x\"\"\"\r\n"
        );
        let j: Value = serde_json::from_str(&to_json(&recs)).unwrap();
        assert_eq!(j["export_version"], 1);
        assert_eq!(j["records"][0]["mof"], 1.5);
        assert_eq!(num(f64::NAN), Value::Null);
    }

    #[test]
    fn yaml_holds_the_json_document_and_csv_leaves_lists_out() {
        let recs = vec![vec![
            ("kind", json!("io")),
            ("job", json!("a: b")),
            ("read_iops", json!(1500.5)),
            ("write_clat_p99_us", Value::Null),
            (
                "per_worker",
                json!([{"worker": 0, "read_iops": 700.25}, {"worker": 1, "read_iops": 800.25}]),
            ),
        ]];
        let yaml = to_yaml(&recs).unwrap();
        assert!(yaml.starts_with("export_version: 1\n"), "{}", yaml);
        let back: Value = yaml_serde::from_str(&yaml).unwrap();
        let json: Value = serde_json::from_str(&to_json(&recs)).unwrap();
        assert_eq!(back, json, "{}", yaml);
        assert_eq!(
            to_csv(&recs),
            "kind,job,read_iops,write_clat_p99_us\r\nio,a: b,1500.5,\r\n"
        );
    }

    #[test]
    fn csv_appends_keep_one_header_and_refuse_other_columns() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("sweep.csv");
        let run = |mix: u32| vec![vec![("kind", json!("io")), ("rwmix", json!(mix))]];
        for mix in [100, 50, 0] {
            append_csv(&f, &run(mix)).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "kind,rwmix\r\nio,100\r\nio,50\r\nio,0\r\n"
        );
        // An empty file gets the header too.
        let g = d.path().join("empty.csv");
        std::fs::write(&g, "").unwrap();
        append_csv(&g, &run(1)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&g).unwrap(),
            "kind,rwmix\r\nio,1\r\n"
        );
        let other = vec![vec![("kind", json!("io")), ("qd", json!(4))]];
        let e = append_csv(&f, &other).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        assert!(
            e.to_string().contains("its columns are kind,rwmix"),
            "{}",
            e
        );
        assert_eq!(std::fs::read_to_string(&f).unwrap().lines().count(), 4);
    }
}
