//! resctl-bench: a benchmark harness for Linux resource control.

pub mod bench;
pub mod cli;
pub mod commands;
pub mod config;
pub mod db;
pub mod doc;
pub mod error;
pub mod format;
pub mod logging;
pub mod report;
pub mod result;
pub mod spec;
pub mod study;
pub mod system;
#[cfg(feature = "testaid")]
pub mod testaid;
pub mod units;
pub mod util;
pub mod vm;
pub mod workload;
