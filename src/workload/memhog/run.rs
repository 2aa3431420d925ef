//! The hidden `__mem-hog` subcommand: the memory hog process (benches-doc/protection.md).
//!
//! An anonymous area of 32 MiB units, 1 GiB at first and grown a GiB at a time, never shrunk.
//! A writer dirties fresh pages one after another at `--wbps` (the area only grows); optional
//! readers touch the written pages cyclically at `--rbps` in all, forcing swapped-out pages
//! back in. Each worker keeps its rate through a [`Pacer`]: what reclaim keeps it from doing
//! for more than `--max-debt` seconds is lost. Every second the main thread replaces the report
//! file (`--report`) atomically. The hog runs until it is killed (or `--duration` passes).

use super::debt::{Pacer, Step, PAGE};
use super::fill::{fill_page, random_words};
use super::report::HogReport;
use crate::report::model::Timestamp;
use crate::workload::hashd::anon::AnonArea;
use anyhow::{bail, Context, Result};
use clap::Args;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The area's first size and growth step.
pub const CLICK: u64 = 1 << 30;
/// Mapping unit of the area.
const UNIT: usize = 32 << 20;

fn size_arg(s: &str) -> Result<u64, String> {
    crate::units::parse::parse_size(s)
}

/// The memory hog: grows anonymous memory at a set rate, reporting every second, until
/// killed
#[derive(Debug, Clone, Args)]
pub struct MemHogArgs {
    /// Growth rate: bytes of new memory written per second (0: no writer)
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = size_arg)]
    pub wbps: u64,
    /// Read rate over the written memory, bytes per second, all readers together (0: none)
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = size_arg)]
    pub rbps: u64,
    /// Reader threads, each over its share of the written memory
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub readers: u32,
    /// Seconds of work a worker may fall behind before the rest counts as lost
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub max_debt: f64,
    /// Compressibility of the written pages (0: random … 1: zeros)
    #[arg(long, value_name = "FRAC", default_value_t = 0.0)]
    pub comp: f64,
    /// Report file, replaced atomically every second
    #[arg(long, value_name = "FILE")]
    pub report: PathBuf,
    /// Exit after this many seconds [default: run until killed]
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Touch no memory until stdin closes (the parent has moved us into our cgroup)
    #[arg(long)]
    pub held: bool,
}

/// One worker's figures, shared with the reporting thread.
#[derive(Debug, Default, Clone, Copy)]
struct WorkerStat {
    bytes: u64,
    debt: f64,
    loss: f64,
}

type Stat = Arc<Mutex<WorkerStat>>;

fn publish(stat: &Stat, bytes: u64, p: &Pacer) {
    let mut s = stat.lock().unwrap_or_else(|e| e.into_inner());
    s.bytes += bytes;
    s.debt = p.debt.debt_bytes();
    s.loss = p.debt.loss_bytes();
}

fn secs_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64()
}

/// The writer: fresh pages after the last one written, growing the area as needed.
fn writer(
    area: Arc<AnonArea>,
    written: Arc<AtomicU64>,
    a: MemHogArgs,
    stat: Stat,
    stop: Arc<AtomicBool>,
) -> Result<()> {
    let t0 = Instant::now();
    let mut pacer = Pacer::new(a.wbps as f64, a.max_debt, 0.0);
    let random = random_words(a.comp);
    let mut rng = SmallRng::from_entropy();
    while !stop.load(Ordering::Relaxed) {
        match pacer.next(secs_since(t0)) {
            Step::Sleep(s) => std::thread::sleep(Duration::from_secs_f64(s.min(0.1))),
            Step::Touch(n) => {
                let first = written.load(Ordering::Relaxed);
                while (first + n) * PAGE > area.size() {
                    area.resize(area.size() + CLICK)
                        .context("growing the hog's memory")?;
                }
                area.with_pages(|pages| {
                    for i in first..first + n {
                        fill_page(pages.page(i), random, &mut rng);
                    }
                });
                written.store(first + n, Ordering::Relaxed);
                pacer.done(n);
                publish(&stat, n * PAGE, &pacer);
            }
        }
    }
    Ok(())
}

