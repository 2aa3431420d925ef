//! Job specs: `BENCH[:KEY[=VALUE],...][:GROUP]...`.
//!
//! Grammar (upstream's, plus escapes):
//!
//! ```text
//! SPEC  := KIND ( ':' GROUP )*
//! GROUP := [ PROP ( ',' PROP )* ]      empty PROPs are skipped
//! PROP  := KEY [ '=' VALUE ]           split on the first '=' only; a bare KEY has value ""
//! ```
//!
//! `\:`, `\,`, `\=` and `\\` stand for the literal character anywhere (any other `\x` is kept
//! as is), so values can hold `:` and `,`. Each group is a sorted map where a repeated key keeps
//! its last value. Without any group there is still one empty first group. `id` and `passive`
//! are taken out of the FIRST group only (upstream took them from every group and kept the last,
//! losing `id` in `iocost-qos:id=x::min=50`); in later groups they are ordinary keys.
//!
//! Parsing (`JobSpec::parse`) checks syntax only; `validate_run` / `validate_format` check the
//! spec against the bench registry in `crate::bench` and the bench-specific rules below.

use crate::bench::{self, BenchDesc, PropDesc, ValueKind};
use crate::error::UsageError;
use crate::units::parse::{self as uparse, ParsedValue};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

pub type PropSet = BTreeMap<String, String>;

/// Tokens accepted in `passive=`, separated by `/`.
pub const PASSIVE_TOKENS: &[&str] = &["ALL", "all", "cpu", "mem", "io", "fs", "oomd", "none", ""];

const SPEC_SYNTAX: &str = "BENCH[:KEY[=VALUE],...][:GROUP]..., e.g. iocost-qos:vrate-max=80";

/// A parsed job spec, serialized exactly as upstream stores it in result files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub kind: String,
    pub id: Option<String>,
    pub passive: Option<String>,
    pub props: Vec<PropSet>,
}

/// `job[KIND:ID]`, `-` for a missing id: how log lines and messages name a job.
impl fmt::Display for JobSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "job[{}:{}]",
            self.kind,
            self.id.as_deref().unwrap_or("-")
        )
    }
}

