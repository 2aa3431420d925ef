//! `__reporter`: the reporter on its own for N seconds, optionally next to a synthetic CPU and
//! IO load, then a JSON summary on stdout: which seconds have a report, and what the reporter
//! thread cost (its CPU time, the process RSS). Used by the tests and `scripts/bench-reporter`.

use crate::cli::testaid::ReporterArgs;
use crate::cli::GlobalOpts;
use crate::config::Config;
use crate::report::iolat_source::IoLatSource;
use crate::report::reporter::{Reporter, ReporterConfig, ReporterStats, ScratchDev};
use crate::report::{load_report, report_path, reports_dir};
use crate::system::cgroup::DevNr;
use crate::system::{blockdev, HostPaths};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The summary printed at the end.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub dir: PathBuf,
    pub dev: Option<String>,
    pub secs: u64,
    /// Seconds a faultless reporter would have written, how many have a loadable report, and
    /// which don't.
    pub expected: u64,
    pub present: u64,
    pub missing: Vec<u64>,
    pub coverage: f64,
    pub stats: ReporterStats,
    /// The reporter thread's CPU time over its lifetime, in percent of one CPU.
    pub thread_cpu_pct: f64,
    pub pass_ms_mean: f64,
    pub pass_ms_max: f64,
    /// Size of the newest report file.
    pub report_bytes: u64,
    /// Process memory (/proc/self/status) before the reporter started and at the end, KiB.
    pub mem_kib: BTreeMap<String, u64>,
    pub load: LoadSummary,
    /// What the newest report says, for checks from outside a VM guest.
    pub last: Option<LastReport>,
}

/// A digest of one report.
#[derive(Debug, Serialize)]
pub struct LastReport {
    pub sec: u64,
    pub units: Vec<String>,
    pub root: crate::report::UsageReport,
    pub mem_stat: Vec<String>,
    pub io_stat: Vec<String>,
    pub vmstat_keys: usize,
    pub vrate: f64,
    pub iocost_enable: u32,
    pub swappiness: u32,
    pub iolat_unavailable: bool,
}

fn digest(sec: u64, r: &crate::report::Report) -> LastReport {
    LastReport {
        sec,
        units: r.usages.keys().cloned().collect(),
        root: r.usages.get("-.slice").cloned().unwrap_or_default(),
        mem_stat: r.mem_stat.keys().cloned().collect(),
        io_stat: r.io_stat.keys().cloned().collect(),
        vmstat_keys: r.vmstat.len(),
        vrate: r.iocost.vrate,
        iocost_enable: r.iocost.qos.enable,
        swappiness: r.swappiness,
        iolat_unavailable: r.iolat_unavailable,
    }
}

#[derive(Debug, Default, Serialize)]
pub struct LoadSummary {
    pub cpu: bool,
    pub io: bool,
    pub written_bytes: u64,
    pub read_ios: u64,
    pub errors: Vec<String>,
}

/// `VmRSS`, `VmHWM`, `RssAnon`, `RssFile` of this process in KiB.
pub fn process_mem_kib() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            if !["VmRSS", "VmHWM", "RssAnon", "RssFile"].contains(&k) {
                return None;
            }
            let kib = v.split_whitespace().next()?.parse().ok()?;
            Some((k.to_string(), kib))
        })
        .collect()
}

/// The synthetic load: threads that run until `stop`.
struct Load {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<Result<u64>>>,
    summary: LoadSummary,
}

const LOAD_FILE_SIZE: u64 = 64 << 20;
const WRITE_BS: usize = 256 << 10;

fn spin(stop: &AtomicBool) -> Result<u64> {
    let mut x: u64 = 1;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
        std::hint::black_box(x);
    }
    Ok(0)
}

/// Rewrites random 256 KiB blocks of `path`, flushing every 4 MiB, until `stop`.
fn write_loop(path: &Path, stop: &AtomicBool, written: &AtomicU64) -> Result<u64> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let buf = vec![0x5au8; WRITE_BS];
    let blocks = LOAD_FILE_SIZE / WRITE_BS as u64;
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f.write_all_at(&buf, (x % blocks) * WRITE_BS as u64)
            .with_context(|| format!("writing {}", path.display()))?;
        n += 1;
        written.fetch_add(WRITE_BS as u64, Ordering::Relaxed);
        if n % 16 == 0 {
            f.sync_data()
                .with_context(|| format!("fdatasync {}", path.display()))?;
        }
    }
    Ok(n)
}

impl Load {
    fn start(kinds: &[String], dir: &Path, secs: u64) -> Result<Load> {
        let mut load = Load {
            stop: Arc::new(AtomicBool::new(false)),
            written: Arc::new(AtomicU64::new(0)),
            threads: Vec::new(),
            summary: LoadSummary::default(),
        };
        for k in kinds {
            match k.trim() {
                "cpu" => load.summary.cpu = true,
                "io" => load.summary.io = true,
                "" | "none" => {}
                other => crate::usage_bail!(
                    "--load: {:?} is not a load kind (accepted: cpu, io, cpu,io, none)",
                    other
                ),
            }
        }
        if load.summary.cpu {
            let stop = load.stop.clone();
            load.threads.push(
                std::thread::Builder::new()
                    .name("load-cpu".into())
                    .spawn(move || spin(&stop))
                    .context("starting the CPU load")?,
            );
        }
        if load.summary.io {
            let scratch = dir.join("scratch");
            std::fs::create_dir_all(&scratch)
                .with_context(|| format!("creating {}", scratch.display()))?;
            let path = scratch.join("reporter-load.dat");
            let f = std::fs::File::create(&path)
                .with_context(|| format!("creating {}", path.display()))?;
            let chunk = vec![0xa5u8; 1 << 20];
            for _ in 0..LOAD_FILE_SIZE / (1 << 20) {
                std::io::Write::write_all(&mut &f, &chunk)
                    .with_context(|| format!("filling {}", path.display()))?;
            }
            f.sync_all()
                .with_context(|| format!("fsync {}", path.display()))?;
            drop(f);
            let (stop, written, p) = (load.stop.clone(), load.written.clone(), path.clone());
            load.threads.push(
                std::thread::Builder::new()
                    .name("load-write".into())
                    .spawn(move || write_loop(&p, &stop, &written))
                    .context("starting the IO writer")?,
            );
            let p = path.clone();
            load.threads.push(
                std::thread::Builder::new()
                    .name("load-read".into())
                    .spawn(move || {
                        crate::workload::randread::randread(&p, Duration::from_secs(secs), 2)
                            .map(|r| r.ios)
                    })
                    .context("starting the IO readers")?,
            );
        }
        Ok(load)
    }

