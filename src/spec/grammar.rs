//! The spec grammar itself (see the module docs of `spec`): parsing, printing, escapes.

use crate::error::UsageError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

pub type PropSet = BTreeMap<String, String>;

/// Tokens accepted in `passive=`, separated by `/`.
pub const PASSIVE_TOKENS: &[&str] = &["ALL", "all", "cpu", "mem", "io", "fs", "oomd", "none", ""];

pub(crate) const SPEC_SYNTAX: &str =
    "BENCH[:KEY[=VALUE],...][:GROUP]..., e.g. iocost-qos:vrate-max=80";

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

pub(crate) fn check_passive(value: &str) -> Result<(), String> {
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

    /// Parses the text form (syntax only; the bench registry validates it).
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
        // It names the entry in reports, file names (`format --plot`) and log lines.
        if id
            .as_deref()
            .is_some_and(|i| i.chars().any(char::is_control))
        {
            return Err(err(
                "an id may not hold control characters (a tab, a newline); e.g. id=fast-ssd".into(),
            ));
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

    pub(crate) fn err(&self, group: usize, msg: impl fmt::Display) -> UsageError {
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
}

/// `job[KIND:ID]` (`-` without an id), as used in messages.
pub fn job_name(spec: &JobSpec) -> String {
    format!("job[{}:{}]", spec.kind, spec.id.as_deref().unwrap_or("-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::files::load_spec_file;
    use crate::spec::suggest::did_you_mean;

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
