//! The bench registry: what each bench is called, what it accepts in a job spec, and how it
//! behaves in the run/match machinery. Validation of specs (`crate::spec`) and `--help` are
//! driven from this table so they can never disagree.

/// The value vocabulary specs and benches share lives in the leaf `units` layer.
pub use crate::units::{ValueKind, PCT_LABELS};

#[derive(Debug, Clone, Copy)]
pub struct PropDesc {
    pub key: &'static str,
    pub kind: ValueKind,
    pub help: &'static str,
}

const fn p(key: &'static str, kind: ValueKind, help: &'static str) -> PropDesc {
    PropDesc { key, kind, help }
}

#[derive(Debug)]
pub struct BenchDesc {
    pub kind: &'static str,
    pub about: &'static str,
    /// Hidden from `--help` and `doc` listings (internal test benches).
    pub hidden: bool,
    /// A re-run links to an existing entry of the same kind+id regardless of props and resumes it.
    pub incremental: bool,
    /// Keys accepted in the first group.
    pub props: &'static [PropDesc],
    /// Prefixes in the first group forwarded to a sub-bench (`storage-` → storage's props).
    pub forward: &'static [(&'static str, &'static str)],
    /// Keys accepted in groups 2+; `None` = only one group allowed.
    pub group_props: Option<&'static [PropDesc]>,
    /// Keys accepted as format props (first group of a `format`/`summary` spec).
    pub format_props: &'static [PropDesc],
    /// Whether `run` is available in this version.
    pub runnable: bool,
    /// What the bench needs from the host when it runs; `None` = it doesn't touch the system
    /// (no systemd check, journal, sysreqs or memory profile).
    pub system: Option<&'static SystemNeeds>,
}

/// The host setup a bench runs on (see `system::session`).
#[derive(Debug)]
pub struct SystemNeeds {
    /// Requirements whose miss aborts the run unless `--force`, listed in the header.
    pub sysreqs: &'static [SysReq],
    /// Whether it runs under the memory profile (balloon of `avail − share`).
    pub mem_profile: bool,
    /// Whether it measures the profile's `avail` itself when that is only estimated (hashd
    /// benches): no balloon is set up for it before it runs then.
    pub measures_avail: bool,
}

use crate::system::sysreqs::SysReq;

/// Everything: protection and iocost-qos depend on all of it.
const ALL_SYSTEM: SystemNeeds = SystemNeeds {
    sysreqs: SysReq::ALL,
    mem_profile: true,
    measures_avail: false,
};

/// hashd sizing and MOF: memory management and swap on the measured device.
const MEM_SYSTEM: SystemNeeds = SystemNeeds {
    sysreqs: &[
        SysReq::Controllers,
        SysReq::AnonBalance,
        SysReq::SwapOnScratch,
        SysReq::Swap,
        SysReq::NoZswap,
        SysReq::Psi,
    ],
    mem_profile: true,
    measures_avail: true,
};

/// io.cost parameter benchmarking: the device and io.cost, at the machine's size.
const IO_SYSTEM: SystemNeeds = SystemNeeds {
    sysreqs: &[
        SysReq::Controllers,
        SysReq::IoCost,
        SysReq::IoCostVer,
        SysReq::NoOtherIoControllers,
        SysReq::NoCompositeStorage,
        SysReq::IoSched,
        SysReq::NoWbt,
    ],
    mem_profile: false,
    measures_avail: false,
};

const APPLY_COMMIT: [PropDesc; 2] = [
    p(
        "apply",
        ValueKind::Bool,
        "apply the result to later benches",
    ),
    p(
        "commit",
        ValueKind::Bool,
        "also save the result to bench.json (implies apply)",
    ),
];

const HASHD_KNOBS: [PropDesc; 4] = [
    p("rps-max", ValueKind::Int, "maximum requests per second"),
    p(
        "hash-size",
        ValueKind::Size,
        "mean size of the data hashed per request",
    ),
    p("chunk-pages", ValueKind::Int, "pages per access chunk"),
    p(
        "log-bps",
        ValueKind::Size,
        "log write bandwidth in bytes per second",
    ),
];

