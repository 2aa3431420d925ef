//! One report per second: what the sampler reads (cgroup usage, pressure, memory and io
//! stats, vmstat, the IO latency source) and how it fills the report.

use crate::report::iolat_source::IoLatSource;
use crate::report::model::{HashdReport, Report, RunnerState, Timestamp, STAT_SLICES};
use crate::report::usage::{self, KReader, MemTotals, ReadIssue, SystemBase, UsageTracker};
use crate::system::cgroup::{CgroupFs, DevNr, IoStat, Slice};
use crate::system::{iocost, sysinfo, HostPaths};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

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

/// Reads a hashd instance's own status as a report entry, when a report is built; `None`
/// when there is no fresh one (the report then keeps [`ReportShared::hashd`]).
#[derive(Clone)]
pub struct LiveHashd(pub Arc<dyn Fn() -> Option<HashdReport> + Send + Sync>);

impl std::fmt::Debug for LiveHashd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveHashd")
    }
}

/// What the workload layer tells the reporter; read at every pass.
#[derive(Debug, Clone, Default)]
pub struct ReportShared {
    pub state: RunnerState,
    /// hashd A and B as the workload layer last saw them.
    pub hashd: [HashdReport; 2],
    /// Read instead of `hashd` at each report when set. A per-second study pairs reports by
    /// their seconds, so each report must carry the completions counted just before it; a
    /// copy the workload's loop makes can't be relied on for that: under TCG, with the hog
    /// swapping, that loop woke 200–750 ms late and a report went out with the copy of the
    /// second before (no progress), the next with two seconds' worth.
    pub hashd_live: [Option<LiveHashd>; 2],
    /// Extra cgroups to report usages of (relative to the cgroup2 root, e.g.
    /// `workload.slice/hashd-A.service`), under their unit names (`hashd-A.service`).
    pub units: Vec<String>,
}

/// Handle to the shared part; lock briefly.
pub type SharedReport = Arc<Mutex<ReportShared>>;

/// Logs each kind of failure once.
#[derive(Debug, Default)]
pub(super) struct LogOnce {
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

    pub(super) fn warn(&mut self, kind: &str, msg: impl FnOnce() -> String) {
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
pub(super) fn dev_line(stat: &IoStat, dev: Option<&ScratchDev>) -> Option<BTreeMap<String, f64>> {
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

    fn system_base(&mut self, issues: &mut Vec<ReadIssue>) -> (SystemBase, MemTotals) {
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
                MemTotals::default()
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
        let mut seen: Vec<String> = vec![crate::report::model::STAT_SLICES[0].to_string()];
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
        for (slot, live) in rep.hashd.iter_mut().zip(&shared.hashd_live) {
            if let Some(r) = live.as_ref().and_then(|l| (l.0)()) {
                *slot = r;
            }
        }
        let mut issues = Vec::new();
        let root_io = self.fill_usages(&mut rep, &shared.units, &mut issues);
        self.fill_slice_stats(&mut rep, root_io.as_ref(), &mut issues);
        self.fill_vmstat(&mut rep, &mut issues);
        self.fill_iocost(&mut rep, root_io.as_ref(), &mut issues);
        rep.swappiness = sysinfo::swappiness(&self.hp).unwrap_or(0);
        rep.zswap_enabled = sysinfo::zswap_enabled(&self.hp);
        self.fill_iolat(&mut rep);
        for i in issues {
            self.log.issue(i);
        }
        rep
    }

    /// memory.stat and io.stat of the slices that exist (the root's io.stat read once, in
    /// `fill_usages`).
    fn fill_slice_stats(
        &mut self,
        rep: &mut Report,
        root_io: Option<&IoStat>,
        issues: &mut Vec<ReadIssue>,
    ) {
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
                    root_io.cloned().map(Ok)
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
    }

    fn fill_vmstat(&mut self, rep: &mut Report, issues: &mut Vec<ReadIssue>) {
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
    }

    /// The vrate io.cost used (from the root's io.stat), and the model and QoS it has.
    fn fill_iocost(
        &mut self,
        rep: &mut Report,
        root_io: Option<&IoStat>,
        issues: &mut Vec<ReadIssue>,
    ) {
        if let (true, Some(dev)) = (self.cgroup2, &self.dev) {
            rep.iocost.vrate = root_io
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
    }

    /// This second's IO latencies from the source, or the marker that there are none.
    fn fill_iolat(&mut self, rep: &mut Report) {
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
                mark_iolat_unavailable(rep);
            }
            None => mark_iolat_unavailable(rep),
        }
    }
}

/// No latency data this second: no percentiles (not zeros) and the marker.
pub(super) fn mark_iolat_unavailable(rep: &mut Report) {
    rep.iolat_hist = None;
    rep.iolat_unavailable = true;
}
