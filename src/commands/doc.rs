//! `doc`: the documentation pages.

use super::shared::LOG;
use crate::cli::GlobalOpts;
use anyhow::Result;

/// Print documentation: `doc` lists subjects, `doc NAME` prints one
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Subject: common, vm, or a bench name
    #[arg(value_name = "SUBJECT")]
    pub subjects: Vec<String>,
}

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

pub fn exec(global: &GlobalOpts, a: Args) -> Result<()> {
    crate::config::Config::from_opts(global)?;
    crate::util::out::out_text(&crate::doc::render(&a.subjects)?);
    Ok(())
}
