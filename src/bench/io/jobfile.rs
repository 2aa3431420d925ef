//! `io:jobs=FILE`: several io jobs from one TOML file, as fio's job files hold several jobs.
//! `[global]` holds the properties every job starts from, each `[[job]]` table one job (its
//! `name`, `together = true` to start it with the job before it, and its own properties);
//! the properties given beside `jobs=` on the command line override the file's for every job.
//! `run --generate FILE` writes such a file from specs, with every property and its default
//! in comments.

use super::props::{job_props, IoProps, JOB_PROPS, RATE_PROPS};
use crate::spec::{JobSpec, PropDesc, PropSet};
use std::fmt::Write as _;
use std::path::Path;

/// Job files are small; a larger one is the wrong file.
const MAX_JOB_FILE_BYTES: u64 = 1 << 20;

/// One job of a file, its properties read as a spec's.
#[derive(Debug, Clone, PartialEq)]
pub struct FileJob {
    pub name: String,
    /// Starts with the job before it instead of after it.
    pub together: bool,
    pub props: IoProps,
}

/// The properties a job file may set: the job's and the rates.
fn file_props() -> impl Iterator<Item = &'static PropDesc> {
    JOB_PROPS.iter().chain(RATE_PROPS.iter())
}

/// A TOML value as the text a spec would hold; arrays and tables are no property values.
fn value_text(key: &str, v: &toml::Value) -> Result<String, String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        _ => {
            return Err(format!(
                "{}: expected a string, number or true/false, got {}",
                key,
                v.type_str()
            ))
        }
    })
}

/// Adds the properties of `table` to `set`, checking keys and values as a spec's; `name` and
/// `together` are skipped (the caller reads them).
fn add_props(table: &toml::Table, set: &mut PropSet) -> Result<(), String> {
    for (key, v) in table {
        if key == "name" || key == "together" {
            continue;
        }
        let Some(p) = file_props().find(|p| p.key == key) else {
            let keys: Vec<String> = file_props().map(|p| p.key.to_string()).collect();
            return Err(format!(
                "unknown property {:?}{} (the io properties of `doc io`, and a job's name and together)",
                key,
                crate::spec::suggest::suggestion(key, &keys)
            ));
        };
        let text = value_text(key, v)?;
        crate::spec::shape::check_value(key, &text, p.kind)?;
        set.insert(key.clone(), text);
    }
    Ok(())
}

/// The longest job name: it heads the job's report block and leads its rows in tables.
const NAME_MAX: usize = 64;

/// A job's `name` (default `jobN`) and `together`.
fn name_and_together(t: &toml::Table, n: usize) -> Result<(String, bool), String> {
    let name = match t.get("name") {
        None => format!("job{}", n),
        // A control character (a newline, an escape) would break the report's lines.
        Some(toml::Value::String(s))
            if !s.trim().is_empty()
                && s.chars().count() <= NAME_MAX
                && !s.chars().any(char::is_control) =>
        {
            s.clone()
        }
        Some(v) => {
            return Err(format!(
                "name: expected 1 to {} characters, none of them control characters, got {}",
                NAME_MAX, v
            ))
        }
    };
    let together = match t.get("together") {
        None => false,
        Some(toml::Value::Boolean(b)) => *b,
        Some(v) => return Err(format!("together: expected true or false, got {}", v)),
    };
    Ok((name, together))
}

/// The file's text read into jobs; `cli` overrides every job's properties. The message says
/// where the file is wrong.
pub fn parse(text: &str, cli: &PropSet) -> Result<Vec<FileJob>, String> {
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| format!("not a TOML job file: {}", e.message()))?;
    let mut global = PropSet::new();
    let mut jobs = &Vec::new();
    for (key, v) in &doc {
        match (key.as_str(), v) {
            ("global", toml::Value::Table(t)) => {
                add_props(t, &mut global).map_err(|e| format!("[global]: {}", e))?;
                if t.contains_key("name") || t.contains_key("together") {
                    return Err("[global]: name and together are a job's own".into());
                }
            }
            ("job", toml::Value::Array(list)) => jobs = list,
            _ => {
                return Err(format!(
                    "{:?} at the top: a job file holds a [global] table and [[job]] tables",
                    key
                ))
            }
        }
    }
    if jobs.is_empty() {
        return Err("no [[job]] table: nothing to run".into());
    }
    let mut out: Vec<FileJob> = Vec::new();
    for (i, v) in jobs.iter().enumerate() {
        let at = |e: String| format!("[[job]] {}: {}", i + 1, e);
        let toml::Value::Table(t) = v else {
            return Err(at("expected a table".into()));
        };
        let (name, together) = name_and_together(t, i + 1).map_err(at)?;
        let at = |e: String| format!("[[job]] {} ({}): {}", i + 1, name, e);
        if out.iter().any(|j| j.name == name) {
            return Err(at("another job has this name; names tell jobs apart".into()));
        }
        if together && out.is_empty() {
            return Err(at(
                "together starts a job with the one before it; the first has none".into(),
            ));
        }
        let mut set = global.clone();
        add_props(t, &mut set).map_err(at)?;
        set.extend(cli.iter().map(|(k, v)| (k.clone(), v.clone())));
        let spec = JobSpec {
            kind: "io".into(),
            id: None,
            passive: None,
            props: vec![set],
        };
        let props = job_props(&spec).map_err(|e| at(e.msg))?;
        out.push(FileJob {
            name,
            together,
            props,
        });
    }
    check_groups(&out)?;
    Ok(out)
}

