//! What several subcommands share: the logging options every one reads, the result file they
//! need, the runner's configuration and its jobs, printing a report.

use crate::bench::runner::{self, Mode, RunConfig};
use crate::cli::{GlobalOpts, SpecArgs};
use crate::config::Config;
use anyhow::Result;
use std::path::PathBuf;

/// What a subcommand gets besides its own arguments: the global options as given (`vm` reads
/// the work directory as given) and validated, with the args file's values under them.
pub struct Globals<'a> {
    pub given: &'a GlobalOpts,
    pub config: &'a Config,
}

/// The logging options, which every subcommand reads.
pub const LOG: [&str; 2] = ["verbose", "logfile"];

/// The result file of a command that needs one: `<what> requires --result` otherwise.
pub fn require_result(config: &Config, what: &str) -> Result<PathBuf> {
    match &config.result {
        Some(p) if !p.as_os_str().is_empty() => Ok(p.clone()),
        _ => crate::usage_bail!("{} requires --result", what),
    }
}

/// What the runner needs, from the validated global options; `what` names the command for the
/// missing-`--result` error.
pub fn run_config(cfg: &Config, what: &str) -> Result<RunConfig> {
    let Some(result) = cfg.result.clone().filter(|p| !p.as_os_str().is_empty()) else {
        crate::usage_bail!("{} requires --result", what);
    };
    Ok(RunConfig {
        result,
        dir: cfg.dir.clone(),
        bench_args: Some(cfg.sysinfo_args()),
        system: Some(crate::system::session::SessionOpts::from_config(cfg)),
        quick: cfg.quick,
    })
}

/// `run`, `study` and `solve`: the job specs (command line, `-f` files, the args file) through
/// the runner.
pub fn jobs(config: &Config, mode: Mode, args: &SpecArgs) -> Result<()> {
    let cfg = run_config(config, mode.name())?;
    let specs = crate::config::args_file::collect_job_specs(
        config,
        mode.name(),
        args,
        crate::bench::validate_run,
    )?;
    runner::run_cmd(&cfg, mode, specs)
}

/// Writes a rendered report to stdout; `| head` closing the pipe is no error worth reporting.
pub fn print_out(text: &str) -> Result<()> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e.into()),
    }
}
