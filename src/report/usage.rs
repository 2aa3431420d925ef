//! Per-unit resource usage for the reports: cumulative readings of one unit (a cgroup, or the
//! whole system for `-.slice`) and the [`UsageReport`] made from two successive readings.
//!
//! Readings come from cgroup files for slices (`cpu.stat`, `memory.current`,
//! `memory.swap.current`, the scratch device's `io.stat` line, `*.pressure`) and from /proc for
//! the root (`/proc/stat`, `/proc/meminfo`, `/proc/diskstats`, `/proc/pressure/*`).
//!
//! Two deliberate differences from upstream's agent:
//! * Rates (`cpu_util`, `io_rbps`, `*_pressures`, …) are only computed against a previous
//!   reading of the same unit. A unit seen for the first time, or a counter that went
//!   backwards (a cgroup removed and re-created), gives 0 for the affected rates instead of a
//!   difference against zero.
//! * The CPU time base leaves out `guest`/`guest_nice`, which /proc/stat already counts in
//!   `user`/`nice`; upstream adds them twice and so under-reports utilization on hosts running
//!   guests.

use super::model::UsageReport;
use crate::system::cgroup::{
    parse_flat_keyed, parse_io_stat, parse_pressure, parse_single_u64, CgroupFs, DevNr, IoStat,
    KernelFileError, PressureKind,
};
use crate::system::HostPaths;
use std::collections::BTreeMap;
use std::path::Path;

/// Reads kernel files into one reused buffer: no size probe and no allocation per file. The
/// reporter reads a few dozen files every second, and each syscall counts in a slow guest.
#[derive(Debug)]
pub struct KReader {
    buf: String,
}

impl Default for KReader {
    fn default() -> Self {
        Self {
            buf: String::with_capacity(16 << 10),
        }
    }
}

impl KReader {
    pub fn new() -> Self {
        Self::default()
    }

    /// The whole text of `path`.
    pub fn read(&mut self, path: &Path) -> Result<&str, KernelFileError> {
        use std::io::Read;
        self.buf.clear();
        let res =
            std::fs::File::open(path).and_then(|f| f.take(u64::MAX).read_to_string(&mut self.buf));
        match res {
            Ok(_) => Ok(&self.buf),
            Err(source) => Err(KernelFileError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// A single-number file.
    pub fn read_u64(&mut self, path: &Path) -> Result<u64, KernelFileError> {
        let text = self.read(path)?;
        parse_single_u64(path, text)
    }

    /// A limit file: `max` is `None`.
    pub fn read_limit(&mut self, path: &Path) -> Result<Option<u64>, KernelFileError> {
        let text = self.read(path)?.trim();
        if text == "max" {
            return Ok(None);
        }
        parse_single_u64(path, text).map(Some)
    }

    /// A flat keyed file (cpu.stat, memory.stat).
    pub fn read_flat(&mut self, path: &Path) -> Result<BTreeMap<String, u64>, KernelFileError> {
        let text = self.read(path)?;
        parse_flat_keyed(path, text)
    }

    pub fn read_io_stat(&mut self, path: &Path) -> Result<IoStat, KernelFileError> {
        let text = self.read(path)?;
        parse_io_stat(path, text)
    }

    /// (some, full) `total=` of a pressure file in seconds; `full` is 0 where absent.
    pub fn read_stalls(&mut self, path: &Path) -> Result<(f64, f64), KernelFileError> {
        let text = self.read(path)?;
        let p = parse_pressure(path, text)?;
        Ok((
            p.some.total as f64 / 1e6,
            p.full.map_or(0.0, |f| f.total as f64 / 1e6),
        ))
    }
}

/// The /proc/meminfo values the reports use, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemTotals {
    pub mem_total: u64,
    pub mem_free: u64,
    pub swap_total: u64,
    pub swap_free: u64,
}

/// Picks MemTotal, MemFree, SwapTotal and SwapFree out of /proc/meminfo text; a key that is
/// absent stays 0, a malformed value of one of them is an error.
pub fn parse_meminfo(path: &Path, text: &str) -> Result<MemTotals, KernelFileError> {
    let mut m = MemTotals::default();
    for (i, line) in text.lines().enumerate() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "MemTotal" => &mut m.mem_total,
            "MemFree" => &mut m.mem_free,
            "SwapTotal" => &mut m.swap_total,
            "SwapFree" => &mut m.swap_free,
            _ => continue,
        };
        *slot =
            crate::system::sysinfo::meminfo_value(rest).ok_or_else(|| KernelFileError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                msg: format!("{:?} has no number", line),
            })?;
    }
    Ok(m)
}

