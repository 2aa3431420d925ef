//! What the sizing phases drive: [`SizingTarget`], implemented by a running [`Hashd`]
//! ([`HashdTarget`]) and, in tests, by a simulated device (`sim`).

use super::phase::Phase;
use crate::report::model::Timestamp;
use crate::report::reporter::SharedReport;
use crate::system::cgroup::CgroupFs;
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
    /// The workload's memory in swap, bytes (0 when unknown).
    pub swap_bytes: u64,
}

/// A workload the sizing bench can steer and watch.
pub trait SizingTarget {
    /// Applies `knobs` (takes effect within about a second).
    fn set(&mut self, knobs: &Knobs) -> Result<()>;
    /// A probe of `phase` starts with `knobs`: applies them. Targets that report what the bench
    /// is doing override it to note the phase.
    fn begin(&mut self, _phase: Phase, knobs: &Knobs) -> Result<()> {
        self.set(knobs)
    }
    /// An unjudged warm-up (before the memory search) or recovery (after a failed probe)
    /// starts with `knobs`. Targets with a latency controller override it to loosen the
    /// latency target meanwhile (see [`WARMUP_LAT_MULT`]); the next [`SizingTarget::begin`]
    /// restores it.
    fn begin_warm_up(&mut self, knobs: &Knobs) -> Result<()> {
        self.begin(Phase::MemPrep, knobs)
    }
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

/// The latency target is this many times looser while warming up or recovering. A cold
/// workload (empty anon area, page cache not yet read, or hot pages in swap after a footprint
/// it couldn't sustain) misses its latency target, and the latency controller then pins
/// concurrency near 1 and lets it grow only a few percent a second: warming up took 40 s or
/// more under emulation. These phases only have to fill the caches, so latency needn't steer
/// them; the probes after them run with the real target.
pub const WARMUP_LAT_MULT: f64 = 10.0;

/// Where a [`HashdTarget`] reads the workload's memory from.
#[derive(Debug, Clone)]
pub enum MemSource {
    /// hashd's resident set (page cache isn't in it): for runs outside cgroups.
    Rss,
    /// `memory.current` of hashd's cgroup (`cg` below `fs`): anon, page cache and kernel
    /// memory.
    Cgroup { fs: CgroupFs, cg: String },
}

/// What a probe is doing, handed to the [`Watch`] hook with every sample.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    pub phase: Phase,
    pub sample: Sample,
    /// The probed footprint (size × mem_frac), bytes.
    pub probe_size: u64,
    /// When the probe started (unix seconds).
    pub probe_at: f64,
}

impl Tick {
    /// Shows the second's status: `{rps} rps, {latency} ms` and the caller's `extra`, as the
    /// progress status, and in the debug log with the phase and the probed footprint.
    pub fn show(&self, extra: &str) {
        let status = format!(
            "{:.1} rps, {:.1} ms{}",
            self.sample.rps,
            self.sample.lat_ctl * 1000.0,
            extra
        );
        log::debug!(
            "[{}] {}: {}",
            self.phase.name(),
            crate::units::format_size(self.probe_size as f64),
            status
        );
        crate::logging::progress::status(status);
    }
}

/// Called once a second with the newest sample; an error aborts the bench.
pub type Watch = Box<dyn FnMut(&Tick) -> Result<()>>;

