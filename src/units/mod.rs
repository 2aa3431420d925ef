//! Units: parsing user-supplied values (`parse`) and the upstream-compatible number formatters
//! (`fmt`) that every report uses.

pub mod fmt;
pub mod parse;

pub use fmt::{format_count, format_duration, format_pct, format_size, pct_label};
