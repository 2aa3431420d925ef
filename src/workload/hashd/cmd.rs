//! The hidden `__hashd` subcommand: lays out the testfiles, then runs the workload until
//! SIGTERM/SIGINT, rewriting its status file every second and reloading its params file when
//! it changes.

use super::anon::AnonArea;
use super::dispatch::{DispatchCfg, Dispatcher, Footprint};
use super::logger::Logger;
use super::params::{Params, ParamsWatcher};
use super::stats::{HashdStatus, PHASE_PREP, PHASE_RUNNING};
use super::testfiles::TestFiles;
use crate::report::model::Timestamp;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

fn size_arg(s: &str) -> Result<u64, String> {
    crate::units::parse::parse_size(s)
}

fn frac_arg(s: &str) -> Result<f64, String> {
    let v = crate::units::parse::parse_frac(s)?;
    if v > 1.0 {
        return Err(format!("{:?} is more than 1", s));
    }
    Ok(v)
}

/// The bundled workload hashd: testfiles, params reload, status file, until SIGTERM
#[derive(Debug, Clone, Args)]
pub struct HashdArgs {
    /// Directory of the testfiles (created if missing; its parent must exist)
    #[arg(long, value_name = "DIR")]
    pub testfiles: PathBuf,
    /// Params file, reloaded when it changes; created with the defaults if missing
    /// (without it the defaults apply and can't change)
    #[arg(long, value_name = "FILE")]
    pub params: Option<PathBuf>,
    /// Status file, rewritten atomically every second
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Hash log file (rotated at 1G)
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Bytes of hash log to keep, archives included [default: total memory / 2]
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub log_size: Option<u64>,
    /// The 100% footprint reference [default: 4 × total memory]
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub size: Option<u64>,
    /// Total memory for the derived defaults [default: MemTotal]
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub total_memory: Option<u64>,
    /// Largest page-cache share of the footprint; the testfiles hold size × this
    #[arg(long, value_name = "FRAC", default_value = "0.25", value_parser = frac_arg)]
    pub file_max_frac: f64,
    /// Compressibility of the testfile contents (0 … 1)
    #[arg(long, value_name = "FRAC", default_value = "0", value_parser = frac_arg)]
    pub compressibility: f64,
    /// CPUs for the initial concurrency [default: online CPUs]
    #[arg(long, value_name = "N")]
    pub nr_cpus: Option<usize>,
    /// Seconds between console summaries (0: none)
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub interval: u64,
    /// Only lay out the testfiles, then exit
    #[arg(long)]
    pub prepare: bool,
    /// Don't drop the testfiles from the page cache after laying them out
    #[arg(long)]
    pub keep_cache: bool,
    /// Rotational mode in the status file: on when the testfiles' or a swap device is
    /// rotational; true or false forces it
    #[arg(long, value_name = "BOOL")]
    pub rotational: Option<bool>,
    /// Before running, read this much of the testfiles into the page cache (charged to
    /// hashd's cgroup): whole 32M files, the highest index first so the hottest files load
    /// last; the status phase stays "prep" meanwhile. 0: none
    #[arg(long, value_name = "SIZE", default_value = "0", value_parser = size_arg)]
    pub preload: u64,
    /// Touch no testfile or memory until stdin closes (the parent has moved us into our
    /// cgroup)
    #[arg(long)]
    pub held: bool,
}

fn total_memory() -> Result<u64> {
    let mi = crate::system::sysinfo::read_meminfo(&crate::system::HostPaths::real())?;
    mi.get("MemTotal")
        .copied()
        .context("/proc/meminfo has no MemTotal")
}

