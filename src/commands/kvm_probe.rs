//! `__kvm-probe`: whether KVM can run a virtual CPU (what `vm --accel auto` asks).

use super::shared::Globals;
use anyhow::Result;

/// Check whether KVM can run a virtual CPU (used by `vm --accel auto`)
#[derive(Debug, clap::Args)]
pub struct Args {}

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_g: &Globals, _a: Args) -> Result<()> {
    crate::vm::qemu::kvm_probe_child()
}
