//! Where specs come from besides the command line: `-f` spec files (upstream's args layout, or
//! a bare list), and the order `run`/`study`/`solve` take them in.

use super::grammar::{JobSpec, SPEC_SYNTAX};
use crate::error::UsageError;
use std::path::Path;

/// The largest `-f` spec file we read.
const MAX_SPEC_FILE_BYTES: u64 = 16 << 20;

/// The job specs of an args-format JSON file (`{"job_specs": [...], ...}`, as upstream's `-a`
/// and `-f` files), as text. Entries may be spec objects (`{kind, id, passive, props}`, the
/// result-file layout) or spec strings; a bare JSON array of them is accepted too.
pub fn load_spec_file(path: &Path) -> anyhow::Result<Vec<String>> {
    let name = path.display();
    let Some(file) = crate::util::fs::open_regular(path, "spec file")? else {
        return Err(
            UsageError::new(format!("spec file {}: cannot read it (no such file)", name)).into(),
        );
    };
    let bytes = crate::util::fs::read_limited(file, path, "spec file", MAX_SPEC_FILE_BYTES)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| UsageError::new(format!("spec file {}: not UTF-8 text", name)))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| UsageError::new(format!("spec file {}: not valid JSON ({})", name, e)))?;
    let list = match &json {
        serde_json::Value::Array(a) => a,
        serde_json::Value::Object(o) => match o.get("job_specs") {
            Some(serde_json::Value::Array(a)) => a,
            _ => {
                return Err(UsageError::new(format!(
                    "spec file {}: no \"job_specs\" list (expected {{\"job_specs\": [\"BENCH:...\" or {{\"kind\": ..., \"props\": [...]}}, ...]}})",
                    name
                ))
                .into())
            }
        },
        _ => {
            return Err(UsageError::new(format!(
                "spec file {}: expected an object with a \"job_specs\" list",
                name
            ))
            .into())
        }
    };
    list.iter()
        .enumerate()
        .map(|(i, v)| {
            spec_text(v).map_err(|e| {
                UsageError::new(format!("spec file {}: job_specs[{}] {}", name, i, e)).into()
            })
        })
        .collect()
}

/// The text of one stored job spec: a spec string as is, a spec object (`{kind, id, passive,
/// props}`, the result-file layout) in its canonical form. `Err` reads after the item's name.
pub fn spec_text(v: &serde_json::Value) -> Result<String, String> {
    match v {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Object(_) => serde_json::from_value::<JobSpec>(v.clone())
            .map(|s| s.canonical())
            .map_err(|e| format!("is not a valid job spec ({})", e)),
        _ => Err("is neither a spec string nor a spec object".into()),
    }
}

/// The specs of a `run`/`study`/`solve` command: those of every `-f` file (`files`) first, in
/// the order given, then those on the command line (`texts`); each parsed and checked with
/// `validate`, which also returns what the caller keeps of the check (e.g. the bench's typed
/// job). Errors if there are none.
pub fn collect_specs<T>(
    files: &[std::path::PathBuf],
    texts: &[String],
    validate: fn(&JobSpec) -> Result<T, UsageError>,
) -> anyhow::Result<Vec<(JobSpec, T)>> {
    let specs = gather_specs(files, texts, validate)?;
    if specs.is_empty() {
        return Err(no_specs_error(None).into());
    }
    Ok(specs)
}

/// `collect_specs` without the check for none.
pub fn gather_specs<T>(
    files: &[std::path::PathBuf],
    texts: &[String],
    validate: fn(&JobSpec) -> Result<T, UsageError>,
) -> anyhow::Result<Vec<(JobSpec, T)>> {
    let mut specs = Vec::new();
    for path in files {
        for text in load_spec_file(path)? {
            let checked = JobSpec::parse(&text)
                .and_then(|s| validate(&s).map(|t| (s, t)))
                .map_err(|e| UsageError::new(format!("spec file {}: {}", path.display(), e)))?;
            specs.push(checked);
        }
    }
    for text in texts {
        let spec = JobSpec::parse(text)?;
        let t = validate(&spec)?;
        specs.push((spec, t));
    }
    Ok(specs)
}

/// The error for a command without job specs; `args_file` is the `-a` file, if one was given.
pub fn no_specs_error(args_file: Option<&Path>) -> UsageError {
    match args_file {
        None => UsageError::new(format!(
            "no job spec given (accepted: {} on the command line, or -f FILE)",
            SPEC_SYNTAX
        )),
        Some(p) => UsageError::new(format!(
            "no job spec given and args file {} holds none for this subcommand (accepted: {} on the command line, or -f FILE)",
            p.display(),
            SPEC_SYNTAX
        )),
    }
}
