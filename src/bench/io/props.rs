//! The properties of one io job (also what `curve` and the other benches that run io jobs
//! read), from a spec or from a job file's job.

use crate::bench::contract::api::{prop, PropDesc, SpecError, ValueKind};
use crate::spec::JobSpec;
use crate::workload::ioengine::job::{EngineChoice, IoJob, Pattern, Rate, Stop, UringOpts};
use crate::workload::ioengine::pace::Arrivals;
use crate::workload::ioengine::steady::SteadyRule;
use std::path::PathBuf;
use std::time::Duration;

const RW: &[&str] = &["read", "write", "rw", "randread", "randwrite", "randrw"];

/// The job's properties, shared with the benches that run io jobs (`curve`).
pub const JOB_PROPS: [PropDesc; 29] = [
    prop(
        "rw",
        ValueKind::Enum(RW),
        "IO pattern, fio's names (randread)",
    ),
    prop("rwmix", ValueKind::Int, "reads in % for rw and randrw (50)"),
    prop("bs", ValueKind::Size, "bytes per IO (4K)"),
    prop(
        "align",
        ValueKind::Size,
        "offsets are multiples of this (bs)",
    ),
    prop(
        "offset",
        ValueKind::Size,
        "start of the range IOs fall in (0)",
    ),
    prop(
        "range",
        ValueKind::Size,
        "length of that range (to the end)",
    ),
    prop("qd", ValueKind::Int, "IOs in flight per worker (1)"),
    prop(
        "batch",
        ValueKind::Int,
        "IOs per submission call (1; 0 = qd)",
    ),
    prop(
        "reap",
        ValueKind::Int,
        "completions taken per wait (1; 0 = all)",
    ),
    prop(
        "workers",
        ValueKind::Int,
        "workers, each with its own queue (1)",
    ),
    prop(
        "dur",
        ValueKind::Duration,
        "measured time, after the ramp (30s)",
    ),
    prop(
        "size",
        ValueKind::Size,
        "stop after this many bytes instead of a time",
    ),
    prop(
        "ramp",
        ValueKind::Duration,
        "run this long before measuring (0)",
    ),
    prop(
        "arrivals",
        ValueKind::Enum(&["linear", "poisson", "stratified"]),
        "open-loop arrivals (io: linear, curve: stratified)",
    ),
    prop(
        "direct",
        ValueKind::Bool,
        "O_DIRECT, bypassing the page cache (true)",
    ),
    prop(
        "engine",
        ValueKind::Enum(&["auto", "io_uring", "psync"]),
        "IO engine (auto: io_uring, else psync)",
    ),
    prop(
        "target",
        ValueKind::Str,
        "file or block device (a test file)",
    ),
    prop("file-size", ValueKind::Size, "size of the test file (1G)"),
    prop(
        "pcts",
        ValueKind::Str,
        "percentiles to list, /-separated (fio's)",
    ),
    prop(
        "seed",
        ValueKind::Int,
        "seed of offsets, mixes and arrivals",
    ),
    prop(
        "ss",
        ValueKind::Str,
        "stop once steady, fio's ss= (iops_slope/2%)",
    ),
    prop("ss-dur", ValueKind::Duration, "the window ss= judges (10s)"),
    prop(
        "fixedbufs",
        ValueKind::Bool,
        "io_uring: registered buffers (false)",
    ),
    prop(
        "registerfiles",
        ValueKind::Bool,
        "io_uring: the target as a fixed file (false)",
    ),
    prop(
        "sqthread-poll",
        ValueKind::Bool,
        "io_uring: a kernel thread polls submissions (false)",
    ),
    prop(
        "hipri",
        ValueKind::Bool,
        "io_uring: polled completions; needs poll queues (false)",
    ),
    prop(
        "taskrun",
        ValueKind::Bool,
        "io_uring: single issuer, deferred task work (true)",
    ),
    prop(
        "devtime",
        ValueKind::Bool,
        "the disk's own time per IO: traced (root, tracefs), else the kernel's count (false)",
    ),
    prop(
        "fast",
        ValueKind::Bool,
        "every io_uring setting the kernel and target allow but sqthread-poll; batch, reap = qd (false)",
    ),
];

