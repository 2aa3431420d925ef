//! The arguments of the hidden test-aid subcommands (`crate::testaid` runs them). Kept with
//! the other clap definitions so the command line is defined in one place and `testaid` sits
//! above `cli`, not beside it.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The hidden test-aid subcommands, flattened into `Command` when the `testaid` feature is on.
#[derive(Debug, Subcommand)]
pub enum TestAid {
    /// Testing aid: set --path to --value through the restore journal of --dir, print `changed`
    /// and wait to be killed
    #[command(name = "__journal-test", hide = true)]
    JournalTest(JournalTestArgs),
    /// Testing aid: repeatedly save the entries of FROM to --result, alternating two orders
    #[command(name = "__save-test", hide = true)]
    SaveTest(SaveTestArgs),
    /// Guest-side probes used by the VM tests (io.cost knobs, io.stat, swaps, random-read IOPS)
    #[command(name = "__probe", hide = true)]
    Probe(ProbeArgs),
    /// Testing aid: run the per-second reporter for --secs into DIR/report.d (optionally next
    /// to a synthetic load) and print a JSON summary of coverage and overhead
    #[command(name = "__reporter", hide = true)]
    Reporter(ReporterArgs),
    /// Testing aid: per-second IO latency of a block device, optionally under a random-read load
    #[command(name = "__iolat", hide = true)]
    IoLat(IoLatArgs),
    /// Testing aid: the hashd sizing bench (rps_max, memory footprint) against a hashd on this
    /// host, without cgroups; prints the result JSON
    #[command(name = "__hashd-bench", hide = true)]
    HashdBench(HashdBenchArgs),
    /// Guest-side scenarios of the VM tests (kill-and-restore, balloon), printed as JSON
    #[command(name = "__vm-scenario", hide = true)]
    VmScenario(ScenarioArgs),
    /// Measuring aid: per file, the iocost-tune solutions of every other configuration's
    /// bootstrap intervals against the whole grid's solutions, as JSON lines
    #[command(name = "__tune-check", hide = true)]
    TuneCheck(TuneCheckArgs),
    /// Measuring aid: the adaptive vrate grid replayed on full-grid result files, one JSON
    /// line per file
    #[command(name = "__tune-replay", hide = true)]
    TuneReplay(TuneReplayArgs),
}

