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

use super::iolat_source::IoLatSource;
use super::model::{HashdReport, Report, RunnerState, Timestamp, STAT_SLICES};
use super::usage::{self, KReader, MemInfo, ReadIssue, SystemBase, UsageTracker};
use super::{remove_reports_before, report_path, reports_dir, write_report};
use crate::system::cgroup::{CgroupFs, DevNr, IoStat, Slice};
use crate::system::session::{Session, SessionOpts};
use crate::system::{iocost, sysinfo, HostPaths};
use anyhow::{Context, Result};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default `--rep-retention`: 7 days.
pub const DFL_RETENTION: u64 = 7 * 24 * 3600;

/// The symlink to the newest report, in the bench directory.
pub const REPORT_LINK: &str = "report.json";

/// The slices reported when they exist, besides the root.
pub const SLICES: [Slice; 5] = [
    Slice::HostCritical,
    Slice::Workload,
    Slice::System,
    Slice::Balloon,
    Slice::Sideload,
];

/// The scratch device the reports' IO numbers are about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScratchDev {
    /// Block device name (`vda`, `nvme0n1`), for /proc/diskstats.
    pub name: String,
    /// `MAJ:MIN`, for io.stat and io.cost.
    pub devnr: DevNr,
}

/// What the workload layer tells the reporter; read at every pass.
#[derive(Debug, Clone, Default)]
pub struct ReportShared {
    pub state: RunnerState,
    /// hashd A and B as the workload layer last saw them.
    pub hashd: [HashdReport; 2],
    /// Extra cgroups to report usages of (relative to the cgroup2 root, e.g.
    /// `workload.slice/hashd-A.service`), under their unit names (`hashd-A.service`).
    pub units: Vec<String>,
}

/// Handle to the shared part; lock briefly.
pub type SharedReport = Arc<Mutex<ReportShared>>;

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

/// Logs each kind of failure once.
#[derive(Debug, Default)]
struct LogOnce {
    seen: HashSet<String>,
}

impl LogOnce {
    fn issue(&mut self, i: ReadIssue) {
        if !self.seen.insert(i.kind) {
            return;
        }
        if i.missing {
            log::debug!("reporter: {} (left out of the reports)", i.msg);
        } else {
            log::warn!("reporter: {} (logged once)", i.msg);
        }
    }

    fn warn(&mut self, kind: &str, msg: impl FnOnce() -> String) {
        if self.seen.insert(kind.to_string()) {
            log::warn!("reporter: {} (logged once)", msg());
        }
    }
}

/// Builds reports: reads the host, keeps the previous usage readings for rates.
pub struct Sampler {
    hp: HostPaths,
    cgfs: CgroupFs,
    cgroup2: bool,
    dev: Option<ScratchDev>,
    ticks: f64,
    tracker: UsageTracker,
    iolat: Option<Box<dyn IoLatSource>>,
    started: Instant,
    log: LogOnce,
    rd: KReader,
}

/// The scratch device's line of an io.stat.
fn dev_line(stat: &IoStat, dev: Option<&ScratchDev>) -> Option<BTreeMap<String, f64>> {
    dev.and_then(|d| stat.get(&d.devnr)).cloned()
}

/// `/proc/vmstat` (or any `key value` file) as numbers; malformed lines are skipped and
/// counted.
pub fn parse_vmstat(text: &str) -> (BTreeMap<String, f64>, usize) {
    let mut map = BTreeMap::new();
    let mut bad = 0;
    for line in text.lines() {
        let mut toks = line.split_whitespace();
        match (toks.next(), toks.next().map(str::parse::<f64>), toks.next()) {
            (None, ..) => {}
            (Some(k), Some(Ok(v)), None) => {
                map.insert(k.to_string(), v);
            }
            _ => bad += 1,
        }
    }
    (map, bad)
}

impl Sampler {
    pub fn new(
        hp: HostPaths,
        dev: Option<ScratchDev>,
        iolat: Option<Box<dyn IoLatSource>>,
    ) -> Self {
        let cgfs = CgroupFs::new(&hp);
        let cgroup2 = cgfs.is_cgroup2();
        if !cgroup2 {
            log::info!(
                "reporter: no cgroup2 at {}; reporting the system (-.slice) only",
                cgfs.root().display()
            );
        }
        Self {
            hp,
            cgfs,
            cgroup2,
            dev,
            ticks: usage::clock_ticks(),
            tracker: UsageTracker::new(),
            iolat,
            started: Instant::now(),
            log: LogOnce::default(),
            rd: KReader::new(),
        }
    }

    /// Reads the usages only, so the first written report already has rates.
    pub fn prime(&mut self, shared: &ReportShared) {
        let mut rep = Report::default();
        self.fill_usages(&mut rep, &shared.units, &mut Vec::new());
    }