/// `cur − prev` when the counter didn't go backwards.
fn delta(cur: f64, prev: f64) -> Option<f64> {
    let d = cur - prev;
    (d >= 0.0 && d.is_finite()).then_some(d)
}

fn rate(cur: f64, prev: f64, dur: f64) -> f64 {
    delta(cur, prev).map_or(0.0, |d| d / dur)
}

fn pressure(cur: (f64, f64), prev: (f64, f64), dur: f64) -> (f64, f64) {
    (
        rate(cur.0, prev.0, dur).clamp(0.0, 1.0),
        rate(cur.1, prev.1, dur).clamp(0.0, 1.0),
    )
}

/// `cur`, a report of cumulative readings taken at monotonic time `at` (seconds), with its
/// rates over the interval since `prev` (a report and its time). Without `prev`, or for
/// counters that went backwards, they are 0.
pub fn with_rates(prev: Option<(f64, &UsageReport)>, at: f64, cur: &UsageReport) -> UsageReport {
    let mut u = cur.clone();
    let Some((prev_at, p)) = prev else {
        return u;
    };
    let dur = at - prev_at;
    if dur.is_nan() || dur <= 0.0 {
        return u;
    }
    if let Some(base) = delta(cur.cpu_usage_base, p.cpu_usage_base).filter(|b| *b > 0.0) {
        let frac = |c: f64, p: f64| delta(c, p).map_or(0.0, |d| (d / base).clamp(0.0, 1.0));
        u.cpu_util = frac(cur.cpu_usage, p.cpu_usage);
        u.cpu_sys = frac(cur.cpu_usage_sys, p.cpu_usage_sys);
    }
    u.io_rbps = rate(cur.io_rbytes as f64, p.io_rbytes as f64, dur).round() as u64;
    u.io_wbps = rate(cur.io_wbytes as f64, p.io_wbytes as f64, dur).round() as u64;
    u.io_util = rate(cur.io_usage, p.io_usage, dur);
    u.cpu_pressures = pressure(cur.cpu_stalls, p.cpu_stalls, dur);
    u.mem_pressures = pressure(cur.mem_stalls, p.mem_stalls, dur);
    u.io_pressures = pressure(cur.io_stalls, p.io_stalls, dur);
    u
}

/// The previous reading of every unit, so each report's rates cover the interval since the
/// unit was last read.
#[derive(Debug, Default)]
pub struct UsageTracker {
    prev: BTreeMap<String, (f64, UsageReport)>,
}

impl UsageTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// The report of `unit` from `reading` (its cumulative readings) taken at monotonic time
    /// `at`, with the rates since the unit's previous reading; remembers it.
    pub fn update(&mut self, unit: &str, at: f64, reading: UsageReport) -> UsageReport {
        let prev = self.prev.get(unit).map(|(t, r)| (*t, r));
        let rep = with_rates(prev, at, &reading);
        self.prev.insert(unit.to_string(), (at, reading));
        rep
    }

    /// Forgets units not in `seen`: a unit that disappears and comes back starts over rather
    /// than being diffed against its previous life.
    pub fn retain(&mut self, seen: &[&str]) {
        self.prev.retain(|k, _| seen.contains(&k.as_str()));
    }

    pub fn has(&self, unit: &str) -> bool {
        self.prev.contains_key(unit)
    }
}

/// System-wide CPU times from the `cpu` line of /proc/stat, in seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    pub busy: f64,
    pub sys: f64,
    pub base: f64,
}

