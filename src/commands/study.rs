//! `study`: re-derive results from the records and the per-second reports.

use super::shared::{Globals, jobs, LOG};
use crate::bench::runner::Mode;
use crate::cli::SpecArgs;
use anyhow::Result;
use std::path::PathBuf;

/// Re-derive results from records and per-second reports
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory holding the per-second reports [default: <result stem>-report.d beside the
    /// result if it exists (a run in `vm`, an unpacked tarball), else DIR/report.d]
    #[arg(short = 'R', long = "reports", value_name = "DIR")]
    pub reports: Option<PathBuf>,
    #[command(flatten)]
    pub specs: SpecArgs,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", "dir", "args", LOG[0], LOG[1]]);

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    let mode = Mode::Study {
        reports_dir: a.reports,
    };
    jobs(g.config, mode, &a.specs)
}
