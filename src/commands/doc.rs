//! `doc`: the documentation pages.

use super::shared::{LOG, Globals};
use anyhow::Result;

/// Print documentation: `doc` lists subjects, `doc NAME` prints one
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Subject: common, vm, or a bench name
    #[arg(value_name = "SUBJECT")]
    pub subjects: Vec<String>,
}

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

pub fn exec(_g: &Globals, a: Args) -> Result<()> {
    crate::util::out::out_text(&crate::doc::render(&a.subjects)?);
    Ok(())
}