/// The clock-tick rate /proc/stat counts in (USER_HZ).
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Parses the aggregate `cpu` line of /proc/stat. base = user + nice + system + idle + iowait +
/// irq + softirq + steal (guest time is already in user/nice), busy = base − idle − iowait.
pub fn parse_proc_stat(path: &Path, text: &str, ticks: f64) -> Result<CpuTimes, KernelFileError> {
    let bad = |msg: String| KernelFileError::Parse {
        path: path.to_path_buf(),
        line: 1,
        msg,
    };
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))
        .ok_or_else(|| bad("no aggregate \"cpu\" line".into()))?;
    let mut f = [0u64; 8];
    let mut toks = line.split_whitespace().skip(1);
    for (i, slot) in f.iter_mut().enumerate() {
        match toks.next() {
            Some(t) => {
                *slot = t
                    .parse()
                    .map_err(|_| bad(format!("cpu field {}: {:?} is not a count", i + 1, t)))?
            }
            // Very old kernels lack the trailing fields; they count as 0.
            None if i >= 4 => break,
            None => return Err(bad(format!("cpu line has only {} fields", i))),
        }
    }
    let base: u64 = f.iter().sum();
    let idle = f[3] + f[4];
    Ok(CpuTimes {
        busy: base.saturating_sub(idle) as f64 / ticks,
        sys: f[2] as f64 / ticks,
        base: base as f64 / ticks,
    })
}

/// Bytes read and written on `dev` according to /proc/diskstats (sectors × 512); `None` when
/// the device has no line.
pub fn parse_diskstats(
    path: &Path,
    text: &str,
    dev: &str,
) -> Result<Option<(u64, u64)>, KernelFileError> {
    for (i, line) in text.lines().enumerate() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.get(2) != Some(&dev) {
            continue;
        }
        let num = |idx: usize, what: &str| -> Result<u64, KernelFileError> {
            toks.get(idx)
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or_else(|| KernelFileError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    msg: format!("{}: no {} count", dev, what),
                })
        };
        let rd = num(5, "sectors-read")?;
        let wr = num(9, "sectors-written")?;
        return Ok(Some((rd.saturating_mul(512), wr.saturating_mul(512))));
    }
    Ok(None)
}

const PRESSURES: [PressureKind; 3] = [PressureKind::Cpu, PressureKind::Memory, PressureKind::Io];

fn proc_pressure_file(kind: PressureKind) -> &'static str {
    match kind {
        PressureKind::Cpu => "proc/pressure/cpu",
        PressureKind::Memory => "proc/pressure/memory",
        PressureKind::Io => "proc/pressure/io",
    }
}

/// What a reading pass could not read. `kind` names the failure for once-only logging (it
/// doesn't change from second to second); `missing` says the file doesn't exist, which is
/// expected on hosts without a controller and logged quietly.
#[derive(Debug)]
pub struct ReadIssue {
    pub kind: String,
    pub msg: String,
    pub missing: bool,
}

impl ReadIssue {
    pub fn from_kfe(kind: impl Into<String>, e: &KernelFileError) -> Self {
        let missing = matches!(e, KernelFileError::Read { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound);
        Self {
            kind: kind.into(),
            msg: e.to_string(),
            missing,
        }
    }
}

/// Readings shared by every unit of one pass: the system CPU base and free swap.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemBase {
    pub cpu: CpuTimes,
    pub swap_free: u64,
}