    fn system_base(&mut self, issues: &mut Vec<ReadIssue>) -> (SystemBase, MemInfo) {
        let mut base = SystemBase::default();
        let path = self.hp.path("proc/stat");
        match self
            .rd
            .read(&path)
            .and_then(|t| usage::parse_proc_stat(&path, t, self.ticks))
        {
            Ok(c) => base.cpu = c,
            Err(e) => issues.push(ReadIssue::from_kfe("proc-stat", &e)),
        }
        let path = self.hp.path("proc/meminfo");
        let meminfo = match self
            .rd
            .read(&path)
            .and_then(|t| usage::parse_meminfo(&path, t))
        {
            Ok(m) => m,
            Err(e) => {
                issues.push(ReadIssue::from_kfe("meminfo", &e));
                MemInfo::default()
            }
        };
        base.swap_free = meminfo.swap_free;
        (base, meminfo)
    }

    /// Fills `usages`; returns the root io.stat (if read) for the other fields.
    fn fill_usages(
        &mut self,
        rep: &mut Report,
        extra_units: &[String],
        issues: &mut Vec<ReadIssue>,
    ) -> Option<IoStat> {
        let at = self.started.elapsed().as_secs_f64();
        let (base, meminfo) = self.system_base(issues);
        let root_io = if self.cgroup2 && self.dev.is_some() {
            match self.rd.read_io_stat(&self.cgfs.root().join("io.stat")) {
                Ok(s) => Some(s),
                Err(e) => {
                    issues.push(ReadIssue::from_kfe("root-io.stat", &e));
                    None
                }
            }
        } else {
            None
        };
        let root_line = root_io
            .as_ref()
            .and_then(|s| dev_line(s, self.dev.as_ref()));
        let root = usage::read_root(
            &mut self.rd,
            &self.hp,
            &base,
            &meminfo,
            self.dev.as_ref().map(|d| d.name.as_str()),
            root_line.as_ref(),
            issues,
        );
        let mut seen: Vec<String> = vec![super::model::STAT_SLICES[0].to_string()];
        rep.usages
            .insert(seen[0].clone(), self.tracker.update(&seen[0], at, root));
        if self.cgroup2 {
            let devnr = self.dev.as_ref().map(|d| d.devnr);
            let units = SLICES
                .iter()
                .map(|s| s.name().to_string())
                .chain(extra_units.iter().cloned());
            for unit in units {
                if seen.contains(&unit) {
                    continue;
                }
                if let Some(r) =
                    usage::read_cgroup(&mut self.rd, &self.cgfs, &unit, &base, devnr, issues)
                {
                    // Keyed by the unit's own name, as upstream's agent reports
                    // `rd-hashd-bench.service`, not by its path.
                    let name = unit.rsplit('/').next().unwrap_or(&unit).to_string();
                    rep.usages.insert(name, self.tracker.update(&unit, at, r));
                    seen.push(unit);
                }
            }
        }
        let seen: Vec<&str> = seen.iter().map(String::as_str).collect();
        self.tracker.retain(&seen);
        root_io
    }

    /// One report of the host as it is now.
    pub fn build(&mut self, seq: u64, shared: &ReportShared) -> Report {
        let mut rep = Report {
            timestamp: Timestamp::now(),
            seq,
            state: shared.state.clone(),
            hashd: shared.hashd.clone(),
            ..Default::default()
        };
        let mut issues = Vec::new();
        let root_io = self.fill_usages(&mut rep, &shared.units, &mut issues);

        if self.cgroup2 {
            for slice in STAT_SLICES {
                if !rep.usages.contains_key(*slice) {
                    continue;
                }
                match self
                    .rd
                    .read_flat(&self.cgfs.path(slice).join("memory.stat"))
                {
                    Ok(m) => {
                        let m = m.into_iter().map(|(k, v)| (k, v as f64)).collect();
                        rep.mem_stat.insert(slice.to_string(), m);
                    }
                    Err(e) => {
                        issues.push(ReadIssue::from_kfe(format!("{}:memory.stat", slice), &e))
                    }
                }
                let stat = if *slice == STAT_SLICES[0] {
                    root_io.clone().map(Ok)
                } else if self.dev.is_some() {
                    Some(self.rd.read_io_stat(&self.cgfs.path(slice).join("io.stat")))
                } else {
                    None
                };
                match stat {
                    Some(Ok(s)) => {
                        if let Some(line) = dev_line(&s, self.dev.as_ref()) {
                            rep.io_stat.insert(slice.to_string(), line);
                        }
                    }
                    Some(Err(e)) => {
                        issues.push(ReadIssue::from_kfe(format!("{}:io.stat", slice), &e))
                    }
                    None => {}
                }
            }
        }

        let path = self.hp.path("proc/vmstat");
        match self.rd.read(&path) {
            Ok(t) => {
                let (map, bad) = parse_vmstat(t);
                if bad > 0 {
                    self.log.warn("vmstat-parse", || {
                        format!("{}: {} malformed lines skipped", path.display(), bad)
                    });
                }
                rep.vmstat = map;
            }
            Err(e) => issues.push(ReadIssue::from_kfe("vmstat", &e)),
        }

        if let (true, Some(dev)) = (self.cgroup2, &self.dev) {
            rep.iocost.vrate = root_io
                .as_ref()
                .and_then(|s| s.get(&dev.devnr))
                .and_then(|kv| kv.get("cost.vrate"))
                .copied()
                .unwrap_or(0.0);
            let path = self.cgfs.root().join("io.cost.model");
            match self
                .rd
                .read(&path)
                .and_then(|t| iocost::parse_model(&path, t, dev.devnr))
            {
                Ok(m) => rep.iocost.model = m,
                Err(e) => issues.push(ReadIssue::from_kfe("io.cost.model", &e)),
            }
            let path = self.cgfs.root().join("io.cost.qos");
            match self
                .rd
                .read(&path)
                .and_then(|t| iocost::parse_qos(&path, t, dev.devnr))
            {
                Ok(q) => rep.iocost.qos = q,
                Err(e) => issues.push(ReadIssue::from_kfe("io.cost.qos", &e)),
            }
        }
        rep.swappiness = sysinfo::swappiness(&self.hp).unwrap_or(0);
        rep.zswap_enabled = sysinfo::zswap_enabled(&self.hp);

        match self.iolat.as_mut().map(|s| (s.name(), s.sample())) {
            Some((_, Ok(s))) => {
                rep.iolat = s.pcts;
                rep.iolat_cum = s.cum;
                rep.iolat_hist = s.hists;
                rep.iolat_unavailable = s.unavailable;
                rep.iolat_mean = s.means;
            }
            Some((name, Err(e))) => {
                self.log.warn(&format!("iolat-{}", name), || {
                    format!("IO latency source {}: {:#}", name, e)
                });
                mark_iolat_unavailable(&mut rep);
            }
            None => mark_iolat_unavailable(&mut rep),
        }

        for i in issues {
            self.log.issue(i);
        }
        rep
    }
}

