//! What `iocost-params` measures and how the model and QoS follow (benches-doc/iocost-params.md):
//! six throughput runs of the IO engine give the model, two rate-limited random runs the latency
//! targets. Pure: the jobs for a device and the numbers from their results, tested without a
//! device.

use crate::system::iocost::{IoCostModel, IoCostQos};
use crate::workload::ioengine::hist::LatHist;
use crate::workload::ioengine::job::{IoJob, Pattern, Rate, Stop};
use crate::workload::ioengine::pace::Arrivals;
use crate::workload::ioengine::result::IoResult;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The measurements, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Rbps,
    Wbps,
    Rseqiops,
    Wseqiops,
    Rrandiops,
    Wrandiops,
    Rlat,
    Wlat,
}

pub const STEPS: [Step; 8] = [
    Step::Rbps,
    Step::Wbps,
    Step::Rseqiops,
    Step::Wseqiops,
    Step::Rrandiops,
    Step::Wrandiops,
    Step::Rlat,
    Step::Wlat,
];

/// The order of upstream's script: each write run before the read run of its kind, so the
/// random reads follow the random writes. `jobs=upstream` runs it, as what a run leaves on the
/// device (written blocks, a drive's or a host's state) shapes the next.
pub const UPSTREAM_STEPS: [Step; 8] = [
    Step::Wbps,
    Step::Rbps,
    Step::Wseqiops,
    Step::Rseqiops,
    Step::Wrandiops,
    Step::Rrandiops,
    Step::Rlat,
    Step::Wlat,
];

/// Bytes per IO of the bandwidth runs (upstream: 128 MiB, which the kernel splits anyway).
pub const BPS_BS: u64 = 1 << 20;
pub const IOPS_BS: u64 = 4096;

/// Whose job shapes the runs have: ours (the default), or those of upstream's fio script
/// (`jobs=upstream`, benches-doc/iocost-params.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Jobs {
    #[default]
    Ours,
    Upstream,
}

impl Jobs {
    pub fn is_ours(&self) -> bool {
        *self == Jobs::Ours
    }

    /// The steps in the order these jobs run them.
    pub fn steps(&self) -> [Step; 8] {
        match self {
            Jobs::Ours => STEPS,
            Jobs::Upstream => UPSTREAM_STEPS,
        }
    }
}

/// The values of the `jobs` property.
pub const JOBS: &[&str] = &["ours", "upstream"];

/// Which engine runs the steps: ours (the default), or fio's libaio engine, which upstream's
/// script runs (`engine=fio`; fio must be installed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Engine {
    #[default]
    Ours,
    Fio,
}

/// The values of the `engine` property.
pub const ENGINES: &[&str] = &["ours", "fio"];

/// What one step's run measured in the step's direction, whichever engine ran it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// The engine as the record names it (`io_uring`, `fio-3.33 libaio`, …).
    pub engine: String,
    pub runtime_ns: u64,
    pub iops: f64,
    pub bw_bytes: f64,
    pub lat_mean_ns: f64,
    /// Completion latencies at percentiles, ns, ascending by percentile.
    pub clat_pcts: Vec<(f64, u64)>,
}

impl Measured {
    /// Our engine's result: its histogram of the whole job at `pcts`.
    pub fn from_ours(step: Step, r: &IoResult, pcts: &[f64]) -> Measured {
        let d = if step.write() { &r.write } else { &r.read };
        let hist = LatHist::from_out(&d.clat);
        Measured {
            engine: r.engine.clone(),
            runtime_ns: r.runtime_ns,
            iops: d.iops,
            bw_bytes: d.bw_bytes,
            lat_mean_ns: d.lat.mean_ns,
            clat_pcts: pcts
                .iter()
                .map(|&p| (p, hist.as_ref().map_or(0, |h| h.percentile(p))))
                .collect(),
        }
    }

    /// The completion latency at the listed percentile nearest `pct` (as upstream's script
    /// reads fio's list), ns; 0 when none is listed.
    pub fn clat_at(&self, pct: f64) -> u64 {
        self.clat_pcts
            .iter()
            .min_by(|a, b| (a.0 - pct).abs().total_cmp(&(b.0 - pct).abs()))
            .map_or(0, |&(_, ns)| ns)
    }
}

