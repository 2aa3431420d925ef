//! The per-second report as stored in `report.d/<unix_sec>.json`.
//!
//! Field names follow upstream's agent reports wherever upstream has the field, so upstream
//! report directories can be studied and upstream tools can read ours. Every field has a
//! default: reports written by older or newer versions (or by upstream, which lacks our
//! additions) load with the missing parts empty.
//!
//! Our additions: `iolat_hist` (mergeable per-second latency histograms, see
//! [`super::hist`]), `iolat_unavailable` (the IO-latency source could not measure
//! per-IO latencies, so `iolat`/`iolat_cum` hold no percentiles) and `iolat_mean` (mean
//! latency per IO type of the second).

use super::hist::{LatHist, LAYOUT};
use chrono::{DateTime, FixedOffset, Local, TimeZone, Utc};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// Latency percentile labels of `iolat` / `iolat_cum` maps.
pub const IOLAT_PCTS: &[&str] = &[
    "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "99.9", "99.99", "99.999", "100",
];

/// IO types of the `iolat` maps.
pub const IO_TYPES: &[&str] = &["read", "write", "discard", "flush"];

/// The slices `mem_stat` / `io_stat` are filled for.
pub const STAT_SLICES: &[&str] = &["-.slice", "workload.slice", "system.slice"];

/// A wall-clock instant with sub-second precision, stored as RFC 3339 text
/// (`2024-05-01T12:00:03.512345678+02:00`). Also accepts a number of Unix seconds. The
/// default is the Unix epoch, which readers treat as "no timestamp".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub DateTime<FixedOffset>);

impl Default for Timestamp {
    fn default() -> Self {
        Timestamp(DateTime::<Utc>::UNIX_EPOCH.fixed_offset())
    }
}

impl Timestamp {
    pub fn now() -> Self {
        Timestamp(Local::now().fixed_offset())
    }

    /// From Unix seconds (fractional); out-of-range values give the epoch.
    pub fn from_unix(secs: f64) -> Self {
        if !secs.is_finite() {
            return Self::default();
        }
        let whole = secs.floor();
        let nanos = ((secs - whole) * 1e9).round().min(999_999_999.0) as u32;
        match Utc.timestamp_opt(whole as i64, nanos) {
            chrono::LocalResult::Single(t) => Timestamp(t.fixed_offset()),
            _ => Self::default(),
        }
    }

    /// Unix seconds with sub-second precision.
    pub fn unix_secs(&self) -> f64 {
        self.0.timestamp() as f64 + self.0.timestamp_subsec_nanos() as f64 / 1e9
    }

    /// Unix milliseconds (what upstream's study differences).
    pub fn unix_millis(&self) -> i64 {
        self.0.timestamp_millis()
    }

