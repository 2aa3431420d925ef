//! `__mem-hog`: the memory hog (its arguments are `workload::memhog::MemHogArgs`).

use crate::cli::GlobalOpts;
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_global: &GlobalOpts, a: crate::workload::memhog::MemHogArgs) -> Result<()> {
    crate::workload::memhog::run::run(&a)
}
