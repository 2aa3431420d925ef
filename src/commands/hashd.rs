//! `__hashd`: the bundled workload (its arguments are `workload::hashd::HashdArgs`).

use crate::cli::GlobalOpts;
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_global: &GlobalOpts, a: crate::workload::hashd::HashdArgs) -> Result<()> {
    crate::workload::hashd::cmd::run(&a)
}
