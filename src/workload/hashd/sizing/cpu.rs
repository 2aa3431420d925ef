//! CPU saturation (benches-doc/hashd.md): with real hashing, uniform addresses and no RPS cap, the
//! latency controller alone limits hashd; the converged RPS of a round whose latency sits at
//! the target is rps_max.

use super::phase::Phase;
use super::probe::{measure, ProbeRecord};
use super::target::{Knobs, SizingTarget};
use super::timing::{Thresholds, Timing};
use anyhow::Result;

/// Runs up to `timing.cpu_rounds` rounds; returns rps_max (never 0) and whether a round was
/// accepted.
pub fn saturate(
    target: &mut dyn SizingTarget,
    mem_frac: f64,
    timing: &Timing,
    th: &Thresholds,
    hist: &mut Vec<ProbeRecord>,
) -> Result<(u32, bool)> {
    let knobs = Knobs {
        mem_frac,
        rps_target: u32::MAX,
        rps_max: 0,
        uniform: true,
    };
    let lat_target = target.lat_target();
    let mut last = 0.0;
    for round in 1..=timing.cpu_rounds {
        crate::logging::progress::step(format!("CPU saturation round {}", round));
        let rec = measure(target, Phase::CpuSat, &knobs, &timing.cpu, None)?;
        let lat_err = (rec.lat - lat_target) / lat_target;
        log::info!(
            "CPU saturation round {}: {:.1} rps at {:.1} ms latency ({:+.1}% off the target), in {}s",
            round,
            rec.rps,
            rec.lat * 1000.0,
            lat_err * 100.0,
            rec.secs
        );
        last = rec.rps;
        let ok = lat_err.abs() <= th.cpu_lat_tol;
        hist.push(ProbeRecord {
            pass: Some(ok),
            ..rec
        });
        if ok {
            return Ok(((last.round() as u32).max(1), true));
        }
    }
    log::warn!(
        "CPU saturation: latency didn't settle at its target in {} rounds; using the last rps {:.1}",
        timing.cpu_rounds,
        last
    );
    Ok(((last.round() as u32).max(1), false))
}
