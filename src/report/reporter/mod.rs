//! The reporter: a thread writing one [`Report`] per wall-clock second to
//! `<dir>/report.d/<unix_sec>.json`.
//!
//! Timing follows upstream's agent: the thread sleeps until half a second into the next second,
//! samples, writes the file named after the current second, and then aims at the second after
//! the one it is in. A pass that overruns a second boundary therefore skips that second (the
//! study counts it as missing) instead of writing a burst of late reports.
//!
//! Each pass reads the root (`-.slice`, from /proc) and every bench slice that exists (from its
//! cgroup files), plus whatever extra cgroups the workload layer lists in [`ReportShared`];
//! slices that don't exist yet are left out of the report. Unreadable files are logged once per
//! kind, never every second: missing ones (a host without cgroup2 or without the io
//! controller) at debug level, anything else as a warning.
//!
//! After each write, `<dir>/report.json` is re-pointed at the new file (a staging symlink renamed
//! over it) and reports older than the retention are deleted unless reports are kept.
//!
//! Here: the configuration, the thread and its handle; `sampler` fills one report, `files`
//! keeps the directory (link, clearing, pruning).

use super::iolat_source::IoLatSource;
use super::model::{Report, RunnerState};
use super::{reports_dir, write_report};
use crate::system::cgroup::DevNr;
use crate::system::session::{Session, SessionOpts};
use crate::system::HostPaths;
use crate::util::proc::thread_cpu_secs;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

mod files;
mod sampler;

pub use files::*;
pub use sampler::*;

/// Default `--rep-retention`: 7 days.
pub const DFL_RETENTION: u64 = 7 * 24 * 3600;

/// Called with every report just before it is written (after the reporter's own fields).
pub type FillHook = Box<dyn FnMut(&mut Report) + Send>;

/// How to run a reporter.
pub struct ReporterConfig {
    pub hp: HostPaths,
    /// Bench directory: reports go to `<dir>/report.d`, the symlink to `<dir>/report.json`.
    pub dir: PathBuf,
    /// `None`: IO fields stay 0 and no io.cost state is read.
    pub dev: Option<ScratchDev>,
    /// Seconds of reports to keep (`--rep-retention`).
    pub retention: u64,
    /// `--keep-reports`: never delete old reports.
    pub keep_reports: bool,
    /// `--clear-reports`: delete every report in `report.d` before starting.
    pub clear_reports: bool,
    /// Written as `seq` in every report.
    pub seq: u64,
    pub iolat: Option<Box<dyn IoLatSource>>,
    pub shared: SharedReport,
    pub fill: Option<FillHook>,
}

impl ReporterConfig {
    pub fn new(hp: HostPaths, dir: impl Into<PathBuf>) -> Self {
        Self {
            hp,
            dir: dir.into(),
            dev: None,
            retention: DFL_RETENTION,
            keep_reports: false,
            clear_reports: false,
            seq: 0,
            iolat: None,
            shared: SharedReport::default(),
            fill: None,
        }
    }
}

/// What a reporter thread did, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ReporterStats {
    /// The first second the thread aimed at.
    pub first_target_sec: u64,
    /// Seconds written, first and last.
    pub written: u64,
    pub first_sec: Option<u64>,
    pub last_sec: Option<u64>,
    /// Seconds skipped because a pass overran a second boundary.
    pub skipped: u64,
    pub write_errors: u64,
    /// Reports deleted by retention (at start and while running).
    pub pruned: u64,
    /// Wall clock (Unix seconds) when the thread stopped.
    pub stopped_at: f64,
    /// CPU time of the thread (user + system), seconds.
    pub cpu_secs: f64,
    /// Duration of the sample-and-write passes, seconds.
    pub pass_secs_total: f64,
    pub pass_secs_max: f64,
}

