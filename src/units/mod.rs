//! Units: parsing user-supplied values (`parse`), the upstream-compatible number formatters
//! (`fmt`) that every report uses, and the value vocabulary both share (`kind`).

pub mod fmt;
pub mod kind;
pub mod parse;

pub use fmt::{format_count, format_duration, format_pct, format_size, pct_label};
pub use kind::{ValueKind, PCT_LABELS};
