//! hashd's statistics: exact latency percentiles per control period, and the status file
//! (`--report`) it rewrites every second, from which the reporter fills [`HashdReport`].

use crate::report::model::{HashdLat, HashdReport, SvcReport, SvcState, Timestamp};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// Nearest-rank quantile of sorted `v`: the smallest value with at least `q·n` values at or
/// below it; q = 0 gives the minimum. 0 for an empty slice.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let n = sorted.len();
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// The latency percentiles of one period's samples (sorted in place); `ctl` at `ctl_pct`.
pub fn lat_stats(samples: &mut [f64], ctl_pct: f64) -> HashdLat {
    samples.sort_unstable_by(f64::total_cmp);
    let q = |x: f64| nearest_rank(samples, x);
    HashdLat {
        min: q(0.0),
        p01: q(0.01),
        p05: q(0.05),
        p10: q(0.10),
        p16: q(0.16),
        p50: q(0.50),
        p84: q(0.84),
        p90: q(0.90),
        p95: q(0.95),
        p99: q(0.99),
        p99_9: q(0.999),
        p99_99: q(0.9999),
        p99_999: q(0.99999),
        max: q(1.0),
        ctl: q(ctl_pct),
    }
}

/// The dispatcher's numbers, refreshed every control period (counters at every event).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stat {
    /// Completions per second over the last control period.
    pub rps: f64,
    pub concurrency: f64,
    pub concurrency_max: f64,
    pub file_addr_frac: f64,
    pub anon_addr_frac: f64,
    pub nr_in_flight: u64,
    /// Cumulative completed requests.
    pub nr_done: u64,
    pub nr_workers: u64,
    pub nr_idle_workers: u64,
    /// Latencies of the last control period, seconds, measured from dispatch.
    pub lat: HashdLat,
    /// Testfile / anon bytes in the footprint (the anon area is mapped in whole units).
    pub file_size: u64,
    pub anon_size: u64,
    /// Page accesses per slot of the file / anon footprint since the params were loaded,
    /// hottest slot first; empty without `acc_dist_slots`.
    pub file_dist: Vec<u64>,
    pub anon_dist: Vec<u64>,
    /// Cumulative testfile IO errors (logged, not fatal).
    pub io_errors: u64,
    /// Cumulative hash-log lines dropped because the log writer fell behind.
    pub log_dropped: u64,
    /// Cumulative bytes hashed.
    pub bytes_hashed: u64,
    /// Cumulative CPU seconds spent hashing them, at the rate measured on one request in
    /// eight: those read the thread's CPU clock around each piece they hash (a system call,
    /// two per chunk; timing every request would cost ~1 % of hashd's CPU). The monotonic
    /// clock would be cheaper but counts time the thread was descheduled, 2 % more on a VM.
    pub hash_cpu: f64,
}

/// hashd's status file. Field names follow upstream's rd-hashd report where it has them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HashdStatus {
    pub timestamp: Timestamp,
    /// `Prep` while testfiles are laid out, then `Running`.
    pub phase: String,
    pub testfiles_progress: f64,
    /// When the params in effect were loaded.
    pub params_modified: Timestamp,
    /// The memory footprint in effect (size × mem_frac) and since when.
    pub mem_probe_size: u64,
    pub mem_probe_at: Timestamp,
    /// The controlled percentile and the reference maximum RPS of the params in effect.
    pub lat_pct: f64,
    pub rps_max: u32,
    /// Whether the testfiles' disk / a swap disk is rotational (`queue/rotational`), and the
    /// rotational mode that follows: either of them, unless `--rotational` forces it.
    pub rotational: bool,
    pub rotational_testfiles: bool,
    pub rotational_swap: bool,
    #[serde(flatten)]
    pub stat: Stat,
}

pub const PHASE_PREP: &str = "Prep";
pub const PHASE_RUNNING: &str = "Running";

impl HashdStatus {
    pub fn load(path: &Path) -> Result<HashdStatus> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("parsing hashd status {}", path.display()))
    }

    /// Writes to `<path>.staging`, then renames it over `path` (no fsync: this is rewritten
    /// every second on the device under test).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut staging = path.as_os_str().to_owned();
        staging.push(".staging");
        let staging = std::path::PathBuf::from(staging);
        let json = serde_json::to_vec_pretty(self).context("serializing hashd status")?;
        crate::util::atomic::write_replacing(path, &staging, "hashd status", |f| {
            f.write_all(&json)?;
            f.write_all(b"\n")
        })
    }

    /// `load` = min(1, rps / rps_max), 0 without rps_max.
    pub fn load_frac(&self) -> f64 {
        if self.rps_max == 0 {
            0.0
        } else {
            (self.stat.rps / self.rps_max as f64).min(1.0)
        }
    }

    /// What the reporter puts in a per-second report for this instance (`svc_name` as the
    /// workload layer names it, e.g. `hashd-A.service`).
    pub fn to_report(&self, svc_name: &str) -> HashdReport {
        HashdReport {
            svc: SvcReport {
                name: svc_name.to_string(),
                state: SvcState::Running,
            },
            phase: self.phase.clone(),
            load: self.load_frac(),
            rps: self.stat.rps,
            lat_pct: self.lat_pct,
            lat: self.stat.lat.clone(),
            nr_in_flight: self.stat.nr_in_flight,
            nr_done: self.stat.nr_done,
            nr_workers: self.stat.nr_workers,
            nr_idle_workers: self.stat.nr_idle_workers,
            mem_probe_size: self.mem_probe_size,
            mem_probe_at: self.mem_probe_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_is_exact() {
        let mut v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let l = lat_stats(&mut v, 0.95);
        assert_eq!(
            (l.min, l.p01, l.p05, l.p50, l.p84, l.p95, l.p99),
            (1.0, 1.0, 5.0, 50.0, 84.0, 95.0, 99.0)
        );
        assert_eq!(
            (l.p99_9, l.p99_999, l.max, l.ctl),
            (100.0, 100.0, 100.0, 95.0)
        );

        let mut v: Vec<f64> = (1..=1000).map(|i| i as f64 / 1000.0).collect();
        let l = lat_stats(&mut v, 0.9);
        assert_eq!((l.p10, l.p99_9, l.ctl), (0.1, 0.999, 0.9));

        assert_eq!(nearest_rank(&[], 0.5), 0.0);
        assert_eq!(nearest_rank(&[3.0], 0.0), 3.0);
        assert_eq!(nearest_rank(&[1.0, 2.0], 0.5), 1.0);
        assert_eq!(nearest_rank(&[1.0, 2.0], 0.51), 2.0);
    }

    #[test]
    fn status_round_trip_and_report() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hashd.json");
        let st = HashdStatus {
            phase: PHASE_RUNNING.into(),
            lat_pct: 0.95,
            rps_max: 1000,
            mem_probe_size: 1 << 30,
            stat: Stat {
                rps: 1500.0,
                nr_done: 42,
                lat: HashdLat {
                    p95: 0.05,
                    ..HashdLat::default()
                },
                ..Stat::default()
            },
            ..HashdStatus::default()
        };
        st.write(&path).unwrap();
        assert!(!dir.path().join("hashd.json.staging").exists());
        let back = HashdStatus::load(&path).unwrap();
        assert_eq!(back, st);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"nr_done\": 42"), "flattened stat: {text}");
        let r = back.to_report("hashd-A.service");
        assert_eq!(r.load, 1.0);
        assert_eq!(r.rps, 1500.0);
        assert_eq!(r.lat.p95, 0.05);
        assert_eq!(r.svc.name, "hashd-A.service");
        assert_eq!(r.mem_probe_size, 1 << 30);
    }
}
