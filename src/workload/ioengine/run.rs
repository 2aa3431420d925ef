//! Running a job: the target opened, the engine picked, one thread per worker, and the
//! workers' measurements added up into the result.

use super::buf::Buffers;
use super::drive::{drive_live, Backend, Clock, MonoClock, WorkerPlan};
use super::job::{EngineChoice, IoJob, UringOpts};
use super::psync::Psync;
use super::result::{IoResult, WorkerOut, RESULT_VERSION};
use super::stats::{Cpu, DirStats, WorkerStats};
use super::steady::{Counted, Live, SteadyOut, Watch};
use super::target::Target;
use super::uring::Uring;
use anyhow::{Context, Result};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Engine {
    IoUring,
    Psync,
}

/// The engine to use and, for the fallback, why.
fn pick(choice: EngineChoice) -> Result<(Engine, String)> {
    match choice {
        EngineChoice::Psync => Ok((Engine::Psync, "asked for".into())),
        EngineChoice::IoUring => match Uring::available() {
            Ok(()) => Ok((Engine::IoUring, String::new())),
            Err(e) => crate::usage_bail!("engine=io_uring: io_uring is unavailable here ({})", e),
        },
        EngineChoice::Auto => match Uring::available() {
            Ok(()) => Ok((Engine::IoUring, String::new())),
            Err(e) => {
                let why = format!("io_uring is unavailable ({})", e);
                log::warn!("io: {}; using blocking pread/pwrite threads", why);
                Ok((Engine::Psync, why))
            }
        },
    }
}

fn with_backend<B: Backend>(
    plan: &WorkerPlan,
    mut b: B,
    clock: &MonoClock,
    halt: &AtomicBool,
    live: &Live,
) -> Result<WorkerStats> {
    let r = drive_live(plan, &mut b, clock, halt, Some(live));
    let extra = b.finish();
    r.map(|mut st| {
        st.cpu.add(&extra);
        st
    })
}

/// The io_uring settings `job` runs with on `t`: those it asked for (refused when the kernel
/// or the device can't) and, with `fast`, every one they allow but the submission poller,
/// which spends a CPU of its own; with notes on what `fast` left out.
fn uring_opts(job: &IoJob, t: &Target, engine: Engine) -> Result<(UringOpts, Vec<String>)> {
    if engine != Engine::IoUring {
        let asked = job.uring.needing_uring();
        if asked.any() {
            crate::usage_bail!(
                "io job: {} needs io_uring, which is unavailable here",
                asked.names()
            );
        }
        let note = job
            .fast
            .then(|| "fast: io_uring is unavailable".to_string());
        return Ok((UringOpts::default(), note.into_iter().collect()));
    }
    if job.uring.hipri && !t.polls {
        crate::usage_bail!(
            "io job: hipri: the device under {} has no poll queues (its queue/io_poll is 0;              NVMe's poll_queues= or null_blk's poll_queues= give it some)",
            job.target.display()
        );
    }
    let mut want = job.uring;
    let mut notes = Vec::new();
    if job.fast {
        // Registered buffers save pinning them for each direct IO to a device; on tmpfs or
        // through the page cache the data is copied, and they cost more than they save.
        match (t.on_disk, job.direct) {
            (true, true) => want.fixedbufs = true,
            (false, _) => notes.push("no fixedbufs (no block device under the target)".into()),
            (true, false) => notes.push("no fixedbufs (it helps direct IO only)".into()),
        }
        want.registerfiles = true;
        want.taskrun = true;
        match (t.polls, job.direct) {
            (true, true) => want.hipri = true,
            (false, _) => notes.push("no hipri (the device has no poll queues)".to_string()),
            (true, false) => notes.push("no hipri (it polls for direct IO only)".to_string()),
        }
    }
    let (got, more) = Uring::supported(want);
    if job.uring.sqthread_poll && !got.sqthread_poll {
        crate::usage_bail!("io job: {}", more.join("; "));
    }
    notes.extend(more);
    Ok((got, notes))
}

