//! `__vm-scenario fio-compare`: the same jobs through our engine and through fio's io_uring
//! engine (fio put into the guest with `vm --with-program`), one after the other on the same
//! test file, and — when `/dev/ram0` exists (`vm --with-module brd:…`) — the peak rate on that
//! RAM disk. Prints per job both sides' IOPS, completion latency p50/p99 and CPU time per IO,
//! each with its defaults (one IO per submission call), and at QD > 1 also both with batched
//! submission and reaping (ours `batch=0,reap=0`, fio's `iodepth_batch_submit` and
//! `iodepth_batch_complete_max` = the depth).

use crate::workload::ioengine::hist::LatHist;
use crate::workload::ioengine::job::{IoJob, Pattern, Stop};
use crate::workload::ioengine::result::IoResult;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const FIO: &str = "/usr/bin/fio";

pub struct Opts {
    /// Seconds each job is measured, after the ramp.
    pub dur: u64,
    /// More fio options, space-separated.
    pub fio_extra: String,
    /// Only the jobs whose name holds this ("" for all).
    pub only: String,
    /// Share of one CPU kept busy while our engine runs.
    pub busy: f64,
}

/// Keeps `share` of one CPU busy (in 10 ms periods) until dropped.
struct Busy {
    stop: std::sync::Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(share: f64) -> Busy {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let thread = (share > 0.0).then(|| {
            let stop = stop.clone();
            let on = Duration::from_secs_f64(0.01 * share.min(1.0));
            let off = Duration::from_secs_f64(0.01) - on;
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = std::time::Instant::now();
                    while t.elapsed() < on {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(off);
                }
            })
        });
        Busy { stop, thread }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
const RAMP: u64 = 2;

struct Spec {
    name: &'static str,
    write: bool,
    seq: bool,
    bs: u64,
    qd: u32,
}

const JOBS: &[Spec] = &[
    Spec {
        name: "randread 4K QD1",
        write: false,
        seq: false,
        bs: 4096,
        qd: 1,
    },
    Spec {
        name: "randread 4K QD32",
        write: false,
        seq: false,
        bs: 4096,
        qd: 32,
    },
    Spec {
        name: "randwrite 4K QD32",
        write: true,
        seq: false,
        bs: 4096,
        qd: 32,
    },
    Spec {
        name: "read 1M QD4",
        write: false,
        seq: true,
        bs: 1 << 20,
        qd: 4,
    },
];

fn ours(s: &Spec, target: &Path, dur: u64, batched: bool, busy: f64) -> Result<Value> {
    let _busy = Busy::start(busy);
    let mut j = IoJob::new(target.to_path_buf());
    j.batch = if batched { 0 } else { 1 };
    j.reap = j.batch;
    j.read_pct = if s.write { 0 } else { 100 };
    j.pattern = if s.seq { Pattern::Seq } else { Pattern::Rand };
    j.bs = s.bs;
    j.qd = s.qd;
    j.ramp = Duration::from_secs(RAMP);
    j.stop = Stop::Time(Duration::from_secs(dur));
    let r: IoResult = crate::workload::ioengine::run::run(&j, &AtomicBool::new(false))?;
    let d = if s.write { &r.write } else { &r.read };
    let h = LatHist::from_out(&d.clat).map_err(anyhow::Error::msg)?;
    Ok(json!({
        "engine": if batched { format!("{}, batched", r.engine) } else { r.engine.to_string() },
        "iops": d.iops,
        "clat_p50_us": h.percentile(50.0) as f64 / 1e3,
        "clat_p99_us": h.percentile(99.0) as f64 / 1e3,
        "clat_p999_us": h.percentile(99.9) as f64 / 1e3,
        "clat_max_us": h.max() as f64 / 1e3,
        "clat_mean_us": h.mean() / 1e3,
        "cpu_ns_per_io": r.cpu_per_io(),
    }))
}

