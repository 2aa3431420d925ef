//! `vm`: run resctl-bench in a disposable QEMU test host (its arguments are `vm::VmArgs`).

use super::shared::{LOG, Globals};
use anyhow::Result;

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

/// Exits with the guest command's status.
pub fn exec(g: &Globals, a: Box<crate::vm::VmArgs>) -> Result<()> {
    let code = crate::vm::run(g.given.dir.as_deref(), g.given.verbose, &a)?;
    std::process::exit(code)
}
