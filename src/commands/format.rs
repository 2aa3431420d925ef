//! `format`: the full report of result entries, and with `--plot` their pictures.

use super::shared::{Globals, print_out, require_result, LOG};
use crate::cli::FormatSpecs;
use anyhow::Result;
use std::path::PathBuf;

/// Print the full report of result entries
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Add resource-stat tables; repeat to include hidden keys
    #[arg(short = 'R', long = "rstat", action = clap::ArgAction::Count)]
    pub rstat: u8,
    /// Also draw the entries that have pictures (storage, iocost-tune, curve, qos-study) as
    /// SVG files and a page in DIR, named after the result file and the entry
    #[arg(long = "plot", value_name = "DIR")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub specs: FormatSpecs,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", LOG[0], LOG[1]]);

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    // A plot directory that can't be is refused before anything is read or printed.
    if let Some(dir) = &a.plot {
        crate::bench::results::show::prepare_plot_dir(dir)?;
    }
    let path = require_result(g.config, "format")?;
    let specs = crate::bench::parse_format_specs(&a.specs.specs)?;
    let entries = crate::result::load_existing(&path)?;
    print_out(&crate::bench::results::show::format_entries(
        &entries, &specs, true, a.rstat,
    )?)?;
    if let Some(dir) = &a.plot {
        let stem = crate::result::pack::stem(&path);
        for path in crate::bench::results::show::plot_entries(&entries, &specs, dir, &stem)? {
            log::info!("wrote {}", path.display());
        }
    }
    Ok(())
}