/// The root (`-.slice`) reading from /proc; `root_io` is the scratch device's line of the
/// root cgroup's io.stat, for `cost.usage`.
pub fn read_root(
    rd: &mut KReader,
    hp: &HostPaths,
    base: &SystemBase,
    meminfo: &MemTotals,
    dev: Option<&str>,
    root_io: Option<&BTreeMap<String, f64>>,
    issues: &mut Vec<ReadIssue>,
) -> UsageReport {
    let mut r = UsageReport {
        cpu_usage: base.cpu.busy,
        cpu_usage_sys: base.cpu.sys,
        cpu_usage_base: base.cpu.base,
        mem_bytes: meminfo.mem_total.saturating_sub(meminfo.mem_free),
        swap_bytes: meminfo.swap_total.saturating_sub(meminfo.swap_free),
        swap_free: base.swap_free,
        io_usage: root_io
            .and_then(|kv| kv.get("cost.usage"))
            .copied()
            .unwrap_or(0.0)
            / 1e6,
        ..Default::default()
    };
    if let Some(dev) = dev {
        let path = hp.path("proc/diskstats");
        match rd.read(&path).and_then(|t| parse_diskstats(&path, t, dev)) {
            Ok(Some((rd, wr))) => (r.io_rbytes, r.io_wbytes) = (rd, wr),
            Ok(None) => issues.push(ReadIssue {
                kind: "diskstats-dev".into(),
                msg: format!("{} has no line for {}", path.display(), dev),
                missing: false,
            }),
            Err(e) => issues.push(ReadIssue::from_kfe("diskstats", &e)),
        }
    }
    for kind in PRESSURES {
        let path = hp.path(proc_pressure_file(kind));
        match rd.read_stalls(&path) {
            Ok(s) => set_stalls(&mut r, kind, s),
            Err(e) => issues.push(ReadIssue::from_kfe(format!("psi-{}", kind.file()), &e)),
        }
    }
    r
}

fn set_stalls(r: &mut UsageReport, kind: PressureKind, s: (f64, f64)) {
    match kind {
        PressureKind::Cpu => r.cpu_stalls = s,
        PressureKind::Memory => r.mem_stalls = s,
        PressureKind::Io => r.io_stalls = s,
    }
}

/// `memory.swap.max − memory.swap.current` of `cg` and each of its ancestors below the root,
/// the smallest, limited by the system's free swap.
fn cgroup_swap_free(
    rd: &mut KReader,
    cgfs: &CgroupFs,
    cg: &str,
    own_swap: u64,
    system_free: u64,
) -> u64 {
    let mut free = system_free;
    let parts: Vec<&str> = cg.trim_matches('/').split('/').collect();
    for n in 1..=parts.len() {
        let dir = cgfs.path(&parts[..n].join("/"));
        if let Ok(Some(max)) = rd.read_limit(&dir.join("memory.swap.max")) {
            let cur = if n == parts.len() {
                own_swap
            } else {
                rd.read_u64(&dir.join("memory.swap.current")).unwrap_or(0)
            };
            free = free.min(max.saturating_sub(cur));
        }
    }
    free
}

