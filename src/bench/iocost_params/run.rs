//! Running `iocost-params`: io.cost off and merges off on the scratch device (journaled; merges
//! back on afterwards), a test file under `<dir>/scratch`, then the eight measurements of
//! `measure` one after another on the IO engine. `measure_on` is also what benches needing a
//! model run nested.

use super::measure::{self, Engine, Jobs, Measured, Step, STEPS};
use crate::bench::contract::ctx::RunCtx;
use crate::logging::progress;
use crate::system::iocost::IoCostKnobs;
use crate::system::session::BenchHost;
use crate::units::format_size;
use crate::util::now;
use crate::workload::ioengine::job::IoJob;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// One measurement as the record keeps it (the engine's full document would be ~100 KB each).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepOut {
    pub step: Step,
    pub rw: String,
    pub bs: u64,
    pub qd: u32,
    pub workers: u32,
    /// The open-loop rate of the latency runs, IOs/s.
    pub rate_iops: Option<f64>,
    pub engine: String,
    pub runtime_ns: u64,
    pub iops: f64,
    pub bw_bytes: f64,
    pub clat_p50_ns: u64,
    pub clat_p95_ns: u64,
    pub clat_p99_ns: u64,
    pub lat_mean_ns: f64,
    /// What the step contributes: a model number, or a latency target in µs.
    pub value: u64,
}

/// The record: upstream's (`devnr`, `model`, `qos`) and how it was measured (ours; absent
/// from upstream's records): the knobs' `upstream_jobs` says whose job shapes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IocostParamsRecord {
    #[serde(flatten)]
    pub knobs: IoCostKnobs,
    #[serde(default)]
    pub period: (u64, u64),
    #[serde(default)]
    pub rotational: bool,
    #[serde(default)]
    pub testfile_size: u64,
    #[serde(default)]
    pub steps: Vec<StepOut>,
}

fn step_out(step: Step, job: &IoJob, m: &Measured, value: u64) -> StepOut {
    StepOut {
        step,
        rw: job.rw_name(),
        bs: job.bs,
        qd: job.qd,
        workers: job.workers,
        rate_iops: match job.rate {
            Some(crate::workload::ioengine::job::Rate::Iops(v)) => Some(v),
            _ => None,
        },
        engine: m.engine.clone(),
        runtime_ns: m.runtime_ns,
        iops: m.iops,
        bw_bytes: m.bw_bytes,
        clat_p50_ns: m.clat_at(50.0),
        clat_p95_ns: m.clat_at(95.0),
        clat_p99_ns: m.clat_at(99.0),
        lat_mean_ns: m.lat_mean_ns,
        value,
    }
}

/// How the steps are run: whose job shapes, on which engine, on what size of test file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct How {
    pub jobs: Jobs,
    pub engine: Engine,
    /// `file-size`: the test file's size asked for (else `measure::testfile_size`'s rule).
    pub file_size: Option<u64>,
}

pub fn run(ctx: &mut RunCtx, how: How) -> Result<IocostParamsRecord> {
    let quick = ctx.quick();
    let dir = ctx.dir().to_path_buf();
    let (mut host, _) = ctx.host().context("iocost-params needs the host session")?;
    measure_on(&mut host, &dir, quick, how)
}

/// bench.json's io.cost parameters; without a measured model, a nested `iocost-params`
/// measures them and commits them (io.cost goes back on with them), as upstream does. `who`
/// names the bench that needs them, for the log.
pub fn ensure_model(
    host: &mut BenchHost,
    dir: &Path,
    quick: bool,
    who: &str,
) -> Result<(IoCostKnobs, &'static str)> {
    if let Some(k) = host.bench_knobs().filter(|k| k.iocost_seq > 0) {
        return Ok((k.iocost.clone(), "bench.json"));
    }
    log::info!(
        "{}: bench.json has no io.cost model; running iocost-params first",
        who
    );
    crate::logging::progress::phase("iocost-params (nested)");
    let rec = measure_on(host, dir, quick, How::default())
        .with_context(|| format!("{}: the nested iocost-params", who))?;
    if rec.knobs.model.wbps == 0 {
        anyhow::bail!("the nested iocost-params measured wbps=0");
    }
    log::info!(
        "{}: iocost-params: {} / {}",
        who,
        crate::system::iocost::model_line(
            rec.knobs.devnr.parse().map_err(anyhow::Error::msg)?,
            &rec.knobs.model
        ),
        rec.knobs.qos.line()
    );
    host.apply_iocost(rec.knobs.clone(), true)?;
    Ok((rec.knobs, "iocost-params"))
}

/// The measurements on the scratch device of `host` (also nested, from a bench that needs a
/// model): io.cost stays off for the rest of the job unless the caller applies the result;
/// request merging is put back afterwards.
pub fn measure_on(
    host: &mut BenchHost,
    dir: &Path,
    quick: bool,
    how: How,
) -> Result<IocostParamsRecord> {
    let start = now();
    // Before the device is touched (io.cost, merges, the test file): a missing fio is a usage
    // error, and the session restores what it set up.
    let fio = match how.engine {
        Engine::Fio => Some(super::fio::find()?),
        Engine::Ours => None,
    };
    let dev = host
        .scratch_dev()
        .cloned()
        .context("iocost-params needs the scratch device")?;
    host.iocost_off_for_job()?;
    // The host's memory, from the reader the reporter uses (unreadable: no memory cap, the test
    // file is sized by the device and the free space alone).
    let meminfo = host.hp().path("proc/meminfo");
    let mem = std::fs::read_to_string(&meminfo)
        .ok()
        .and_then(|t| crate::report::usage::parse_meminfo(&meminfo, &t).ok())
        .map_or(u64::MAX / 4, |m| m.mem_total);
    let nomerges = host.set_scratch_queue_knob("nomerges", "1")?;
    let r = measure_dev(dir, quick, mem, &dev, start, how, fio.as_deref());
    host.set_scratch_queue_knob("nomerges", &nomerges)?;
    r
}

