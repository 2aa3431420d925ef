//! `__hashd`: the bundled workload (its arguments are `workload::hashd::HashdArgs`).

use super::shared::Globals;
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_g: &Globals, a: crate::workload::hashd::HashdArgs) -> Result<()> {
    crate::workload::hashd::cmd::run(&a)
}