fn worker(
    plan: &WorkerPlan,
    (engine, opts): (Engine, UringOpts),
    fd: i32,
    clock: MonoClock,
    halt: &AtomicBool,
    live: &Live,
) -> Result<WorkerStats> {
    // An open-loop worker sleeps until each IO is due, and its latency counts from then: the
    // default 50 µs of timer slack would be added to every IO at low rates.
    // SAFETY: prctl with integer arguments on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let bufs = Buffers::new(plan.qd, plan.bs as usize, plan.seed)?;
    match engine {
        Engine::IoUring => {
            let b = Uring::new(fd, bufs, plan.qd, clock, opts).context("setting up io_uring")?;
            with_backend(plan, b, &clock, halt, live)
        }
        Engine::Psync => {
            let b = Psync::new(fd, bufs, plan.qd, clock).context("starting IO threads")?;
            with_backend(plan, b, &clock, halt, live)
        }
    }
}

/// A worker thread's result: what it returned, or why it didn't.
fn joined(
    h: std::io::Result<std::thread::ScopedJoinHandle<'_, Result<WorkerStats>>>,
) -> Result<WorkerStats> {
    match h {
        Ok(h) => h
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("an IO worker panicked"))),
        Err(e) => Err(anyhow::Error::new(e).context("starting an IO worker")),
    }
}

/// Runs `job` to its end (or until `abort` is set: what was measured until then is the
/// result) and returns what it measured.
pub fn run(job: &IoJob, abort: &AtomicBool) -> Result<IoResult> {
    run_sampled(job, abort, &mut |_, _| {})
}

/// The job checked, and its target opened and checked against the job's range.
fn open_checked(job: &IoJob) -> Result<Target> {
    if let Err(e) = job.check() {
        crate::usage_bail!("io job: {}", e);
    }
    let t = super::target::open(&job.target, job.read_pct < 100, job.direct)?;
    let end = if job.end == 0 { t.size } else { job.end };
    if end > t.size {
        crate::usage_bail!(
            "io job: the range ends at {} but {} holds {} bytes",
            end,
            job.target.display(),
            t.size
        );
    }
    let start = job.start.div_ceil(job.alignment()) * job.alignment();
    if end < start + job.bs {
        crate::usage_bail!(
            "io job: {} ({} bytes) holds no aligned IO of {} bytes in the range",
            job.target.display(),
            t.size,
            job.bs
        );
    }
    Ok(t)
}

/// [`run`], handing the job's running totals to `on_second` once a second (with the
/// milliseconds since the start), for a caller that keeps a time series.
pub fn run_sampled(
    job: &IoJob,
    abort: &AtomicBool,
    on_second: &mut dyn FnMut(u64, Counted),
) -> Result<IoResult> {
    let t = open_checked(job)?;
    let (engine, note) = pick(job.engine)?;
    let (opts, uring_notes) = uring_opts(job, &t, engine)?;
    let mut trace = match job.devtime {
        true => Some(super::devtime::DevTrace::start(&job.target)?),
        false => None,
    };
    let clock = MonoClock::new();
    let fd = t.file.as_raw_fd();
    let halt = AtomicBool::new(false);
    let live = Live::default();
    let mut steady: Option<u32> = None;
    let plans: Vec<WorkerPlan> = (0..job.workers)
        .map(|i| WorkerPlan::of(job, i, t.size))
        .collect();
    let results: Vec<Result<WorkerStats>> = std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .iter()
            .map(|p| {
                let (halt, live) = (&halt, &live);
                std::thread::Builder::new()
                    .name(format!("io-worker-{}", p.index))
                    .spawn_scoped(s, move || {
                        let r = worker(p, (engine, opts), fd, clock, halt, live);
                        if r.is_err() {
                            // One worker failing ends the job.
                            halt.store(true, Ordering::Relaxed);
                        }
                        r
                    })
            })
            .collect();
        // Hand an abort on to the workers while they run, and stop them once steady.
        let mut watch = job.ss.map(|r| (Watch::new(r), r));
        let t0 = clock.now();
        let ramp_end = t0 + job.ramp.as_nanos() as u64;
        let mut next_sample = t0 + 1_000_000_000;
        // The device's times count from the ramp's end (to within one pass of this loop).
        let mut trace_ramp = !job.ramp.is_zero();
        while handles
            .iter()
            .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
        {
            if abort.load(Ordering::Relaxed) {
                halt.store(true, Ordering::Relaxed);
            }
            if let Some((w, rule)) = &mut watch {
                let next = ramp_end + (w.seconds() as u64 + 1) * 1_000_000_000;
                if steady.is_none() && clock.now() >= next && w.second(live.totals()) {
                    log::debug!("io: steady by {} after {} s", rule.name(), w.seconds());
                    steady = Some(w.seconds());
                    halt.store(true, Ordering::Relaxed);
                }
            }
            let now = clock.now();
            if trace_ramp && now >= ramp_end {
                trace_ramp = false;
                if let Some(Err(e)) = trace.as_mut().map(|t| t.reset()) {
                    log::warn!("io: devtime: {:#}", e);
                }
            }
            if now >= next_sample {
                on_second((now - t0) / 1_000_000, live.totals());
                next_sample += 1_000_000_000;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        handles.into_iter().map(joined).collect()
    });
    let mut workers = Vec::with_capacity(results.len());
    for r in results {
        workers.push(r?);
    }
    let mut r = assemble(job, Some(engine), note, (t.size, t.block_device), &workers);
    r.uring = opts;
    r.uring_note = uring_notes.join("; ");
    r.dev = trace.map(|t| t.finish()).transpose()?;
    r.steady = job.ss.map(|rule| SteadyOut {
        rule,
        reached: steady.is_some(),
        at_s: steady.unwrap_or((r.runtime_ns / 1_000_000_000) as u32),
    });
    Ok(r)
}

