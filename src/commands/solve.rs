//! `solve`: re-derive results from the stored results only.

use super::shared::{jobs, LOG};
use crate::bench::runner::Mode;
use crate::cli::{GlobalOpts, SpecArgs};
use anyhow::Result;

/// Re-derive results from the stored results only
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub specs: SpecArgs,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", "args", LOG[0], LOG[1]]);

pub fn exec(global: &GlobalOpts, a: Args) -> Result<()> {
    jobs(global, Mode::Solve, &a.specs)
}