/// fio with its defaults, or (`batched`) submitting and reaping up to the queue depth per
/// call, as our engine does.
fn fio(s: &Spec, target: &Path, size: u64, dur: u64, batched: bool, extra: &str) -> Result<Value> {
    let rw = match (s.write, s.seq) {
        (false, false) => "randread",
        (true, false) => "randwrite",
        (false, true) => "read",
        (true, true) => "write",
    };
    let mut cmd = Command::new(FIO);
    cmd.args(extra.split_whitespace());
    if batched {
        cmd.args([
            format!("--iodepth_batch_submit={}", s.qd),
            format!("--iodepth_batch_complete_max={}", s.qd),
        ]);
    }
    let out = cmd
        .args([
            "--name=cmp",
            &format!("--filename={}", target.display()),
            &format!("--rw={}", rw),
            &format!("--bs={}", s.bs),
            &format!("--iodepth={}", s.qd),
            "--ioengine=io_uring",
            "--direct=1",
            "--time_based",
            &format!("--runtime={}", dur),
            &format!("--ramp_time={}", RAMP),
            &format!("--size={}", size),
            "--randrepeat=0",
            "--percentile_list=50:99:99.9",
            "--output-format=json",
        ])
        .output();
    let v = fio_json(out)?;
    let j = &v["jobs"][0];
    let d = &j[if s.write { "write" } else { "read" }];
    let pct = |k: &str| d["clat_ns"]["percentile"][k].as_f64().unwrap_or(0.0) / 1e3;
    let ios = d["total_ios"].as_f64().unwrap_or(0.0);
    let cpu = fio_cpu_ns(j);
    Ok(json!({
        "engine": if batched { "fio io_uring, batched" } else { "fio io_uring" },
        "iops": d["iops"].as_f64().unwrap_or(0.0),
        "clat_p50_us": pct("50.000000"),
        "clat_p99_us": pct("99.000000"),
        "clat_p999_us": pct("99.900000"),
        "clat_max_us": d["clat_ns"]["max"].as_f64().unwrap_or(0.0) / 1e3,
        "clat_mean_us": d["clat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1e3,
        "cpu_ns_per_io": if ios > 0.0 { cpu / ios } else { 0.0 },
    }))
}

/// The CPU time fio says a job used over its runtime (its usr and sys shares), ns.
pub fn fio_cpu_ns(job: &Value) -> f64 {
    let share = job["usr_cpu"].as_f64().unwrap_or(0.0) + job["sys_cpu"].as_f64().unwrap_or(0.0);
    share / 100.0 * job["job_runtime"].as_f64().unwrap_or(0.0) * 1e6
}

/// fio's JSON report from its run (`--output-format=json`), or why there is none.
pub fn fio_json(out: std::io::Result<std::process::Output>) -> Result<Value> {
    let out = out.with_context(|| format!("running {}", FIO))?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before its JSON.
    serde_json::from_str(&text[text.find('{').unwrap_or(0)..])
        .with_context(|| format!("fio's output: {}", text))
}

fn ratio(o: &Value, f: &Value, k: &str) -> Value {
    let (a, b) = (o[k].as_f64().unwrap_or(0.0), f[k].as_f64().unwrap_or(0.0));
    if b > 0.0 {
        json!(a / b)
    } else {
        Value::Null
    }
}

/// Busy CPU seconds of the whole guest so far (/proc/stat).
fn guest_busy() -> Result<f64> {
    let p = Path::new("/proc/stat");
    let text = std::fs::read_to_string(p).context("reading /proc/stat")?;
    Ok(crate::report::usage::parse_proc_stat(p, &text, crate::report::usage::clock_ticks())?.busy)
}

/// The device `target` is on (or is), as (major, minor).
fn devnr(target: &Path) -> Result<(u32, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(target)?;
    let dev = if m.file_type().is_block_device() {
        m.rdev()
    } else {
        m.dev()
    };
    Ok((libc::major(dev), libc::minor(dev)))
}

/// The block layer's counters of the device `target` is on (or is): /sys/dev/block/M:m/stat.
fn dev_stat(target: &Path) -> Result<Vec<u64>> {
    let (major, minor) = devnr(target)?;
    let p = format!("/sys/dev/block/{}:{}/stat", major, minor);
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p))?;
    Ok(text
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect())
}