/// The result of `workers` run by `engine` (`None`: a simulated device) on a target of
/// `size` bytes.
pub(super) fn assemble(
    job: &IoJob,
    engine: Option<Engine>,
    engine_note: String,
    (size, block_device): (u64, bool),
    workers: &[WorkerStats],
) -> IoResult {
    let pcts = &job.percentiles;
    let runtime_ns = workers.iter().map(|w| w.runtime_ns).max().unwrap_or(0);
    let (mut read, mut write, mut cpu) = (DirStats::default(), DirStats::default(), Cpu::default());
    for w in workers {
        read.merge(&w.read);
        write.merge(&w.write);
        cpu.add(&w.cpu);
    }
    IoResult {
        version: RESULT_VERSION,
        engine: match engine {
            Some(Engine::IoUring) => "io_uring",
            Some(Engine::Psync) => "psync",
            None => "simulated",
        }
        .to_string(),
        engine_note,
        job: job.clone(),
        target_size: size,
        block_device,
        runtime_ns,
        read: read.out(runtime_ns, pcts),
        write: write.out(runtime_ns, pcts),
        cpu,
        steady: None,
        uring: UringOpts::default(),
        uring_note: String::new(),
        dev: None,
        workers: workers
            .iter()
            .enumerate()
            .map(|(i, w)| WorkerOut {
                index: i as u32,
                runtime_ns: w.runtime_ns,
                read: w.read.out(w.runtime_ns, pcts),
                write: w.write.out(w.runtime_ns, pcts),
                cpu: w.cpu,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::ioengine::job::{Pattern, Rate, Stop};

    fn file(size: usize) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t");
        std::fs::write(&p, vec![7u8; size]).unwrap();
        (d, p)
    }

    fn job(p: &std::path::Path) -> IoJob {
        let mut j = IoJob::new(p.to_path_buf());
        j.direct = false;
        j.stop = Stop::Time(Duration::from_millis(300));
        j.qd = 4;
        j
    }

    #[test]
    fn the_summary_adds_up_the_workers_and_merges_their_histograms() {
        use crate::workload::ioengine::hist::LatHist;
        use crate::workload::ioengine::stats::{Stamps, WorkerStats};
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut all: Vec<u64> = Vec::new();
        let mut workers = Vec::new();
        // Three workers of different speeds and spreads, over the same 2 s.
        for (n, base) in [(3000u64, 20_000u64), (1000, 500_000), (200, 5_000_000)] {
            let mut w = WorkerStats {
                runtime_ns: 2_000_000_000,
                ..WorkerStats::default()
            };
            for i in 0..n {
                let clat = base + rng.gen_range(0..base);
                let s = Stamps {
                    wait: 0,
                    slat: 1_000,
                    clat,
                };
                w.read.record(4096, false, s, (i * 2 / n) as usize);
                all.push(clat);
            }
            workers.push(w);
        }
        let mut j = IoJob::new("/dev/null".into());
        j.workers = 3;
        j.percentiles = vec![50.0, 90.0, 99.0, 99.9];
        let r = assemble(&j, None, String::new(), (1 << 30, false), &workers);
        // Counts and IOPS are the workers' sums (not their mean).
        assert_eq!(r.read.ios, 4200);
        assert_eq!(
            r.read.ios,
            r.workers.iter().map(|w| w.read.ios).sum::<u64>()
        );
        let sum_iops: f64 = r.workers.iter().map(|w| w.read.iops).sum();
        assert!((r.read.iops - 2100.0).abs() < 1e-9 && (sum_iops - 2100.0).abs() < 1e-9);
        assert_eq!(r.read.bytes, 4200 * 4096);
        // Percentiles come from the merged buckets: the same as one histogram of every
        // sample, and within a bucket (1/128) of the exact order statistic.
        all.sort_unstable();
        let mut one = LatHist::new();
        for &v in &all {
            one.record(v);
        }
        let merged = LatHist::from_out(&r.read.clat).unwrap();
        for pct in [50.0, 90.0, 99.0, 99.9] {
            let exact = all[((pct / 100.0 * all.len() as f64).ceil() as usize).max(1) - 1];
            let got = merged.percentile(pct);
            assert_eq!(got, one.percentile(pct), "p{}", pct);
            let off = (got as f64 - exact as f64).abs() / exact as f64;
            assert!(off <= 1.0 / 128.0, "p{}: {} vs exact {}", pct, got, exact);
        }
        let mean = all.iter().sum::<u64>() as f64 / all.len() as f64;
        assert!((r.read.clat.mean_ns - mean).abs() < 1e-6 * mean);
    }

    #[test]
    fn both_engines_read_and_write_a_file() {
        let (_d, p) = file(4 << 20);
        for engine in [EngineChoice::Auto, EngineChoice::Psync] {
            let mut j = job(&p);
            j.engine = engine;
            j.read_pct = 50;
            j.workers = 2;
            let r = run(&j, &AtomicBool::new(false)).unwrap();
            assert!(r.read.ios > 0 && r.write.ios > 0, "{:?}", engine);
            assert_eq!(
                r.read.ios + r.write.ios,
                r.workers
                    .iter()
                    .map(|w| w.read.ios + w.write.ios)
                    .sum::<u64>()
            );
            assert_eq!(r.read.bytes, r.read.ios * 4096);
            assert!(r.read.clat.n == r.read.ios && r.read.lat.min_ns >= r.read.clat.min_ns);
            assert!(r.runtime_ns >= 300_000_000, "{}", r.runtime_ns);
            let t = text(&r);
            assert!(
                t.starts_with("randrw rwmix=50: bs=4K qd=4 workers=2 buffered"),
                "{}",
                t
            );
            assert!(
                t.contains("  read: IOPS=") && t.contains("clat percentiles"),
                "{}",
                t
            );
            if engine == EngineChoice::Psync {
                assert_eq!(r.engine, "psync");
                assert_eq!(r.engine_note, "asked for");
            }
            // The document reads back as it was written.
            // The document reads back as it was written (floats to the last digit or so:
            // serde_json's parser may round the last bit).
            let back: IoResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
            let (a, b) = (
                serde_json::to_value(&back).unwrap(),
                serde_json::to_value(&r).unwrap(),
            );
            assert_eq!(differs(&a, &b, String::new()), None);
        }
        // Writes land: random bytes where 7s were (a mixed job may write back what it read,
        // as fio does, so this one only writes).
        let (_d, p) = file(1 << 20);
        let mut j = job(&p);
        j.read_pct = 0;
        j.stop = Stop::Bytes(64 << 10);
        run(&j, &AtomicBool::new(false)).unwrap();
        let data = std::fs::read(&p).unwrap();
        assert!(data.iter().filter(|&&b| b != 7).count() > 60_000);
    }

    use super::super::result::text;

    /// The numbers of a report line, in order.
    fn numbers(line: &str) -> Vec<f64> {
        line.split(['=', ',', ':', ' ', '(', ')'])
            .filter_map(|v| v.trim().parse().ok())
            .collect()
    }

    #[test]
    fn device_times_split_the_latency_in_the_report() {
        use super::super::devtime::{DevDir, DevTime, KernelCount, KernelDir};
        let (_d, p) = file(1 << 20);
        let mut r = run(&job(&p), &AtomicBool::new(false)).unwrap();
        assert!(!text(&r).contains("device (disk"));
        let clat = r.read.clat.mean_ns;
        r.dev = Some(DevTime {
            disk: "8:0".into(),
            read: DevDir {
                n: r.read.ios,
                mean_ns: clat * 0.75,
                p50_ns: clat * 0.7,
                p99_ns: clat * 2.0,
            },
            write: DevDir::default(),
            kernel: Some(KernelCount {
                read: KernelDir {
                    n: r.read.ios + 2,
                    mean_ns: clat * 0.8,
                },
                write: KernelDir::default(),
            }),
            untraced: String::new(),
        });
        let t = text(&r);
        assert!(t.contains("  device (disk 8:0, block layer"), "{}", t);
        assert!(t.contains("    read  ("), "{}", t);
        // The device's time and the rest add up to the mean latency.
        let split = t.lines().find(|l| l.contains("lat split")).unwrap();
        let nums = numbers(split);
        assert_eq!(nums.len(), 4, "{}", split);
        let (u, div) = super::super::result::unit(r.read.lat.mean_ns as u64);
        assert!(
            (nums[0] - r.read.lat.mean_ns / div).abs() < 0.01,
            "{}",
            split
        );
        assert!(
            (nums[1] + nums[2] - nums[0]).abs() < 0.02,
            "{} {}",
            split,
            u
        );
        assert!(
            (nums[3] - r.read.slat.mean_ns / div).abs() < 0.01,
            "{}",
            split
        );
        assert!(!t.contains("write lat split"));
        // The kernel's count: its mean, and what it adds to the trace's (0.8 − 0.75 of clat).
        let k = t.lines().find(|l| l.contains("kernel's count")).unwrap();
        assert!(k.starts_with("    read  kernel's count ("), "{}", k);
        let nums = numbers(k);
        assert_eq!(nums.len(), 3, "{}", k);
        assert_eq!(nums[0], (r.read.ios + 2) as f64, "{}", k);
        // The device line's unit (from its p99, 2 × clat).
        let (_, div) = super::super::result::unit((clat * 2.0) as u64);
        assert!((nums[1] - clat * 0.8 / div).abs() < 0.01, "{}", k);
        assert!((nums[2] - clat * 0.05 / div).abs() < 0.01, "{}", k);
        assert!(!t.contains("write kernel's count"));
    }

    #[test]
    fn without_a_trace_the_kernels_count_splits_the_latency() {
        use super::super::devtime::{DevTime, KernelCount, KernelDir};
        let (_d, p) = file(1 << 20);
        let mut r = run(&job(&p), &AtomicBool::new(false)).unwrap();
        let lat = r.read.lat.mean_ns;
        r.dev = Some(DevTime {
            disk: "8:0".into(),
            read: Default::default(),
            write: Default::default(),
            kernel: Some(KernelCount {
                read: KernelDir {
                    n: r.read.ios,
                    mean_ns: lat * 0.6,
                },
                write: KernelDir::default(),
            }),
            untraced: "tracefs is not mounted".into(),
        });
        let t = text(&r);
        assert!(
            t.contains("  device (disk 8:0, the kernel's count: allocation to completion, all of its IOs; not traced: tracefs is not mounted):"),
            "{}",
            t
        );
        // (The traced form's line under the trace.)
        assert!(!t.contains("kernel's count ("), "{}", t);
        let split = t.lines().find(|l| l.contains("lat split")).unwrap();
        assert!(split.contains(", device and queue="), "{}", split);
        let nums = numbers(split);
        assert_eq!(nums.len(), 4, "{}", split);
        let (_, div) = super::super::result::unit(lat as u64);
        assert!((nums[1] - lat * 0.6 / div).abs() < 0.01, "{}", split);
        assert!((nums[1] + nums[2] - nums[0]).abs() < 0.02, "{}", split);
        // No direction without IOs on either side.
        assert!(!t.contains("    write ("), "{}", t);
    }

    #[test]
    fn io_uring_settings_run_and_fast_says_what_it_picked() {
        if Uring::available().is_err() {
            eprintln!("io_uring unavailable here: skipped");
            return;
        }
        let (_d, p) = file(4 << 20);
        let one = |f: fn(&mut UringOpts)| {
            let mut o = UringOpts::default();
            f(&mut o);
            o
        };
        for opts in [
            one(|o| o.fixedbufs = true),
            one(|o| o.registerfiles = true),
            one(|o| o.sqthread_poll = true),
            one(|o| o.taskrun = true),
            // The poller with deferred task work: the kernel refuses DEFER_TASKRUN there.
            one(|o| {
                o.sqthread_poll = true;
                o.taskrun = true;
                o.fixedbufs = true;
            }),
        ] {
            let mut j = job(&p);
            j.read_pct = 50;
            j.uring = opts;
            let r = match run(&j, &AtomicBool::new(false)) {
                Ok(r) => r,
                // A kernel without the setting refuses it in one line.
                Err(e) if crate::error::exit_code(&e) == crate::error::EXIT_USAGE => continue,
                Err(e) => panic!("{}: {:#}", opts.names(), e),
            };
            assert!(r.read.ios > 0 && r.write.ios > 0, "{}", opts.names());
            assert_eq!(r.uring, opts);
            assert!(text(&r).contains(&format!("io_uring     : {}", opts.names())));
            if opts.sqthread_poll {
                // The poller's CPU time is the job's: it spins while there is work.
                assert!(r.cpu.sys_ns > 0, "{:?}", r.cpu);
            }
        }
        // A temporary directory's device has no poll queues: fast leaves hipri out and says
        // so, and registered buffers for buffered IO; asking for hipri there is refused.
        let mut j = job(&p);
        j.fast = true;
        let r = run(&j, &AtomicBool::new(false)).unwrap();
        assert!(!r.uring.fixedbufs && r.uring.registerfiles && !r.uring.hipri);
        assert!(r.uring_note.contains("no hipri"), "{}", r.uring_note);
        assert!(
            text(&r).contains("(fast); no fixedbufs (it helps direct IO only); no hipri")
                || text(&r).contains("(fast); no fixedbufs (no block device"),
            "{}",
            text(&r)
        );
        let mut j = job(&p);
        j.direct = true;
        j.uring.hipri = true;
        if super::super::target::open(&p, false, true).is_ok_and(|t| !t.polls) {
            let e = run(&j, &AtomicBool::new(false)).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
            assert!(e.to_string().contains("no poll queues"), "{}", e);
        }
    }

    /// The first path where two JSON documents differ (numbers within 1e-12 relative).
    fn differs(a: &serde_json::Value, b: &serde_json::Value, path: String) -> Option<String> {
        use serde_json::Value::*;
        match (a, b) {
            (Object(x), Object(y)) if x.len() == y.len() => x
                .iter()
                .find_map(|(k, v)| differs(v, y.get(k)?, format!("{}.{}", path, k))),
            (Array(x), Array(y)) if x.len() == y.len() => x
                .iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (v, w))| differs(v, w, format!("{}[{}]", path, i))),
            (Number(x), Number(y)) => {
                let (x, y) = (x.as_f64()?, y.as_f64()?);
                ((x - y).abs() > 1e-12 * x.abs().max(y.abs()))
                    .then(|| format!("{}: {} vs {}", path, x, y))
            }
            _ => (a != b).then(|| format!("{}: {} vs {}", path, a, b)),
        }
    }

    #[test]
    fn a_rate_is_kept_and_a_size_stop_ends_on_bytes() {
        let (_d, p) = file(1 << 20);
        let mut j = job(&p);
        j.stop = Stop::Time(Duration::from_secs(1));
        j.rate = Some(Rate::Iops(200.0));
        let r = run(&j, &AtomicBool::new(false)).unwrap();
        assert!((190..=210).contains(&r.read.ios), "{}", r.read.ios);
        let mut j = job(&p);
        j.pattern = Pattern::Seq;
        j.stop = Stop::Bytes(2 << 20);
        j.bs = 64 << 10;
        let r = run(&j, &AtomicBool::new(false)).unwrap();
        assert_eq!(r.read.bytes, 2 << 20);
    }

    #[test]
    fn bad_targets_are_one_line_usage_errors() {
        let d = tempfile::tempdir().unwrap();
        let j = job(&d.path().join("missing"));
        let e = run(&j, &AtomicBool::new(false)).unwrap_err();
        assert!(format!("{:#}", e).contains("missing"), "{:#}", e);
        let j = job(d.path());
        let e = run(&j, &AtomicBool::new(false)).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        assert!(
            e.to_string()
                .contains("neither a regular file nor a block device"),
            "{}",
            e
        );
        let (_d, p) = file(1000);
        let e = run(&job(&p), &AtomicBool::new(false)).unwrap_err();
        assert!(
            e.to_string().contains("holds no aligned IO of 4096 bytes"),
            "{}",
            e
        );
        let mut j = job(&p);
        j.qd = 0;
        let e = run(&j, &AtomicBool::new(false)).unwrap_err();
        assert_eq!(e.to_string(), "io job: qd=0 is not from 1 to 4096");
    }
}