/// A step's number as it is logged: the unit, and for a latency target how it was found.
fn log_step(step: Step, v: u64, pct: f64, job: &IoJob) {
    log::info!(
        "iocost-params: {} = {}{}",
        step.name(),
        v,
        match step {
            Step::Rlat | Step::Wlat => format!(
                " µs (1.5 × clat p{} at {:.0} IOPS)",
                pct,
                job.worker_iops().unwrap_or(0.0) * job.workers as f64
            ),
            Step::Rbps | Step::Wbps => format!(" ({}/s)", format_size(v as f64)),
            _ => String::new(),
        }
    );
}

/// The test file under `dir/scratch`, written or kept at the size `measure::testfile_size`
/// gives: its path and size.
fn test_file(
    dir: &Path,
    quick: bool,
    mem: u64,
    dev_size: u64,
    want: Option<u64>,
) -> Result<(std::path::PathBuf, u64)> {
    let path = dir.join("scratch/iocost-testfile");
    let held = std::fs::metadata(&path).map_or(0, |m| {
        use std::os::unix::fs::MetadataExt;
        m.blocks() * 512
    });
    let free = crate::util::fs::free_bytes(path.parent().unwrap_or(dir))
        .or_else(|_| crate::util::fs::free_bytes(dir))
        .unwrap_or(0);
    let size = measure::testfile_size(quick, mem, dev_size, free + held, want);
    if let Some(want) = want.filter(|&w| w / (1 << 20) * (1 << 20) > size) {
        crate::usage_bail!(
            "iocost-params: file-size={} doesn't fit: {} at most under {} (its free space, \
             less {} kept free)",
            format_size(want as f64),
            format_size(size as f64),
            dir.display(),
            format_size(measure::KEEP_FREE as f64)
        );
    }
    if size < measure::MIN_TESTFILE {
        crate::usage_bail!(
            "iocost-params: no room for a test file of at least 256M under {} ({} free)",
            dir.display(),
            format_size(free as f64)
        );
    }
    progress::phase(format!("test file ({})", format_size(size as f64)));
    crate::workload::ioengine::testfile::ensure(&path, size, true).context("iocost-params")?;
    Ok((path, size))
}

fn measure_dev(
    dir: &Path,
    quick: bool,
    mem: u64,
    dev: &crate::system::blockdev::DevInfo,
    start: u64,
    how: How,
    fio: Option<&Path>,
) -> Result<IocostParamsRecord> {
    let t = if quick { measure::QUICK } else { measure::FULL };

    let (path, size) = test_file(dir, quick, mem, dev.size, how.file_size)?;
    let each = (t.ramp + t.dur).as_secs_f64();
    log::info!(
        "iocost-params: {} on {} ({}), {} runs of {}{}{}",
        dev.name,
        path.display(),
        if dev.rotational { "rotational" } else { "SSD" },
        STEPS.len(),
        progress::format_secs(each),
        if how.jobs.is_ours() {
            ""
        } else {
            ", jobs as upstream's fio script"
        },
        match fio {
            Some(f) => format!(", run by {}", f.display()),
            None => String::new(),
        }
    );
    let pct = measure::qos_pct(dev.rotational);
    let (mut values, mut steps, mut lat) = ([0u64; 6], Vec::new(), [0u64; 2]);
    for (i, &step) in how.jobs.steps().iter().enumerate() {
        let rand_iops = match step.write() {
            true => values[Step::Wrandiops.index()],
            false => values[Step::Rrandiops.index()],
        };
        let job = step.job(&path, dev.rotational, &t, rand_iops, how.jobs);
        progress::phase(format!(
            "{} ({} {}, {}×{} in flight) · {} of {}",
            step.name(),
            job.rw_name(),
            crate::workload::ioengine::result::size_text(job.bs),
            job.workers,
            job.qd,
            i + 1,
            STEPS.len()
        ));
        progress::eta(Some(each * (STEPS.len() - i) as f64));
        let m = match fio {
            Some(f) => super::fio::run(f, &job, step.write()),
            None => crate::workload::ioengine::run::run(&job, &AtomicBool::new(false))
                .map(|r| Measured::from_ours(step, &r, &[50.0, pct, 95.0, 99.0])),
        }
        .with_context(|| format!("iocost-params: measuring {}", step.name()))?;
        let v = match step {
            Step::Rlat | Step::Wlat => measure::lat_target(pct, &m),
            _ => measure::value(step, &m),
        };
        match step.index() {
            k @ 0..=5 => values[k] = v,
            k => lat[k - 6] = v,
        }
        log_step(step, v, pct, &job);
        steps.push(step_out(step, &job, &m, v));
    }
    let knobs = IoCostKnobs {
        devnr: format!("{}:{}", dev.devnr.0, dev.devnr.1),
        model: measure::model(&values),
        qos: measure::qos(dev.rotational, lat[0], lat[1]),
        upstream_jobs: !how.jobs.is_ours(),
        fio_engine: fio.is_some(),
    };
    Ok(IocostParamsRecord {
        knobs,
        period: (start, now()),
        rotational: dev.rotational,
        testfile_size: size,
        steps,
    })
}
