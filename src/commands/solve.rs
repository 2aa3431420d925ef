//! `solve`: re-derive results from the stored results only.

use super::shared::{Globals, jobs, LOG};
use crate::bench::runner::Mode;
use crate::cli::SpecArgs;
use anyhow::Result;

/// Re-derive results from the stored results only
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub specs: SpecArgs,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", "args", LOG[0], LOG[1]]);

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    jobs(g.config, Mode::Solve, &a.specs)
}
