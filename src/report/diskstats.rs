//! The counter-only IO latency source, and picking the best source available.
//!
//! `/proc/diskstats` counts completed IOs and the milliseconds they took per IO type; the
//! per-second mean latency is Δms / Δios. The kernel times these from when the request was
//! allocated, so unlike the tracefs source they include time queued in the block layer, and
//! they have millisecond resolution. No percentiles can be derived: samples are marked
//! `unavailable` and carry only the means.

use crate::report::iolat_source::{IoLatSample, IoLatSource};
use crate::report::tracefs::TraceFsSource;
use crate::system::HostPaths;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Completed IOs and milliseconds spent, per IO type (read, write, discard, flush).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    pub ios: [u64; 4],
    pub ms: [u64; 4],
}

/// The counters of `devnr` in the text of /proc/diskstats; `None` when the device isn't listed.
/// Older kernels lack the discard (4.18) and flush (5.5) columns; those read as 0.
pub fn parse_diskstats(text: &str, devnr: (u32, u32)) -> Result<Option<DiskCounters>> {
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        if (f[0].parse::<u32>().ok(), f[1].parse::<u32>().ok()) != (Some(devnr.0), Some(devnr.1)) {
            continue;
        }
        if f.len() < 14 {
            bail!("/proc/diskstats:{}: too few fields in {:?}", i + 1, line);
        }
        let num = |idx: usize| -> Result<u64> {
            match f.get(idx) {
                None => Ok(0),
                Some(v) => v.parse().with_context(|| {
                    format!("/proc/diskstats:{}: field {} is {:?}", i + 1, idx + 1, v)
                }),
            }
        };
        // 3 reads, 6 ms reading, 7 writes, 10 ms writing, 14 discards, 17 ms discarding,
        // 18 flushes, 19 ms flushing (0-based indices).
        return Ok(Some(DiskCounters {
            ios: [num(3)?, num(7)?, num(14)?, num(18)?],
            ms: [num(6)?, num(10)?, num(17)?, num(19)?],
        }));
    }
    Ok(None)
}

/// IOs completed and milliseconds spent on them between `a` and `b` for IO type `i` (an index
/// into `IO_TYPES`); `None` when a counter went backwards (the disk was replaced).
pub fn delta(a: &DiskCounters, b: &DiskCounters, i: usize) -> Option<(u64, u64)> {
    Some((
        b.ios[i].checked_sub(a.ios[i])?,
        b.ms[i].checked_sub(a.ms[i])?,
    ))
}

/// Mean latencies (seconds) per IO type that completed IOs between `a` and `b`.
pub fn mean_latencies(a: &DiskCounters, b: &DiskCounters) -> BTreeMap<String, f64> {
    crate::report::model::IO_TYPES
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let (ios, ms) = delta(a, b, i)?;
            (ios > 0).then(|| (t.to_string(), ms as f64 / ios as f64 / 1e3))
        })
        .collect()
}

/// Mean latencies from /proc/diskstats; percentiles unavailable.
pub struct DiskStatsSource {
    path: PathBuf,
    devnr: (u32, u32),
    last: DiskCounters,
}

impl DiskStatsSource {
    pub fn open(hp: &HostPaths, devnr: (u32, u32)) -> Result<Self> {
        let path = hp.path("proc/diskstats");
        let mut s = Self {
            path,
            devnr,
            last: DiskCounters::default(),
        };
        s.last = s.read()?;
        Ok(s)
    }

    fn read(&self) -> Result<DiskCounters> {
        let text = std::fs::read_to_string(&self.path)
            .with_context(|| format!("reading {}", self.path.display()))?;
        parse_diskstats(&text, self.devnr)?.with_context(|| {
            format!(
                "{} has no line for device {}:{}",
                self.path.display(),
                self.devnr.0,
                self.devnr.1
            )
        })
    }
}

