//! `summary`: the short report of result entries, or their headline numbers as records
//! (`-o json|yaml|csv`, or added to a CSV file with `--append`).

use super::shared::{Globals, print_out, require_result, LOG};
use crate::bench::results::export::{self, OutputFormat};
use crate::cli::FormatSpecs;
use crate::spec::JobSpec;
use anyhow::Result;
use std::path::PathBuf;

/// Print the short report of result entries
#[derive(Debug, clap::Args)]
pub struct Args {
    /// text (the report), or each entry's headline numbers as json, yaml or csv records (see
    /// `doc results`, "Export")
    #[arg(
        short = 'o',
        long = "output-format",
        value_name = "FORMAT",
        value_enum,
        default_value_t = OutputFormat::Text
    )]
    pub output_format: OutputFormat,
    /// With `-o csv`: add the records to FILE instead of printing them, so runs one after
    /// another make one table; the header is written when FILE is new or empty, and must be
    /// the same when it isn't
    #[arg(long = "append", value_name = "FILE")]
    pub append: Option<PathBuf>,
    #[command(flatten)]
    pub specs: FormatSpecs,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", LOG[0], LOG[1]]);

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    let output = a.output_format;
    if a.append.is_some() && output != OutputFormat::Csv {
        crate::usage_bail!("summary: --append adds CSV records: it needs -o csv");
    }
    let path = require_result(g.config, "summary")?;
    let specs = crate::bench::parse_format_specs(&a.specs.specs)?;
    let entries = crate::result::load_existing(&path)?;
    if output == OutputFormat::Text {
        return print_out(&crate::bench::results::show::format_entries(
            &entries, &specs, false, 0,
        )?);
    }
    refuse_format_props(&specs)?;
    let records = export::records(&entries, &specs)?;
    if let Some(csv) = &a.append {
        return export::append_csv(csv, &records);
    }
    print_out(&match output {
        OutputFormat::Json => export::to_json(&records),
        OutputFormat::Yaml => export::to_yaml(&records)?,
        OutputFormat::Csv | OutputFormat::Text => export::to_csv(&records),
    })
}

/// Format properties shape the text report; the records of `summary -o json|csv|yaml` are the
/// same with or without them, so one given there is refused rather than ignored.
fn refuse_format_props(specs: &[JobSpec]) -> Result<()> {
    for spec in specs {
        let g = spec.group(0);
        if let Some((k, _)) = g.props().iter().next() {
            crate::usage_bail!(
                "summary: {}: format property {} shapes the text report only; the records \
                 of -o json/csv/yaml don't change with it (drop it, or use summary or format \
                 without -o)",
                crate::format::job_name(spec),
                k
            );
        }
    }
    Ok(())
}
