//! The sizing bench (benches-doc/hashd.md): how many requests per second hashd serves at its
//! latency target (rps_max, by CPU saturation — skipped with fake CPU load, where rps_max is
//! given), and how large a memory footprint the machine's memory and IO device sustain at that rate
//! (mem_frac, by the memory search).
//!
//! * [`converge`] — the convergence detector every phase runs
//! * [`timing`] — phase lengths (normal and `--quick`) and verdict thresholds
//! * [`target`] — what the phases drive: [`SizingTarget`], implemented by a running hashd
//! * [`probe`] — one measurement and its record
//! * [`cpu`] — CPU saturation
//! * [`mem`] — the memory-footprint search
//! * [`upstream`] — upstream's memory-footprint search, on request (`search=upstream`)
//! * the hidden `__hashd-bench` command that drives it from the tests lives in `crate::testaid`

pub mod converge;
pub mod cpu;
pub mod mem;
pub mod phase;
pub mod probe;
pub mod target;
pub mod timing;

pub mod upstream;

#[cfg(test)]
mod prior_tests;
#[cfg(test)]
pub(crate) mod sim;
#[cfg(test)]
mod tests;

pub use phase::Phase;
pub use probe::ProbeRecord;
pub use target::{HashdTarget, Knobs, MemSource, Sample, SizingTarget, Tick, Watch};
pub use timing::{Thresholds, Timing};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// What to size and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizingOpts {
    /// Given rps_max (required with fake CPU load); `None` measures it.
    pub rps_max: Option<u32>,
    pub fake_cpu: bool,
    /// Footprint during CPU saturation (kept within memory so IO doesn't limit it).
    pub cpu_mem_frac: f64,
    pub timing: Timing,
    pub thresholds: Thresholds,
    /// What earlier searches found: where the memory search starts, its known upper end
    /// (see `mem`).
    pub mem_prior: mem::Prior,
    /// Given mem_frac: no memory search (as a given rps_max skips CPU saturation).
    pub mem_frac: Option<f64>,
    /// The memory search is upstream's ([`upstream`]), which takes no prior.
    pub upstream_search: bool,
}

impl SizingOpts {
    pub fn new(rps_max: Option<u32>, fake_cpu: bool, quick: bool) -> Self {
        SizingOpts {
            rps_max,
            fake_cpu,
            cpu_mem_frac: 0.2,
            timing: Timing::new(quick),
            thresholds: Thresholds::default(),
            mem_prior: mem::Prior::default(),
            mem_frac: None,
            upstream_search: false,
        }
    }
}

/// The bench's figures, settings and every probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizingResult {
    pub rps_max: u32,
    /// rps_max came from CPU saturation (false: given).
    pub rps_max_measured: bool,
    pub mem_frac: f64,
    /// size × mem_frac, bytes.
    pub mem_size: u64,
    pub size: u64,
    pub fake_cpu_load: bool,
    pub quick: bool,
    /// Seconds of measurement (sum over probes).
    pub measured_secs: u64,
    pub timing: Timing,
    pub thresholds: Thresholds,
    pub cpu_history: Vec<ProbeRecord>,
    pub mem_history: Vec<ProbeRecord>,
}

/// Runs CPU saturation (unless rps_max is given) and the memory search against `target`.
pub fn run(target: &mut dyn SizingTarget, opts: &SizingOpts) -> Result<SizingResult> {
    let mut cpu_history = Vec::new();
    let (rps_max, measured) = match opts.rps_max {
        Some(0) => bail!("rps_max must be positive"),
        Some(r) => (r, false),
        None if opts.fake_cpu => {
            bail!("fake CPU load needs a given rps_max (CPU saturation would measure sleeps)")
        }
        None => {
            let (r, _) = cpu::saturate(
                target,
                opts.cpu_mem_frac,
                &opts.timing,
                &opts.thresholds,
                &mut cpu_history,
            )?;
            (r, true)
        }
    };
    let mut mem_history = Vec::new();
    if opts.upstream_search && opts.mem_prior != mem::Prior::default() {
        bail!("upstream's memory search takes no hint or ceiling");
    }
    let mem_frac = match opts.mem_frac {
        Some(f) => f,
        None if opts.upstream_search => {
            upstream::search(target, rps_max, &opts.timing, &mut mem_history)?
        }
        None => mem::search_near(
            target,
            rps_max,
            &opts.timing,
            &opts.thresholds,
            &mut mem_history,
            opts.mem_prior,
        )?,
    };
    let size = target.size();
    let mem_size = (size as f64 * mem_frac).round() as u64;
    log::info!(
        "sizing result: footprint {} ({:.1}%), rps_max {}",
        crate::units::format_size(mem_size as f64),
        mem_frac * 100.0,
        rps_max
    );
    let measured_secs = cpu_history
        .iter()
        .chain(&mem_history)
        .map(|r| r.secs as u64)
        .sum();
    Ok(SizingResult {
        rps_max,
        rps_max_measured: measured,
        mem_frac,
        mem_size,
        size,
        fake_cpu_load: opts.fake_cpu,
        quick: opts.timing.quick,
        measured_secs,
        timing: opts.timing,
        thresholds: opts.thresholds,
        cpu_history,
        mem_history,
    })
}
