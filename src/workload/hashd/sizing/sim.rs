//! A simulated workload on a simulated device, for testing the sizing bench without hashd.
//!
//! The footprint share that fits in memory (`mem_fit`) is served from memory; the device's IO
//! sustains `io_frac` more. Past their sum the latency controller has to shed load, and the
//! sustainable RPS falls off exponentially (`steep`). CPU caps RPS at `cpu_rps`. Each simulated
//! second the RPS moves toward its steady value with time constant `tau` and is observed with
//! relative Gaussian noise.
//!
//! Optionally (`cold` > 0) the workload starts cold: while its pages are not yet where the
//! steady state keeps them, the footprint weighs `1 + cold × (1 − warmth)` times its size. It
//! warms up in proportion to the device's spare capacity at its footprint and cools down again
//! past the boundary, so a workload started right at the boundary barely warms — as a TCG
//! guest's hashd started at a footprint near what it sustains does.

use super::target::{Knobs, Sample, SizingTarget};
use crate::workload::hashd::dist::Rng;
use anyhow::Result;

/// How fast a cold workload warms (and a warm one cools) per second, per unit of spare share.
const WARM_RATE: f64 = 0.2;

#[derive(Debug, Clone)]
pub struct SimDevice {
    pub size: u64,
    pub mem_fit: f64,
    pub io_frac: f64,
    pub steep: f64,
    pub noise: f64,
    pub tau: f64,
    pub cpu_rps: f64,
    pub lat_target: f64,
    pub rotational: bool,
    /// Extra weight of a cold footprint (0: always warm).
    pub cold: f64,
    /// 0 (cold) to 1 (warm); only with `cold` > 0.
    warmth: f64,
    rng: Rng,
    knobs: Knobs,
    rps: f64,
    lat: f64,
    /// Simulated seconds so far.
    pub secs: u64,
}

impl SimDevice {
    pub fn new(mem_fit: f64, io_frac: f64, noise: f64, seed: u64) -> Self {
        SimDevice {
            size: 64 << 30,
            mem_fit,
            io_frac,
            steep: 10.0,
            noise,
            tau: 3.0,
            cpu_rps: 3000.0,
            lat_target: 0.075,
            rotational: false,
            cold: 0.0,
            warmth: 0.0,
            rng: Rng::seeded(seed),
            knobs: Knobs {
                mem_frac: 0.0,
                rps_target: 1,
                rps_max: 0,
                uniform: false,
            },
            rps: 0.0,
            lat: 0.0,
            secs: 0,
        }
    }

    /// The footprint share currently set.
    pub fn mem_frac(&self) -> f64 {
        self.knobs.mem_frac
    }

    /// The footprint the device sustains at full load.
    pub fn boundary(&self) -> f64 {
        self.mem_fit + self.io_frac
    }

    /// Sustainable share of the requested load at footprint `p`.
    pub fn ratio_at(&self, p: f64) -> f64 {
        let b = self.boundary();
        if p <= b {
            1.0
        } else {
            (-self.steep * (p - b) / b).exp()
        }
    }

    /// The footprint at which the steady RPS is `pass` × the requested.
    pub fn crossing(&self, pass: f64) -> f64 {
        self.boundary() * (1.0 + (1.0 / pass).ln() / self.steep)
    }

    /// The footprint as the device sees it: larger while the workload is cold.
    fn effective(&self) -> f64 {
        self.knobs.mem_frac * (1.0 + self.cold * (1.0 - self.warmth))
    }

    fn steady(&self) -> (f64, f64) {
        let k = &self.knobs;
        let ratio = self.ratio_at(self.effective());
        let want = (k.rps_target as f64).min(self.cpu_rps);
        let rps = want * ratio;
        let limited = ratio < 1.0 || k.rps_target as f64 >= self.cpu_rps;
        let lat = if limited {
            self.lat_target
        } else {
            self.lat_target * (0.4 + 0.5 * (k.mem_frac / self.boundary()).min(1.0))
        };
        (rps, lat)
    }
}

impl SizingTarget for SimDevice {
    fn set(&mut self, knobs: &Knobs) -> Result<()> {
        self.knobs = *knobs;
        Ok(())
    }

    fn next_sample(&mut self) -> Result<Sample> {
        self.secs += 1;
        if self.cold > 0.0 {
            // Share of the device left over (or missing, < 0) at the footprint once warm: below
            // the boundary the workload always warms up in the end, if slowly close to it.
            let spare = 1.0 - self.knobs.mem_frac / self.boundary();
            let rate = (WARM_RATE * spare.abs()).min(1.0);
            if spare > 0.0 {
                self.warmth += (1.0 - self.warmth) * rate;
            } else {
                self.warmth -= self.warmth * rate;
            }
        }
        let (rps, lat) = self.steady();
        let a = 1.0 - (-1.0 / self.tau).exp();
        self.rps += (rps - self.rps) * a;
        self.lat += (lat - self.lat) * a;
        let mut n = || 1.0 + self.noise * self.rng.std_normal();
        let r = (self.rps * n()).max(0.0);
        let l = (self.lat * n()).max(0.0);
        Ok(Sample {
            rps: r,
            lat_ctl: l,
            lat_p95: l,
            mem_bytes: (self.size as f64 * self.knobs.mem_frac) as u64,
            swap_bytes: 0,
        })
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn lat_target(&self) -> f64 {
        self.lat_target
    }

    fn rotational(&self) -> bool {
        self.rotational
    }
}