/// No latency data this second: no percentiles (not zeros) and the marker.
fn mark_iolat_unavailable(rep: &mut Report) {
    rep.iolat_hist = None;
    rep.iolat_unavailable = true;
}

/// Deletes every report (`<sec>.json` and leftover staging files) in `dir`; returns how many.
pub fn clear_reports(dir: &Path) -> Result<usize> {
    let n = remove_reports_before(dir, u64::MAX)?;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for ent in rd.flatten() {
            let name = ent.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') && name.ends_with(".json.tmp") {
                let _ = std::fs::remove_file(ent.path());
            }
        }
    }
    Ok(n)
}

/// Points `<dir>/report.json` at `report.d/<sec>.json`: a staging symlink renamed over the
/// old one, so readers always find a link.
pub fn update_link(dir: &Path, sec: u64) -> std::io::Result<()> {
    let link = dir.join(REPORT_LINK);
    let staging = dir.join(format!("{}.staging", REPORT_LINK));
    let target = Path::new(super::REPORT_DIR).join(format!("{}.json", sec));
    if let Err(e) = std::os::unix::fs::symlink(&target, &staging) {
        // A staging link left by a killed run.
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(e);
        }
        std::fs::remove_file(&staging)?;
        std::os::unix::fs::symlink(&target, &staging)?;
    }
    std::fs::rename(&staging, &link)
}

/// Deletes expired reports as seconds pass: after writing second `sec`, every report before
/// `sec − retention` goes, by name for the seconds elapsed since the last pass (no directory
/// listing every second).
#[derive(Debug)]
pub struct Pruner {
    dir: PathBuf,
    retention: u64,
    /// Every report before this second is gone.
    done_before: u64,
}

/// Beyond this many seconds to catch up (a suspended host), list the directory instead.
const PRUNE_BY_NAME_MAX: u64 = 600;

impl Pruner {
    /// Purges what is already expired at `now_sec` (a directory listing).
    pub fn start(dir: &Path, retention: u64, now_sec: u64) -> Result<(Self, usize)> {
        let before = now_sec.saturating_sub(retention);
        let n = remove_reports_before(dir, before)?;
        Ok((
            Self {
                dir: dir.to_path_buf(),
                retention,
                done_before: before,
            },
            n,
        ))
    }

    /// After second `sec` was written; returns how many files went.
    pub fn after_write(&mut self, sec: u64) -> usize {
        let before = sec.saturating_sub(self.retention);
        if before <= self.done_before {
            return 0;
        }
        let n = if before - self.done_before > PRUNE_BY_NAME_MAX {
            remove_reports_before(&self.dir, before).unwrap_or(0)
        } else {
            (self.done_before..before)
                .filter(|s| std::fs::remove_file(report_path(&self.dir, *s)).is_ok())
                .count()
        };
        self.done_before = before;
        n
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
        let last = (self.stopped_at - 0.5).floor();
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

/// CPU time the calling thread has used, seconds.
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
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
        std::fs::create_dir_all(&rdir)
            .with_context(|| format!("creating the report directory {}", rdir.display()))?;
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
    'outer: loop {
        let target = next_sec as f64 + 0.5;
        loop {
            let now = unix_now();
            if now >= target {
                break;
            }
            match stop.recv_timeout(Duration::from_secs_f64(target - now)) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => break 'outer,
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
    }
    st.stopped_at = unix_now();
    st.cpu_secs = thread_cpu_secs();
    st
}

#[cfg(test)]
mod tests;