/// A running hashd as a sizing target: knobs go into its params file on top of `base`,
/// samples come from its status file, memory from [`MemSource`]. With a reporter's shared
/// state, every sample also becomes the reports' hashd entry (with the bench phase and probe).
pub struct HashdTarget {
    pub hashd: Hashd,
    pub base: Params,
    pub size: u64,
    pub rotational: bool,
    pub mem: MemSource,
    /// The reporter's shared state and the name hashd goes by in the reports.
    pub report: Option<(SharedReport, String)>,
    pub watch: Option<Watch>,
    last_ts: Option<f64>,
    phase: Phase,
    probe_size: u64,
    probe_at: f64,
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
            mem: MemSource::Rss,
            report: None,
            watch: None,
            last_ts: None,
            phase: Phase::MemUp,
            probe_size: 0,
            probe_at: 0.0,
        }
    }

    /// The kernel's OOM kills in hashd's cgroup (0 outside one).
    fn oom_kills(&self) -> u64 {
        match &self.mem {
            MemSource::Rss => 0,
            MemSource::Cgroup { fs, cg } => fs.oom_kills(cg),
        }
    }

    fn mem_bytes(&self) -> u64 {
        match &self.mem {
            MemSource::Rss => self.rss(),
            // The cgroup exists while hashd runs in it; a failed read counts as 0 rather
            // than aborting the probe.
            MemSource::Cgroup { fs, cg } => fs.read_memory_current(cg).unwrap_or(0),
        }
    }

    fn swap_bytes(&self) -> u64 {
        match &self.mem {
            MemSource::Rss => 0,
            MemSource::Cgroup { fs, cg } => fs.read_swap_current(cg).unwrap_or(0),
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

    /// Puts hashd's status, with the bench phase and probe, into the reports.
    fn publish(&mut self) {
        let Some((shared, svc)) = &self.report else {
            return;
        };
        let mut rep = self.hashd.report(svc);
        rep.phase = self.phase.name().to_string();
        rep.mem_probe_size = self.probe_size;
        rep.mem_probe_at = Timestamp::from_unix(self.probe_at);
        if let Ok(mut sh) = shared.lock() {
            sh.hashd[0] = rep;
        }
    }
}

impl HashdTarget {
    fn params(&self, k: &Knobs) -> Params {
        let mut p = self.base.clone();
        p.mem_frac = k.mem_frac.clamp(0.0, 1.0);
        p.rps_target = k.rps_target.max(1);
        p.rps_max = k.rps_max;
        if k.uniform {
            p.file_addr_stdev_ratio = 100.0;
            p.anon_addr_stdev_ratio = 100.0;
        }
        p
    }

    fn note_probe(&mut self, phase: Phase, knobs: &Knobs) {
        self.phase = phase;
        self.probe_size = (self.size as f64 * knobs.mem_frac.clamp(0.0, 1.0)) as u64;
        self.probe_at = Timestamp::now().unix_secs();
    }
}

impl SizingTarget for HashdTarget {
    fn set(&mut self, k: &Knobs) -> Result<()> {
        let p = self.params(k);
        self.hashd.set_params(&p)
    }

    fn begin(&mut self, phase: Phase, knobs: &Knobs) -> Result<()> {
        self.note_probe(phase, knobs);
        self.set(knobs)
    }

    fn begin_warm_up(&mut self, knobs: &Knobs) -> Result<()> {
        self.note_probe(Phase::MemPrep, knobs);
        let mut p = self.params(knobs);
        p.lat_target *= WARMUP_LAT_MULT;
        self.hashd.set_params(&p)
    }

    fn next_sample(&mut self) -> Result<Sample> {
        let start = Instant::now();
        loop {
            if let Ok(st) = self.hashd.status() {
                let ts = st.timestamp.unix_secs();
                if self.last_ts.is_none_or(|l| ts > l) {
                    self.last_ts = Some(ts);
                    let sample = Sample {
                        rps: st.stat.rps,
                        lat_ctl: st.stat.lat.ctl,
                        lat_p95: st.stat.lat.p95,
                        mem_bytes: self.mem_bytes(),
                        swap_bytes: self.swap_bytes(),
                    };
                    self.publish();
                    let tick = Tick {
                        phase: self.phase,
                        sample,
                        probe_size: self.probe_size,
                        probe_at: self.probe_at,
                    };
                    if let Some(w) = &mut self.watch {
                        w(&tick)?;
                    }
                    return Ok(sample);
                }
            }
            if let Some(why) = self.hashd.ended(self.oom_kills()) {
                bail!("{}", why);
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