    pub fn is_epoch(&self) -> bool {
        self.0.timestamp() == 0 && self.0.timestamp_subsec_nanos() == 0
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp or Unix seconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Timestamp, E> {
                DateTime::parse_from_rfc3339(v)
                    .map(Timestamp)
                    .map_err(|e| E::custom(format!("bad timestamp {:?}: {}", v, e)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Timestamp, E> {
                Ok(Timestamp::from_unix(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Timestamp, E> {
                Ok(Timestamp::from_unix(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Timestamp, E> {
                Ok(Timestamp::from_unix(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

/// Declares a string-backed enum: known names map to variants, anything else is kept as
/// `Unknown(name)` so a report from a newer writer still loads.
macro_rules! name_enum {
    ($(#[$m:meta])* $name:ident { $($var:ident),* $(,)? } default $dfl:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum $name {
            $($var,)*
            Unknown(String),
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$dfl
            }
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$var => stringify!($var),)*
                    $name::Unknown(s) => s,
                }
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $(stringify!($var) => $name::$var,)*
                    _ => $name::Unknown(s.to_string()),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Ok($name::from(s.as_str()))
            }
        }
    };
}

name_enum!(
    /// What the runner was doing when the report was taken.
    RunnerState { Idle, Running, BenchHashd, BenchIoCost } default Idle
);

name_enum!(
    /// State of a service (process) a report refers to.
    SvcState { Running, Exited, Failed, Other } default Other
);

/// A service: its name (empty when it doesn't exist) and state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SvcReport {
    pub name: String,
    pub state: SvcState,
}

/// hashd latency percentiles over its last report interval (seconds); `ctl` is the latency
/// at the control percentile over hashd's last control period.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HashdLat {
    pub min: f64,
    pub p01: f64,
    pub p05: f64,
    pub p10: f64,
    pub p16: f64,
    pub p50: f64,
    pub p84: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
    pub p99_999: f64,
    pub max: f64,
    pub ctl: f64,
}

/// One hashd instance's state in a report. Filled by the workload layer; all zero when hashd
/// isn't running or its own report is stale.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HashdReport {
    pub svc: SvcReport,
    pub phase: String,
    /// `min(1, rps / rps_max)`.
    pub load: f64,
    pub rps: f64,
    /// The control percentile (0.95 by default).
    pub lat_pct: f64,
    pub lat: HashdLat,
    pub nr_in_flight: u64,
    /// Cumulative completed requests.
    pub nr_done: u64,
    pub nr_workers: u64,
    pub nr_idle_workers: u64,
    pub mem_probe_size: u64,
    pub mem_probe_at: Timestamp,
}

/// Resource usage of one cgroup (or the whole system for `-.slice`). Cumulative readings are
/// in seconds / bytes since they were first read; rates cover the interval since the previous
/// report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageReport {
    /// Busy fraction of all CPUs over the interval (0 … 1).
    pub cpu_util: f64,
    /// System-time fraction of all CPUs over the interval (0 … 1).
    pub cpu_sys: f64,
    /// Cumulative busy CPU seconds.
    pub cpu_usage: f64,
    /// Cumulative system CPU seconds.
    pub cpu_usage_sys: f64,
    /// Cumulative CPU seconds available (all CPUs, busy or not): the denominator of
    /// `cpu_usage` deltas.
    pub cpu_usage_base: f64,
    pub mem_bytes: u64,
    pub swap_bytes: u64,
    /// Swap this cgroup could still use (system free swap limited by swap.max on the path).
    pub swap_free: u64,
    /// Cumulative bytes read / written on the scratch device.
    pub io_rbytes: u64,
    pub io_wbytes: u64,
    pub io_rbps: u64,
    pub io_wbps: u64,
    /// Cumulative io.cost usage in seconds.
    pub io_usage: f64,
    /// io.cost usage over the interval (vtime seconds per second).
    pub io_util: f64,
    /// Cumulative (some, full) stall seconds.
    pub cpu_stalls: (f64, f64),
    pub mem_stalls: (f64, f64),
    pub io_stalls: (f64, f64),
    /// (some, full) pressure over the interval (0 … 1).
    pub cpu_pressures: (f64, f64),
    pub mem_pressures: (f64, f64),
    pub io_pressures: (f64, f64),
}

/// io.cost state of the scratch device in a report: `vrate` (percent, 100 = nominal; 0 when
/// iocost doesn't report it), model and QoS in the kernel's view — the shared io.cost layer.
pub type IoCostReport = crate::system::iocost::IoCostState;

/// `{io type → {latency pct label → seconds}}`.
pub type IoLatPcts = BTreeMap<String, BTreeMap<String, f64>>;

/// Per-second latency histograms per IO type, in the [`LAYOUT`] bucket layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoLatHists {
    pub layout: String,
    #[serde(default, skip_serializing_if = "LatHist::is_empty")]
    pub read: LatHist,
    #[serde(default, skip_serializing_if = "LatHist::is_empty")]
    pub write: LatHist,
    #[serde(default, skip_serializing_if = "LatHist::is_empty")]
    pub discard: LatHist,
    #[serde(default, skip_serializing_if = "LatHist::is_empty")]
    pub flush: LatHist,
}

impl Default for IoLatHists {
    fn default() -> Self {
        Self {
            layout: LAYOUT.to_string(),
            read: LatHist::default(),
            write: LatHist::default(),
            discard: LatHist::default(),
            flush: LatHist::default(),
        }
    }
}

impl IoLatHists {
    /// The histogram of an IO type (`read`, `write`, `discard`, `flush`).
    pub fn get(&self, io_type: &str) -> Option<&LatHist> {
        match io_type {
            "read" => Some(&self.read),
            "write" => Some(&self.write),
            "discard" => Some(&self.discard),
            "flush" => Some(&self.flush),
            _ => None,
        }
    }

    pub fn get_mut(&mut self, io_type: &str) -> Option<&mut LatHist> {
        match io_type {
            "read" => Some(&mut self.read),
            "write" => Some(&mut self.write),
            "discard" => Some(&mut self.discard),
            "flush" => Some(&mut self.flush),
            _ => None,
        }
    }

    /// Written in the layout this build understands.
    pub fn layout_known(&self) -> bool {
        self.layout == LAYOUT
    }

    /// The `iolat`-style percentile map of every IO type.
    pub fn pct_maps(&self) -> IoLatPcts {
        IO_TYPES
            .iter()
            .filter_map(|t| self.get(t).map(|h| (t.to_string(), h.pct_map(IOLAT_PCTS))))
            .collect()
    }

    pub fn merge(&mut self, other: &IoLatHists) {
        for t in IO_TYPES {
            if let (Some(a), Some(b)) = (self.get_mut(t), other.get(t)) {
                a.merge(b);
            }
        }
    }
}

/// An all-zero percentile map for every IO type (what upstream writes without IO).
pub fn zero_iolat() -> IoLatPcts {
    IO_TYPES
        .iter()
        .map(|t| {
            let pcts = IOLAT_PCTS.iter().map(|p| (p.to_string(), 0.0)).collect();
            (t.to_string(), pcts)
        })
        .collect()
}

/// One per-second report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Report {
    pub timestamp: Timestamp,
    /// Instance sequence number of the writer.
    pub seq: u64,
    pub state: RunnerState,
    /// hashd instances A and B.
    pub hashd: [HashdReport; 2],
    /// Per unit (`-.slice`, the slices, services we started).
    pub usages: BTreeMap<String, UsageReport>,
    /// `memory.stat` per slice of [`STAT_SLICES`].
    pub mem_stat: BTreeMap<String, BTreeMap<String, f64>>,
    /// The scratch device's `io.stat` keys per slice of [`STAT_SLICES`].
    pub io_stat: BTreeMap<String, BTreeMap<String, f64>>,
    /// `/proc/vmstat`.
    pub vmstat: BTreeMap<String, f64>,
    /// Completion-latency percentiles of this second per IO type.
    pub iolat: IoLatPcts,
    /// Completion-latency percentiles since the latency source started.
    pub iolat_cum: IoLatPcts,
    /// Ours: this second's latency histograms (absent in upstream reports and when the source
    /// can't measure per-IO latencies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iolat_hist: Option<IoLatHists>,
    /// Ours: the latency source can't measure per-IO latencies (counter fallback);
    /// `iolat`/`iolat_cum` then carry no percentiles.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub iolat_unavailable: bool,
    /// Ours: mean completion latency of this second per IO type with IO, seconds. Filled by
    /// every source; with the diskstats fallback it is the only latency figure.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub iolat_mean: BTreeMap<String, f64>,
    pub iocost: IoCostReport,
    pub swappiness: u32,
    pub zswap_enabled: bool,
}

impl Report {
    /// A report stamped now with upstream's zeroed latency maps.
    pub fn new(seq: u64, state: RunnerState) -> Self {
        Report {
            timestamp: Timestamp::now(),
            seq,
            state,
            iolat: zero_iolat(),
            iolat_cum: zero_iolat(),
            ..Default::default()
        }
    }

    /// The per-second percentile of `io_type` at latency label `pct`, if present.
    pub fn iolat_at(&self, io_type: &str, pct: &str) -> Option<f64> {
        self.iolat.get(io_type)?.get(pct).copied()
    }
}