/// The reading of cgroup `cg`, or `None` when it doesn't exist (its `cpu.stat`, a core file of
/// every cgroup2 cgroup, can't be read). Files of controllers not enabled there read as 0.
pub fn read_cgroup(
    rd: &mut KReader,
    cgfs: &CgroupFs,
    cg: &str,
    base: &SystemBase,
    dev: Option<DevNr>,
    issues: &mut Vec<ReadIssue>,
) -> Option<UsageReport> {
    let dir = cgfs.path(cg);
    let cpu_path = dir.join("cpu.stat");
    let cpu = rd.read_flat(&cpu_path).and_then(|m| {
        let get = |k: &str| {
            m.get(k).copied().ok_or_else(|| KernelFileError::Missing {
                path: cpu_path.clone(),
                msg: format!("no {} line", k),
            })
        };
        Ok((get("usage_usec")?, get("system_usec")?))
    });
    let (usage_usec, system_usec) = match cpu {
        Ok(c) => c,
        Err(e) => {
            let issue = ReadIssue::from_kfe(format!("{}:cpu.stat", cg), &e);
            if !issue.missing {
                issues.push(issue);
            }
            return None;
        }
    };
    let mut r = UsageReport {
        cpu_usage: usage_usec as f64 / 1e6,
        cpu_usage_sys: system_usec as f64 / 1e6,
        cpu_usage_base: base.cpu.base,
        ..Default::default()
    };
    let mut note = |what: &str, e: &KernelFileError| {
        issues.push(ReadIssue::from_kfe(format!("{}:{}", cg, what), e));
    };
    match rd.read_u64(&dir.join("memory.current")) {
        Ok(v) => r.mem_bytes = v,
        Err(e) => note("memory.current", &e),
    }
    match rd.read_u64(&dir.join("memory.swap.current")) {
        Ok(v) => r.swap_bytes = v,
        Err(e) => note("memory.swap.current", &e),
    }
    if let Some(dev) = dev {
        match rd.read_io_stat(&dir.join("io.stat")) {
            Ok(stat) => {
                if let Some(kv) = stat.get(&dev) {
                    let get = |k: &str| kv.get(k).copied().unwrap_or(0.0);
                    r.io_rbytes = get("rbytes") as u64;
                    r.io_wbytes = get("wbytes") as u64;
                    r.io_usage = get("cost.usage") / 1e6;
                }
            }
            Err(e) => note("io.stat", &e),
        }
    }
    for kind in PRESSURES {
        match rd.read_stalls(&dir.join(kind.file())) {
            Ok(s) => set_stalls(&mut r, kind, s),
            Err(e) => note(kind.file(), &e),
        }
    }
    r.swap_free = cgroup_swap_free(rd, cgfs, cg, r.swap_bytes, base.swap_free);
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(busy: f64, base: f64, rbytes: u64, stall: f64) -> UsageReport {
        UsageReport {
            cpu_usage: busy,
            cpu_usage_sys: busy / 4.0,
            cpu_usage_base: base,
            mem_bytes: 1 << 20,
            io_rbytes: rbytes,
            io_wbytes: rbytes / 2,
            io_usage: rbytes as f64 / 1e6,
            io_stalls: (stall, stall / 2.0),
            ..Default::default()
        }
    }

    #[test]
    fn rates_come_from_two_readings() {
        let a = reading(10.0, 100.0, 1_000_000, 1.0);
        let b = reading(11.0, 102.0, 3_000_000, 1.5);
        let u = with_rates(Some((5.0, &a)), 7.0, &b);
        assert_eq!(u.cpu_util, 0.5);
        assert_eq!(u.cpu_sys, 0.125);
        assert_eq!(u.io_rbps, 1_000_000);
        assert_eq!(u.io_wbps, 500_000);
        assert!((u.io_util - 1.0).abs() < 1e-9);
        assert_eq!(u.io_pressures, (0.25, 0.125));
        assert_eq!(u.cpu_usage, 11.0);
        assert_eq!(u.cpu_usage_base, 102.0);
        assert_eq!(u.io_rbytes, 3_000_000);
        assert!((u.io_usage - 3.0).abs() < 1e-9);
        assert_eq!(u.io_stalls, (1.5, 0.75));
    }

    #[test]
    fn first_reading_has_no_rates() {
        let mut t = UsageTracker::new();
        let u = t.update("workload.slice", 1.0, reading(50.0, 100.0, 1 << 40, 30.0));
        assert_eq!(
            (u.cpu_util, u.io_rbps, u.io_util, u.io_pressures),
            (0.0, 0, 0.0, (0.0, 0.0))
        );
        assert_eq!(u.io_rbytes, 1 << 40);
        let u = t.update(
            "workload.slice",
            2.0,
            reading(50.5, 102.0, (1 << 40) + 4096, 30.1),
        );
        assert_eq!(u.cpu_util, 0.25);
        assert_eq!(u.io_rbps, 4096);
    }

    #[test]
    fn counters_going_backwards_give_no_rate() {
        let a = reading(50.0, 100.0, 1 << 30, 30.0);
        let b = reading(1.0, 101.0, 4096, 0.5);
        let u = with_rates(Some((1.0, &a)), 2.0, &b);
        assert_eq!(u.cpu_util, 0.0);
        assert_eq!(u.cpu_sys, 0.0);
        assert_eq!((u.io_rbps, u.io_wbps), (0, 0));
        assert_eq!(u.io_util, 0.0);
        assert_eq!(u.io_pressures, (0.0, 0.0));
        // The levels are still reported.
        assert_eq!(u.io_rbytes, 4096);
        // Zero or negative intervals give no rates at all.
        let c = reading(60.0, 110.0, 1 << 31, 31.0);
        let u = with_rates(Some((2.0, &a)), 2.0, &c);
        assert_eq!((u.cpu_util, u.io_rbps), (0.0, 0));
    }

    #[test]
    fn utilization_is_clamped() {
        let a = reading(10.0, 100.0, 0, 0.0);
        let b = reading(14.0, 101.0, 0, 3.0);
        let u = with_rates(Some((0.0, &a)), 1.0, &b);
        assert_eq!(u.cpu_util, 1.0);
        assert_eq!(u.io_pressures, (1.0, 1.0));
    }

    #[test]
    fn a_unit_that_disappears_starts_over() {
        let mut t = UsageTracker::new();
        t.update("balloon.slice", 1.0, reading(5.0, 100.0, 0, 0.0));
        t.retain(&["-.slice"]);
        assert!(!t.has("balloon.slice"));
        let u = t.update("balloon.slice", 2.0, reading(5.5, 101.0, 0, 0.0));
        assert_eq!(u.cpu_util, 0.0);
    }

    #[test]
    fn proc_stat_leaves_guest_time_out_of_the_base() {
        let p = Path::new("/proc/stat");
        let text = "cpu  100 20 30 400 50 6 4 10 40 0\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1 2\n";
        let c = parse_proc_stat(p, text, 10.0).unwrap();
        assert_eq!(c.base, 62.0);
        assert_eq!(c.busy, 17.0);
        assert_eq!(c.sys, 3.0);
        // Kernels without steal/guest columns.
        let c = parse_proc_stat(p, "cpu 1 0 1 8 0\n", 1.0).unwrap();
        assert_eq!((c.base, c.busy), (10.0, 2.0));
        for bad in ["", "cpu0 1 2 3 4\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"] {
            assert!(parse_proc_stat(p, bad, 100.0).is_err(), "{:?}", bad);
        }
    }

    #[test]
    fn meminfo_keys_and_the_reader() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("meminfo");
        std::fs::write(
            &p,
            "MemTotal:       1000 kB\nMemFree:         400 kB\nHugePages_Total:  0\n\
             SwapTotal:       100 kB\nSwapFree:         60 kB\n",
        )
        .unwrap();
        let mut rd = KReader::new();
        let m = parse_meminfo(&p, rd.read(&p).unwrap()).unwrap();
        assert_eq!(
            m,
            MemTotals {
                mem_total: 1000 << 10,
                mem_free: 400 << 10,
                swap_total: 100 << 10,
                swap_free: 60 << 10,
            }
        );
        assert!(parse_meminfo(&p, "MemFree: lots kB\n").is_err());
        let missing = rd.read(&t.path().join("nope")).unwrap_err();
        assert!(ReadIssue::from_kfe("x", &missing).missing);
        std::fs::write(&p, "max\n").unwrap();
        assert_eq!(rd.read_limit(&p).unwrap(), None);
        std::fs::write(&p, "4096\n").unwrap();
        assert_eq!(rd.read_limit(&p).unwrap(), Some(4096));
        std::fs::write(&p, "lots\n").unwrap();
        assert!(rd.read_limit(&p).is_err());
    }

    #[test]
    fn diskstats_bytes_of_one_device() {
        let p = Path::new("/proc/diskstats");
        let text = "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0\n \
                    254       0 vda 100 5 2048 30 40 2 4096 10 0 20 40 0 0 0 0\n \
                    254       1 vda1 1 0 8 0 0 0 0 0 0 0 0\n";
        assert_eq!(
            parse_diskstats(p, text, "vda").unwrap(),
            Some((2048 * 512, 4096 * 512))
        );
        assert_eq!(parse_diskstats(p, text, "sdz").unwrap(), None);
        assert!(parse_diskstats(p, "8 0 sda 1 2\n", "sda").is_err());
    }
}
