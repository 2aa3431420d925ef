//! What the subcommands' command lines share (clap derive): the global options, the job specs of
//! `run`/`study`/`solve` and the entry specs of `format`/`summary`, and the hidden test aids'
//! arguments. Each subcommand's own arguments are in its file under `commands/`. Values that need
//! our own grammar (sizes, durations, QoS overrides) are kept as strings here and validated in
//! `config`, so every bad value gets the same one-line error and exit code 2.

use clap::Args;
use std::path::PathBuf;

#[cfg(feature = "testaid")]
pub mod testaid;

pub use crate::system::DFL_DIR;

#[derive(Debug, Clone, Args)]
pub struct GlobalOpts {
    /// Result file (JSON; gzip when the name ends in .gz)
    #[arg(short = 'r', long = "result", global = true, value_name = "FILE")]
    pub result: Option<PathBuf>,

    /// Top-level work directory (scratch/, report.d/, bench.json); empty resets to the default
    #[arg(short = 'd', long = "dir", global = true, value_name = "DIR")]
    pub dir: Option<String>,

    /// Scratch block device name (e.g. nvme0n1); default: the device backing DIR
    #[arg(short = 'D', long = "dev", global = true, value_name = "DEV")]
    pub dev: Option<String>,

    /// Per-second report retention (duration, e.g. 7D or 604800)
    #[arg(long = "rep-retention", global = true, value_name = "DUR")]
    pub rep_retention: Option<String>,

    /// Memory profile in GiB (a power of two) or "off" to run at machine size [default: 16]
    #[arg(short = 'M', long = "mem-profile", global = true, value_name = "N|off")]
    pub mem_profile: Option<String>,

    /// Available memory (size); skips the estimation
    #[arg(short = 'm', long = "mem-avail", global = true, value_name = "SIZE")]
    pub mem_avail: Option<String>,

    /// Workload memory.low margin below its share (fraction or percent) [default: 25%]
    #[arg(long = "mem-margin", global = true, value_name = "FRAC")]
    pub mem_margin: Option<String>,

    /// io.cost QoS overrides: rpct,wpct,min,max (percent), rlat,wlat (usec), vrate (min=max)
    #[arg(long = "iocost-qos", global = true, value_name = "K=V,...")]
    pub iocost_qos: Option<String>,

    /// hashd footprint (size) to use instead of the benchmarked one
    #[arg(long = "hashd-size", global = true, value_name = "SIZE")]
    pub hashd_size: Option<String>,

    /// hashd CPU load: fake (sleep instead of hashing), real, or keep (the benchmarked choice)
    #[arg(long = "hashd-cpu-load", global = true, value_name = "LOAD")]
    pub hashd_cpu_load: Option<String>,

    /// vm.swappiness to use during benches (0-200)
    #[arg(long = "swappiness", global = true, value_name = "N")]
    pub swappiness: Option<String>,

    /// Persistent argument file (JSON)
    #[arg(short = 'a', long = "args", global = true, value_name = "FILE")]
    pub args: Option<PathBuf>,

    /// Take io.cost model and QoS from /sys/fs/cgroup instead of bench.json
    #[arg(long = "iocost-from-sys", global = true)]
    pub iocost_from_sys: bool,

    /// Don't delete expired per-second reports
    #[arg(long = "keep-reports", global = true)]
    pub keep_reports: bool,

    /// Delete existing per-second reports before running
    #[arg(long = "clear-reports", global = true, conflicts_with = "keep_reports")]
    pub clear_reports: bool,

    /// Keep going even when system requirements are missed
    #[arg(long = "force", global = true)]
    pub force: bool,

    /// Quick mode: shorter phases (fewer rounds, shorter settling windows), still real
    /// measurements; results carry a `quick` mark
    #[arg(long = "quick", global = true)]
    pub quick: bool,

    /// More log output (repeat for more)
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Also write log output to FILE
    #[arg(long = "logfile", global = true, value_name = "FILE")]
    pub logfile: Option<PathBuf>,
}

impl GlobalOpts {
    /// The global options of a command line alone (no subcommand), for the tests of what
    /// reads them.
    #[cfg(test)]
    pub fn parse_alone(args: &[&str]) -> Result<GlobalOpts, clap::Error> {
        use clap::Parser;
        #[derive(Parser)]
        struct Alone {
            #[command(flatten)]
            global: GlobalOpts,
        }
        let argv = std::iter::once("resctl-bench").chain(args.iter().copied());
        Alone::try_parse_from(argv).map(|a| a.global)
    }

    /// What the logger is set up with (`logging::init`): the verbosity and the log file.
    pub fn log_opts(&self) -> (u8, Option<&std::path::Path>) {
        (self.verbose, self.logfile.as_deref())
    }
}

#[derive(Debug, Args)]
pub struct SpecArgs {
    /// Read job specs from an args-format JSON file (repeatable)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Vec<PathBuf>,
    /// Job specs: BENCH[:KEY[=VAL],...][:GROUP]...
    #[arg(value_name = "SPEC")]
    pub specs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct FormatSpecs {
    /// Entries to print (BENCH[:ID-and-format-props]); default: every entry
    #[arg(value_name = "SPEC")]
    pub specs: Vec<String>,
}