    fn stop(mut self) -> LoadSummary {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let name = t.thread().name().unwrap_or("load").to_string();
            match t.join() {
                Ok(Ok(n)) if name == "load-read" => self.summary.read_ios = n,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => self.summary.errors.push(format!("{}: {:#}", name, e)),
                Err(_) => self.summary.errors.push(format!("{} panicked", name)),
            }
        }
        self.summary.written_bytes = self.written.load(Ordering::Relaxed);
        self.summary
    }
}

/// The scratch device for `--dev` / the device backing `dir`; `None` (with a warning) when it
/// can't be found.
fn scratch_dev(hp: &HostPaths, dir: &Path, dev: Option<&str>) -> Option<ScratchDev> {
    match blockdev::detect(hp, dir, dev) {
        Ok(s) => Some(ScratchDev {
            name: s.dev.name.clone(),
            devnr: DevNr::new(s.dev.devnr.0, s.dev.devnr.1),
        }),
        Err(e) => {
            log::warn!("no scratch device, IO fields stay 0: {:#}", e);
            None
        }
    }
}

/// The `--iolat` source for the scratch device.
fn iolat_source(
    name: &str,
    hp: &HostPaths,
    dev: Option<&ScratchDev>,
) -> Result<Option<Box<dyn IoLatSource>>> {
    if !["none", "auto", "tracefs", "diskstats"].contains(&name) {
        crate::usage_bail!(
            "--iolat: {:?} is not a latency source (accepted: none, auto, tracefs, diskstats)",
            name
        );
    }
    if name == "none" {
        return Ok(None);
    }
    let Some(dev) = dev else {
        anyhow::bail!("--iolat {}: no scratch device to measure", name);
    };
    let devnr = (dev.devnr.maj, dev.devnr.min);
    Ok(Some(match name {
        "tracefs" => Box::new(crate::report::tracefs::TraceFsSource::open(hp, devnr)?),
        "diskstats" => Box::new(crate::report::diskstats::DiskStatsSource::open(hp, devnr)?),
        _ => crate::report::diskstats::open_best(hp, devnr)?,
    }))
}

pub fn run(global: &GlobalOpts, a: &ReporterArgs) -> Result<()> {
    let cfg = Config::from_opts(global)?;
    if a.secs == 0 {
        crate::usage_bail!("--secs: must be at least 1");
    }
    std::fs::create_dir_all(&cfg.dir).with_context(|| format!("creating {}", cfg.dir.display()))?;
    let hp = HostPaths::real();
    let dev = scratch_dev(&hp, &cfg.dir, cfg.dev.as_deref());
    let iolat = iolat_source(&a.iolat, &hp, dev.as_ref())?;
    let mem_start = process_mem_kib();
    let load = Load::start(&a.load, &cfg.dir, a.secs)?;

    let mut rcfg = ReporterConfig::new(hp, &cfg.dir);
    rcfg.dev = dev.clone();
    rcfg.iolat = iolat;
    rcfg.retention = cfg.rep_retention;
    rcfg.keep_reports = cfg.keep_reports;
    rcfg.clear_reports = cfg.clear_reports;
    let started = Instant::now();
    let handle = Reporter::start(rcfg)?;
    std::thread::sleep(Duration::from_secs(a.secs));
    let stats = handle.stop()?;
    let lifetime = started.elapsed().as_secs_f64();
    let load = load.stop();

    let rdir = reports_dir(&cfg.dir);
    let (mut present, mut missing, mut last) = (0u64, Vec::new(), None);
    let range = stats.expected_range();
    for sec in range.clone() {
        match load_report(&report_path(&rdir, sec)) {
            Ok(r) => {
                present += 1;
                last = Some(digest(sec, &r));
            }
            Err(_) => missing.push(sec),
        }
    }
    let expected = range.count() as u64;
    let report_bytes = stats
        .last_sec
        .and_then(|s| std::fs::metadata(report_path(&rdir, s)).ok())
        .map_or(0, |m| m.len());
    let mut mem_kib = process_mem_kib();
    for (k, v) in mem_start {
        mem_kib.insert(format!("{}_start", k), v);
    }
    let summary = Summary {
        dir: cfg.dir.clone(),
        dev: dev.map(|d| d.name),
        secs: a.secs,
        expected,
        present,
        coverage: if expected > 0 {
            present as f64 / expected as f64
        } else {
            0.0
        },
        missing,
        thread_cpu_pct: if lifetime > 0.0 {
            stats.cpu_secs / lifetime * 100.0
        } else {
            0.0
        },
        pass_ms_mean: if stats.written > 0 {
            stats.pass_secs_total / stats.written as f64 * 1e3
        } else {
            0.0
        },
        pass_ms_max: stats.pass_secs_max * 1e3,
        stats,
        report_bytes,
        mem_kib,
        load,
        last,
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&summary).context("serializing the summary")?
    );
    Ok(())
}
