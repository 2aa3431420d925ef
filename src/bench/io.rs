//! `io`: one job of our IO engine (`workload::ioengine`) — `io:rw=randread,bs=4k,qd=32,dur=30s`
//! — on a test file under `<dir>/scratch` (written once with random data, then reused) or on
//! the file or block device `target=` names. The record is the engine's result document; the
//! report is its fio-style text.

use crate::bench::api::{
    concat_props, prop, Bench, BenchDesc, DocPage, FormatOpts, PropDesc, Shape, SpecError, Stored,
    ValueKind,
};
use crate::bench::runner::ctx::{RunCtx, StudyCtx};
use crate::spec::JobSpec;
use crate::units::format_size;
use crate::util::now;
use crate::workload::ioengine::job::{EngineChoice, IoJob, Pattern, Rate, Stop, UringOpts};
use crate::workload::ioengine::pace::Arrivals;
use crate::workload::ioengine::result::{text, IoResult, RESULT_VERSION};
use crate::workload::ioengine::steady::SteadyRule;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub struct Io;

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
        "trace the disk's own time per IO (root, tracefs) (false)",
    ),
    prop(
        "fast",
        ValueKind::Bool,
        "every io_uring setting the kernel and target allow but sqthread-poll; batch=qd (false)",
    ),
];

const RATE_PROPS: [PropDesc; 2] = [
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

static PROPS: [PropDesc; 31] = concat_props(&JOB_PROPS, &RATE_PROPS);

pub static DESC: BenchDesc = BenchDesc {
    kind: "io",
    about: "One IO job of the built-in engine (fio-style latency and IOPS)",
    hidden: false,
    incremental: false,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &PROPS,
        forward: &[],
        group_props: None,
        open_keys: None,
        format_props: &[],
    },
    doc: Some(DocPage {
        title: "The built-in IO engine",
        text: include_str!("../../benches-doc/io.md"),
    }),
    system: None,
};

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

/// Where the job runs: `target=`, or the test file under `<dir>/scratch`, written first when
/// missing (then `true`).
pub fn prepare_target(ctx: &mut RunCtx, props: &IoProps) -> Result<(PathBuf, bool)> {
    Ok(match &props.target {
        Some(t) => (t.clone(), false),
        None => {
            let path = ctx.scratch_dir()?.join("io-testfile");
            crate::logging::progress::phase("test file");
            let written = crate::workload::ioengine::testfile::ensure(
                &path,
                props.file_size,
                props.job.direct,
            )
            .with_context(|| format!("the test file {}", path.display()))?;
            (path, written)
        }
    })
}

/// The record (and result): the engine's document, and whether the test file was written
/// first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoRecord {
    pub period: (u64, u64),
    pub testfile_written: bool,
    pub io: IoResult,
}

impl Bench for Io {
    type Props = IoProps;
    type Record = IoRecord;
    /// The record, once its version is known to be readable.
    type Result = IoRecord;
    const RESULT_KEYS: &'static [&'static str] = &["io"];
    const KEY_NUMBERS: &'static [&'static str] = &[
        "read_iops",
        "read_bps",
        "read_clat_p99_us",
        "write_iops",
        "write_bps",
        "write_clat_p99_us",
        "cpu_ns_per_io",
    ];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<IoProps, SpecError> {
        let p = read_props(spec)?;
        if spec.group(0).text("arrivals").is_some() && p.job.rate.is_none() {
            return Err(spec
                .group(0)
                .err("arrivals only applies with rate-iops or rate-bps"));
        }
        Ok(p)
    }

    fn run(&self, ctx: &mut RunCtx, props: &IoProps) -> Result<IoRecord> {
        let start = now();
        let mut job = props.job.clone();
        let (target, written) = prepare_target(ctx, props)?;
        job.target = target;
        crate::logging::progress::phase(format!(
            "{} bs={} qd={} on {}",
            job.rw_name(),
            crate::workload::ioengine::result::size_text(job.bs),
            job.qd,
            job.target.display()
        ));
        if let Stop::Time(d) = job.stop {
            crate::logging::progress::eta(Some((d + job.ramp).as_secs_f64()));
        }
        let io = crate::workload::ioengine::run::run(&job, &AtomicBool::new(false))?;
        log::info!(
            "io: {} IOPS, {}/s, clat p99 {} µs ({})",
            crate::workload::ioengine::result::si(io.read.iops + io.write.iops),
            format_size(io.read.bw_bytes + io.write.bw_bytes),
            io.read
                .clat
                .percentiles
                .iter()
                .chain(&io.write.clat.percentiles)
                .find(|p| p.0 == "99.000000")
                .map_or(0, |p| p.1 / 1000),
            io.engine
        );
        Ok(IoRecord {
            period: (start, now()),
            testfile_written: written,
            io,
        })
    }

    fn study(&self, _ctx: &StudyCtx, rec: &IoRecord) -> Result<IoRecord> {
        if rec.io.version > RESULT_VERSION {
            crate::usage_bail!(
                "the io record has version {}; this version reads up to {}",
                rec.io.version,
                RESULT_VERSION
            );
        }
        Ok(rec.clone())
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, _opts: &FormatOpts) -> Result<bool> {
        out.push_str(&text(&stored.result.io));
        Ok(true)
    }

    /// Per direction: IOPS, bandwidth and completion-latency percentiles in µs.
    fn headline(&self, stored: &Stored<Self>) -> Result<Vec<crate::bench::headline::Row>> {
        use serde_json::json;
        let io = &stored.result.io;
        // From the buckets, whatever percentiles the job listed.
        let p = |d: &crate::workload::ioengine::stats::DirOut, pct: f64| {
            crate::workload::ioengine::hist::LatHist::from_out(&d.clat)
                .ok()
                .filter(|h| h.count() > 0)
                .map_or(serde_json::Value::Null, |h| {
                    json!(h.percentile(pct) as f64 / 1e3)
                })
        };
        let mut row = vec![
            ("engine", json!(io.engine)),
            ("rw", json!(io.job.rw_name())),
            ("bs", json!(io.job.bs)),
            ("qd", json!(io.job.qd)),
            ("workers", json!(io.job.workers)),
        ];
        for (name, d) in [("read", &io.read), ("write", &io.write)] {
            let keys: [(&'static str, serde_json::Value); 5] = match name {
                "read" => [
                    ("read_iops", json!(d.iops)),
                    ("read_bps", json!(d.bw_bytes)),
                    ("read_clat_p50_us", p(d, 50.0)),
                    ("read_clat_p99_us", p(d, 99.0)),
                    ("read_lat_mean_us", json!(d.lat.mean_ns / 1e3)),
                ],
                _ => [
                    ("write_iops", json!(d.iops)),
                    ("write_bps", json!(d.bw_bytes)),
                    ("write_clat_p50_us", p(d, 50.0)),
                    ("write_clat_p99_us", p(d, 99.0)),
                    ("write_lat_mean_us", json!(d.lat.mean_ns / 1e3)),
                ],
            };
            row.extend(keys);
        }
        row.push(("cpu_ns_per_io", json!(io.cpu_per_io())));
        Ok(vec![row])
    }
}