/// Upstream's bandwidth runs: 128 MiB blocks, one in flight per job.
pub const UPSTREAM_BPS_BS: u64 = 128 << 20;
/// Upstream's IOPS and latency runs: 256 in flight per job.
pub const UPSTREAM_QD: u32 = 256;

/// How long and how wide the runs are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    pub ramp: Duration,
    pub dur: Duration,
}

pub const FULL: Timing = Timing {
    ramp: Duration::from_secs(5),
    dur: Duration::from_secs(60),
};
pub const QUICK: Timing = Timing {
    ramp: Duration::from_secs(1),
    dur: Duration::from_secs(6),
};

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Rbps => "rbps",
            Step::Wbps => "wbps",
            Step::Rseqiops => "rseqiops",
            Step::Wseqiops => "wseqiops",
            Step::Rrandiops => "rrandiops",
            Step::Wrandiops => "wrandiops",
            Step::Rlat => "rlat",
            Step::Wlat => "wlat",
        }
    }

    /// The step's place in `STEPS`: the six throughput steps in `model`'s order, then the
    /// two latency runs.
    pub fn index(self) -> usize {
        match self {
            Step::Rbps => 0,
            Step::Wbps => 1,
            Step::Rseqiops => 2,
            Step::Wseqiops => 3,
            Step::Rrandiops => 4,
            Step::Wrandiops => 5,
            Step::Rlat => 6,
            Step::Wlat => 7,
        }
    }

    pub fn write(self) -> bool {
        matches!(
            self,
            Step::Wbps | Step::Wseqiops | Step::Wrandiops | Step::Wlat
        )
    }

    /// The engine job on `target`: `rand_iops` is the random IOPS measured before (for the
    /// latency runs' rate).
    pub fn job(
        self,
        target: &Path,
        rotational: bool,
        t: &Timing,
        rand_iops: u64,
        jobs: Jobs,
    ) -> IoJob {
        // What both shapes share: the direction, O_DIRECT, the measured time.
        let mut j = IoJob::new(target.to_path_buf());
        j.read_pct = if self.write() { 0 } else { 100 };
        j.stop = Stop::Time(t.dur);
        j.direct = true;
        match jobs {
            Jobs::Ours => self.our_job(j, rotational, t, rand_iops),
            Jobs::Upstream => self.upstream_job(j, rotational, rand_iops),
        }
    }

    fn our_job(self, mut j: IoJob, rotational: bool, t: &Timing, rand_iops: u64) -> IoJob {
        j.ramp = t.ramp;
        // Enough in flight to saturate the device: upstream's 8 jobs (1 on a rotational disk)
        // at depth 256 is more than the block layer takes, so a quarter of the jobs.
        let (workers, qd) = if rotational { (1, 64) } else { (4, 64) };
        match self {
            Step::Rbps | Step::Wbps => {
                j.pattern = Pattern::Seq;
                j.bs = BPS_BS;
                j.workers = 1;
                j.qd = if rotational { 8 } else { 16 };
            }
            Step::Rseqiops | Step::Wseqiops => {
                j.pattern = Pattern::Seq;
                j.bs = IOPS_BS;
                j.workers = workers;
                j.qd = qd;
            }
            Step::Rrandiops | Step::Wrandiops => {
                j.pattern = Pattern::Rand;
                j.bs = IOPS_BS;
                j.workers = workers;
                j.qd = qd;
            }
            Step::Rlat | Step::Wlat => {
                j.pattern = Pattern::Rand;
                j.bs = IOPS_BS;
                j.workers = workers;
                j.qd = qd;
                // 90 % of what the device does flat out, for the whole job (upstream's fio
                // applied the rate per job, 8 × that in all).
                j.rate = Some(Rate::Iops((rand_iops as f64 * 0.9).max(1.0)));
                j.arrivals = Arrivals::Linear;
            }
        }
        j
    }

    /// The fio run upstream's script makes for this step (libaio there, our engine here): 8 jobs
    /// (1 on a rotational disk), no ramp; bandwidth with 128 MiB blocks one at a time per job;
    /// the 4 KiB runs at depth 256 handed over 16 at a time (fio's `iodepth_batch_submit` of
    /// depth / 16); the latency runs' rate 90 % of the random IOPS (rounded down) *per job*.
    fn upstream_job(self, mut j: IoJob, rotational: bool, rand_iops: u64) -> IoJob {
        j.ramp = Duration::ZERO;
        j.workers = if rotational { 1 } else { 8 };
        match self {
            Step::Rbps | Step::Wbps => {
                j.pattern = Pattern::Seq;
                j.bs = UPSTREAM_BPS_BS;
                j.qd = 1;
            }
            _ => {
                j.pattern = match self {
                    Step::Rseqiops | Step::Wseqiops => Pattern::Seq,
                    _ => Pattern::Rand,
                };
                j.bs = IOPS_BS;
                j.qd = UPSTREAM_QD;
                j.batch = UPSTREAM_QD.div_ceil(16);
            }
        }
        if matches!(self, Step::Rlat | Step::Wlat) {
            // Ours splits a job's rate over its workers: the per-job rate times the jobs.
            let per_job = (rand_iops as f64 * 0.9).floor().max(1.0);
            j.rate = Some(Rate::Iops(per_job * j.workers as f64));
            j.arrivals = Arrivals::Linear;
        }
        j
    }
}

