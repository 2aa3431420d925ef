//! `__mem-hog`: the memory hog (its arguments are `workload::memhog::MemHogArgs`).

use super::shared::Globals;
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_g: &Globals, a: crate::workload::memhog::MemHogArgs) -> Result<()> {
    crate::workload::memhog::run::run(&a)
}
