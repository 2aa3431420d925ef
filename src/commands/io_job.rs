//! `__io-job`: one IO engine job in a process of its own (its arguments are
//! `workload::iojob::IoJobArgs`).

use crate::cli::GlobalOpts;
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_global: &GlobalOpts, a: crate::workload::iojob::IoJobArgs) -> Result<()> {
    crate::workload::iojob::run(&a)
}