#[derive(Debug, Args)]
pub struct SaveTestArgs {
    /// Result file to take the entries from
    #[arg(long = "from", value_name = "FILE")]
    pub from: PathBuf,
    /// Number of saves (0 = until killed)
    #[arg(long = "loops", default_value_t = 0)]
    pub loops: u64,
    /// Instead: fork this many saving children, SIGKILL each at a random moment, print
    /// `killed N` and wait for a line on stdin before the next
    #[arg(long = "kills", default_value_t = 0)]
    pub kills: u64,
    /// Seed of the kill delays
    #[arg(long = "seed", default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// Write this to io.cost.qos for the scratch device (MAJ:MIN is prepended) and read it back
    #[arg(long = "iocost-qos", value_name = "KNOBS")]
    pub iocost_qos: Option<String>,
    /// Same for io.cost.model
    #[arg(long = "iocost-model", value_name = "KNOBS")]
    pub iocost_model: Option<String>,
    /// Include the root cgroup's io.stat
    #[arg(long = "io-stat")]
    pub io_stat: bool,
    /// Include /proc/swaps
    #[arg(long = "swaps")]
    pub swaps: bool,
    /// Measure 4 KiB O_DIRECT random-read IOPS for this many seconds
    #[arg(long = "randread", value_name = "SECS")]
    pub randread: Option<f64>,
    /// Device or file to read [default: the scratch device]
    #[arg(long = "randread-target", value_name = "PATH")]
    pub randread_target: Option<PathBuf>,
    /// Concurrent readers (queue depth)
    #[arg(long = "jobs", default_value_t = 4)]
    pub jobs: usize,
    /// Write --content to this file (relative to the working directory)
    #[arg(long = "write-file", value_name = "PATH")]
    pub write_file: Option<PathBuf>,
    #[arg(long = "content", default_value = "")]
    pub content: String,
    /// Write these bytes to stdout / stderr verbatim (instead of the JSON report)
    #[arg(long = "stdout", value_name = "TEXT")]
    pub stdout: Option<String>,
    #[arg(long = "stderr", value_name = "TEXT")]
    pub stderr: Option<String>,
    /// Exit with this status
    #[arg(long = "exit", value_name = "N")]
    pub exit: Option<i32>,
    /// Run this shell command (sh -c) instead, its output passed through, and exit with its
    /// status
    #[arg(long = "sh", value_name = "SCRIPT")]
    pub sh: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReporterArgs {
    /// Seconds to run the reporter
    #[arg(long = "secs", value_name = "N")]
    pub secs: u64,
    /// Synthetic load next to it: cpu (a spinning thread), io (a writer and two O_DIRECT
    /// random readers on DIR/scratch), or both (cpu,io)
    #[arg(long = "load", value_name = "KINDS", value_delimiter = ',')]
    pub load: Vec<String>,
    /// IO-latency source: none, auto (tracefs, else /proc/diskstats), tracefs or diskstats
    #[arg(long = "iolat", value_name = "SOURCE", default_value = "none")]
    pub iolat: String,
}

#[derive(Debug, Clone, Args)]
pub struct IoLatArgs {
    /// Seconds to sample
    #[arg(long = "secs", default_value_t = 10)]
    pub secs: u64,
    /// Block device name (e.g. vda) [default: the VM scratch device]
    #[arg(long = "dev", value_name = "NAME")]
    pub dev: Option<String>,
    /// Load to run on the device meanwhile (randread: 4 KiB O_DIRECT random reads)
    #[arg(long = "load", value_name = "randread")]
    pub load: Option<String>,
    /// Concurrent readers of the load (queue depth)
    #[arg(long = "jobs", default_value_t = 4)]
    pub jobs: usize,
    /// Latency source: auto (tracefs, else diskstats), tracefs, tracefs-text (trace_pipe
    /// instead of the raw per-CPU pipes) or diskstats
    #[arg(long = "source", default_value = "auto")]
    pub source: String,
    /// Print the block trace event formats to stderr first
    #[arg(long = "show-formats")]
    pub show_formats: bool,
}

#[derive(Debug, Args)]
pub struct HashdBenchArgs {
    /// The 100 % footprint (size, e.g. 2G)
    #[arg(long = "size", value_name = "SIZE")]
    pub size: String,
    /// Sleep instead of hashing (needs --rps-max)
    #[arg(long = "fake-cpu")]
    pub fake_cpu: bool,
    /// Use this rps_max instead of measuring it
    #[arg(long = "rps-max", value_name = "N")]
    pub rps_max: Option<u32>,
    /// Use the longer probes of rotational devices
    #[arg(long = "rotational")]
    pub rotational: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    System,
    RestoreAfterKill,
    Balloon,
    Reports,
    IocostQos,
    Seq,
    FioCompare,
    /// A curve of our engine, then fio's rate sweep at its points (scripts/curve-compare)
    CurveFio,
    /// Our plain and fast io_uring paths against fio's plain and fastest (scripts/io-fast-compare)
    FastCompare,
    /// In a `vm --init systemd` guest: `seq`'s commands, then what systemd was left with
    SystemdHost,
}

#[derive(Debug, Clone, Args)]
pub struct ScenarioArgs {
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Work directory of the runs (on the scratch disk)
    #[arg(long = "work", default_value = "/var/lib/resctl-demo/scenario")]
    pub work: PathBuf,
    /// `balloon`: the memory profile
    #[arg(long = "profile", default_value = "1")]
    pub profile: String,
    /// `reports`: the result file of the runs [default: WORK/result.json]
    #[arg(long = "run-result", value_name = "FILE")]
    pub run_result: Option<PathBuf>,
    /// `systemd-host`: after the commands, `apply` end to end with this result (relabelled
    /// for the guest's `--scsi-disk`) and systemd's own iocost
    #[arg(long = "apply", value_name = "FILE")]
    pub apply: Option<PathBuf>,
    /// `seq`: a resctl-bench command line (split at spaces, run with `--dir WORK`); repeat
    /// for several, run one after another in the same guest
    #[arg(long = "cmd", value_name = "ARGS", allow_hyphen_values = true)]
    pub cmds: Vec<String>,
    /// `fio-compare`, `curve-fio`, `fast-compare`: seconds each job is measured (after a 2 s
    /// ramp)
    #[arg(long = "dur", default_value = "20")]
    pub dur: u64,
    /// `curve-fio`: the curve's points, /-separated [default: the curve's]
    #[arg(long = "points", default_value = "")]
    pub points: String,
    /// `curve-fio`: the curve's arrivals; fio's rate_process is `linear` for `linear`, else
    /// `poisson`
    #[arg(long = "arrivals", default_value = "linear", value_parser = ["linear", "poisson", "stratified"])]
    pub arrivals: String,
    /// `fast-compare`: the file or block device [default: /dev/nullb0 when there, else a test
    /// file in WORK]
    #[arg(long = "target", value_name = "PATH")]
    pub target: Option<PathBuf>,
    /// `fast-compare`: run every variant this many times, in reverse order every other round
    /// (so drift on the host is spread over them)
    #[arg(long = "rounds", default_value = "1")]
    pub rounds: u32,
    /// `fio-compare`: more fio options, space-separated (e.g. "--thread --disk_util=0")
    #[arg(long = "fio-extra", default_value = "", allow_hyphen_values = true)]
    pub fio_extra: String,
    /// `fio-compare`: only the jobs whose name holds this text (e.g. "QD32")
    #[arg(long = "only", default_value = "")]
    pub only: String,
    /// `fio-compare`: while our engine runs, keep this share of one guest CPU busy (0 to 1), to
    /// see what a busier guest does to the emulated device
    #[arg(long = "busy", default_value = "0")]
    pub busy: f64,
    /// When the scenario is done, copy WORK/result.json and WORK/report.d to DIR/NAME.json and
    /// DIR/NAME-report.d (DIR relative to the working directory, which the host shares), to
    /// compare reports across versions afterwards
    #[arg(long = "keep", value_name = "DIR")]
    pub keep: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct JournalTestArgs {
    /// File to change
    #[arg(long = "path", value_name = "FILE")]
    pub path: PathBuf,
    /// Value to write
    #[arg(long = "value")]
    pub value: String,
    /// Keep the main thread busy computing instead of sleeping
    #[arg(long = "spin")]
    pub spin: bool,
    /// Exit normally after this many seconds instead of waiting to be killed
    #[arg(long = "exit-after", value_name = "SECS")]
    pub exit_after: Option<f64>,
}

#[derive(Debug, Args)]
pub struct TuneCheckArgs {
    /// Result files with an iocost-tune entry
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Bootstrap resamples
    #[arg(long = "resamples", default_value_t = 200)]
    pub resamples: usize,
}

#[derive(Debug, Args)]
pub struct TuneReplayArgs {
    /// Result files with an iocost-tune entry made on a full grid
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Configurations of the coarse pass
    #[arg(long = "coarse", default_value_t = 5)]
    pub coarse: usize,
    /// At most this many configurations
    #[arg(long = "budget", default_value_t = 12)]
    pub budget: usize,
    /// Stop when every interval is at most this wide (vrate points)
    #[arg(long = "target", default_value_t = 10.0)]
    pub target: f64,
    /// The bootstrap's seed (the product's fixed one by default)
    #[arg(long = "seed")]
    pub seed: Option<u64>,
}
