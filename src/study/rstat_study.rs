//! The resource-stat study: per-slice distributions over a period, in the JSON layout the
//! `--rstat` tables ([`super::rstat`]) render and upstream result files carry.
//!
//! Per loaded report, for the slice's entry in `usages`:
//!
//! | field | from | kind |
//! |---|---|---|
//! | `cpu_util` | Δcpu_usage / Δcpu_usage_base | ratio of deltas |
//! | `cpu_sys` | Δcpu_usage_sys / Δcpu_usage_base | ratio of deltas |
//! | `mem_bytes`, `swap_bytes` | level | |
//! | `io_util` | Δio_usage / Δt | rate |
//! | `io_bps` | [Δio_rbytes / Δt, Δio_wbytes / Δt] | rates |
//! | `psi_cpu` | Δcpu_stalls.some / Δt | rate |
//! | `psi_mem`, `psi_io` | [Δ…_stalls.some / Δt, Δ…_stalls.full / Δt] | rates |
//!
//! plus every key of the `memory.stat`, `io.stat` and (root slice only) `vmstat` key lists:
//! cumulative keys as per-second rates, the rest as levels. Every value is weighted by the
//! report's `cnt`. Rates come from the slice's own previous reading (see
//! [`DeltaSel`]): the first report of a period, counter resets and readings missing from a
//! report yield no sample rather than a zero or a spike. A slice or key absent from a report
//! contributes nothing for that second.

use super::dist::MeanPcts;
use super::reports::{DeltaSel, RatioSel, SelArg, Study};
use super::rstat::{StatKey, IO_STAT_KEYS, MEMORY_STAT_KEYS, VMSTAT_KEYS};
use crate::report::UsageReport;
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// The root slice: the whole system.
pub const ROOT_SLICE: &str = "-.slice";

/// One distribution in result JSON: `{"00": …, …, "100": …, "mean": …, "stdev": …}`.
pub type DistJson = BTreeMap<String, f64>;

/// The study's result for one slice, serialized in the upstream layout.
#[derive(Debug, Clone, Serialize)]
pub struct ResourceStatResult {
    pub cpu_util: DistJson,
    pub cpu_sys: DistJson,
    pub mem_bytes: DistJson,
    pub swap_bytes: DistJson,
    pub io_util: DistJson,
    pub io_bps: [DistJson; 2],
    pub psi_cpu: DistJson,
    pub psi_mem: [DistJson; 2],
    pub psi_io: [DistJson; 2],
    pub mem_stat: BTreeMap<String, DistJson>,
    pub io_stat: BTreeMap<String, DistJson>,
    pub vmstat: BTreeMap<String, DistJson>,
}

impl ResourceStatResult {
    /// As raw JSON, the form result models keep rstat blobs in.
    pub fn to_raw(&self) -> Result<Box<RawValue>> {
        let s = serde_json::to_string(self).context("serializing resource stat")?;
        RawValue::from_string(s).context("serializing resource stat")
    }
}

/// A rate or level distribution with its delta context.
#[derive(Debug, Clone, Default)]
struct Acc {
    dist: MeanPcts,
    delta: DeltaSel,
}

impl Acc {
    fn level(&mut self, v: Option<f64>, cnt: u64) {
        if let Some(v) = v {
            self.dist.push_n(v, cnt);
        }
    }

    fn rate(&mut self, v: Option<f64>, ts: f64, cnt: u64) {
        if let Some(r) = self.delta.rate(v, ts) {
            self.dist.push_n(r, cnt);
        }
    }
}

/// Distributions of one keyed stat file, in key-list order.
#[derive(Debug, Clone)]
struct KeyedAcc {
    keys: &'static [StatKey],
    accs: Vec<Acc>,
}

impl KeyedAcc {
    fn new(keys: &'static [StatKey]) -> Self {
        Self {
            keys,
            accs: vec![Acc::default(); keys.len()],
        }
    }

    fn reset(&mut self) {
        for a in &mut self.accs {
            a.delta.reset();
        }
    }

    fn study(&mut self, map: Option<&BTreeMap<String, f64>>, ts: f64, cnt: u64) {
        for (key, acc) in self.keys.iter().zip(&mut self.accs) {
            let v = map.and_then(|m| m.get(key.name)).copied();
            if key.is_cumulative() {
                acc.rate(v, ts, cnt);
            } else {
                acc.level(v, cnt);
            }
        }
    }

    fn result(&self) -> BTreeMap<String, DistJson> {
        self.keys
            .iter()
            .zip(&self.accs)
            .map(|(k, a)| (k.name.to_string(), a.dist.dfl_result()))
            .collect()
    }
}

