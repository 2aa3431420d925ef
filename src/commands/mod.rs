//! The subcommands, one file each: its arguments (clap), the global options it reads and what
//! it does. `subcommands!` below lists them once, one line each, which declares their modules
//! and makes the `Command` enum, its dispatch and `options_of`; `parse` reads the command line
//! into them; `shared` holds what several use (the result file they need, the runner's
//! configuration and jobs, reading a result file, printing a report).

pub mod parse;
mod shared;

use crate::cli::GlobalOpts;
use anyhow::Result;

#[derive(Debug, clap::Parser)]
#[command(
    name = "resctl-bench",
    version,
    about = "Benchmark harness for Linux resource control: memory offloading, protection and io.cost QoS",
    after_help = crate::bench::help_list()
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalOpts,

    #[command(subcommand)]
    pub cmd: Command,
}

/// One line per subcommand: its attributes (hidden ones), its name, its variant and arguments,
/// and the module (declared here) that holds them with `OPTIONS` (the global options it reads: `None` for all,
/// `run` and the hidden ones) and `exec` (what it does). The variant's help is the arguments'
/// doc comment.
macro_rules! subcommands {
    ($( $(#[$attr:meta])* $name:literal $variant:ident($args:ty) => $module:ident; )*) => {
        $( mod $module; )*

        #[derive(Debug, clap::Subcommand)]
        pub enum Command {
            $( $(#[$attr])* #[command(name = $name)] $variant($args), )*
            /// The hidden subcommands only tests and scripts use (built with the `testaid`
            /// feature).
            #[cfg(feature = "testaid")]
            #[command(flatten)]
            TestAid(crate::cli::testaid::TestAid),
        }

        /// Runs the parsed command line's subcommand, with the global options validated once
        /// (a bad value is refused whatever the subcommand, as `run` refuses it).
        /// The test aids take the options as given: `__probe --iocost-qos` writes raw knobs
        /// (`enable=1 ctrl=user ...`) that share the global option's name.
        pub fn dispatch(cli: Cli) -> Result<()> {
            #[cfg(feature = "testaid")]
            if let Command::TestAid(t) = cli.cmd {
                return crate::testaid::dispatch(t, &cli.global);
            }
            let config = crate::config::Config::from_opts(&cli.global)?;
            let g = shared::Globals {
                given: &cli.global,
                config: &config,
            };
            match cli.cmd {
                $( Command::$variant(a) => $module::exec(&g, a), )*
                #[cfg(feature = "testaid")]
                Command::TestAid(_) => unreachable!("dispatched above"),
            }
        }

        /// The global options a subcommand reads; the others are left out of its help and
        /// refused when given (an accepted option must do something). `None`: all of them.
        pub fn options_of(subcommand: &str) -> Option<&'static [&'static str]> {
            match subcommand {
                $( $name => $module::OPTIONS, )*
                "help" => Some(&shared::LOG),
                _ => None,
            }
        }
    };
}

subcommands! {
    "run" Run(run::Args) => run;
    "study" Study(study::Args) => study;
    "solve" Solve(solve::Args) => solve;
    "format" Format(format::Args) => format;
    "summary" Summary(summary::Args) => summary;
    "deps" Deps(deps::Args) => deps;
    "pack" Pack(pack::Args) => pack;
    "compare" Compare(compare::Args) => compare;
    "merge" Merge(merge::Args) => merge;
    "apply" Apply(apply::Args) => apply;
    "db" Db(db::Args) => db;
    "doc" Doc(doc::Args) => doc;
    "man" Man(man::Args) => man;
    "completions" Completions(completions::Args) => completions;
    "vm" Vm(Box<crate::vm::VmArgs>) => vm;
    #[command(hide = true)] "__kvm-probe" KvmProbe(kvm_probe::Args) => kvm_probe;
    #[command(hide = true)] "__balloon" Balloon(balloon::Args) => balloon;
    #[command(hide = true)] "__hashd" Hashd(crate::workload::hashd::HashdArgs) => hashd;
    #[command(hide = true)] "__mem-hog" MemHog(crate::workload::memhog::MemHogArgs) => mem_hog;
    #[command(hide = true)] "__io-job" IoJob(crate::workload::iojob::IoJobArgs) => io_job;
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
        let cli = Cli::try_parse_from(argv).unwrap();
        let g = &cli.global;
        // The args file is only loaded, not validated against a directory, here.
        let mut config = match crate::config::Config::from_opts(g) {
            Ok(c) => c,
            Err(e) => panic!("{:?}: {:#}", args, e),
        };
        let kept_args = config.args_file.take().map(|a| a.path().to_path_buf());
        config.result.get_or_insert_with(|| "default.json".into());
        let mut run = shared::run_config(&config, "run").unwrap();
        run.bench_args = None;
        format!("{:?} {:?} {:?}", run, kept_args, g.log_opts())
    }

    #[test]
    fn every_global_option_is_read_by_some_code_path() {
        let ids: Vec<String> = Cli::command()
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

    /// The test aids take the global options wherever they are given.
    #[cfg(feature = "testaid")]
    #[test]
    fn hashd_bench_takes_the_global_dir_and_quick() {
        let cli = Cli::try_parse_from([
            "resctl-bench",
            "__hashd-bench",
            "--dir",
            "/tmp/x",
            "--size",
            "1G",
            "--fake-cpu",
            "--rps-max",
            "200",
            "--quick",
        ])
        .unwrap();
        assert_eq!(cli.global.dir.as_deref(), Some("/tmp/x"));
        assert!(cli.global.quick);
        let Command::TestAid(crate::cli::testaid::TestAid::HashdBench(a)) = cli.cmd else {
            panic!("not __hashd-bench");
        };
        assert!(a.fake_cpu && !a.rotational);
        assert_eq!((a.size.as_str(), a.rps_max), ("1G", Some(200)));
    }
}