pub const RATE_PROPS: [PropDesc; 2] = [
    prop(
        "rate-iops",
        ValueKind::Float,
        "open-loop rate in IOs/s, all workers",
    ),
    prop(
        "rate-bps",
        ValueKind::Size,
        "open-loop rate in bytes/s, all workers",
    ),
];

pub const DFL_FILE_SIZE: u64 = 1 << 30;
/// fio has no default window; ten seconds judge a trend without making short jobs wait long.
pub const DFL_SS_WINDOW_S: f64 = 10.0;

#[derive(Debug, Clone, PartialEq)]
pub struct IoProps {
    pub job: IoJob,
    /// `None`: the test file of `file_size` under `<dir>/scratch`.
    pub target: Option<PathBuf>,
    pub file_size: u64,
}

/// One io job's properties from a spec (or a job file's job): [`read_props`] and the rules
/// of `io` beyond the engine's.
pub fn job_props(spec: &JobSpec) -> Result<IoProps, SpecError> {
    let p = read_props(spec)?;
    if spec.group(0).text("arrivals").is_some() && p.job.rate.is_none() {
        return Err(spec
            .group(0)
            .err("arrivals only applies with rate-iops or rate-bps"));
    }
    Ok(p)
}

/// `pcts`: the percentiles to list, `/`-separated.
fn read_pcts(g: &crate::spec::Group) -> Result<Option<Vec<f64>>, SpecError> {
    let Some(p) = g.text("pcts") else {
        return Ok(None);
    };
    p.split('/')
        .map(|v| v.trim().parse::<f64>().ok().filter(|x| *x > 0.0 && *x <= 100.0))
        .collect::<Option<Vec<f64>>>()
        .filter(|v| !v.is_empty())
        .map(Some)
        .ok_or_else(|| {
            g.err(format!(
                "pcts={:?}: expected percentiles above 0 and at most 100, /-separated, like 50/99/99.9",
                p
            ))
        })
}

/// `ss` and its window `ss-dur`.
fn read_ss(g: &crate::spec::Group) -> Result<Option<SteadyRule>, SpecError> {
    let window = g.f64("ss-dur", ValueKind::Duration)?;
    match g.text("ss") {
        Some(rule) => SteadyRule::parse(rule, window.unwrap_or(DFL_SS_WINDOW_S).round() as u32)
            .map(Some)
            .map_err(|e| g.err(e)),
        None if window.is_some() => Err(g.err("ss-dur is the window of ss=; give ss too")),
        None => Ok(None),
    }
}

/// The io_uring settings; `fast` also batches submissions and reaping unless `batch` and
/// `reap` were given.
fn read_uring(g: &crate::spec::Group, job: &mut IoJob) -> Result<(), SpecError> {
    let on = |k: &str| g.flag(k).map(|v| v.unwrap_or(false));
    job.uring = UringOpts {
        fixedbufs: on("fixedbufs")?,
        registerfiles: on("registerfiles")?,
        sqthread_poll: on("sqthread-poll")?,
        hipri: on("hipri")?,
        // On by default, as in fio.
        taskrun: g.flag("taskrun")?.unwrap_or(true),
    };
    if g.text("engine") == Some("psync") && g.flag("taskrun")? == Some(true) {
        return Err(g.err("taskrun needs engine=io_uring (or auto), not psync"));
    }
    job.fast = on("fast")?;
    job.devtime = on("devtime")?;
    if job.fast && g.text("batch").is_none() {
        job.batch = 0;
    }
    if job.fast && g.text("reap").is_none() {
        job.reap = 0;
    }
    Ok(())
}