/// Resource statistics of one slice over one or more periods.
#[derive(Debug, Clone)]
pub struct ResourceStatStudy {
    slice: String,
    cpu_util: MeanPcts,
    cpu_util_sel: RatioSel,
    cpu_sys: MeanPcts,
    cpu_sys_sel: RatioSel,
    mem_bytes: Acc,
    swap_bytes: Acc,
    io_util: Acc,
    io_bps: [Acc; 2],
    psi_cpu: Acc,
    psi_mem: [Acc; 2],
    psi_io: [Acc; 2],
    mem_stat: KeyedAcc,
    io_stat: KeyedAcc,
    vmstat: Option<KeyedAcc>,
}

impl ResourceStatStudy {
    /// A study of `slice` (`-.slice`, `workload.slice`, `system.slice`); the root slice also
    /// collects `vmstat`.
    pub fn new(slice: &str) -> Self {
        Self {
            slice: slice.to_string(),
            cpu_util: MeanPcts::new(),
            cpu_util_sel: RatioSel::default(),
            cpu_sys: MeanPcts::new(),
            cpu_sys_sel: RatioSel::default(),
            mem_bytes: Acc::default(),
            swap_bytes: Acc::default(),
            io_util: Acc::default(),
            io_bps: Default::default(),
            psi_cpu: Acc::default(),
            psi_mem: Default::default(),
            psi_io: Default::default(),
            mem_stat: KeyedAcc::new(MEMORY_STAT_KEYS),
            io_stat: KeyedAcc::new(IO_STAT_KEYS),
            vmstat: (slice == ROOT_SLICE).then(|| KeyedAcc::new(VMSTAT_KEYS)),
        }
    }

    pub fn slice(&self) -> &str {
        &self.slice
    }

    pub fn result(&self) -> ResourceStatResult {
        let r = |a: &Acc| a.dist.dfl_result();
        ResourceStatResult {
            cpu_util: self.cpu_util.dfl_result(),
            cpu_sys: self.cpu_sys.dfl_result(),
            mem_bytes: r(&self.mem_bytes),
            swap_bytes: r(&self.swap_bytes),
            io_util: r(&self.io_util),
            io_bps: [r(&self.io_bps[0]), r(&self.io_bps[1])],
            psi_cpu: r(&self.psi_cpu),
            psi_mem: [r(&self.psi_mem[0]), r(&self.psi_mem[1])],
            psi_io: [r(&self.psi_io[0]), r(&self.psi_io[1])],
            mem_stat: self.mem_stat.result(),
            io_stat: self.io_stat.result(),
            vmstat: self
                .vmstat
                .as_ref()
                .map(KeyedAcc::result)
                .unwrap_or_default(),
        }
    }
}

impl Study for ResourceStatStudy {
    fn reset(&mut self) {
        self.cpu_util_sel.reset();
        self.cpu_sys_sel.reset();
        let [r, w] = &mut self.io_bps;
        let [ms, mf] = &mut self.psi_mem;
        let [is, isf] = &mut self.psi_io;
        for a in [&mut self.io_util, r, w, &mut self.psi_cpu, ms, mf, is, isf] {
            a.delta.reset();
        }
        self.mem_stat.reset();
        self.io_stat.reset();
        if let Some(v) = &mut self.vmstat {
            v.reset();
        }
    }

