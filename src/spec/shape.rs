//! What a bench accepts in a job spec (its [`Shape`]: property keys and value kinds per group,
//! format properties) and the checks of a spec against it. The bench registry owns the shapes;
//! this layer only knows how to check a spec against one, so every bench gets the same keys,
//! values and messages.

use super::grammar::{check_passive, JobSpec};
use super::suggest::suggestion;
use crate::error::UsageError;
use crate::units::parse::{self as uparse, ParsedValue};
use crate::units::ValueKind;

/// One property a bench takes: its key, the kind of value, and a line of help.
#[derive(Debug, Clone, Copy)]
pub struct PropDesc {
    pub key: &'static str,
    pub kind: ValueKind,
    pub help: &'static str,
}

/// Shorthand for the property tables.
pub const fn prop(key: &'static str, kind: ValueKind, help: &'static str) -> PropDesc {
    PropDesc { key, kind, help }
}

/// `a` then `b` as one table, for a bench whose properties extend another's (`N` must be the
/// sum of the lengths: a mismatch fails the build).
pub const fn concat_props<const N: usize>(a: &[PropDesc], b: &[PropDesc]) -> [PropDesc; N] {
    assert!(
        a.len() + b.len() == N,
        "concat_props: N is not the sum of the lengths"
    );
    let mut out = [prop("", ValueKind::Bool, ""); N];
    let mut i = 0;
    while i < N {
        out[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    out
}

/// First-group keys `PREFIX KEY` handed to a sub-bench (`storage-loops` → storage's `loops`).
#[derive(Debug)]
pub struct Forward {
    pub prefix: &'static str,
    /// The sub-bench, as named in messages.
    pub bench: &'static str,
    pub props: &'static [PropDesc],
}

/// What a bench accepts.
#[derive(Debug)]
pub struct Shape {
    /// Keys of the first group (besides `id` and `passive`).
    pub props: &'static [PropDesc],
    /// Prefixed first-group keys forwarded to a sub-bench.
    pub forward: &'static [Forward],
    /// Keys of groups 2+; `None`: only one group.
    pub group_props: Option<&'static [PropDesc]>,
    /// Keys of the one group of a `format`/`summary` spec (besides `id` and `passive`).
    pub format_props: &'static [PropDesc],
    /// Keys beyond the lists that the bench reads itself (iocost-tune's data selectors and
    /// latency targets, too many to list): `(group index, key)` → whether it is one. Their
    /// values are checked by the bench's `props`.
    pub open_keys: Option<fn(usize, &str) -> bool>,
}

impl Shape {
    /// Where a first-group key is defined: the bench's own props, or a forwarded sub-bench's.
    pub fn first_group_key(&self, key: &str) -> Option<&'static PropDesc> {
        if let Some(p) = self.props.iter().find(|p| p.key == key) {
            return Some(p);
        }
        self.forward.iter().find_map(|f| {
            let sub_key = key.strip_prefix(f.prefix)?;
            f.props.iter().find(|p| p.key == sub_key)
        })
    }
}

/// Checks one value against its kind; the message names the key, the value and what's accepted.
pub fn check_value(key: &str, value: &str, kind: ValueKind) -> Result<ParsedValue, String> {
    let needs_value = !matches!(
        kind,
        ValueKind::Bool | ValueKind::BoolOrFloat | ValueKind::BoolOrFrac | ValueKind::Str
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

impl JobSpec {
    /// Checks a spec given to `run`/`study`/`solve` against its bench's shape: a valid
    /// `passive`, every key one the bench takes in that group, every value parses, and no more
    /// groups than the bench takes. The bench's own rules come after (`Bench::props`).
    pub fn check_run_shape(&self, shape: &Shape) -> Result<(), UsageError> {
        if let Some(passive) = &self.passive {
            check_passive(passive).map_err(|e| self.err(0, e))?;
        }
        for (key, value) in &self.first_group() {
            match shape.first_group_key(key) {
                Some(p) => {
                    check_value(key, value, p.kind).map_err(|e| self.err(0, e))?;
                }
                None if shape.open_keys.is_some_and(|open| open(0, key)) => {}
                None => return Err(self.err(0, self.unknown_first_group_key(shape, key))),
            }
        }
        if self.props.len() > 1 {
            let Some(group_props) = shape.group_props else {
                return Err(self.err(
                    0,
                    format!(
                        "{} takes one property group, got {} (groups are separated by ':')",
                        self.kind,
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
                        None if shape.open_keys.is_some_and(|open| open(gi, key)) => {}
                        None => {
                            return Err(
                                self.err(gi, self.unknown_group_key(shape, group_props, key))
                            )
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks a spec given to `format`/`summary`: the one group holds only `id` (and a valid
    /// `passive`, which selects like `id`) and the bench's format props.
    pub fn check_format_shape(&self, shape: &Shape) -> Result<(), UsageError> {
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
            match shape.format_props.iter().find(|p| p.key == key) {
                Some(p) => {
                    check_value(key, value, p.kind).map_err(|e| self.err(0, e))?;
                }
                None => {
                    let mut valid: Vec<String> = shape
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
                            self.kind,
                            valid.join(", "),
                            suggestion(key, &valid)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn unknown_first_group_key(&self, shape: &Shape, key: &str) -> String {
        let mut valid: Vec<String> = shape.props.iter().map(|p| p.key.to_string()).collect();
        valid.push("id".into());
        valid.push("passive".into());
        let mut candidates = valid.clone();
        let mut listed = valid.join(", ");
        for f in shape.forward {
            listed += &format!(", {}KEY for any {} property", f.prefix, f.bench);
            candidates.extend(f.props.iter().map(|p| format!("{}{}", f.prefix, p.key)));
        }
        if shape.open_keys.is_some() {
            listed += &format!(" and the keys `doc {}` lists", self.kind);
        }
        let mut msg = format!(
            "unknown property {:?} for {}; valid: {}{}",
            key,
            self.kind,
            listed,
            suggestion(key, &candidates)
        );
        let group_key = shape
            .group_props
            .and_then(|g| g.iter().find(|p| p.key == key));
        if let Some(p) = group_key.filter(|_| !shape.props.is_empty()) {
            // A configuration key given in the first group: say where it goes.
            let value = self.first_group().get(key).cloned().unwrap_or_default();
            msg += &format!(
                "; {} is a key of groups 2+ (one configuration each): write {}::{}={}",
                p.key, self.kind, p.key, value
            );
        } else if shape.props.is_empty() {
            if let Some(p) = shape.group_props.and_then(|g| g.first()) {
                let example = match p.kind {
                    ValueKind::Enum(choices) => choices.first().copied().unwrap_or("..."),
                    _ => "...",
                };
                msg += &format!(
                    "; {} properties go in groups 2+, e.g. {}::{}={}",
                    self.kind, self.kind, p.key, example
                );
            }
        }
        msg
    }

    fn unknown_group_key(&self, shape: &Shape, group_props: &[PropDesc], key: &str) -> String {
        let valid: Vec<String> = group_props.iter().map(|p| p.key.to_string()).collect();
        let more = if shape.open_keys.is_some() {
            format!(" and the keys `doc {}` lists", self.kind)
        } else {
            String::new()
        };
        let mut msg = format!(
            "unknown property {:?} for {}; valid in groups 2+: {}{}{}",
            key,
            self.kind,
            valid.join(", "),
            more,
            suggestion(key, &valid)
        );
        if key == "id" || key == "passive" {
            msg += "; id and passive are only recognised in the first group";
        }
        msg
    }
}
