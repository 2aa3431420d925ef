//! Dispatch of a parsed command line to the subcommand implementations.

use crate::cli::{Cli, Command};
use crate::run::{self, Mode};
use anyhow::Result;

pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Run(a) => run::cli_jobs(&cli.global, Mode::Run, &a.specs),
        Command::Study(a) => run::cli_jobs(
            &cli.global,
            Mode::Study {
                reports_dir: a.reports,
            },
            &a.specs,
        ),
        Command::Solve(a) => run::cli_jobs(&cli.global, Mode::Solve, &a),
        Command::Format(a) => format_cmd(&cli.global, &a.specs.specs, true, a.rstat),
        Command::Summary(a) => format_cmd(&cli.global, &a.specs, false, 0),
        Command::Deps(a) => crate::system::deps::deps_cmd(&cli.global, a.fix),
        Command::JournalTest(a) => crate::system::restore::journal_test(
            &crate::config::Config::from_opts(&cli.global)?.dir,
            &a.path,
            &a.value,
            a.spin,
            a.exit_after,
        ),
        Command::Pack => run::cli_pack(&cli.global),
        Command::Doc(a) => {
            crate::config::Config::from_opts(&cli.global)?;
            print!("{}", crate::doc::render(&a.subjects)?);
            Ok(())
        }
        Command::Vm(a) => {
            let code = crate::vm::run(&cli.global, &a)?;
            std::process::exit(code)
        }
        Command::Probe(a) => crate::vm::probe::run(&a),
        Command::KvmProbe => crate::vm::qemu::kvm_probe_child(),
        Command::Reporter(a) => crate::testaid::reporter::run(&cli.global, &a),
        Command::IoLat(a) => crate::testaid::iolat::run(&a),
        Command::Balloon => crate::system::mem::balloon_main(),
        Command::Hashd(a) => crate::workload::hashd::cmd::run(&a),
        Command::HashdBench(a) => crate::testaid::hashd_bench::run_cmd(&a, &cli.global),
        Command::VmScenario(a) => crate::vm::scenario::run(&a),
        Command::SaveTest(a) => crate::result::save::save_test(
            &run::require_result(&cli.global, "__save-test")?,
            &a.from,
            a.loops,
            a.kills,
            a.seed,
        ),
    }
}

/// `format` (full) and `summary`: render the selected entries of the result file to stdout.
fn format_cmd(
    global: &crate::cli::GlobalOpts,
    specs: &[String],
    full: bool,
    rstat: u8,
) -> Result<()> {
    use std::io::Write;
    let name = if full { "format" } else { "summary" };
    // The global options mean nothing here, but a bad one is refused as `run` refuses it.
    crate::config::Config::from_opts(global)?;
    let path = run::require_result(global, name)?;
    let specs = crate::spec::parse_format_specs(specs)?;
    let Some(bytes) = crate::result::read_bytes(&path)? else {
        crate::usage_bail!("{}: no such result file", path.display());
    };
    let entries = crate::result::parse_entries(&path, &bytes)?;
    drop(bytes);
    let text = crate::format::format_entries(&entries, &specs, full, rstat)?;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|_| stdout.flush())
    {
        Ok(()) => Ok(()),
        // `| head` closing the pipe is not an error worth reporting.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(e.into()),
    }
}
