//! Dispatch of a parsed command line to the subcommand implementations.

use crate::bench::runner::{self, Mode, RunConfig};
use crate::cli::{Cli, Command};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub fn dispatch(cli: Cli) -> Result<()> {
    match cli.cmd {
        Command::Run(a) => match &a.generate {
            Some(path) => generate_cmd(&cli.global, &a.specs, path),
            None => cli_jobs(&cli.global, Mode::Run, &a.specs),
        },
        Command::Study(a) => cli_jobs(
            &cli.global,
            Mode::Study {
                reports_dir: a.reports,
            },
            &a.specs,
        ),
        Command::Solve(a) => cli_jobs(&cli.global, Mode::Solve, &a),
        Command::Format(a) => {
            if let Some(dir) = &a.plot {
                crate::bench::show::prepare_plot_dir(dir)?;
            }
            format_cmd(
                &cli.global,
                &a.specs.specs,
                true,
                a.rstat,
                Output::Stdout(crate::bench::export::OutputFormat::Text),
            )?;
            match &a.plot {
                Some(dir) => plot_cmd(&cli.global, &a.specs.specs, dir),
                None => Ok(()),
            }
        }
        Command::Summary(a) => {
            let output = crate::bench::export::OutputFormat::parse(&a.output_format)
                .expect("clap accepts only the known formats");
            if a.append.is_some() && output != crate::bench::export::OutputFormat::Csv {
                crate::usage_bail!("summary: --append adds CSV records: it needs -o csv");
            }
            let out = match &a.append {
                Some(path) => Output::AppendCsv(path),
                None => Output::Stdout(output),
            };
            format_cmd(&cli.global, &a.specs.specs, false, 0, out)
        }
        Command::Deps(a) => {
            let cfg = crate::config::Config::from_opts(&cli.global)?;
            crate::system::deps::deps_cmd(&cfg.dir, cfg.dev.as_deref(), a.fix)
        }
        Command::Pack(a) => cli_pack(&cli.global, a.allow_missing),
        Command::Compare(a) => compare_cmd(&cli.global, &a),
        Command::Merge(a) => merge_cmd(&cli.global, &a),
        Command::Doc(a) => {
            crate::config::Config::from_opts(&cli.global)?;
            crate::util::out::out_text(&crate::doc::render(&a.subjects)?);
            Ok(())
        }
        Command::Vm(a) => {
            let code = crate::vm::run(cli.global.dir.as_deref(), cli.global.verbose, &a)?;
            std::process::exit(code)
        }
        Command::KvmProbe => crate::vm::qemu::kvm_probe_child(),
        Command::Balloon => crate::system::mem::balloon_main(),
        Command::Hashd(a) => crate::workload::hashd::cmd::run(&a),
        Command::MemHog(a) => crate::workload::memhog::run::run(&a),
        Command::IoJob(a) => crate::workload::iojob::run(&a),
        #[cfg(feature = "testaid")]
        Command::TestAid(t) => crate::testaid::dispatch(t, &cli.global),
    }
}

/// Where `format` and `summary` put what they render.
enum Output<'a> {
    Stdout(crate::bench::export::OutputFormat),
    /// `summary -o csv --append FILE`.
    AppendCsv(&'a Path),
}

