//! Command-line definitions (clap derive). Values that need our own grammar (sizes, durations,
//! QoS overrides) are kept as strings here and validated in `config`, so every bad value gets the
//! same one-line error and exit code 2.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[cfg(feature = "testaid")]
pub mod testaid;

pub use crate::system::DFL_DIR;

#[derive(Debug, Parser)]
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
    /// What the logger is set up with (`logging::init`): the verbosity and the log file.
    pub fn log_opts(&self) -> (u8, Option<&std::path::Path>) {
        (self.verbose, self.logfile.as_deref())
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run or continue benchmark jobs
    Run(RunArgs),
    /// Re-derive results from records and per-second reports
    Study(StudyArgs),
    /// Re-derive results from the stored results only
    Solve(SpecArgs),
    /// Print the full report of result entries
    Format(FormatArgs),
    /// Print the short report of result entries
    Summary(SummaryArgs),
    /// Check the system requirements (cgroup2, io.cost, swap, IO scheduler, ...) and list them;
    /// exits 1 if any is missed
    Deps(DepsArgs),
    /// Pack the result file and its per-second reports into a tarball
    Pack(PackArgs),
    /// Show the headline numbers of two result files side by side, with their ratio
    Compare(CompareArgs),
    /// Merge the results of many hosts (e.g. iocost-tune per device model) into the file
    /// given with --result
    Merge(MergeArgs),
    /// Print documentation: `doc` lists subjects, `doc NAME` prints one
    Doc(DocArgs),
    /// Run resctl-bench inside a disposable QEMU VM test host (see `doc vm`)
    Vm(Box<crate::vm::VmArgs>),
    /// Check whether KVM can run a virtual CPU (used by `vm --accel auto`)
    #[command(name = "__kvm-probe", hide = true)]
    KvmProbe,
    /// The memory balloon: holds the byte counts read from stdin, one a line, until EOF
    #[command(name = "__balloon", hide = true)]
    Balloon,
    /// The bundled workload hashd: testfiles, params reload, status file, until SIGTERM
    #[command(name = "__hashd", hide = true)]
    Hashd(crate::workload::hashd::HashdArgs),
    /// The memory hog: grows anonymous memory at a set rate, reporting every second, until
    /// killed
    #[command(name = "__mem-hog", hide = true)]
    MemHog(crate::workload::memhog::MemHogArgs),
    /// One IO engine job in a process of its own (a cgroup holds it), until done or SIGTERM
    #[command(name = "__io-job", hide = true)]
    IoJob(crate::workload::iojob::IoJobArgs),
    /// The hidden subcommands only tests and scripts use (built with the `testaid` feature).
    #[cfg(feature = "testaid")]
    #[command(flatten)]
    TestAid(testaid::TestAid),
}

#[derive(Debug, Args)]
pub struct CompareArgs {
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

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The result files to merge
    #[arg(value_name = "SOURCE", required = true)]
    pub sources: Vec<PathBuf>,
    /// Keep entries with different ids apart
    #[arg(long = "by-id")]
    pub by_id: bool,
    /// Merge results of different bench, agent and hashd versions
    #[arg(long = "ignore-versions")]
    pub ignore_versions: bool,
    /// Merge results of runs that missed system requirements
    #[arg(long = "ignore-sysreqs")]
    pub ignore_sysreqs: bool,
    /// Keep every group of each kind, not only the one with the most sources
    #[arg(long = "multiple")]
    pub multiple: bool,
    /// Merge results measured with this tool's time-savers (iocost-qos's mof-hint and
    /// the others) with upstream-faithful ones; kept apart otherwise
    #[arg(long = "merge-time-savers")]
    pub merge_time_savers: bool,
}

#[derive(Debug, Args)]
pub struct PackArgs {
    /// Pack even when the reports of a run are nowhere to be found (they are left out)
    #[arg(long = "allow-missing")]
    pub allow_missing: bool,
}

