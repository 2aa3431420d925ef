//! The memory hog (benches-doc/protection.md): a process that grows anonymous memory at a set rate
//! until it is killed, so a workload's protection can be measured while something else floods
//! memory.
//!
//! `run` is the hog itself (the hidden `__mem-hog` subcommand); `debt` its rate keeping,
//! `fill` its page contents; `handle` starts and ends it from a bench; `watch` decides when the
//! host is in danger and the hog must go; `report` is what it writes every second.

pub mod debt;
pub mod fill;
pub mod handle;
mod report;
pub mod run;
pub mod watch;

pub use handle::{HogOpts, MemHog};
pub use report::HogReport;
pub use run::MemHogArgs;