/// A measurement's number: bytes/s for the bandwidth runs, 4 KiB IOs per second (bytes /
/// 4096, rounded) for the IOPS runs.
pub fn value(step: Step, m: &Measured) -> u64 {
    match step {
        Step::Rbps | Step::Wbps => m.bw_bytes.round() as u64,
        _ => (m.bw_bytes / 4096.0).round() as u64,
    }
}

/// The latency percentile io.cost's QoS watches: 95 on SSDs, 50 on rotational disks.
pub fn qos_pct(rotational: bool) -> f64 {
    if rotational {
        50.0
    } else {
        95.0
    }
}

/// A latency target in µs: 1.5 × the completion latency at the QoS percentile of the
/// rate-limited run.
pub fn lat_target(pct: f64, m: &Measured) -> u64 {
    (m.clat_at(pct) as f64 * 1.5 / 1000.0).round() as u64
}

/// The model from the six throughput numbers (in `STEPS` order).
pub fn model(v: &[u64; 6]) -> IoCostModel {
    IoCostModel {
        ctrl: "user".into(),
        model: "linear".into(),
        rbps: v[0],
        wbps: v[1],
        rseqiops: v[2],
        wseqiops: v[3],
        rrandiops: v[4],
        wrandiops: v[5],
    }
}

pub fn qos(rotational: bool, rlat: u64, wlat: u64) -> IoCostQos {
    let pct = qos_pct(rotational);
    IoCostQos {
        enable: 1,
        ctrl: "user".into(),
        rpct: pct,
        rlat,
        wpct: pct,
        wlat,
        min: 60.0,
        max: 100.0,
    }
}

/// The test file's size: 16 GiB as upstream, but no more than twice the memory (O_DIRECT
/// bypasses the page cache; a device's own cache is far smaller than the host's memory), a
/// quarter of the device and half the free space; 2 GiB at most in quick mode. `want` (the
/// `file-size` property) is taken as asked while it leaves `KEEP_FREE` of the free space: the
/// user chose the size, so only the room left bounds it.
pub fn testfile_size(quick: bool, mem: u64, dev_size: u64, free: u64, want: Option<u64>) -> u64 {
    let size = match want {
        Some(w) => w.min(free.saturating_sub(KEEP_FREE)),
        None => {
            let cap = if quick { 2u64 << 30 } else { 16u64 << 30 };
            cap.min(2 * mem).min(dev_size / 4).min(free / 2)
        }
    };
    size / (1 << 20) * (1 << 20)
}

/// What a test file of the asked size must leave free (results, reports, swap growth).
pub const KEEP_FREE: u64 = 1 << 30;