pub static BENCHES: &[BenchDesc] = &[
    BenchDesc {
        kind: "iocost-params",
        about: "Benchmark io.cost model and QoS parameters of the scratch device",
        hidden: false,
        incremental: false,
        props: &APPLY_COMMIT,
        forward: &[],
        group_props: None,
        format_props: &[],
        runnable: false,
        system: Some(&IO_SYSTEM),
    },
    BenchDesc {
        kind: "hashd-params",
        about: "Benchmark the parameters of the hashd workload",
        hidden: false,
        incremental: false,
        props: &[
            APPLY_COMMIT[0],
            APPLY_COMMIT[1],
            p(
                "fake-cpu-load",
                ValueKind::Bool,
                "simulate CPU load instead of hashing",
            ),
            HASHD_KNOBS[0],
            HASHD_KNOBS[1],
            HASHD_KNOBS[2],
            HASHD_KNOBS[3],
        ],
        forward: &[],
        group_props: None,
        format_props: &[],
        runnable: true,
        system: Some(&MEM_SYSTEM),
    },
    BenchDesc {
        kind: "storage",
        about: "Measure how much memory the storage can offload (MOF)",
        hidden: false,
        incremental: false,
        props: &STORAGE_PROPS,
        forward: &[],
        group_props: None,
        format_props: &[],
        runnable: true,
        system: Some(&MEM_SYSTEM),
    },
    BenchDesc {
        kind: "protection",
        about: "Measure how well the workload is protected from a memory hog",
        hidden: false,
        incremental: false,
        props: &[],
        forward: &[],
        group_props: Some(&PROTECTION_SCENARIO_PROPS),
        format_props: &[],
        runnable: false,
        system: Some(&ALL_SYSTEM),
    },
    BenchDesc {
        kind: "iocost-qos",
        about: "Compare MOF and protection across io.cost QoS settings",
        hidden: false,
        incremental: true,
        props: &[
            p(
                "vrate-min",
                ValueKind::Float,
                "lowest vrate of the grid (0: one step above 0)",
            ),
            p("vrate-max", ValueKind::Float, "highest vrate of the grid"),
            p("vrate-intvs", ValueKind::Int, "number of vrate grid points"),
            p(
                "dither",
                ValueKind::BoolOrFloat,
                "shift the grid randomly, or by the given amount",
            ),
            p(
                "storage-base-loops",
                ValueKind::Int,
                "storage loops for the baseline run",
            ),
            p(
                "storage-loops",
                ValueKind::Int,
                "storage loops for the other runs",
            ),
            p(
                "isol-pct",
                ValueKind::Enum(PCT_LABELS),
                "isolation percentile to judge by",
            ),
            p("isol-thr", ValueKind::Frac, "isolation threshold"),
            p(
                "retries",
                ValueKind::Int,
                "extra storage attempts per configuration",
            ),
            p(
                "allow-fail",
                ValueKind::Bool,
                "skip a failing configuration instead of aborting",
            ),
            p(
                "ignore-min-perf",
                ValueKind::Bool,
                "don't skip vrates below the device minimum",
            ),
        ],
        forward: &[("storage-", "storage")],
        group_props: Some(&[
            p("rpct", ValueKind::Float, "read latency percentile"),
            p("rlat", ValueKind::Int, "read latency target in usecs"),
            p("wpct", ValueKind::Float, "write latency percentile"),
            p("wlat", ValueKind::Int, "write latency target in usecs"),
            p("min", ValueKind::Float, "minimum vrate in percent"),
            p("max", ValueKind::Float, "maximum vrate in percent"),
            p(
                "vrate",
                ValueKind::Float,
                "fixed vrate in percent (min=max)",
            ),
        ]),
        format_props: &[p(
            "sub-full",
            ValueKind::Bool,
            "print sub-bench results in full",
        )],
        runnable: false,
        system: Some(&ALL_SYSTEM),
    },
    BenchDesc {
        kind: "iocost-tune",
        about: "Derive io.cost QoS solutions from iocost-qos results",
        hidden: false,
        incremental: true,
        props: &[],
        forward: &[],
        group_props: None,
        format_props: &[],
        runnable: false,
        system: None,
    },
    BenchDesc {
        kind: "selftest",
        about: "Internal bench exercising run, checkpoint, resume and study",
        hidden: true,
        incremental: true,
        props: &[
            p("steps", ValueKind::Int, "number of steps"),
            p("step-time", ValueKind::Duration, "time each step takes"),
            p("fail-at", ValueKind::Int, "fail at this step (for testing)"),
        ],
        forward: &[],
        group_props: None,
        format_props: &[],
        runnable: true,
        system: None,
    },
    BenchDesc {
        kind: "systest",
        about: "Internal bench holding the full host setup (sysreqs, journal, memory profile)",
        hidden: true,
        incremental: false,
        props: &[p("hold", ValueKind::Duration, "keep the setup this long")],
        forward: &[],
        group_props: None,
        format_props: &[],
        runnable: true,
        system: Some(&ALL_SYSTEM),
    },
];

const STORAGE_PROPS: [PropDesc; 10] = [
    APPLY_COMMIT[0],
    APPLY_COMMIT[1],
    p("loops", ValueKind::Int, "number of measurements to average"),
    HASHD_KNOBS[0],
    HASHD_KNOBS[1],
    HASHD_KNOBS[2],
    HASHD_KNOBS[3],
    p(
        "mem-avail-err-max",
        ValueKind::Frac,
        "tolerated error of the memory usage estimate",
    ),
    p(
        "mem-avail-inner-retries",
        ValueKind::Int,
        "retries that keep mem-avail",
    ),
    p(
        "mem-avail-outer-retries",
        ValueKind::Int,
        "retries that re-estimate mem-avail",
    ),
];

