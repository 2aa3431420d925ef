//! `vm`: run resctl-bench in a disposable QEMU test host (its arguments are `vm::VmArgs`).

use super::shared::LOG;
use crate::cli::GlobalOpts;
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

/// Exits with the guest command's status.
pub fn exec(global: &GlobalOpts, a: Box<crate::vm::VmArgs>) -> Result<()> {
    let code = crate::vm::run(global.dir.as_deref(), global.verbose, &a)?;
    std::process::exit(code)
}