    fn study(&mut self, arg: &SelArg) {
        let (ts, cnt) = (arg.ts(), arg.cnt);
        let rep = arg.rep;
        let u: Option<&UsageReport> = rep.usages.get(&self.slice);
        let f = |get: fn(&UsageReport) -> f64| u.map(get);

        if let Some(v) = self
            .cpu_util_sel
            .ratio(u.map(|u| (u.cpu_usage, u.cpu_usage_base)))
        {
            self.cpu_util.push_n(v, cnt);
        }
        if let Some(v) = self
            .cpu_sys_sel
            .ratio(u.map(|u| (u.cpu_usage_sys, u.cpu_usage_base)))
        {
            self.cpu_sys.push_n(v, cnt);
        }
        self.mem_bytes.level(f(|u| u.mem_bytes as f64), cnt);
        self.swap_bytes.level(f(|u| u.swap_bytes as f64), cnt);
        self.io_util.rate(f(|u| u.io_usage), ts, cnt);
        self.io_bps[0].rate(f(|u| u.io_rbytes as f64), ts, cnt);
        self.io_bps[1].rate(f(|u| u.io_wbytes as f64), ts, cnt);
        self.psi_cpu.rate(f(|u| u.cpu_stalls.0), ts, cnt);
        self.psi_mem[0].rate(f(|u| u.mem_stalls.0), ts, cnt);
        self.psi_mem[1].rate(f(|u| u.mem_stalls.1), ts, cnt);
        self.psi_io[0].rate(f(|u| u.io_stalls.0), ts, cnt);
        self.psi_io[1].rate(f(|u| u.io_stalls.1), ts, cnt);

        self.mem_stat.study(rep.mem_stat.get(&self.slice), ts, cnt);
        self.io_stat.study(rep.io_stat.get(&self.slice), ts, cnt);
        if let Some(v) = &mut self.vmstat {
            v.study(Some(&rep.vmstat), ts, cnt);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::{write_report, Report, Timestamp};
    use crate::study::reports::study_period;
    use std::path::Path;

    /// Second `i` of a steady synthetic load: 50 % CPU (10 % sys) of 4 CPUs, memory growing
    /// by 1 MiB/s from 1 GiB, 2 MiB/s reads and 1 MiB/s writes, io util 0.25, cpu some 0.1,
    /// mem some/full 0.2/0.05, io some/full 0.3/0.15, pgfault 1000/s, anon level, rbytes
    /// 2 MiB/s in io.stat, pgscan_kswapd 50/s in vmstat.
    fn report_at(i: u64) -> Report {
        let t = i as f64;
        let mut rep = Report {
            timestamp: Timestamp::from_unix(1000.0 + t + 0.5),
            ..Default::default()
        };
        let u = UsageReport {
            cpu_usage: 2.0 * t,
            cpu_usage_sys: 0.4 * t,
            cpu_usage_base: 4.0 * t,
            mem_bytes: (1 << 30) + (i << 20),
            swap_bytes: 4096,
            io_rbytes: i * (2 << 20),
            io_wbytes: i * (1 << 20),
            io_usage: 0.25 * t,
            cpu_stalls: (0.1 * t, 0.0),
            mem_stalls: (0.2 * t, 0.05 * t),
            io_stalls: (0.3 * t, 0.15 * t),
            ..Default::default()
        };
        rep.usages.insert("workload.slice".into(), u.clone());
        rep.usages.insert(ROOT_SLICE.into(), u);
        let ms: BTreeMap<String, f64> = [
            ("pgfault".to_string(), 1000.0 * t),
            ("anon".to_string(), 8192.0),
        ]
        .into();
        rep.mem_stat.insert("workload.slice".into(), ms.clone());
        rep.mem_stat.insert(ROOT_SLICE.into(), ms);
        let io: BTreeMap<String, f64> = [("rbytes".to_string(), t * (2 << 20) as f64)].into();
        rep.io_stat.insert("workload.slice".into(), io);
        rep.vmstat.insert("pgscan_kswapd".into(), 50.0 * t);
        rep.vmstat.insert("nr_free_pages".into(), 300.0);
        rep
    }

    pub(crate) fn write(dir: &Path, secs: impl IntoIterator<Item = u64>) {
        for i in secs {
            write_report(dir, 1000 + i, &report_at(i)).unwrap();
        }
    }

    pub(crate) fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn steady_load_gives_exact_rates_and_levels() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 0..10);
        let mut st = ResourceStatStudy::new("workload.slice");
        let nr = study_period(dir.path(), (1000, 1010), &mut [&mut st]).unwrap();
        assert_eq!(nr.pair(), (10, 0));
        let r = st.result();
        for (name, d, want) in [
            ("cpu_util", &r.cpu_util, 0.5),
            ("cpu_sys", &r.cpu_sys, 0.1),
            ("io_util", &r.io_util, 0.25),
            ("rbps", &r.io_bps[0], (2 << 20) as f64),
            ("wbps", &r.io_bps[1], (1 << 20) as f64),
            ("psi_cpu", &r.psi_cpu, 0.1),
            ("mem some", &r.psi_mem[0], 0.2),
            ("mem full", &r.psi_mem[1], 0.05),
            ("io some", &r.psi_io[0], 0.3),
            ("io full", &r.psi_io[1], 0.15),
            ("pgfault", &r.mem_stat["pgfault"], 1000.0),
            ("anon", &r.mem_stat["anon"], 8192.0),
            ("rbytes", &r.io_stat["rbytes"], (2 << 20) as f64),
        ] {
            for l in ["00", "50", "100", "mean"] {
                assert!(close(d[l], want), "{} {}: {} != {}", name, l, d[l], want);
            }
            assert!(d["stdev"].abs() < 1e-6, "{} stdev {}", name, d["stdev"]);
        }
        // Memory is a level: every second, 0 … 9 MiB above 1 GiB.
        assert_eq!(r.mem_bytes["00"], (1u64 << 30) as f64);
        assert_eq!(r.mem_bytes["100"], ((1u64 << 30) + (9 << 20)) as f64);
        assert_eq!(r.mem_bytes["50"], ((1u64 << 30) + (4 << 20)) as f64);
        assert_eq!(r.swap_bytes["mean"], 4096.0);
        // Keys absent from the reports are all zero; every list key is there.
        assert_eq!(r.mem_stat.len(), MEMORY_STAT_KEYS.len());
        assert_eq!(r.io_stat.len(), IO_STAT_KEYS.len());
        assert!(r.mem_stat["file"].values().all(|&v| v == 0.0));
        // Non-root slices carry no vmstat.
        assert!(r.vmstat.is_empty());
    }

