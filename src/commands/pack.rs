//! `pack`: the result file and its per-second reports in one tarball, `./<stem>.tar.gz`.

use super::shared::{Globals, run_config, LOG};
use anyhow::Result;
use std::path::Path;

/// Pack the result file and its per-second reports into a tarball
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pack even when the reports of a run are nowhere to be found (they are left out)
    #[arg(long = "allow-missing")]
    pub allow_missing: bool,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", "dir", "args", LOG[0], LOG[1]]);

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    let config = g.config;
    let cfg = run_config(config, "pack")?;
    // pack takes no job specs: the stored subcommand and specs stay as they are.
    if let Some(file) = &config.args_file {
        file.save(config, None)?;
    }
    let _lock = crate::result::lock::ResultLock::acquire(&cfg.result)?;
    // Benches that run without the host set up (io, curve, iocost-tune) write no reports.
    let reported = |kind: &str| crate::bench::find(kind).is_none_or(|b| b.desc().system.is_some());
    crate::result::pack::pack(
        &cfg.result,
        &cfg.dir,
        Path::new("."),
        a.allow_missing,
        &reported,
    )?;
    Ok(())
}