/// `run`'s result with what the rest of the guest saw meanwhile: how many of its CPUs were busy
/// on average (all processes: fio's helper threads too, which its own CPU figures leave out),
/// the block layer's request count and mean request time for the job's direction (its own
/// account of the device's latency, the same for both engines), and — when tracefs is there —
/// the percentiles of the device's dispatch-to-completion times from the block events.
fn observed(target: &Path, write: bool, run: impl FnOnce() -> Result<Value>) -> Result<Value> {
    use crate::report::iolat_source::IoLatSource;
    let hp = crate::system::HostPaths::real();
    let mut trace = crate::report::tracefs::TraceFsSource::open(&hp, devnr(target)?).ok();
    if let Some(t) = trace.as_mut() {
        // Start the count here.
        let _ = t.sample();
    }
    let (b0, d0, t0) = (guest_busy()?, dev_stat(target)?, std::time::Instant::now());
    let mut v = run()?;
    if let Some(h) = trace.as_mut().and_then(|t| t.sample().ok()?.hists) {
        let h = if write { &h.write } else { &h.read };
        v["dev_trace"] = json!({
            "n": h.total(),
            "p50_us": h.quantile(0.5) * 1e6,
            "p99_us": h.quantile(0.99) * 1e6,
            "p999_us": h.quantile(0.999) * 1e6,
        });
    }
    let busy = (guest_busy()? - b0) / t0.elapsed().as_secs_f64();
    let d1 = dev_stat(target)?;
    // Fields: read ios, merges, sectors, ticks (ms); then the same for writes.
    let (ios, ticks) = if write { (4, 7) } else { (0, 3) };
    let delta = |i: usize| {
        d1.get(i)
            .unwrap_or(&0)
            .saturating_sub(*d0.get(i).unwrap_or(&0))
    };
    v["guest_busy_cpus"] = json!(busy);
    v["dev_requests"] = json!(delta(ios));
    v["dev_mean_us"] = json!(if delta(ios) > 0 {
        delta(ticks) as f64 * 1e3 / delta(ios) as f64
    } else {
        0.0
    });
    Ok(v)
}

/// Ours and fio's, the order alternating from call to call so neither always runs first.
fn pair(
    first_fio: bool,
    s: &Spec,
    target: &Path,
    size: u64,
    batched: bool,
    o: &Opts,
) -> Result<(Value, Value)> {
    let f = || {
        observed(target, s.write, || {
            fio(s, target, size, o.dur, batched, &o.fio_extra)
        })
    };
    let o = || observed(target, s.write, || ours(s, target, o.dur, batched, o.busy));
    if first_fio {
        let f = f()?;
        Ok((o()?, f))
    } else {
        let o = o()?;
        Ok((o, f()?))
    }
}

/// Job `i` on `target`: fio and ours with their defaults, and at QD > 1 both with batched
/// submission.
fn compare(i: usize, s: &Spec, target: &Path, size: u64, opts: &Opts) -> Result<Value> {
    eprintln!("fio-compare: {} on {}", s.name, target.display());
    let (o, f) = pair(i % 2 == 0, s, target, size, false, opts)?;
    let (ob, fb) = if s.qd > 1 {
        let (ob, fb) = pair(i % 2 == 1, s, target, size, true, opts)?;
        (Some(ob), Some(fb))
    } else {
        (None, None)
    };
    let both = |k: &str| match (&ob, &fb) {
        (Some(ob), Some(fb)) => ratio(ob, fb, k),
        _ => Value::Null,
    };
    Ok(json!({
        "job": s.name,
        "target": target.display().to_string(),
        "ours": o,
        "fio": f,
        "ours_batched": ob,
        "fio_batched": fb,
        "iops_ratio": ratio(&o, &f, "iops"),
        "p50_ratio": ratio(&o, &f, "clat_p50_us"),
        "p99_ratio": ratio(&o, &f, "clat_p99_us"),
        "cpu_ratio": ratio(&o, &f, "cpu_ns_per_io"),
        "iops_ratio_batched": both("iops"),
        "p50_ratio_batched": both("clat_p50_us"),
        "p99_ratio_batched": both("clat_p99_us"),
        "cpu_ratio_batched": both("cpu_ns_per_io"),
    }))
}

pub fn fio_compare(work: &Path, opts: &Opts) -> Result<Value> {
    if !Path::new(FIO).exists() {
        bail!(
            "{} is not in the guest: run vm with --with-program $(command -v fio)",
            FIO
        );
    }
    let file = work.join("fio-testfile");
    let size = 1u64 << 30;
    if crate::workload::ioengine::testfile::ensure(&file, size, true)? {
        // Let the writes behind the new file settle before anything is measured.
        unsafe { libc::sync() };
        std::thread::sleep(Duration::from_secs(5));
    }
    let mut rows = Vec::new();
    for (i, s) in JOBS.iter().enumerate() {
        if s.name.contains(&opts.only) {
            rows.push(compare(i, s, &file, size, opts)?);
        }
    }
    let ram = Path::new("/dev/ram0");
    if ram.exists() && JOBS[1].name.contains(&opts.only) {
        let size = crate::workload::ioengine::target::size_of(&std::fs::File::open(ram)?)?;
        rows.push(compare(0, &JOBS[1], ram, size, opts)?);
    }
    Ok(json!({
        "profile": std::env::var("RESCTL_BENCH_VM").unwrap_or_default(),
        "busy": opts.busy,
        "rows": rows,
    }))
}