    #[test]
    fn missing_seconds_are_weighted_and_rates_span_the_gap() {
        let dir = tempfile::tempdir().unwrap();
        // 3 … 6 missing: report 7 stands for 5 seconds and its rate covers 4 → 7.
        write(dir.path(), (0..3).chain(7..10));
        let mut st = ResourceStatStudy::new(ROOT_SLICE);
        let nr = study_period(dir.path(), (1000, 1010), &mut [&mut st]).unwrap();
        assert_eq!(nr.pair(), (6, 4));
        let r = st.result();
        // The rate is still exact across the gap.
        assert!(close(r.io_bps[0]["00"], (2 << 20) as f64));
        assert!(close(r.io_bps[0]["100"], (2 << 20) as f64));
        // mem level of report 7 counts 5 times: sorted levels (MiB above 1 GiB) are
        // 0 1 2 7 7 7 7 7 8 9 → p25 = rank 3 = 2, p50 = rank 5 = 7.
        let mib = |m: u64| ((1u64 << 30) + (m << 20)) as f64;
        assert_eq!(r.mem_bytes["25"], mib(2));
        assert_eq!(r.mem_bytes["50"], mib(7));
        assert!(close(
            r.mem_bytes["mean"],
            mib(0) + (3.0 + 35.0 + 17.0) / 10.0 * (1 << 20) as f64
        ));
        // Root collects vmstat: rates for CUM keys, levels for the rest.
        assert_eq!(r.vmstat.len(), VMSTAT_KEYS.len());
        assert!(close(r.vmstat["pgscan_kswapd"]["mean"], 50.0));
        assert_eq!(r.vmstat["nr_free_pages"]["mean"], 300.0);
    }

    #[test]
    fn counter_reset_and_absent_slice_yield_no_spikes() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 0..3);
        // Second 3: the slice is gone; seconds 4, 5: it's back with counters from zero.
        let mut gone = report_at(3);
        gone.usages.remove("workload.slice");
        write_report(dir.path(), 1003, &gone).unwrap();
        for i in 4..6u64 {
            let mut rep = report_at(i);
            let mut fresh = report_at(i - 4);
            fresh.timestamp = rep.timestamp;
            rep.usages
                .insert("workload.slice".into(), fresh.usages[ROOT_SLICE].clone());
            write_report(dir.path(), 1000 + i, &rep).unwrap();
        }
        let mut st = ResourceStatStudy::new("workload.slice");
        study_period(dir.path(), (1000, 1006), &mut [&mut st]).unwrap();
        let r = st.result();
        // Rates from (0,1), (1,2) and (4,5) only; all exact.
        assert!(close(r.io_bps[1]["100"], (1 << 20) as f64));
        assert!(close(r.io_bps[1]["00"], (1 << 20) as f64));
        assert!(close(r.cpu_util["100"], 0.5));
        // Levels from the 5 seconds the slice existed.
        assert_eq!(r.swap_bytes["mean"], 4096.0);
    }

    #[test]
    fn contexts_reset_between_periods() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 0..3);
        // A later period whose counters are far higher (as if a long time passed).
        for i in 100..103u64 {
            let mut rep = report_at(i * 10);
            rep.timestamp = Timestamp::from_unix(1000.0 + i as f64 + 0.5);
            let mut u = rep.usages[ROOT_SLICE].clone();
            u.io_rbytes = (i - 100) * (2 << 20) + (1 << 40);
            rep.usages.insert("workload.slice".into(), u);
            write_report(dir.path(), 1000 + i, &rep).unwrap();
        }
        let mut st = ResourceStatStudy::new("workload.slice");
        let nr = crate::study::reports::study_periods(
            dir.path(),
            &[(1000, 1003), (1100, 1103)],
            &mut [&mut st],
        )
        .unwrap();
        assert_eq!(nr.pair(), (6, 0));
        let r = st.result();
        assert!(
            close(r.io_bps[0]["100"], (2 << 20) as f64),
            "{:?}",
            r.io_bps[0]
        );
    }
}