/// The global options a visible subcommand reads; the others are left out of its help and
/// refused when given on the command line (an accepted option must do something). `None`:
/// all of them (`run`, and the hidden test aids).
pub fn options_of(subcommand: &str) -> Option<&'static [&'static str]> {
    const LOG: [&str; 2] = ["verbose", "logfile"];
    match subcommand {
        "run" => None,
        "study" => Some(&["result", "dir", "args", LOG[0], LOG[1]]),
        "solve" => Some(&["result", "args", LOG[0], LOG[1]]),
        "format" | "summary" | "merge" => Some(&["result", LOG[0], LOG[1]]),
        "pack" => Some(&["result", "dir", "args", LOG[0], LOG[1]]),
        "deps" => Some(&["dir", "dev", LOG[0], LOG[1]]),
        "doc" | "vm" | "compare" | "help" => Some(&LOG),
        _ => None,
    }
}

fn global_ids(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().to_string())
        .collect()
}

/// The command line, each subcommand's help showing only the global options it reads: the
/// others are defined on it again, hidden (clap then doesn't propagate the visible ones).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let globals: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for sub in subs {
        let Some(keep) = options_of(&sub) else {
            continue;
        };
        let hidden: Vec<clap::Arg> = globals
            .iter()
            .filter(|g| !keep.contains(&g.get_id().as_str()))
            .map(|g| g.clone().hide(true))
            .collect();
        cmd = cmd.mut_subcommand(&sub, |sc| sc.args(hidden));
    }
    cmd
}

/// Why the command line was refused.
#[derive(Debug)]
pub enum ParseError {
    /// clap's own (it prints and exits: help, version, usage errors).
    Clap(clap::Error),
    /// A global option the subcommand doesn't read (one line, exit 2).
    NotApplicable(String),
}

/// Parses the command line: clap's checks, then that every global option given applies to
/// the subcommand.
pub fn parse_from<I, T>(args: I) -> Result<Cli, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let mut cmd = command();
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let m = cmd
        .try_get_matches_from_mut(args.clone())
        .map_err(ParseError::Clap)?;
    if let Some(sub) = m.subcommand_name() {
        if let Some(twice) = given_on_both_sides(&cmd, &args, sub) {
            return Err(ParseError::NotApplicable(format!(
                "{} is given before and after the subcommand; give it once",
                twice
            )));
        }
    }
    if let Some((sub, sm)) = m.subcommand() {
        if let Some(keep) = options_of(sub) {
            for id in global_ids(&cmd) {
                if keep.contains(&id.as_str())
                    || sm.value_source(&id) != Some(clap::parser::ValueSource::CommandLine)
                {
                    continue;
                }
                let flag = |id: &str| {
                    let a = cmd.get_arguments().find(|a| a.get_id() == id);
                    a.and_then(|a| a.get_long())
                        .map_or(id.to_string(), |l| format!("--{}", l))
                };
                let accepted: Vec<String> = keep.iter().map(|k| flag(k)).collect();
                return Err(ParseError::NotApplicable(format!(
                    "{} doesn't apply to {} (its options: {}; see `resctl-bench help {}`)",
                    flag(&id),
                    sub,
                    accepted.join(", "),
                    sub
                )));
            }
        }
    }
    Cli::from_arg_matches(&m).map_err(|e| ParseError::Clap(e.format(&mut cmd)))
}

/// A global option that takes a value and is given both before and after the subcommand
/// (`-r A summary -r B`): clap keeps the later one silently, while `-r A -r B` is refused.
/// Returns how it was given (`--result`).
fn given_on_both_sides(
    cmd: &clap::Command,
    args: &[std::ffi::OsString],
    sub: &str,
) -> Option<String> {
    let globals: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set() && a.get_action().takes_values())
        .collect();
    let mut seen: [Vec<&str>; 2] = [Vec::new(), Vec::new()];
    let mut side = 0;
    let mut i = 1;
    while i < args.len() {
        let tok = args[i].to_string_lossy();
        i += 1;
        if tok == "--" {
            break;
        }
        if let Some(long) = tok.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            if let Some(a) = globals.iter().find(|a| a.get_long() == Some(name)) {
                seen[side].push(a.get_id().as_str());
                i += usize::from(!inline);
            }
        } else if tok.len() > 1 && tok.starts_with('-') {
            // A cluster of short options: the first that takes a value ends it.
            for (at, c) in tok.char_indices().skip(1) {
                if let Some(a) = globals.iter().find(|a| a.get_short() == Some(c)) {
                    seen[side].push(a.get_id().as_str());
                    i += usize::from(at + c.len_utf8() == tok.len());
                    break;
                }
            }
        } else if side == 0 && tok == sub {
            side = 1;
        }
    }
    let twice = seen[0].iter().find(|id| seen[1].contains(id))?;
    let a = globals.iter().find(|a| a.get_id() == *twice)?;
    Some(
        a.get_long()
            .map_or(twice.to_string(), |l| format!("--{}", l)),
    )
}

