//! Typed reads of a spec's property groups, for the benches' typed property structs. A value
//! that doesn't parse, or a bench rule a value breaks, is a [`SpecError`] naming its group;
//! [`JobSpec::error`] turns it into the one-line usage error.

use super::grammar::{JobSpec, PropSet};
use super::shape::check_value;
use crate::error::UsageError;
use crate::units::parse::ParsedValue;
use crate::units::ValueKind;

/// What is wrong with a spec's properties, and in which group (0-based).
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    pub group: usize,
    pub msg: String,
}

/// One property group of a spec, read as typed values.
#[derive(Debug, Clone, Copy)]
pub struct Group<'a> {
    props: &'a PropSet,
    index: usize,
}

static EMPTY: PropSet = PropSet::new();

impl<'a> Group<'a> {
    pub fn props(&self) -> &'a PropSet {
        self.props
    }

    /// An error in this group.
    pub fn err(&self, msg: impl Into<String>) -> SpecError {
        SpecError {
            group: self.index,
            msg: msg.into(),
        }
    }

    /// The raw text of `key`, if present.
    pub fn text(&self, key: &str) -> Option<&'a str> {
        self.props.get(key).map(|s| s.as_str())
    }

    /// The value of `key` read as `kind`, if present.
    pub fn value(&self, key: &str, kind: ValueKind) -> Result<Option<ParsedValue>, SpecError> {
        self.props
            .get(key)
            .map(|v| check_value(key, v, kind).map_err(|e| self.err(e)))
            .transpose()
    }

    /// A numeric value of `key` (sizes in bytes, durations in seconds, fractions as ratios).
    pub fn f64(&self, key: &str, kind: ValueKind) -> Result<Option<f64>, SpecError> {
        Ok(self.value(key, kind)?.and_then(|v| v.as_f64()))
    }

    /// A non-negative integer (`Int`) or a size in bytes (`Size`).
    pub fn u64(&self, key: &str, kind: ValueKind) -> Result<Option<u64>, SpecError> {
        Ok(self.value(key, kind)?.and_then(|v| match v {
            ParsedValue::Int(v) | ParsedValue::Size(v) => Some(v),
            v => v.as_f64().map(|f| f as u64),
        }))
    }

    /// A boolean (a bare key is true).
    pub fn flag(&self, key: &str) -> Result<Option<bool>, SpecError> {
        Ok(self.f64(key, ValueKind::Bool)?.map(|v| v != 0.0))
    }

    /// `Err` when `key` is given as zero, which the bench can't use.
    pub fn nonzero(&self, key: &str, kind: ValueKind) -> Result<(), SpecError> {
        match (self.f64(key, kind)?, self.text(key)) {
            (Some(0.0), Some(text)) => Err(self.err(format!("{}={} must not be zero", key, text))),
            _ => Ok(()),
        }
    }
}

impl JobSpec {
    /// Property group `index` (empty when the spec has none there).
    pub fn group(&self, index: usize) -> Group<'_> {
        Group {
            props: self.props.get(index).unwrap_or(&EMPTY),
            index,
        }
    }

    /// Groups 2+ (the per-configuration or per-scenario groups).
    pub fn later_groups(&self) -> impl Iterator<Item = Group<'_>> {
        self.props
            .iter()
            .enumerate()
            .skip(1)
            .map(|(index, props)| Group { props, index })
    }

    /// The usage error for a property problem of this spec, naming the spec and the group.
    pub fn error(&self, e: SpecError) -> UsageError {
        self.err(e.group, e.msg)
    }
}
