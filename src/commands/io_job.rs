//! `__io-job`: one IO engine job in a process of its own (its arguments are
//! `workload::iojob::IoJobArgs`).

use super::shared::Globals;
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_g: &Globals, a: crate::workload::iojob::IoJobArgs) -> Result<()> {
    crate::workload::iojob::run(&a)
}
