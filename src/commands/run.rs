//! `run`: run or continue benchmark jobs; with `--generate`, write io specs as a job file.

use super::shared::{jobs, Globals};
use crate::bench::runner::Mode;
use crate::cli::SpecArgs;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Run or continue benchmark jobs
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub specs: SpecArgs,
    /// Write the io specs as a job file to FILE instead of running them: a [[job]] per spec and
    /// every property with its default in comments (run it with `io:jobs=FILE`)
    #[arg(long = "generate", value_name = "FILE")]
    pub generate: Option<PathBuf>,
}

/// Every global option.
pub const OPTIONS: Option<&[&str]> = None;

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    match &a.generate {
        Some(path) => generate( &a.specs, path),
        None => jobs(g.config, Mode::Run, &a.specs),
    }
}

/// `run --generate FILE`: the io specs as a job file, checked as a run would check them.
fn generate(args: &SpecArgs, path: &Path) -> Result<()> {
    if !args.file.is_empty() {
        crate::usage_bail!("run --generate: give the io specs on the command line, not with -f");
    }
    if args.specs.is_empty() {
        crate::usage_bail!("run --generate: no io spec to write (e.g. `io:rw=randread,qd=32`)");
    }
    let mut specs = Vec::new();
    for text in &args.specs {
        let spec = crate::spec::JobSpec::parse(text)?;
        if spec.kind != "io" {
            crate::usage_bail!(
                "run --generate writes io job files; {:?} is a {} job",
                text,
                spec.kind
            );
        }
        if spec.group(0).text("jobs").is_some() {
            crate::usage_bail!(
                "run --generate: {:?} reads a job file (jobs=); give the jobs' own properties",
                text
            );
        }
        crate::bench::validate_run(&spec)?;
        if spec.id.is_some() && specs.iter().any(|s: &crate::spec::JobSpec| s.id == spec.id) {
            crate::usage_bail!(
                "run --generate: two specs have id={}; a job file's jobs need names of their own",
                spec.id.as_deref().unwrap_or_default()
            );
        }
        specs.push(spec);
    }
    crate::util::fs::open_regular(path, "io job file")?;
    crate::util::atomic::check_dir_writable(path, "io job file")?;
    let text = crate::bench::io::jobfile::generate(&specs);
    crate::util::atomic::write_atomic(path, |f| f.write_all(text.as_bytes()))
        .with_context(|| format!("writing the io job file {}", path.display()))?;
    log::info!("wrote {} io job(s) to {}", specs.len(), path.display());
    Ok(())
}
