//! The storage properties (benches-doc/storage.md): their shape, typed values and rules.

use crate::bench::contract::api::{prop, PropDesc, SpecError, ValueKind, APPLY_COMMIT};
use crate::bench::hashd_sizing::{positive_knob, AsUpstream, HASHD_KNOBS, SEARCH};
use crate::spec::JobSpec;

pub const DFL_HASH_SIZE: f64 = 1258291.0;
pub const DFL_LOG_BPS: f64 = 1100794.0;
pub const DFL_LOOPS: u32 = 3;

pub const PROPS: [PropDesc; 13] = [
    APPLY_COMMIT[0],
    APPLY_COMMIT[1],
    prop("loops", ValueKind::Int, "number of measurements to average"),
    HASHD_KNOBS[0],
    HASHD_KNOBS[1],
    HASHD_KNOBS[2],
    HASHD_KNOBS[3],
    HASHD_KNOBS[4],
    HASHD_KNOBS[5],
    SEARCH,
    prop(
        "mem-avail-err-max",
        ValueKind::Frac,
        "tolerated error of the memory usage estimate",
    ),
    prop(
        "mem-avail-inner-retries",
        ValueKind::Int,
        "retries that keep mem-avail",
    ),
    prop(
        "mem-avail-outer-retries",
        ValueKind::Int,
        "retries that re-estimate mem-avail",
    ),
];

#[derive(Debug, Clone, PartialEq)]
pub struct StorageProps {
    pub apply: bool,
    pub commit: bool,
    pub loops: u32,
    /// `None`: the fake-CPU rate for the memory share.
    pub rps_max: Option<u32>,
    pub hash_size: u64,
    pub chunk_pages: u32,
    pub log_bps: u64,
    /// `requests`, `flow` and `search`: which of hashd's behaviours are upstream's.
    pub upstream: AsUpstream,
    pub err_max: f64,
    pub inner_retries: u32,
    pub outer_retries: u32,
    /// Where the memory searches start, mem_frac (set by iocost-qos, not a spec property).
    pub hint: Option<f64>,
    /// A loop after the first starts next to the footprint the loops before it found (iocost-
    /// qos's `mof-hint` on a configuration with several loops, not a spec property).
    pub hint_loops: bool,
    /// Stop the loops once the last two footprints agree within this fraction (iocost-qos's
    /// `early-stop`, not a spec property).
    pub stop_agree: Option<f64>,
    /// A footprint a configuration at least as capable failed (iocost-qos's `mof-ceiling`,
    /// not a spec property); used when this run measures with the same memory.
    pub ceiling: Option<super::record::Ceiling>,
}

fn clamp_u32(v: u64) -> u32 {
    v.min(u32::MAX as u64) as u32
}

impl StorageProps {
    /// The values of `spec` with their defaults, as a stored spec is reported (no rules).
    /// `prefix` reads them from a parent bench's forwarded keys (`storage-` in iocost-qos).
    pub fn read_prefixed(spec: &JobSpec, prefix: &str) -> Result<StorageProps, SpecError> {
        let g = spec.group(0);
        let key = |k: &str| format!("{}{}", prefix, k);
        let int = |k: &str| g.u64(&key(k), ValueKind::Int);
        let size = |k: &str| g.u64(&key(k), ValueKind::Size);
        let commit = g.flag(&key("commit"))?.unwrap_or(false);
        Ok(StorageProps {
            apply: g.flag(&key("apply"))?.unwrap_or(false) || commit,
            commit,
            loops: int("loops")?.map_or(DFL_LOOPS, clamp_u32),
            rps_max: int("rps-max")?.map(clamp_u32),
            hash_size: size("hash-size")?.unwrap_or(DFL_HASH_SIZE as u64),
            chunk_pages: int("chunk-pages")?.map_or(25, clamp_u32),
            log_bps: size("log-bps")?.unwrap_or(DFL_LOG_BPS as u64),
            upstream: AsUpstream::read(&g, prefix)?,
            err_max: g
                .f64(&key("mem-avail-err-max"), ValueKind::Frac)?
                .unwrap_or(0.1),
            inner_retries: int("mem-avail-inner-retries")?.map_or(2, clamp_u32),
            outer_retries: int("mem-avail-outer-retries")?.map_or(2, clamp_u32),
            hint: None,
            hint_loops: false,
            stop_agree: None,
            ceiling: None,
        })
    }

    pub fn read(spec: &JobSpec) -> Result<StorageProps, SpecError> {
        Self::read_prefixed(spec, "")
    }

    /// The values of a spec to run: at least one loop, and no hashd knob given as zero.
    pub fn check(spec: &JobSpec) -> Result<StorageProps, SpecError> {
        spec.group(0).nonzero("loops", ValueKind::Int)?;
        Self::check_prefixed(spec, "")
    }

    /// The hashd knobs' rules for keys forwarded with `prefix` (iocost-qos's `storage-`).
    pub fn check_prefixed(spec: &JobSpec, prefix: &str) -> Result<StorageProps, SpecError> {
        let g = spec.group(0);
        for (k, kind) in [
            ("rps-max", ValueKind::Int),
            ("hash-size", ValueKind::Size),
            ("chunk-pages", ValueKind::Int),
        ] {
            positive_knob(&g, &format!("{}{}", prefix, k), kind, "use the default")?;
        }
        Self::read_prefixed(spec, prefix)
    }
}