/// Drops the hidden subcommands (`__hashd`, …) from the "similar subcommands" tip of an
/// unrecognized-subcommand error: they are internal and never what a user meant.
pub fn without_hidden_suggestions(mut err: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::Strings(list)) = err.get(ContextKind::SuggestedSubcommand) else {
        return err;
    };
    let visible: Vec<String> = list
        .iter()
        .filter(|s| !s.starts_with("__"))
        .cloned()
        .collect();
    if !visible.is_empty() {
        err.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(visible),
        );
        return err;
    }
    // No tip left: the same error without the suggestion context.
    let mut bare = clap::Error::new(err.kind()).with_cmd(&<Cli as clap::CommandFactory>::command());
    for kind in [ContextKind::InvalidSubcommand, ContextKind::Usage] {
        if let Some(v) = err.get(kind) {
            bare.insert(kind, v.clone());
        }
    }
    bare
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
pub struct RunArgs {
    #[command(flatten)]
    pub specs: SpecArgs,
    /// Write the io specs as a job file to FILE instead of running them: a [[job]] per spec and
    /// every property with its default in comments (run it with `io:jobs=FILE`)
    #[arg(long = "generate", value_name = "FILE")]
    pub generate: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct StudyArgs {
    /// Directory holding the per-second reports [default: <result stem>-report.d beside the
    /// result if it exists (a run in `vm`, an unpacked tarball), else DIR/report.d]
    #[arg(short = 'R', long = "reports", value_name = "DIR")]
    pub reports: Option<PathBuf>,
    #[command(flatten)]
    pub specs: SpecArgs,
}

#[derive(Debug, Args)]
pub struct FormatSpecs {
    /// Entries to print (BENCH[:ID-and-format-props]); default: every entry
    #[arg(value_name = "SPEC")]
    pub specs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct SummaryArgs {
    /// text (the report), or each entry's headline numbers as json, yaml or csv records (see
    /// `doc results`, "Export")
    #[arg(
        short = 'o',
        long = "output-format",
        value_name = "FORMAT",
        default_value = "text",
        value_parser = ["text", "json", "yaml", "csv"]
    )]
    pub output_format: String,
    /// With `-o csv`: add the records to FILE instead of printing them, so runs one after
    /// another make one table; the header is written when FILE is new or empty, and must be
    /// the same when it isn't
    #[arg(long = "append", value_name = "FILE")]
    pub append: Option<PathBuf>,
    #[command(flatten)]
    pub specs: FormatSpecs,
}

#[derive(Debug, Args)]
pub struct FormatArgs {
    /// Add resource-stat tables; repeat to include hidden keys
    #[arg(short = 'R', long = "rstat", action = clap::ArgAction::Count)]
    pub rstat: u8,
    /// Also draw the entries that have pictures (storage, iocost-tune, curve, qos-study) as
    /// SVG files and a page in DIR, named after the result file and the entry
    #[arg(long = "plot", value_name = "DIR")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub specs: FormatSpecs,
}

#[derive(Debug, Args)]
pub struct DocArgs {
    /// Subject: common, vm, or a bench name
    #[arg(value_name = "SUBJECT")]
    pub subjects: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DepsArgs {
    /// Also apply the fixes a run applies (through the restore journal) and report the result;
    /// every change is restored when deps exits
    #[arg(long = "fix")]
    pub fix: bool,
}