impl ReporterStats {
    /// The seconds a reporter running without fault would have written: from the first target
    /// to the last second whose half-second mark had passed when it stopped.
    pub fn expected_range(&self) -> std::ops::RangeInclusive<u64> {
        let last = (self.stopped_at - SAMPLE_AT.as_secs_f64()).floor();
        let last = if last.is_finite() && last >= 0.0 {
            last as u64
        } else {
            0
        };
        self.first_target_sec..=last
    }
}

fn unix_now() -> f64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(_) => 0.0,
    }
}

/// Starts reporter threads.
pub struct Reporter;

/// A running reporter. Stopping (explicitly or by dropping the handle) ends the thread and
/// waits for it; a report being written is finished first.
pub struct ReporterHandle {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<ReporterStats>>,
    shared: SharedReport,
    reports_dir: PathBuf,
}

impl Reporter {
    /// Prepares `report.d` (clearing it for `--clear-reports`, purging expired reports unless
    /// `--keep-reports`) and starts the thread.
    pub fn start(cfg: ReporterConfig) -> Result<ReporterHandle> {
        let rdir = reports_dir(&cfg.dir);
        crate::util::create::ensure_dir(&rdir, "report directory")?;
        if cfg.clear_reports {
            let n = clear_reports(&rdir)?;
            let _ = std::fs::remove_file(cfg.dir.join(REPORT_LINK));
            log::info!("reporter: cleared {} reports from {}", n, rdir.display());
        }
        let now_sec = unix_now().floor() as u64;
        let (pruner, pruned) = if cfg.keep_reports {
            (None, 0)
        } else {
            let (p, n) = Pruner::start(&rdir, cfg.retention, now_sec)?;
            if n > 0 {
                log::info!(
                    "reporter: deleted {} reports older than {}s",
                    n,
                    cfg.retention
                );
            }
            (Some(p), n)
        };
        let (tx, rx) = mpsc::channel();
        let shared = cfg.shared.clone();
        let thread = std::thread::Builder::new()
            .name("reporter".into())
            .spawn(move || run_thread(cfg, rx, pruner, pruned as u64))
            .context("starting the reporter thread")?;
        Ok(ReporterHandle {
            stop: Some(tx),
            thread: Some(thread),
            shared,
            reports_dir: rdir,
        })
    }
}

impl ReporterHandle {
    /// The state the workload layer updates.
    pub fn shared(&self) -> &SharedReport {
        &self.shared
    }

    pub fn reports_dir(&self) -> &Path {
        &self.reports_dir
    }

    /// Sets `state` for the following reports.
    pub fn set_state(&self, state: RunnerState) {
        if let Ok(mut s) = self.shared.lock() {
            s.state = state;
        }
    }

    /// Stops the thread and returns what it did.
    pub fn stop(mut self) -> Result<ReporterStats> {
        self.stop_join()
    }

    fn stop_join(&mut self) -> Result<ReporterStats> {
        drop(self.stop.take());
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("the reporter thread panicked")),
            None => Ok(ReporterStats::default()),
        }
    }
}

/// Where in each wall-clock second a report is sampled (upstream's agent: +500 ms). hashd
/// writes its status on the second and the reporter reads it here ([`LiveHashd`]), so every
/// report sees exactly one new status (see `util::until_mark`).
pub const SAMPLE_AT: Duration = Duration::from_millis(500);

/// Starts the per-second reporter on the scratch device with the best IO latency source
/// (tracefs block events in a journaled instance, else /proc/diskstats means). Reports go
/// to `<dir>/report.d`.
pub fn start_on(session: &mut Session, opts: &SessionOpts) -> Result<ReporterHandle> {
    let dev = session.scratch_dev().map(|d| ScratchDev {
        name: d.name.clone(),
        devnr: DevNr::new(d.devnr.0, d.devnr.1),
    });
    let iolat = match &dev {
        Some(d) => match super::diskstats::open_best_journaled(
            &session.hp().clone(),
            (d.devnr.maj, d.devnr.min),
            session.journal_mut(),
        ) {
            Ok(src) => Some(src),
            Err(e) => {
                log::warn!("reports carry no IO latencies: {:#}", e);
                None
            }
        },
        None => None,
    };
    let mut rcfg = ReporterConfig::new(session.hp().clone(), &opts.dir);
    rcfg.dev = dev;
    rcfg.iolat = iolat;
    rcfg.retention = opts.rep_retention;
    rcfg.keep_reports = opts.keep_reports;
    rcfg.clear_reports = opts.clear_reports;
    let h = Reporter::start(rcfg)?;
    log::info!(
        "reporter: writing per-second reports to {}",
        h.reports_dir().display()
    );
    Ok(h)
}