/// Lifts the open-files soft limit to the hard limit: testfiles stay open.
fn raise_nofile() {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 && rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

struct StatusFile {
    path: Option<PathBuf>,
    status: HashdStatus,
    warned: bool,
}

impl StatusFile {
    fn write(&mut self) {
        let Some(path) = &self.path else { return };
        self.status.timestamp = Timestamp::now();
        if let Err(e) = self.status.write(path) {
            if !self.warned {
                log::warn!("{:#}", e);
                self.warned = true;
            }
        }
    }
}

fn ts(t: SystemTime) -> Timestamp {
    Timestamp::from_unix(
        t.duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
    )
}

pub fn run(a: &HashdArgs) -> Result<()> {
    if a.held {
        crate::util::proc::wait_released().context("waiting to be placed in our cgroup")?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let mem = match a.total_memory {
        Some(m) => m,
        None => total_memory()?,
    };
    let size = a.size.unwrap_or(4 * mem);
    if size == 0 {
        bail!("--size must be positive");
    }
    let log_size = a.log_size.unwrap_or(mem / 2);
    let nr_cpus = a.nr_cpus.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });

    if let Some(parent) = a.testfiles.parent() {
        if !parent.as_os_str().is_empty() && !parent.is_dir() {
            bail!(
                "testfiles directory {}: {} doesn't exist",
                a.testfiles.display(),
                parent.display()
            );
        }
    }
    let files = TestFiles::new(
        &a.testfiles,
        testfiles_size(size, a.file_max_frac),
        a.compressibility,
    )?;
    let hp = crate::system::HostPaths::real();
    // The testfiles' disk (their parent's before they exist); an undetectable device counts
    // as not rotational.
    let tf_dir = if a.testfiles.exists() {
        a.testfiles.as_path()
    } else {
        a.testfiles
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."))
    };
    let rotational_testfiles = crate::system::blockdev::device_of_path(&hp, tf_dir)
        .and_then(|d| crate::system::blockdev::DevInfo::read(&hp, &d.disk))
        .is_ok_and(|d| d.rotational);
    let rotational_swap = crate::system::sysreqs::swap_rotational(&hp);
    let mut sf = StatusFile {
        path: a.report.clone(),
        status: HashdStatus {
            phase: PHASE_PREP.into(),
            rotational: a
                .rotational
                .unwrap_or(rotational_testfiles || rotational_swap),
            rotational_testfiles,
            rotational_swap,
            ..HashdStatus::default()
        },
        warned: false,
    };
    sf.write();
    prepare(&files, &mut sf, &stop)?;
    if !a.keep_cache {
        files.drop_cache();
    }
    if a.prepare || stop.load(Ordering::Relaxed) {
        return Ok(());
    }
    if a.preload > 0 {
        preload(&files, a.preload, &mut sf, &stop)?;
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
    }

    let (mut watcher, params) = match &a.params {
        Some(p) => {
            let (w, params) = ParamsWatcher::open(p)?;
            (Some(w), params)
        }
        None => (None, Params::default()),
    };
    let w = Workload {
        size,
        log_size,
        nr_cpus,
        files,
        params,
    };
    run_workload(a, w, watcher.as_mut(), sf, &stop)
}

/// What the request loop runs on: the sizes, the prepared testfiles and the first params.
struct Workload {
    size: u64,
    log_size: u64,
    nr_cpus: usize,
    files: TestFiles,
    params: Params,
}

fn prepare(files: &TestFiles, sf: &mut StatusFile, stop: &AtomicBool) -> Result<()> {
    let started = Instant::now();
    let mut last = Instant::now();
    let mut last_log = Instant::now();
    let st = files.prepare(&mut |p| {
        if last.elapsed() >= Duration::from_millis(100) {
            last = Instant::now();
            sf.status.testfiles_progress = p;
            sf.write();
        }
        if last_log.elapsed() >= Duration::from_secs(10) {
            last_log = Instant::now();
            log::info!("hashd: laying out testfiles {:.1}%", p * 100.0);
        }
        !stop.load(Ordering::Relaxed)
    })?;
    if stop.load(Ordering::Relaxed) {
        log::info!("hashd: interrupted while laying out testfiles");
        return Ok(());
    }
    sf.status.testfiles_progress = 1.0;
    sf.write();
    if st.created > 0 {
        log::info!(
            "hashd: {} testfiles created, {} reused in {:.1}s ({})",
            st.created,
            st.kept,
            started.elapsed().as_secs_f64(),
            files.dir().display()
        );
    }
    Ok(())
}

/// Reads the first `bytes` of testfiles (whole files, highest index first) into the page
/// cache, rewriting the status (phase still prep) every second so it doesn't go stale.
fn preload(files: &TestFiles, bytes: u64, sf: &mut StatusFile, stop: &AtomicBool) -> Result<()> {
    let started = Instant::now();
    let mut last = Instant::now();
    let (mut nr, mut pages) = (0u64, 0u64);
    let mut buf = Vec::new();
    for i in files.preload_order(bytes) {
        if stop.load(Ordering::Relaxed) {
            log::info!("hashd: interrupted while preloading testfiles");
            return Ok(());
        }
        pages += files.preload_file(i, &mut buf)?;
        nr += 1;
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            sf.write();
        }
    }
    log::info!(
        "hashd: preloaded {} testfiles ({:.1}M) in {:.1}s",
        nr,
        (pages * super::testfiles::PAGE) as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_workload(
    a: &HashdArgs,
    w: Workload,
    mut watcher: Option<&mut ParamsWatcher>,
    mut sf: StatusFile,
    stop: &AtomicBool,
) -> Result<()> {
    let Workload {
        size,
        log_size,
        nr_cpus,
        files,
        params,
    } = w;
    raise_nofile();
    let files = Arc::new(files);
    let fp = Footprint::new(&params, size, a.file_max_frac, files.size());
    let area = Arc::new(AnonArea::new(fp.anon_bytes)?);
    let logger = match &a.log {
        Some(p) => Some(Arc::new(Logger::start(p, log_size, params.rps_max)?)),
        None => None,
    };
    let mut disp = Dispatcher::start(
        DispatchCfg {
            size,
            file_max_frac: a.file_max_frac,
            nr_cpus,
        },
        params,
        files,
        area,
        logger.clone(),
    )
    .context("starting the hashd dispatcher")?;
    sf.status.phase = PHASE_RUNNING.into();
    let mut summary = Summary::default();
    // Status writes on the wall-clock second (see `util::until_mark`), a fixed rate from there.
    let mut next_sec = Instant::now() + crate::util::until_next_mark(Duration::ZERO);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() < next_sec {
            continue;
        }
        next_sec += Duration::from_secs(1);
        if let Some(w) = watcher.as_deref_mut() {
            match w.check() {
                Ok(Some(p)) => {
                    log::debug!("hashd: params reloaded from {}", w.path().display());
                    disp.set_params(p);
                }
                Ok(None) => {}
                Err(e) => log::warn!("hashd: keeping the old params: {:#}", e),
            }
        }
        update_status(&mut sf.status, &disp);
        sf.write();
        summary.add(&sf.status);
        if a.interval > 0 && summary.n >= a.interval {
            log::info!("{}", summary.line(log::log_enabled!(log::Level::Debug)));
            summary = Summary::default();
        }
    }
    disp.stop();
    update_status(&mut sf.status, &disp);
    sf.write();
    drop(disp);
    if let Some(lg) = logger {
        // The dispatcher's clone is gone; this flushes the queue.
        if let Ok(mut lg) = Arc::try_unwrap(lg) {
            lg.finish();
        }
    }
    log::debug!("hashd: stopped");
    Ok(())
}

