//! What the sizing phases drive: [`SizingTarget`], implemented by a running [`Hashd`]
//! ([`HashdTarget`]) and, in tests, by a simulated device (`sim`).

use crate::workload::hashd::{Hashd, Params};
use anyhow::{bail, Result};
use std::time::{Duration, Instant};

/// The knobs a phase sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knobs {
    pub mem_frac: f64,
    pub rps_target: u32,
    /// Reference maximum RPS (0: no footprint scaling by load).
    pub rps_max: u32,
    /// Uniform addresses over the whole footprint (CPU saturation) instead of the hot-centre
    /// distributions.
    pub uniform: bool,
}

/// One second of the workload.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    pub rps: f64,
    /// Controlled-percentile latency, seconds.
    pub lat_ctl: f64,
    pub lat_p95: f64,
    /// Memory in use by the workload, bytes (0 when unknown).
    pub mem_bytes: u64,
}

/// A workload the sizing bench can steer and watch.
pub trait SizingTarget {
    /// Applies `knobs` (takes effect within about a second).
    fn set(&mut self, knobs: &Knobs) -> Result<()>;
    /// The next second's sample; blocks until it exists.
    fn next_sample(&mut self) -> Result<Sample>;
    /// The 100 % footprint, bytes.
    fn size(&self) -> u64;
    /// The controlled latency target, seconds.
    fn lat_target(&self) -> f64;
    /// Rotational devices get longer probes.
    fn rotational(&self) -> bool {
        false
    }
}

/// A running hashd as a sizing target: knobs go into its params file on top of `base`,
/// samples come from its status file, memory from its resident set (page cache isn't in it;
/// the storage bench reads its cgroup instead).
pub struct HashdTarget {
    pub hashd: Hashd,
    pub base: Params,
    pub size: u64,
    pub rotational: bool,
    last_ts: Option<f64>,
}

/// How long to wait for a fresh status before giving up on hashd.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(10);

impl HashdTarget {
    pub fn new(hashd: Hashd, base: Params, size: u64, rotational: bool) -> Self {
        HashdTarget {
            hashd,
            base,
            size,
            rotational,
            last_ts: None,
        }
    }

    fn rss(&self) -> u64 {
        let path = format!("/proc/{}/status", self.hashd.pid());
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or(0, |kb| kb << 10)
    }
}

impl SizingTarget for HashdTarget {
    fn set(&mut self, k: &Knobs) -> Result<()> {
        let mut p = self.base.clone();
        p.mem_frac = k.mem_frac.clamp(0.0, 1.0);
        p.rps_target = k.rps_target.max(1);
        p.rps_max = k.rps_max;
        if k.uniform {
            p.file_addr_stdev_ratio = 100.0;
            p.anon_addr_stdev_ratio = 100.0;
        }
        self.hashd.set_params(&p)
    }

    fn next_sample(&mut self) -> Result<Sample> {
        let start = Instant::now();
        loop {
            if let Ok(st) = self.hashd.status() {
                let ts = st.timestamp.unix_secs();
                if self.last_ts.map_or(true, |l| ts > l) {
                    self.last_ts = Some(ts);
                    return Ok(Sample {
                        rps: st.stat.rps,
                        lat_ctl: st.stat.lat.ctl,
                        lat_p95: st.stat.lat.p95,
                        mem_bytes: self.rss(),
                    });
                }
            }
            if start.elapsed() > SAMPLE_TIMEOUT {
                bail!("hashd wrote no status for {:?}", SAMPLE_TIMEOUT);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn lat_target(&self) -> f64 {
        self.base.lat_target
    }

    fn rotational(&self) -> bool {
        self.rotational
    }
}
