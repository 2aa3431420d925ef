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
//! Parsing (`JobSpec::parse`) checks syntax only. A bench's [`shape::Shape`] says which keys
//! and values it takes (`JobSpec::check_run_shape` / `check_format_shape`); its typed property
//! struct reads the groups through [`props::Group`]. The bench registry (`crate::bench`) puts
//! the two together.

pub mod files;
mod grammar;
pub mod props;
pub mod shape;
pub mod suggest;

pub use files::{collect_specs, gather_specs, load_spec_file, no_specs_error, spec_text};
pub use grammar::{job_name, JobSpec, PropSet, PASSIVE_TOKENS};
pub use props::{Group, SpecError};
pub use shape::{concat_props, prop, Forward, PropDesc, Shape};