/// The job's properties (`JOB_PROPS`, and the rates when given), checked as the engine
/// checks a job.
pub fn read_props(spec: &JobSpec) -> Result<IoProps, SpecError> {
    let g = spec.group(0);
    let mut job = IoJob::new(PathBuf::new());
    let rw = g.text("rw").unwrap_or("randread");
    job.pattern = if rw.starts_with("rand") {
        Pattern::Rand
    } else {
        Pattern::Seq
    };
    // Counts checked against their range as given, so a message echoes the value typed.
    let int = |key: &str, max: u64, range: &str| -> Result<Option<u32>, SpecError> {
        match g.u64(key, ValueKind::Int)? {
            Some(v) if v > max => Err(g.err(format!("{}={} is not {}", key, v, range))),
            v => Ok(v.map(|v| v as u32)),
        }
    };
    let mix = int("rwmix", 100, "from 0 to 100")?;
    job.read_pct = match rw.trim_start_matches("rand") {
        "read" => 100,
        "write" => 0,
        _ => mix.unwrap_or(50),
    };
    if mix.is_some() && !rw.ends_with("rw") {
        return Err(g.err(format!("rwmix is for rw and randrw, not rw={}", rw)));
    }
    if let Some(bs) = g.u64("bs", ValueKind::Size)? {
        job.bs = bs;
    }
    job.align = g.u64("align", ValueKind::Size)?.unwrap_or(0);
    job.start = g.u64("offset", ValueKind::Size)?.unwrap_or(0);
    if let Some(r) = g.u64("range", ValueKind::Size)? {
        job.end = job.start + r;
    }
    let depth = |key: &str| int(key, 4096, "from 0 to qd (at most 4096)");
    job.qd = int("qd", 4096, "from 1 to 4096")?.unwrap_or(1);
    (job.batch, job.reap) = (depth("batch")?.unwrap_or(1), depth("reap")?.unwrap_or(1));
    job.workers = int("workers", 1024, "from 1 to 1024")?.unwrap_or(1);
    let dur = g.f64("dur", ValueKind::Duration)?;
    job.stop = match (dur, g.u64("size", ValueKind::Size)?) {
        (Some(_), Some(_)) => return Err(g.err("dur and size both stop the job; give one")),
        (_, Some(b)) => Stop::Bytes(b),
        (d, None) => Stop::Time(Duration::from_secs_f64(d.unwrap_or(30.0))),
    };
    // Shorter "measurements" stored entries of no IO at all.
    if dur.is_some_and(|d| d > 0.0 && d < 1.0) {
        return Err(g.err(format!(
            "dur={} is shorter than 1s, the shortest measurement io takes",
            g.text("dur").unwrap_or_default()
        )));
    }
    job.ramp = Duration::from_secs_f64(g.f64("ramp", ValueKind::Duration)?.unwrap_or(0.0));
    job.rate = match (
        g.f64("rate-iops", ValueKind::Float)?,
        g.f64("rate-bps", ValueKind::Size)?,
    ) {
        (Some(_), Some(_)) => return Err(g.err("rate-iops and rate-bps both set a rate; give one")),
        (Some(r), None) => Some(Rate::Iops(r)),
        (None, Some(b)) => Some(Rate::Bps(b)),
        (None, None) => None,
    };
    job.arrivals = match g.text("arrivals") {
        Some("poisson") => Arrivals::Poisson,
        Some("stratified") => Arrivals::Stratified,
        _ => Arrivals::Linear,
    };
    job.direct = g.flag("direct")?.unwrap_or(true);
    job.engine = match g.text("engine") {
        Some("io_uring") => EngineChoice::IoUring,
        Some("psync") => EngineChoice::Psync,
        _ => EngineChoice::Auto,
    };
    if let Some(p) = read_pcts(&g)? {
        job.percentiles = p;
    }
    if let Some(s) = g.u64("seed", ValueKind::Int)? {
        job.seed = s;
    }
    job.ss = read_ss(&g)?;
    read_uring(&g, &mut job)?;
    let target = g.text("target").map(PathBuf::from);
    let file_size = g.u64("file-size", ValueKind::Size)?;
    if target.is_some() && file_size.is_some() {
        return Err(g.err("file-size is for the test file; target names an existing one"));
    }
    job.check().map_err(|e| g.err(e))?;
    Ok(IoProps {
        job,
        target,
        file_size: file_size.unwrap_or(DFL_FILE_SIZE),
    })
}
