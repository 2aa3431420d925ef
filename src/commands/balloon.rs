//! `__balloon`: the memory balloon process.

use super::shared::Globals;
use anyhow::Result;

/// The memory balloon: holds the byte counts read from stdin, one a line, until EOF
#[derive(Debug, clap::Args)]
pub struct Args {}

pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(_g: &Globals, _a: Args) -> Result<()> {
    crate::system::mem::balloon_main()
}