impl IoLatSource for DiskStatsSource {
    fn name(&self) -> &'static str {
        "diskstats"
    }

    fn sample(&mut self) -> Result<IoLatSample> {
        let now = self.read()?;
        let means = mean_latencies(&self.last, &now);
        self.last = now;
        Ok(IoLatSample {
            hists: None,
            pcts: BTreeMap::new(),
            cum: BTreeMap::new(),
            unavailable: true,
            means,
        })
    }
}

/// The best IO latency source for `devnr`: tracefs block events, else /proc/diskstats means
/// (logging why). Fails only when neither works.
pub fn open_best(hp: &HostPaths, devnr: (u32, u32)) -> Result<Box<dyn IoLatSource>> {
    open_best_journaled(hp, devnr, &mut crate::system::change_journal::NoJournal)
}

/// [`open_best`] recording the tracefs instance in `journal`, so that the restore journal
/// removes it if the run is killed.
pub fn open_best_journaled(
    hp: &HostPaths,
    devnr: (u32, u32),
    journal: &mut dyn crate::system::change_journal::ChangeJournal,
) -> Result<Box<dyn IoLatSource>> {
    let why = match TraceFsSource::open_journaled(hp, devnr, journal) {
        Ok(s) => return Ok(Box::new(s)),
        Err(e) => e,
    };
    log::warn!(
        "IO latency percentiles unavailable, using /proc/diskstats mean latencies: {:#}",
        why
    );
    let s = DiskStatsSource::open(hp, devnr)
        .with_context(|| format!("no IO latency source (tracefs: {:#})", why))?;
    Ok(Box::new(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = "\
 254       0 vda 1200 3 96000 600 50 10 800 250 0 900 1100 7 0 56 14 20 30
 254       1 vda1 10 0 80 5 0 0 0 0 0 5 5 0 0 0 0 0 0
   8       0 sda 5 0 40 1 0 0 0 0 0 1 1
";

    #[test]
    fn parses_the_device_line() {
        let c = parse_diskstats(STATS, (254, 0)).unwrap().unwrap();
        assert_eq!(c.ios, [1200, 50, 7, 20]);
        assert_eq!(c.ms, [600, 250, 14, 30]);
        // Old kernels: no discard/flush columns.
        let c = parse_diskstats(STATS, (8, 0)).unwrap().unwrap();
        assert_eq!((c.ios, c.ms), ([5, 0, 0, 0], [1, 0, 0, 0]));
        assert_eq!(parse_diskstats(STATS, (9, 9)).unwrap(), None);
        assert!(parse_diskstats(" 8 0 sda x 2 3 4 5 6 7 8 9 10 11", (8, 0)).is_err());
        assert!(parse_diskstats(" 8 0 sda 1 2", (8, 0)).is_err());
    }

    #[test]
    fn means_from_deltas() {
        let a = DiskCounters {
            ios: [100, 10, 0, 5],
            ms: [50, 40, 0, 5],
        };
        let b = DiskCounters {
            ios: [300, 10, 0, 4],
            ms: [250, 45, 0, 9],
        };
        let m = mean_latencies(&a, &b);
        assert_eq!(m.len(), 1, "{:?}", m);
        assert!((m["read"] - 0.001).abs() < 1e-12);
    }

    #[test]
    fn source_samples_means_and_marks_percentiles_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(dir.path());
        let p = dir.path().join("proc/diskstats");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, STATS).unwrap();
        assert!(DiskStatsSource::open(&hp, (1, 1)).is_err());
        let mut s = DiskStatsSource::open(&hp, (254, 0)).unwrap();
        std::fs::write(&p, STATS.replace("1200 3 96000 600", "1300 3 96800 900")).unwrap();
        let smp = s.sample().unwrap();
        assert!(smp.unavailable && smp.hists.is_none() && smp.pcts.is_empty());
        assert!((smp.means["read"] - 0.003).abs() < 1e-12);
        // No tracefs in the temp tree: open_best falls back.
        let best = open_best(&hp, (254, 0)).unwrap();
        assert_eq!(best.name(), "diskstats");
        assert!(open_best(&hp, (1, 1)).is_err());
    }
}