/// The smallest test file `file-size` takes (and the run needs).
pub const MIN_TESTFILE: u64 = 256 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// A completed IO that spent 1 µs being submitted and `clat` ns in the device.
    fn stamps(clat: u64) -> crate::workload::ioengine::stats::Stamps {
        crate::workload::ioengine::stats::Stamps {
            wait: 0,
            slat: 1_000,
            clat,
        }
    }

    #[test]
    fn jobs_follow_the_device_kind() {
        let t = &FULL;
        let p = Path::new("/x");
        let j = Step::Wbps.job(p, false, t, 0, Jobs::Ours);
        assert_eq!(
            (j.read_pct, j.bs, j.pattern, j.qd),
            (0, 1 << 20, Pattern::Seq, 16)
        );
        let j = Step::Rrandiops.job(p, true, t, 0, Jobs::Ours);
        assert_eq!((j.read_pct, j.bs, j.workers, j.qd), (100, 4096, 1, 64));
        let j = Step::Wlat.job(p, false, t, 10_000, Jobs::Ours);
        assert_eq!(j.rate, Some(Rate::Iops(9000.0)));
        assert_eq!((j.read_pct, j.pattern, j.workers), (0, Pattern::Rand, 4));
        assert!(j.check().is_ok());
        assert_eq!(j.stop, Stop::Time(Duration::from_secs(60)));
    }

    #[test]
    fn upstream_jobs_are_the_fio_runs_of_upstreams_script() {
        let t = &FULL;
        let p = Path::new("/x");
        let up = |s: Step, rot: bool, r: u64| s.job(p, rot, t, r, Jobs::Upstream);
        // Bandwidth: one 128 MiB block in flight per job; 8 jobs on an SSD, 1 rotational.
        let j = up(Step::Rbps, false, 0);
        assert_eq!(
            (j.read_pct, j.bs, j.pattern, j.qd, j.workers),
            (100, 128 << 20, Pattern::Seq, 1, 8)
        );
        assert_eq!(up(Step::Wbps, true, 0).workers, 1);
        // 4 KiB runs: depth 256, handed over 16 at a time (fio's iodepth_batch_submit).
        let j = up(Step::Wseqiops, true, 0);
        assert_eq!(
            (j.read_pct, j.bs, j.pattern, j.qd, j.batch, j.workers),
            (0, 4096, Pattern::Seq, 256, 16, 1)
        );
        assert_eq!(up(Step::Rrandiops, false, 0).pattern, Pattern::Rand);
        // Latency: 90 % of the random IOPS, rounded down, per job: 8 × that on an SSD.
        let j = up(Step::Rlat, false, 10_001);
        assert_eq!(j.rate, Some(Rate::Iops(8.0 * 9000.0)));
        assert_eq!(j.worker_iops(), Some(9000.0));
        assert_eq!(up(Step::Wlat, true, 151).rate, Some(Rate::Iops(135.0)));
        // Upstream's order: every step once, each write before its read, the random reads
        // right after the random writes, the latency runs last (they need both random IOPS).
        let order = Jobs::Upstream.steps();
        let at = |s: Step| order.iter().position(|&o| o == s).unwrap_or(usize::MAX);
        assert!(STEPS.iter().all(|&s| at(s) < 8));
        assert!(at(Step::Wbps) < at(Step::Rbps) && at(Step::Wseqiops) < at(Step::Rseqiops));
        assert_eq!(at(Step::Rrandiops), at(Step::Wrandiops) + 1);
        assert_eq!((at(Step::Rlat), at(Step::Wlat)), (6, 7));
        assert_eq!(Jobs::Ours.steps(), STEPS);
        for (i, s) in STEPS.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
        // No ramp: fio measured from the start; every job passes the engine's checks.
        for s in STEPS {
            for rot in [false, true] {
                let j = up(s, rot, 1000);
                assert_eq!(j.ramp, Duration::ZERO);
                assert_eq!(j.stop, Stop::Time(Duration::from_secs(60)));
                assert!(j.check().is_ok(), "{:?}: {:?}", s, j.check());
            }
        }
    }

    #[test]
    fn qos_follows_upstream_rules() {
        let q = qos(true, 9000, 12000);
        assert_eq!(
            (q.rpct, q.wpct, q.rlat, q.wlat, q.min, q.max),
            (50.0, 50.0, 9000, 12000, 60.0, 100.0)
        );
        assert_eq!(qos(false, 1, 1).rpct, 95.0);
        let m = model(&[1, 2, 3, 4, 5, 6]);
        assert_eq!(
            (
                m.rbps,
                m.wbps,
                m.rseqiops,
                m.wseqiops,
                m.rrandiops,
                m.wrandiops
            ),
            (1, 2, 3, 4, 5, 6)
        );
    }

    #[test]
    fn the_test_file_fits_the_machine() {
        let g = 1u64 << 30;
        let size = |q, m, d, f| testfile_size(q, m, d, f, None);
        assert_eq!(size(false, 64 * g, 1000 * g, 500 * g), 16 * g);
        assert_eq!(size(false, 2 * g, 1000 * g, 500 * g), 4 * g);
        assert_eq!(size(false, 64 * g, 8 * g, 500 * g), 2 * g);
        assert_eq!(size(false, 64 * g, 1000 * g, 3 * g), 3 * g / 2);
        assert_eq!(size(true, 64 * g, 1000 * g, 500 * g), 2 * g);
        // `file-size`: upstream's 16 GiB on a small machine, also in quick mode and past a
        // quarter of the device; only the free space, less `KEEP_FREE`, bounds it.
        let want = |q, d, w| testfile_size(q, 2 * g, d, 500 * g, Some(w));
        assert_eq!(
            (want(false, 1000 * g, 16 * g), want(true, 1000 * g, 16 * g)),
            (16 * g, 16 * g)
        );
        assert_eq!(want(false, 48 * g, 16 * g), 16 * g);
        assert_eq!(want(false, 1000 * g, g + 1), g);
        assert_eq!(
            testfile_size(false, 2 * g, 1000 * g, 17 * g, Some(16 * g)),
            16 * g
        );
        assert_eq!(
            testfile_size(false, 2 * g, 1000 * g, 16 * g, Some(16 * g)),
            15 * g
        );
        assert_eq!(
            testfile_size(false, 2 * g, 1000 * g, g / 2, Some(16 * g)),
            0
        );
    }

    #[test]
    fn numbers_come_from_the_right_direction() {
        use crate::workload::ioengine::stats::DirStats;
        let mut d = DirStats::default();
        for _ in 0..100 {
            d.record(4096, false, stamps(99_000), 0);
        }
        d.record(4096, false, stamps(999_000), 0);
        let out = d.out(1_000_000_000, &[]);
        let empty = DirStats::default().out(1_000_000_000, &[]);
        let r = IoResult {
            version: 1,
            engine: "io_uring".into(),
            engine_note: String::new(),
            job: IoJob::new("/x".into()),
            target_size: 0,
            block_device: false,
            runtime_ns: 1_000_000_000,
            read: out,
            write: empty,
            cpu: Default::default(),
            workers: vec![],
            steady: None,
            uring: Default::default(),
            uring_note: String::new(),
            dev: None,
        };
        let pcts = [50.0, 95.0];
        let (rd, wr) = (
            Measured::from_ours(Step::Rrandiops, &r, &pcts),
            Measured::from_ours(Step::Wrandiops, &r, &pcts),
        );
        assert_eq!(rd.engine, "io_uring");
        assert_eq!(value(Step::Rrandiops, &rd), 101);
        assert_eq!(value(Step::Rbps, &rd), 101 * 4096);
        assert_eq!(value(Step::Wrandiops, &wr), 0);
        // p95 of 100 × 99 µs and one 999 µs: 99 µs → 148.5 → 149 (to the bucket's precision).
        let t = lat_target(95.0, &rd);
        assert!((147..=150).contains(&t), "{}", t);
        assert_eq!(lat_target(50.0, &wr), 0);
        // The nearest listed percentile, as upstream's script reads fio's list.
        let m = Measured {
            clat_pcts: vec![(50.0, 10), (90.0, 20), (95.0, 30), (99.0, 40)],
            ..Measured::default()
        };
        assert_eq!(
            (m.clat_at(95.0), m.clat_at(94.0), m.clat_at(1.0)),
            (30, 30, 10)
        );
        assert_eq!(Measured::default().clat_at(95.0), 0);
    }
}
