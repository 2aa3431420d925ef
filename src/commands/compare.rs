//! `compare A B`: the headline numbers of two result files side by side, with their ratio.

use super::shared::{Globals, LOG};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Show the headline numbers of two result files side by side, with their ratio
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The first result file (A)
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The second result file (B)
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Entries to compare (BENCH[:ID]), as for summary; default: every entry
    #[arg(value_name = "SPEC")]
    pub specs: Vec<String>,
    /// Every headline number of each pair, not only the bench's key numbers
    #[arg(long)]
    pub full: bool,
}

pub const OPTIONS: Option<&[&str]> = Some(&LOG);

pub fn exec(_g: &Globals, a: Args) -> Result<()> {
    let specs = crate::bench::parse_format_specs(&a.specs)?;
    let records = |path: &Path| -> Result<Vec<crate::bench::contract::headline::Row>> {
        crate::bench::results::export::records(&crate::result::load_existing(path)?, &specs)
    };
    let keys = |kind: &str| crate::bench::find(kind).map_or(&[][..], |b| b.key_numbers());
    let text = crate::bench::results::compare::compare(
        &records(&a.a)?,
        &records(&a.b)?,
        (&a.a.display().to_string(), &a.b.display().to_string()),
        &keys,
        crate::bench::results::compare::CompareOpts { full: a.full },
    );
    crate::util::out::out_text(&text);
    Ok(())
}