const PROTECTION_SCENARIO_PROPS: [PropDesc; 9] = [
    p(
        "scenario",
        ValueKind::Enum(&["mem-hog", "mem-hog-tune"]),
        "scenario to run",
    ),
    p("loops", ValueKind::Int, "mem-hog: number of runs"),
    p("load", ValueKind::Frac, "workload load level"),
    p("speed", ValueKind::Str, "memory hog speed, e.g. 2x"),
    p(
        "size-min",
        ValueKind::Size,
        "mem-hog-tune: smallest workload size to probe",
    ),
    p(
        "size-max",
        ValueKind::Size,
        "mem-hog-tune: largest workload size to probe",
    ),
    p("intvs", ValueKind::Int, "mem-hog-tune: number of probes"),
    p(
        "isol-pct",
        ValueKind::Enum(PCT_LABELS),
        "isolation percentile to judge by",
    ),
    p("isol-thr", ValueKind::Frac, "isolation threshold"),
];

pub mod hashd_bench;
pub mod hashd_params;
pub mod iocost_params;
pub mod iocost_qos;
pub mod protection;
pub mod selftest;
pub mod storage;
pub mod systest;

/// The implementation of a bench, if this version has one.
pub fn implementation(kind: &str) -> Option<&'static dyn Bench> {
    match kind {
        "selftest" => Some(&selftest::SelfTest),
        "systest" => Some(&systest::SysTest),
        "storage" => Some(&storage::Storage),
        "hashd-params" => Some(&hashd_params::HashdParams),
        _ => None,
    }
}

pub fn find(kind: &str) -> Option<&'static BenchDesc> {
    BENCHES.iter().find(|b| b.kind == kind)
}

pub fn visible() -> impl Iterator<Item = &'static BenchDesc> {
    BENCHES.iter().filter(|b| !b.hidden)
}

/// The bench list appended to `--help`.
pub fn help_list() -> String {
    let mut s = String::from("Benches:\n");
    for b in visible() {
        s += &format!("  {:<15} {}\n", b.kind, b.about);
    }
    s += "\nRun `resctl-bench doc BENCH` for a bench's properties and output.";
    s
}

/// Options of a `format`/`summary` invocation for one entry.
#[derive(Debug, Clone, Default)]
pub struct FormatOpts {
    /// `format` (true) or `summary` (false).
    pub full: bool,
    /// Number of `--rstat` flags.
    pub rstat: u8,
    /// Format props from the spec's first group (e.g. `sub-full`).
    pub props: crate::spec::PropSet,
}

/// Benchmark parameters a finished record hands to the jobs after it (`apply`); `commit`
/// also writes them to bench.json.
#[derive(Debug, Clone, PartialEq)]
pub enum Apply {
    Hashd {
        knobs: crate::system::bench_file::HashdKnobs,
        commit: bool,
    },
}

/// A bench implementation. `run` touches the system and returns the record; `study` turns a
/// record plus per-second reports into the result; `solve` post-processes a result; `format`
/// renders an entry's result (after the common header).
pub trait Bench: Sync {
    fn desc(&self) -> &'static BenchDesc;

    fn run(&self, ctx: &mut crate::run::RunCtx) -> anyhow::Result<serde_json::Value>;

    /// Checks the spec's property values before anything runs, so a bad one is reported as
    /// itself (exit 2) rather than after the host setup, or after hours of earlier jobs.
    fn check(&self, _spec: &crate::spec::JobSpec) -> anyhow::Result<()> {
        Ok(())
    }

    /// What a finished record applies for the later jobs, as the spec's `apply`/`commit` ask.
    /// `run` calls it after the bench ran and again when it reuses the finished record, so the
    /// parameters reach later jobs either way (upstream applies in its study stage, which a
    /// reused record goes through too).
    fn applies(
        &self,
        _spec: &crate::spec::JobSpec,
        _record: &serde_json::value::RawValue,
    ) -> anyhow::Result<Option<Apply>> {
        Ok(None)
    }

    fn study(
        &self,
        ctx: &crate::run::StudyCtx,
        record: &serde_json::value::RawValue,
    ) -> anyhow::Result<serde_json::Value>;

    fn solve(&self, result: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        Ok(result)
    }

    /// How far the checkpointed `record` of an unfinished run got, e.g. "1 of 3 loops done";
    /// `None` when the bench can't tell.
    fn progress(
        &self,
        _spec: &crate::spec::JobSpec,
        _record: &serde_json::value::RawValue,
    ) -> Option<String> {
        None
    }

    fn format(
        &self,
        out: &mut String,
        entry: &crate::result::Entry,
        opts: &FormatOpts,
    ) -> anyhow::Result<()>;
}