/// Splits at every `sep` not preceded by an escaping backslash; escapes stay in the pieces.
fn split_unescaped(s: &str, sep: char, max_pieces: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        if pieces.len() + 1 == max_pieces {
            break;
        }
        if c == '\\' {
            chars.next();
        } else if c == sep {
            pieces.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    pieces.push(&s[start..]);
    pieces
}

/// Resolves `\:`, `\,`, `\=` and `\\`; any other backslash is kept literally.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(&n) = chars.peek() {
                if matches!(n, ':' | ',' | '=' | '\\') {
                    out.push(n);
                    chars.next();
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// Escapes the characters that would otherwise split the text (`=` only where it matters).
fn escape(s: &str, escape_eq: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, ':' | ',' | '\\') || (escape_eq && c == '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Optimal-string-alignment edit distance (a swap of neighbours counts as one edit).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// The closest candidate if it is close enough to be a plausible typo.
fn did_you_mean<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (input.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(input, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn suggestion(input: &str, candidates: &[String]) -> String {
    match did_you_mean(input, candidates.iter().map(|s| s.as_str())) {
        Some(c) => format!("; did you mean {}?", c),
        None => String::new(),
    }
}

/// Where a first-group key of a bench is defined: its own props, or a forwarded sub-bench's.
fn lookup_first_group_key(desc: &BenchDesc, key: &str) -> Option<&'static PropDesc> {
    if let Some(p) = desc.props.iter().find(|p| p.key == key) {
        return Some(p);
    }
    for (prefix, target) in desc.forward {
        if let Some(sub_key) = key.strip_prefix(prefix) {
            if let Some(t) = bench::find(target) {
                if let Some(p) = t.props.iter().find(|p| p.key == sub_key) {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// Checks one value against its kind; the message names the key, the value and what's accepted.
fn check_value(key: &str, value: &str, kind: ValueKind) -> Result<ParsedValue, String> {
    let needs_value = !matches!(
        kind,
        ValueKind::Bool | ValueKind::BoolOrFloat | ValueKind::Str
    );
    if needs_value && value.trim().is_empty() {
        return Err(format!(
            "{} needs a value (accepted: {})",
            key,
            uparse::accepted(kind)
        ));
    }
    uparse::parse_value(kind, value).map_err(|e| {
        if e.starts_with('"') {
            format!("{}={}", key, e)
        } else {
            format!("{}: {}", key, e)
        }
    })
}

/// The typed value of `key` in `props`, if present (errors as in validation).
pub fn prop_value(
    props: &PropSet,
    key: &str,
    kind: ValueKind,
) -> Result<Option<ParsedValue>, String> {
    props
        .get(key)
        .map(|v| check_value(key, v, kind))
        .transpose()
}

fn prop_f64(props: &PropSet, key: &str, kind: ValueKind) -> Result<Option<f64>, String> {
    Ok(prop_value(props, key, kind)?.and_then(|v| v.as_f64()))
}

fn check_passive(value: &str) -> Result<(), String> {
    for tok in value.split('/') {
        if !PASSIVE_TOKENS.contains(&tok) {
            return Err(format!(
                "passive={:?} has unknown token {:?} (accepted: tokens separated by '/' from ALL, all, cpu, mem, io, fs, oomd, none)",
                value, tok
            ));
        }
    }
    Ok(())
}

impl JobSpec {
    /// A spec of `kind` with one empty group.
    pub fn new(kind: &str) -> Self {
        Self {
            kind: kind.to_string(),
            id: None,
            passive: None,
            props: vec![PropSet::new()],
        }
    }

    /// Parses the text form (syntax only; see `validate_run` / `validate_format`).
    pub fn parse(s: &str) -> Result<JobSpec, UsageError> {
        let err = |msg: String| UsageError::new(format!("job spec {:?}: {}", s, msg));
        if s.trim().is_empty() {
            return Err(UsageError::new(format!(
                "empty job spec (accepted: {})",
                SPEC_SYNTAX
            )));
        }
        let mut pieces = split_unescaped(s, ':', usize::MAX).into_iter();
        let kind = unescape(pieces.next().unwrap_or_default().trim());
        if kind.is_empty() {
            return Err(err(format!(
                "missing bench name (accepted: {})",
                SPEC_SYNTAX
            )));
        }
        let mut props = Vec::new();
        for group in pieces {
            let mut set = PropSet::new();
            for prop in split_unescaped(group, ',', usize::MAX) {
                if prop.is_empty() {
                    continue;
                }
                let kv = split_unescaped(prop, '=', 2);
                let key = unescape(kv[0]);
                let value = kv.get(1).map(|v| unescape(v)).unwrap_or_default();
                if key.is_empty() {
                    return Err(err(format!(
                        "property {:?} has no key (accepted: KEY or KEY=VALUE)",
                        prop
                    )));
                }
                set.insert(key, value);
            }
            props.push(set);
        }
        if props.is_empty() {
            props.push(PropSet::new());
        }
        let id = props[0].remove("id");
        if id.as_deref() == Some("") {
            return Err(err("id needs a value, e.g. id=fast-ssd".into()));
        }
        let passive = props[0].remove("passive");
        Ok(JobSpec {
            kind,
            id,
            passive,
            props,
        })
    }

    /// The canonical text form: groups joined by `:`, props by `,`, sorted keys, `k` for an
    /// empty value, `id`/`passive` back in the first group, special characters escaped.
    /// `JobSpec::parse(&spec.canonical())` gives back `spec`.
    pub fn canonical(&self) -> String {
        let mut out = escape(&self.kind, false);
        let mut groups = self.props.clone();
        if groups.is_empty() {
            groups.push(PropSet::new());
        }
        if let Some(id) = &self.id {
            groups[0].insert("id".into(), id.clone());
        }
        if let Some(passive) = &self.passive {
            groups[0].insert("passive".into(), passive.clone());
        }
        if groups.len() == 1 && groups[0].is_empty() {
            return out;
        }
        for group in &groups {
            out.push(':');
            let props: Vec<String> = group
                .iter()
                .map(|(k, v)| {
                    if v.is_empty() {
                        escape(k, true)
                    } else {
                        format!("{}={}", escape(k, true), escape(v, false))
                    }
                })
                .collect();
            out += &props.join(",");
        }
        out
    }

    /// Same job for re-run purposes: kind, id, passive and props equal once `apply`/`commit`
    /// are dropped from the first group (they only decide what happens to the result).
    pub fn eq_ignoring_apply_commit(&self, other: &JobSpec) -> bool {
        fn norm(s: &JobSpec) -> Vec<PropSet> {
            let mut props = s.props.clone();
            if props.is_empty() {
                props.push(PropSet::new());
            }
            props[0].remove("apply");
            props[0].remove("commit");
            props
        }
        self.kind == other.kind
            && self.id == other.id
            && self.passive == other.passive
            && norm(self) == norm(other)
    }

    /// The first group (empty when a deserialized spec has none).
    pub fn first_group(&self) -> PropSet {
        self.props.first().cloned().unwrap_or_default()
    }

    fn err(&self, group: usize, msg: impl fmt::Display) -> UsageError {
        if group == 0 {
            UsageError::new(format!("job spec {:?}: {}", self.canonical(), msg))
        } else {
            UsageError::new(format!(
                "job spec {:?}: group {}: {}",
                self.canonical(),
                group + 1,
                msg
            ))
        }
    }

    fn desc(&self) -> Result<&'static BenchDesc, UsageError> {
        bench::find(&self.kind).ok_or_else(|| {
            let known: Vec<String> = bench::visible().map(|b| b.kind.to_string()).collect();
            let msg = format!(
                "unknown bench {:?}; known: {}{}",
                self.kind,
                known.join(", "),
                suggestion(&self.kind, &known)
            );
            if self.canonical() == self.kind {
                UsageError::new(msg)
            } else {
                self.err(0, msg)
            }
        })
    }

    /// Checks a spec given to `run`/`study`/`solve`: the bench exists, every key is one the
    /// bench takes in that group, every value parses, and the bench's own rules hold.
    pub fn validate_run(&self) -> Result<(), UsageError> {
        let desc = self.desc()?;
        if let Some(passive) = &self.passive {
            check_passive(passive).map_err(|e| self.err(0, e))?;
        }
        let first = self.first_group();
        for (key, value) in &first {
            match lookup_first_group_key(desc, key) {
                Some(p) => {
                    check_value(key, value, p.kind).map_err(|e| self.err(0, e))?;
                }
                None => return Err(self.err(0, unknown_first_group_key(desc, key))),
            }
        }
        if self.props.len() > 1 {
            let Some(group_props) = desc.group_props else {
                return Err(self.err(
                    0,
                    format!(
                        "{} takes one property group, got {} (groups are separated by ':')",
                        desc.kind,
                        self.props.len()
                    ),
                ));
            };
            for (gi, group) in self.props.iter().enumerate().skip(1) {
                for (key, value) in group {
                    match group_props.iter().find(|p| p.key == key) {
                        Some(p) => {
                            check_value(key, value, p.kind).map_err(|e| self.err(gi, e))?;
                        }
                        None => return Err(self.err(gi, unknown_group_key(desc, group_props, key))),
                    }
                }
            }
        }
        bench_checks(self).map_err(|(g, e)| self.err(g, e))
    }

    /// Checks a spec given to `format`/`summary`: the bench exists, and the one group holds
    /// only `id` (and a valid `passive`, which selects like `id`) and the bench's format props.
    pub fn validate_format(&self) -> Result<(), UsageError> {
        let desc = self.desc()?;
        if let Some(passive) = &self.passive {
            check_passive(passive).map_err(|e| self.err(0, e))?;
        }
        if self.props.len() > 1 {
            return Err(self.err(
                0,
                format!(
                    "format specs take one property group, got {}",
                    self.props.len()
                ),
            ));
        }
        for (key, value) in &self.first_group() {
            match desc.format_props.iter().find(|p| p.key == key) {
                Some(p) => {
                    check_value(key, value, p.kind).map_err(|e| self.err(0, e))?;
                }
                None => {
                    let mut valid: Vec<String> = desc
                        .format_props
                        .iter()
                        .map(|p| p.key.to_string())
                        .collect();
                    valid.push("id".into());
                    return Err(self.err(
                        0,
                        format!(
                            "unknown format property {:?} for {}; valid: {}{}",
                            key,
                            desc.kind,
                            valid.join(", "),
                            suggestion(key, &valid)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

fn unknown_first_group_key(desc: &BenchDesc, key: &str) -> String {
    let mut valid: Vec<String> = desc.props.iter().map(|p| p.key.to_string()).collect();
    valid.push("id".into());
    valid.push("passive".into());
    let mut candidates = valid.clone();
    let mut listed = valid.join(", ");
    for (prefix, target) in desc.forward {
        listed += &format!(", {}KEY for any {} property", prefix, target);
        if let Some(t) = bench::find(target) {
            candidates.extend(t.props.iter().map(|p| format!("{}{}", prefix, p.key)));
        }
    }
    let mut msg = format!(
        "unknown property {:?} for {}; valid: {}{}",
        key,
        desc.kind,
        listed,
        suggestion(key, &candidates)
    );
    if desc.props.is_empty() {
        if let Some(g) = desc.group_props {
            if let Some(p) = g.first() {
                let example = match p.kind {
                    ValueKind::Enum(choices) => choices.first().copied().unwrap_or("..."),
                    _ => "...",
                };
                msg += &format!(
                    "; {} properties go in groups 2+, e.g. {}::{}={}",
                    desc.kind, desc.kind, p.key, example
                );
            }
        }
    }
    msg
}

fn unknown_group_key(desc: &BenchDesc, group_props: &[PropDesc], key: &str) -> String {
    let valid: Vec<String> = group_props.iter().map(|p| p.key.to_string()).collect();
    let mut msg = format!(
        "unknown property {:?} for {}; valid in groups 2+: {}{}",
        key,
        desc.kind,
        valid.join(", "),
        suggestion(key, &valid)
    );
    if key == "id" || key == "passive" {
        msg += "; id and passive are only recognised in the first group";
    }
    msg
}

/// Bench-specific rules beyond key and value types. Errors carry the group index (0-based).
type BenchCheck = fn(&JobSpec) -> Result<(), (usize, String)>;

fn bench_checks(spec: &JobSpec) -> Result<(), (usize, String)> {
    const CHECKS: &[(&str, BenchCheck)] = &[
        ("iocost-qos", check_iocost_qos),
        ("protection", check_protection),
        ("storage", check_storage),
    ];
    match CHECKS.iter().find(|(k, _)| *k == spec.kind) {
        Some((_, check)) => check(spec),
        None => Ok(()),
    }
}

fn check_iocost_qos(spec: &JobSpec) -> Result<(), (usize, String)> {
    let first = spec.first_group();
    let min = prop_f64(&first, "vrate-min", ValueKind::Float).map_err(|e| (0, e))?;
    let max = prop_f64(&first, "vrate-max", ValueKind::Float).map_err(|e| (0, e))?;
    for (key, v) in [("vrate-min", min), ("vrate-max", max)] {
        if let Some(v) = v {
            if v < 0.0 {
                return Err((0, format!("{}={} must not be negative", key, v)));
            }
        }
    }
    let (lo, hi) = (min.unwrap_or(0.0), max.unwrap_or(100.0));
    if lo >= hi {
        let hi_text = match max {
            Some(v) => format!("vrate-max={}", v),
            None => "vrate-max (default 100)".to_string(),
        };
        return Err((0, format!("vrate-min={} must be less than {}", lo, hi_text)));
    }
    for (gi, group) in spec.props.iter().enumerate().skip(1) {
        crate::config::QosOverride::from_pairs(group.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|e| (gi, e))?;
    }
    Ok(())
}

fn check_nonzero(group: &PropSet, key: &str, kind: ValueKind) -> Result<(), String> {
    match (prop_f64(group, key, kind)?, group.get(key)) {
        (Some(0.0), Some(text)) => Err(format!("{}={} must not be zero", key, text)),
        _ => Ok(()),
    }
}

fn check_protection(spec: &JobSpec) -> Result<(), (usize, String)> {
    const MEM_HOG: &[&str] = &["scenario", "loops", "load", "speed"];
    const MEM_HOG_TUNE: &[&str] = &[
        "scenario", "load", "speed", "size-min", "size-max", "intvs", "isol-pct", "isol-thr",
    ];
    for (gi, group) in spec.props.iter().enumerate().skip(1) {
        let Some(scenario) = group.get("scenario") else {
            return Err((
                gi,
                "missing scenario (accepted: scenario=mem-hog or scenario=mem-hog-tune)".into(),
            ));
        };
        let keys = match scenario.as_str() {
            "mem-hog" => MEM_HOG,
            _ => MEM_HOG_TUNE,
        };
        for key in group.keys() {
            if !keys.contains(&key.as_str()) {
                return Err((
                    gi,
                    format!(
                        "{} does not apply to scenario={}; valid: {}",
                        key,
                        scenario,
                        keys.join(", ")
                    ),
                ));
            }
        }
        let e = |e| (gi, e);
        check_nonzero(group, "loops", ValueKind::Int).map_err(e)?;
        check_nonzero(group, "load", ValueKind::Frac).map_err(e)?;
        check_nonzero(group, "intvs", ValueKind::Int).map_err(e)?;
        if scenario == "mem-hog-tune" {
            let max = prop_f64(group, "size-max", ValueKind::Size).map_err(e)?;
            let min = prop_f64(group, "size-min", ValueKind::Size).map_err(e)?;
            let Some(max) = max else {
                return Err((
                    gi,
                    "scenario=mem-hog-tune needs size-max, e.g. size-max=16G".into(),
                ));
            };
            if let (Some(min), Some(max_text), Some(min_text)) =
                (min, group.get("size-max"), group.get("size-min"))
            {
                if max < min {
                    return Err((
                        gi,
                        format!(
                            "size-max={} must not be smaller than size-min={}",
                            max_text, min_text
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn check_storage(spec: &JobSpec) -> Result<(), (usize, String)> {
    check_nonzero(&spec.first_group(), "loops", ValueKind::Int).map_err(|e| (0, e))
}

/// Parses and validates one `run`/`study`/`solve` spec.
pub fn parse_run_spec(s: &str) -> Result<JobSpec, UsageError> {
    let spec = JobSpec::parse(s)?;
    spec.validate_run()?;
    Ok(spec)
}

/// Parses and validates the specs of a `format`/`summary` invocation.
pub fn parse_format_specs(specs: &[String]) -> Result<Vec<JobSpec>, UsageError> {
    specs
        .iter()
        .map(|s| {
            let spec = JobSpec::parse(s)?;
            spec.validate_format()?;
            Ok(spec)
        })
        .collect()
}

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
/// the order given, then those on the command line (`texts`); each parsed and checked with `validate` (e.g.
/// `JobSpec::validate_run`). Errors if there are none.
pub fn collect_specs(
    files: &[std::path::PathBuf],
    texts: &[String],
    validate: fn(&JobSpec) -> Result<(), UsageError>,
) -> anyhow::Result<Vec<JobSpec>> {
    let specs = gather_specs(files, texts, validate)?;
    if specs.is_empty() {
        return Err(no_specs_error(None).into());
    }
    Ok(specs)
}

/// `collect_specs` without the check for none.
pub fn gather_specs(
    files: &[std::path::PathBuf],
    texts: &[String],
    validate: fn(&JobSpec) -> Result<(), UsageError>,
) -> anyhow::Result<Vec<JobSpec>> {
    let mut specs = Vec::new();
    for path in files {
        for text in load_spec_file(path)? {
            let spec = JobSpec::parse(&text)
                .and_then(|s| validate(&s).map(|_| s))
                .map_err(|e| UsageError::new(format!("spec file {}: {}", path.display(), e)))?;
            specs.push(spec);
        }
    }
    for text in texts {
        let spec = JobSpec::parse(text)?;
        validate(&spec)?;
        specs.push(spec);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> PropSet {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parse_groups_ids_and_escapes() {
        let s = JobSpec::parse("iocost-qos:id=x,vrate-max=80::min=50,max=50").unwrap();
        assert_eq!(s.kind, "iocost-qos");
        assert_eq!(s.id.as_deref(), Some("x"));
        assert_eq!(
            s.props,
            vec![
                set(&[("vrate-max", "80")]),
                set(&[]),
                set(&[("max", "50"), ("min", "50")])
            ]
        );
        let s = JobSpec::parse(r"storage:id=a\:b\,c,x=p=q\=r\\").unwrap();
        assert_eq!(s.id.as_deref(), Some("a:b,c"));
        assert_eq!(s.props[0]["x"], r"p=q=r\");
    }

    #[test]
    fn canonical_round_trips() {
        for text in [
            "storage",
            "storage::",
            "iocost-qos:vrate-max=80::min=50,max=50:",
            "iocost-qos:dither,id=a\\:b,passive=io/mem",
            "protection::scenario=mem-hog,load=0.8",
            r"x:k\=y=v\,w,z=a\\b",
            r"x:a\b=c",
        ] {
            let s = JobSpec::parse(text).unwrap();
            let c = s.canonical();
            assert_eq!(JobSpec::parse(&c).unwrap(), s, "{} -> {}", text, c);
            assert_eq!(JobSpec::parse(&c).unwrap().canonical(), c);
        }
        assert_eq!(
            JobSpec::parse("iocost-qos:vrate-max=80,id=x,dither")
                .unwrap()
                .canonical(),
            "iocost-qos:dither,id=x,vrate-max=80"
        );
        assert_eq!(JobSpec::parse("storage:").unwrap().canonical(), "storage");
    }

    #[test]
    fn display_form() {
        assert_eq!(
            JobSpec::parse("storage").unwrap().to_string(),
            "job[storage:-]"
        );
        assert_eq!(
            JobSpec::parse("storage:id=a").unwrap().to_string(),
            "job[storage:a]"
        );
    }

    #[test]
    fn equality_ignores_apply_commit_in_first_group_only() {
        let a = JobSpec::parse("storage:apply,commit,loops=2").unwrap();
        let b = JobSpec::parse("storage:loops=2").unwrap();
        assert!(a.eq_ignoring_apply_commit(&b));
        let c = JobSpec::parse("storage:loops=3").unwrap();
        assert!(!a.eq_ignoring_apply_commit(&c));
        let d = JobSpec::parse("iocost-qos::apply").unwrap();
        let e = JobSpec::parse("iocost-qos::").unwrap();
        assert!(!d.eq_ignoring_apply_commit(&e));
        let mut f = JobSpec::parse("storage").unwrap();
        f.props.clear();
        assert!(f.eq_ignoring_apply_commit(&JobSpec::parse("storage:commit").unwrap()));
    }

    #[test]
    fn suggestions_only_when_close() {
        assert_eq!(
            did_you_mean("iocost-qso", ["storage", "iocost-qos"]),
            Some("iocost-qos")
        );
        assert_eq!(
            did_you_mean("vrate-mn", ["vrate-min", "vrate-max"]),
            Some("vrate-min")
        );
        assert_eq!(did_you_mean("banana", ["storage", "protection"]), None);
    }

    fn run_err(text: &str) -> String {
        match JobSpec::parse(text).and_then(|s| s.validate_run()) {
            Ok(()) => panic!("{} should be rejected", text),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn validation_messages() {
        assert_eq!(
            run_err("iocost-qso"),
            "unknown bench \"iocost-qso\"; known: iocost-params, hashd-params, storage, protection, iocost-qos, iocost-tune; did you mean iocost-qos?"
        );
        let e = run_err("iocost-qos:vrate-mn=5");
        assert!(e.starts_with("job spec \"iocost-qos:vrate-mn=5\": unknown property \"vrate-mn\" for iocost-qos; valid: vrate-min, vrate-max,"), "{}", e);
        assert!(e.ends_with("did you mean vrate-min?"), "{}", e);
        assert_eq!(
            run_err("iocost-qos:vrate-max=abc"),
            "job spec \"iocost-qos:vrate-max=abc\": vrate-max=\"abc\" is not a number (accepted: a finite number, e.g. 50 or 12.5)"
        );
        assert!(run_err("iocost-qos::min=x").contains(": group 2: min=\"x\" is not a number"));
        assert!(run_err("iocost-qos:storage-rps-mx=5").contains("did you mean storage-rps-max?"));
    }

    #[test]
    fn validation_accepts() {
        for text in [
            "iocost-qos",
            "iocost-qos:allow-fail",
            "iocost-qos:storage-rps-max=1000,storage-commit,storage-loops=2",
            "iocost-qos:vrate-min=10,vrate-max=90,dither=2.5::vrate=50:rpct=95,rlat=5000",
            "protection::scenario=mem-hog-tune,size-max=16G,size-min=4G",
            "storage:passive=ALL",
            "storage:passive=io/mem",
        ] {
            let s = JobSpec::parse(text).unwrap();
            s.validate_run()
                .unwrap_or_else(|e| panic!("{}: {}", text, e));
        }
        JobSpec::parse("iocost-qos:sub-full,id=a")
            .unwrap()
            .validate_format()
            .unwrap();
        assert!(JobSpec::parse("iocost-qos:vrate-min=5")
            .unwrap()
            .validate_format()
            .is_err());
    }

    #[test]
    fn spec_file_accepts_objects_and_strings() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        std::fs::write(
            &p,
            r#"{"job_specs": [{"kind":"storage","id":"s","passive":null,"props":[{"loops":"2"}]}, "protection"]}"#,
        )
        .unwrap();
        assert_eq!(
            load_spec_file(&p).unwrap(),
            vec!["storage:id=s,loops=2", "protection"]
        );
        std::fs::write(&p, "{").unwrap();
        assert!(load_spec_file(&p)
            .unwrap_err()
            .to_string()
            .contains("not valid JSON"));
        std::fs::write(&p, r#"{"job_specs": [3]}"#).unwrap();
        assert!(load_spec_file(&p)
            .unwrap_err()
            .to_string()
            .contains("job_specs[0]"));
    }
}