fn update_status(st: &mut HashdStatus, disp: &Dispatcher) {
    let pb = disp.published.lock().unwrap_or_else(|e| e.into_inner());
    st.stat = pb.stat.clone();
    st.lat_pct = pb.lat_pct;
    st.rps_max = pb.rps_max;
    if let Some(at) = pb.params_at {
        let at = ts(at);
        if st.params_modified != at {
            st.params_modified = at;
            if st.mem_probe_size != pb.footprint_total {
                st.mem_probe_size = pb.footprint_total;
                st.mem_probe_at = at;
            }
        }
    }
}

/// Averages of the per-second stats for the console line (with -v also the concurrency cap's
/// average and the latest counters).
#[derive(Default)]
struct Summary {
    n: u64,
    p50: f64,
    p84: f64,
    p90: f64,
    p99: f64,
    rps: f64,
    con: f64,
    con_max: f64,
    last: super::stats::Stat,
}

impl Summary {
    fn add(&mut self, st: &HashdStatus) {
        let s = &st.stat;
        self.n += 1;
        self.p50 += s.lat.p50;
        self.p84 += s.lat.p84;
        self.p90 += s.lat.p90;
        self.p99 += s.lat.p99;
        self.rps += s.rps;
        self.con += s.concurrency;
        self.con_max += s.concurrency_max;
        self.last = s.clone();
    }

    fn line(&self, verbose: bool) -> String {
        let n = self.n.max(1) as f64;
        let ms = |v: f64| v / n * 1000.0;
        let mut line = format!(
            "hashd: p50:{:5.1} p84:{:5.1} p90:{:5.1} p99:{:5.1} rps:{:7.1} con:{:6.1}",
            ms(self.p50),
            ms(self.p84),
            ms(self.p90),
            ms(self.p99),
            self.rps / n,
            self.con / n
        );
        if verbose {
            let l = &self.last;
            line += &format!(
                "/{:.1} infl:{} workers:{}/{} done:{}",
                self.con_max / n,
                l.nr_in_flight,
                l.nr_workers.saturating_sub(l.nr_idle_workers),
                l.nr_workers,
                l.nr_done
            );
        }
        line
    }
}

/// Bytes of testfiles `__hashd` lays out for `size` and `file_max_frac`.
pub fn testfiles_size(size: u64, file_max_frac: f64) -> u64 {
    (size as f64 * file_max_frac).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_averages_and_verbose_counters() {
        let mut sum = Summary::default();
        for (p50, rps, con_max, done) in [(0.040, 100.0, 8.0, 10), (0.060, 300.0, 12.0, 30)] {
            let mut st = HashdStatus::default();
            st.stat.lat.p50 = p50;
            st.stat.rps = rps;
            st.stat.concurrency = 4.0;
            st.stat.concurrency_max = con_max;
            st.stat.nr_in_flight = 3;
            st.stat.nr_workers = 5;
            st.stat.nr_idle_workers = 1;
            st.stat.nr_done = done;
            sum.add(&st);
        }
        assert_eq!(
            sum.line(false),
            "hashd: p50: 50.0 p84:  0.0 p90:  0.0 p99:  0.0 rps:  200.0 con:   4.0"
        );
        assert!(
            sum.line(true)
                .ends_with("con:   4.0/10.0 infl:3 workers:4/5 done:30"),
            "{}",
            sum.line(true)
        );
    }
}