impl Drop for ReporterHandle {
    fn drop(&mut self) {
        if let Err(e) = self.stop_join() {
            log::warn!("{:#}", e);
        }
    }
}

fn run_thread(
    mut cfg: ReporterConfig,
    stop: mpsc::Receiver<()>,
    mut pruner: Option<Pruner>,
    pruned: u64,
) -> ReporterStats {
    let rdir = reports_dir(&cfg.dir);
    let mut sampler = Sampler::new(cfg.hp.clone(), cfg.dev.clone(), cfg.iolat.take());
    let snapshot = |shared: &SharedReport| match shared.lock() {
        Ok(s) => s.clone(),
        Err(p) => p.into_inner().clone(),
    };
    sampler.prime(&snapshot(&cfg.shared));
    let mut log = LogOnce::default();
    let mut st = ReporterStats {
        pruned,
        ..Default::default()
    };
    let mut next_sec = unix_now().floor() as u64 + 1;
    st.first_target_sec = next_sec;
    // When the stop arrived. A stop that lands after a second's sample time (the wait timing
    // out and the stop arriving race) still gets that second's report, so every second
    // `expected_range` counts was written.
    let mut stop_seen: Option<f64> = None;
    'outer: loop {
        let target = next_sec as f64 + SAMPLE_AT.as_secs_f64();
        loop {
            let now = unix_now();
            if now >= target {
                break;
            }
            match stop.recv_timeout(Duration::from_secs_f64(target - now)) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => {
                    let at = unix_now();
                    stop_seen = Some(at);
                    if at < target {
                        break 'outer;
                    }
                    break;
                }
            }
        }
        let t0 = Instant::now();
        let shared = snapshot(&cfg.shared);
        let mut rep = sampler.build(cfg.seq, &shared);
        let sec = rep.timestamp.0.timestamp().max(0) as u64;
        if let Some(fill) = cfg.fill.as_mut() {
            fill(&mut rep);
        }
        match write_report(&rdir, sec, &rep) {
            Ok(_) => {
                st.written += 1;
                st.first_sec.get_or_insert(sec);
                st.last_sec = Some(sec);
                if let Err(e) = update_link(&cfg.dir, sec) {
                    log.warn("link", || {
                        format!(
                            "can't update {}: {}",
                            cfg.dir.join(REPORT_LINK).display(),
                            e
                        )
                    });
                }
            }
            Err(e) => {
                st.write_errors += 1;
                log.warn("write", || format!("{:#}", e));
            }
        }
        if let Some(p) = pruner.as_mut() {
            st.pruned += p.after_write(sec) as u64;
        }
        let pass = t0.elapsed().as_secs_f64();
        st.pass_secs_total += pass;
        st.pass_secs_max = st.pass_secs_max.max(pass);
        let after = unix_now().floor() as u64 + 1;
        if after > sec + 1 {
            st.skipped += after - sec - 1;
            log::debug!(
                "reporter: pass for {} took {:.3}s; skipping {} second(s)",
                sec,
                pass,
                after - sec - 1
            );
        }
        next_sec = after.max(sec + 1);
        if stop_seen.is_some() {
            break;
        }
    }
    st.stopped_at = stop_seen.unwrap_or_else(unix_now);
    st.cpu_secs = thread_cpu_secs();
    st
}

#[cfg(test)]
mod tests;