/// Reader `idx` of `nr`: touches the first word of every page in its share of the written
/// pages, round and round.
fn reader(
    area: Arc<AnonArea>,
    written: Arc<AtomicU64>,
    (idx, nr): (u64, u64),
    bps: f64,
    max_debt: f64,
    stat: Stat,
    stop: Arc<AtomicBool>,
) {
    let t0 = Instant::now();
    let mut pacer = Pacer::new(bps, max_debt, 0.0);
    let mut pos = 0u64;
    let mut sum = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let total = written.load(Ordering::Relaxed);
        let (lo, hi) = (total * idx / nr, total * (idx + 1) / nr);
        if hi <= lo {
            // Nothing of ours written yet: don't run up debt for it.
            std::thread::sleep(Duration::from_millis(100));
            pacer = Pacer::new(bps, max_debt, secs_since(t0));
            continue;
        }
        match pacer.next(secs_since(t0)) {
            Step::Sleep(s) => std::thread::sleep(Duration::from_secs_f64(s.min(0.1))),
            Step::Touch(n) => {
                area.with_pages(|pages| {
                    for _ in 0..n {
                        if pos < lo || pos >= hi {
                            pos = lo;
                        }
                        sum = sum.wrapping_add(pages.page(pos)[0].load(Ordering::Relaxed));
                        pos += 1;
                    }
                });
                pacer.done(n);
                publish(&stat, n * PAGE, &pacer);
            }
        }
    }
    std::hint::black_box(sum);
}

fn sum(stats: &[Stat]) -> WorkerStat {
    stats.iter().fold(WorkerStat::default(), |acc, s| {
        let s = *s.lock().unwrap_or_else(|e| e.into_inner());
        WorkerStat {
            bytes: acc.bytes + s.bytes,
            debt: acc.debt + s.debt,
            loss: acc.loss + s.loss,
        }
    })
}

fn write_report(path: &Path, rep: &HogReport) -> Result<()> {
    let json = serde_json::to_vec_pretty(rep).context("serializing the hog report")?;
    let mut staging = path.as_os_str().to_owned();
    staging.push(".staging");
    crate::util::atomic::write_replacing(path, Path::new(&staging), "hog report", |f| {
        f.write_all(&json)?;
        f.write_all(b"\n")
    })
}

pub fn run(a: &MemHogArgs) -> Result<()> {
    if a.held {
        crate::util::proc::wait_released().context("waiting to be placed in our cgroup")?;
    }
    if !(0.0..=1.0).contains(&a.comp) {
        bail!("--comp {} is not between 0 and 1", a.comp);
    }
    if !a.max_debt.is_finite() || a.max_debt < 0.0 {
        bail!("--max-debt {} is not a number of seconds", a.max_debt);
    }
    let area = Arc::new(AnonArea::with_unit(CLICK, UNIT).context("mapping the hog's memory")?);
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let wstat = Stat::default();
    if a.wbps > 0 {
        let (area, written, args, stat, stop) = (
            area.clone(),
            written.clone(),
            a.clone(),
            wstat.clone(),
            stop.clone(),
        );
        threads.push(
            std::thread::Builder::new()
                .name("writer".into())
                .spawn(move || {
                    if let Err(e) = writer(area, written, args, stat, stop) {
                        crate::errln!("mem-hog: {:#}", e);
                        std::process::exit(1);
                    }
                })?,
        );
    }
    let nr = if a.rbps > 0 {
        a.readers.max(1) as u64
    } else {
        0
    };
    let rstats: Vec<Stat> = (0..nr).map(|_| Stat::default()).collect();
    for (i, stat) in rstats.iter().enumerate() {
        let bps = (a.rbps as f64 / nr as f64).ceil();
        let (area, written, stat, stop) =
            (area.clone(), written.clone(), stat.clone(), stop.clone());
        let max_debt = a.max_debt;
        threads.push(
            std::thread::Builder::new()
                .name(format!("reader-{}", i))
                .spawn(move || reader(area, written, (i as u64, nr), bps, max_debt, stat, stop))?,
        );
    }

    let t0 = Instant::now();
    let (mut last_w, mut last_r, mut last_t) = (0u64, 0u64, t0);
    let mut next = t0 + Duration::from_secs(1);
    loop {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next += Duration::from_secs(1);
        let (w, r) = (sum(std::slice::from_ref(&wstat)), sum(&rstats));
        let dt = last_t.elapsed().as_secs_f64().max(1e-3);
        let rep = HogReport {
            timestamp: Timestamp::now(),
            wbps: ((w.bytes - last_w) as f64 / dt).round() as u64,
            rbps: ((r.bytes - last_r) as f64 / dt).round() as u64,
            wbytes: w.bytes,
            rbytes: r.bytes,
            wdebt: w.debt.round() as u64,
            rdebt: r.debt.round() as u64,
            wloss: w.loss.round() as u64,
            rloss: r.loss.round() as u64,
        };
        (last_w, last_r, last_t) = (w.bytes, r.bytes, Instant::now());
        if let Err(e) = write_report(&a.report, &rep) {
            crate::errln!("mem-hog: {:#}", e);
        }
        if a.duration.is_some_and(|d| t0.elapsed().as_secs_f64() >= d) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}
