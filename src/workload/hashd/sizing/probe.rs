//! One measurement: set the knobs, feed the detector a sample a second until it is done (or an
//! early-exit rule fires), and keep what was seen as a [`ProbeRecord`] for the result history.

use super::converge::{ConvergeCfg, Detector};
use super::phase::Phase;
use super::target::{Knobs, SizingTarget};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Memory usage is the largest of this many newest samples (upstream's window).
const MEM_WINDOW: usize = 10;

/// Why a probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    Converged,
    MaxDur,
    HighEnough,
    TooLow,
}

/// Early-exit rules of a memory probe (benches-doc/hashd.md), relative to `rps_max`, checked once a
/// window and `after` seconds have passed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Early {
    pub rps_max: f64,
    /// No early exit before this second (upstream: one window). A footprint that has just
    /// grown takes seconds to be touched and to push pages out; before that the RPS still
    /// reads as the smaller footprint's.
    pub after: u32,
    /// Rising and above this share: passed.
    pub high_enough: Option<f64>,
    /// Falling and below this share after two windows: failed (not on rotational devices).
    pub too_low: Option<f64>,
}

/// A finished probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    pub phase: Phase,
    pub mem_frac: f64,
    pub rps: f64,
    /// Controlled latency, seconds.
    pub lat: f64,
    /// rps / rps_max (memory phases) — 0 when no reference yet.
    pub ratio: f64,
    pub converged: bool,
    pub end: End,
    pub secs: u32,
    /// When the probe started (unix seconds).
    #[serde(default)]
    pub start: u64,
    /// Largest memory usage of the last seconds, bytes.
    pub mem_bytes: u64,
    /// Pass/fail as the phase judged it (None for CPU rounds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pass: Option<bool>,
}

/// Runs one probe.
pub fn measure(
    target: &mut dyn SizingTarget,
    phase: Phase,
    knobs: &Knobs,
    cfg: &ConvergeCfg,
    early: Option<Early>,
) -> Result<ProbeRecord> {
    let cfg = cfg.for_device(target.rotational());
    target.begin(phase, knobs)?;
    let start = crate::util::now();
    let mut det = Detector::new(cfg);
    let mut mem: VecDeque<u64> = VecDeque::new();
    let mut end = End::MaxDur;
    while !det.done() {
        let s = target.next_sample()?;
        mem.push_back(s.mem_bytes);
        if mem.len() > MEM_WINDOW {
            mem.pop_front();
        }
        let Some(p) = det.tick(s.lat_ctl, s.rps) else {
            continue;
        };
        log::debug!("[{:?} {:.3}] {}", phase, knobs.mem_frac, det.line(&p));
        if let Some(e) = early {
            let period = cfg.period as u32;
            if p.t >= period.max(e.after) {
                if e.high_enough
                    .is_some_and(|h| p.streak > 0 && p.rps > h * e.rps_max)
                {
                    end = End::HighEnough;
                    break;
                }
                if !target.rotational()
                    && p.t >= 2 * period
                    && e.too_low
                        .is_some_and(|l| p.streak < 0 && p.rps < l * e.rps_max)
                {
                    end = End::TooLow;
                    break;
                }
            }
        }
    }
    let o = det.outcome();
    if end == End::MaxDur && det.secs() < cfg.max_dur {
        end = End::Converged;
    }
    let ratio = match early {
        Some(e) if e.rps_max > 0.0 => o.rps / e.rps_max,
        _ => 0.0,
    };
    Ok(ProbeRecord {
        phase,
        mem_frac: knobs.mem_frac,
        rps: o.rps,
        lat: o.lat,
        ratio,
        converged: o.converged,
        end,
        secs: det.secs(),
        start,
        mem_bytes: mem.iter().copied().max().unwrap_or(0),
        pass: None,
    })
}