/// `format` (full) and `summary`: render the selected entries of the result file to stdout,
/// as the report or (`summary -o json|csv`) as records of their headline numbers, or add the
/// records to a CSV file.
fn format_cmd(
    global: &crate::cli::GlobalOpts,
    specs: &[String],
    full: bool,
    rstat: u8,
    output: Output,
) -> Result<()> {
    use crate::bench::export::{self, OutputFormat};
    use std::io::Write;
    let name = if full { "format" } else { "summary" };
    // The global options mean nothing here, but a bad one is refused as `run` refuses it.
    crate::config::Config::from_opts(global)?;
    let path = require_result(global, name)?;
    let specs = crate::bench::parse_format_specs(specs)?;
    let Some(bytes) = crate::result::read_bytes(&path)? else {
        crate::usage_bail!("{}: no such result file", path.display());
    };
    let entries = crate::result::parse_entries(&path, &bytes)?;
    drop(bytes);
    if !matches!(output, Output::Stdout(OutputFormat::Text)) {
        refuse_format_props(&specs)?;
    }
    let text = match output {
        Output::AppendCsv(csv) => {
            return export::append_csv(csv, &export::records(&entries, &specs)?)
        }
        Output::Stdout(OutputFormat::Text) => {
            crate::bench::show::format_entries(&entries, &specs, full, rstat)?
        }
        Output::Stdout(OutputFormat::Json) => export::to_json(&export::records(&entries, &specs)?),
        Output::Stdout(OutputFormat::Csv) => export::to_csv(&export::records(&entries, &specs)?),
        Output::Stdout(OutputFormat::Yaml) => export::to_yaml(&export::records(&entries, &specs)?)?,
    };
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

/// Format properties shape the text report; the records of `summary -o json|csv|yaml` are the
/// same with or without them, so one given there is refused rather than ignored.
fn refuse_format_props(specs: &[crate::spec::JobSpec]) -> Result<()> {
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

/// `format --plot DIR`: the SVGs of the selected entries.
fn plot_cmd(global: &crate::cli::GlobalOpts, specs: &[String], dir: &Path) -> Result<()> {
    let path = require_result(global, "format")?;
    let specs = crate::bench::parse_format_specs(specs)?;
    let Some(bytes) = crate::result::read_bytes(&path)? else {
        crate::usage_bail!("{}: no such result file", path.display());
    };
    let entries = crate::result::parse_entries(&path, &bytes)?;
    let stem = crate::result::pack::stem(&path);
    crate::bench::show::plot_entries(&entries, &specs, dir, &stem)?;
    Ok(())
}

/// `compare A B`: both files' headline numbers side by side.
fn compare_cmd(global: &crate::cli::GlobalOpts, a: &crate::cli::CompareArgs) -> Result<()> {
    crate::config::Config::from_opts(global)?;
    let specs = crate::bench::parse_format_specs(&a.specs)?;
    let records = |path: &Path| -> Result<Vec<crate::bench::headline::Row>> {
        let Some(bytes) = crate::result::read_bytes(path)? else {
            crate::usage_bail!("{}: no such result file", path.display());
        };
        let entries = crate::result::parse_entries(path, &bytes)?;
        crate::bench::export::records(&entries, &specs)
    };
    let keys = |kind: &str| crate::bench::find(kind).map_or(&[][..], |b| b.key_numbers());
    let text = crate::bench::compare::compare(
        &records(&a.a)?,
        &records(&a.b)?,
        (&a.a.display().to_string(), &a.b.display().to_string()),
        &keys,
        crate::bench::compare::CompareOpts { full: a.full },
    );
    crate::util::out::out_text(&text);
    Ok(())
}

/// The result file of a command that needs one: `<what> requires --result` otherwise.
fn require_result(global: &crate::cli::GlobalOpts, what: &str) -> Result<PathBuf> {
    match &global.result {
        Some(p) if !p.as_os_str().is_empty() => Ok(p.clone()),
        _ => crate::usage_bail!("{} requires --result", what),
    }
}

/// What the runner needs, from the validated global options; `what` names the command for the
/// missing-`--result` error.
fn run_config(cfg: &crate::config::Config, what: &str) -> Result<RunConfig> {
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

/// `run`, `study` and `solve` from the command line.
fn cli_jobs(
    global: &crate::cli::GlobalOpts,
    mode: Mode,
    args: &crate::cli::SpecArgs,
) -> Result<()> {
    let config = crate::config::Config::from_opts(global)?;
    let cfg = run_config(&config, mode.name())?;
    let specs = crate::config::args_file::collect_job_specs(
        &config,
        mode.name(),
        args,
        crate::bench::validate_run,
    )?;
    runner::run_cmd(&cfg, mode, specs)
}

/// `run --generate FILE`: the io specs as a job file, checked as a run would check them.
fn generate_cmd(
    global: &crate::cli::GlobalOpts,
    args: &crate::cli::SpecArgs,
    path: &Path,
) -> Result<()> {
    crate::config::Config::from_opts(global)?;
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

/// `merge SOURCE...`: merges the sources' mergeable entries into the `--result` file (replaced
/// whole, under its lock) and prints the `merge-info` entry.
fn merge_cmd(global: &crate::cli::GlobalOpts, a: &crate::cli::MergeArgs) -> Result<()> {
    crate::config::Config::from_opts(global)?;
    let out = require_result(global, "merge")?;
    // Held from before anything is read to the save: a second merge into the same file stops
    // at once, and the output (which may also be a source) is replaced only as it was read.
    let _lock = crate::result::lock::ResultLock::acquire(&out)?;
    let target = crate::result::save::resolve_trusted(&out)?;
    let expect = crate::result::save::FileId::at(&target)
        .with_context(|| format!("checking {}", out.display()))?;
    let mut files = Vec::new();
    for src in &a.sources {
        let Some(bytes) = crate::result::read_bytes(src)? else {
            crate::usage_bail!("{}: no such result file", src.display());
        };
        let entries = crate::result::parse_entries(src, &bytes)?;
        files.push((src.display().to_string(), entries));
    }
    let opts = crate::bench::merge::MergeOpts {
        by_id: a.by_id,
        ignore_versions: a.ignore_versions,
        ignore_sysreqs: a.ignore_sysreqs,
        multiple: a.multiple,
        merge_time_savers: a.merge_time_savers,
    };
    let entries = crate::bench::merge::merge(&files, &opts, crate::util::now())?;
    crate::result::save::save_entries_over(&out, expect, &entries)?;
    let mut text = String::new();
    let opts = crate::format::FormatOpts {
        full: true,
        ..Default::default()
    };
    crate::bench::show::format_entry(&mut text, &entries[0], &opts)?;
    crate::util::out::out_text(&text);
    Ok(())
}

/// `pack` from the command line: `./<stem>.tar.gz`.
fn cli_pack(global: &crate::cli::GlobalOpts, allow_missing: bool) -> Result<()> {
    let config = crate::config::Config::from_opts(global)?;
    let cfg = run_config(&config, "pack")?;
    // pack takes no job specs: the stored subcommand and specs stay as they are.
    if let Some(file) = &config.args_file {
        file.save(&config, None)?;
    }
    let _lock = crate::result::lock::ResultLock::acquire(&cfg.result)?;
    // Benches that run without the host set up (io, curve, iocost-tune) write no reports.
    let reported = |kind: &str| crate::bench::find(kind).is_none_or(|b| b.desc().system.is_some());
    crate::result::pack::pack(
        &cfg.result,
        &cfg.dir,
        Path::new("."),
        allow_missing,
        &reported,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// A value for every global option, as a user would give it.
    const EXAMPLES: &[(&str, &[&str])] = &[
        ("result", &["-r", "r.json"]),
        ("dir", &["-d", "/tmp/elsewhere"]),
        ("dev", &["-D", "vdb"]),
        ("rep_retention", &["--rep-retention", "1D"]),
        ("mem_profile", &["-M", "8"]),
        ("mem_avail", &["-m", "4G"]),
        ("mem_margin", &["--mem-margin", "10%"]),
        ("iocost_qos", &["--iocost-qos", "vrate=50"]),
        ("swappiness", &["--swappiness", "10"]),
        ("hashd_size", &["--hashd-size", "2G"]),
        ("hashd_cpu_load", &["--hashd-cpu-load", "fake"]),
        ("args", &["-a", "/tmp/resctl-bench-options-test.json"]),
        ("iocost_from_sys", &["--iocost-from-sys"]),
        ("keep_reports", &["--keep-reports"]),
        ("clear_reports", &["--clear-reports"]),
        ("force", &["--force"]),
        ("quick", &["--quick"]),
        ("verbose", &["-v"]),
        ("logfile", &["--logfile", "/tmp/x.log"]),
    ];

    /// What the code paths read of the options: the runner's and the host session's
    /// configuration (`bench_args` aside: it records every option), whether an args file is
    /// kept, and what `main` hands to the logger.
    fn consumed(args: &[&str]) -> String {
        let mut argv = vec!["resctl-bench"];
        argv.extend_from_slice(args);
        argv.extend(["run", "selftest"]);
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        let g = &cli.global;
        // The args file is only loaded, not validated against a directory, here.
        let mut config = match crate::config::Config::from_opts(g) {
            Ok(c) => c,
            Err(e) => panic!("{:?}: {:#}", args, e),
        };
        let kept_args = config.args_file.take().map(|a| a.path().to_path_buf());
        config.result.get_or_insert_with(|| "default.json".into());
        let mut run = run_config(&config, "run").unwrap();
        run.bench_args = None;
        format!("{:?} {:?} {:?}", run, kept_args, g.log_opts())
    }

    #[test]
    fn every_global_option_is_read_by_some_code_path() {
        let ids: Vec<String> = crate::cli::Cli::command()
            .get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().to_string())
            .collect();
        for id in &ids {
            assert!(
                EXAMPLES.iter().any(|(k, _)| k == id),
                "--{}: no example; add one, and make sure some code path reads it",
                id
            );
        }
        let base = consumed(&[]);
        for (id, args) in EXAMPLES {
            assert!(ids.contains(&id.to_string()), "{} is no global option", id);
            assert_ne!(
                consumed(args),
                base,
                "{:?} changes nothing that is read",
                args
            );
        }
    }
}