/// The rules for jobs that run together: one test file (the same size) and no device-time
/// tracing, which counts every IO on the disk.
fn check_groups(jobs: &[FileJob]) -> Result<(), String> {
    for (i, j) in jobs.iter().enumerate().skip(1) {
        if !j.together {
            continue;
        }
        let first = jobs[..i].iter().rposition(|p| !p.together).unwrap_or(0);
        for p in &jobs[first..i] {
            if p.props.job.devtime || j.props.job.devtime {
                return Err(format!(
                    "{} and {} run together: devtime traces every IO on the disk, so it is for a job that runs alone",
                    p.name, j.name
                ));
            }
            if p.props.target.is_none()
                && j.props.target.is_none()
                && p.props.file_size != j.props.file_size
            {
                return Err(format!(
                    "{} and {} run together on the test file with different file-size",
                    p.name, j.name
                ));
            }
        }
    }
    Ok(())
}

/// `jobs=FILE` read; `cli` are the spec's other properties.
pub fn read(path: &Path, cli: &PropSet) -> Result<(Vec<FileJob>, String), String> {
    let what = "io job file";
    let name = path.display();
    let text = crate::util::fs::open_regular(path, what)
        .and_then(|f| match f {
            Some(f) => crate::util::fs::read_limited(f, path, what, MAX_JOB_FILE_BYTES),
            None => Err(crate::error::UsageError::new(format!("{}: no such file", name)).into()),
        })
        .map_err(|e| e.to_string())?;
    let sha1 = {
        use sha1::Digest;
        let d: [u8; 20] = sha1::Sha1::digest(&text).into();
        d.iter().map(|b| format!("{:02x}", b)).collect::<String>()
    };
    let text = String::from_utf8(text).map_err(|_| format!("{}: not UTF-8 text", name))?;
    let jobs = parse(&text, cli).map_err(|e| format!("{}: {}", name, e))?;
    Ok((jobs, sha1))
}

/// Every property's default as the file writes it, where one alone is valid; `None` for the
/// ones that are unset by default or only apply beside another.
fn default_value(key: &str) -> Option<&'static str> {
    Some(match key {
        "rw" => "\"randread\"",
        "offset" => "\"0\"",
        "bs" => "\"4K\"",
        "qd" | "batch" | "reap" | "workers" => "1",
        "dur" => "\"30s\"",
        "ramp" => "\"0s\"",
        "direct" | "taskrun" => "true",
        "engine" => "\"auto\"",
        "file-size" => "\"1G\"",
        "seed" => "24301",
        "fixedbufs" | "registerfiles" | "sqthread-poll" | "hipri" | "devtime" | "fast" => "false",
        _ => return None,
    })
}

/// A spec value as TOML: numbers and booleans bare where the property takes them, the rest
/// quoted.
fn toml_value(p: &PropDesc, text: &str) -> String {
    use crate::units::ValueKind;
    let bare = match p.kind {
        ValueKind::Int => text.parse::<i64>().is_ok(),
        ValueKind::Float => text.parse::<f64>().is_ok_and(f64::is_finite),
        ValueKind::Bool => text == "true" || text == "false",
        _ => false,
    };
    if bare {
        text.to_string()
    } else {
        toml::Value::String(text.to_string()).to_string()
    }
}

/// The commented job file for `specs` (io specs, already checked): a `[global]` table listing
/// every property with its default, commented out, and one `[[job]]` per spec with what the
/// spec gives (its id as the name).
pub fn generate(specs: &[JobSpec]) -> String {
    let mut out = String::from(
        "# An io job file. `resctl-bench -r RESULT run io:jobs=THIS-FILE` runs its [[job]]s one\n\
         # after another (`together = true` starts a job with the one before it). A job starts\n\
         # from [global] and overrides it with its own keys; properties given beside jobs= on\n\
         # the command line (`io:jobs=THIS-FILE,qd=8`) override both for every job.\n\
         # `resctl-bench doc io` says what each property does.\n\n[global]\n",
    );
    for p in file_props() {
        let v = default_value(p.key).unwrap_or("");
        let line = format!("# {} = {}", p.key, v);
        let _ = writeln!(out, "{:<30} # {}", line.trim_end(), p.help);
    }
    for (i, s) in specs.iter().enumerate() {
        let _ = writeln!(out, "\n[[job]]");
        let name = s.id.clone().unwrap_or_else(|| format!("job{}", i + 1));
        let _ = writeln!(out, "name = {}", toml::Value::String(name));
        for p in file_props() {
            if let Some(text) = s.group(0).text(p.key) {
                let _ = writeln!(out, "{} = {}", p.key, toml_value(p, text));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
