//! io.cost model and QoS: the one data layer shared by the kernel files, the persisted
//! parameters (`bench.json`), result-file sysinfo and records, and `--iocost-qos` overrides.
//!
//! Two JSON layouts exist for the same data. Sysinfo and per-second reports carry the kernel
//! view (`model {ctrl, model, rbps…}`, `qos {enable, ctrl, rpct…}`), which is what the types
//! serialize to by default; bench.json and bench records carry only the parameters, which the
//! [`model_params`] / [`qos_params`] serde adapters write. Both layouts read into the same
//! types. QoS floats are kept rounded to 2 decimals, as the kernel does.

use super::cgroup::{nested_num, parse_io_stat, parse_nested_keyed, read_file, write_file};
use super::cgroup::{DevNr, KernelFileError};
use super::change_journal::ChangeJournal;
use super::HostPaths;
use crate::error::UsageError;
use crate::units::parse::{parse_float, parse_int};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Rounds to 2 decimals, the precision the kernel keeps for percentiles and vrates.
pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// io.cost model parameters (bytes/s and IOPS at vrate 100%). `ctrl` (`auto`/`user`) and
/// `model` (`linear`) only come from the kernel file; they're empty in parameter files.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostModel {
    pub ctrl: String,
    pub model: String,
    pub rbps: u64,
    pub rseqiops: u64,
    pub rrandiops: u64,
    pub wbps: u64,
    pub wseqiops: u64,
    pub wrandiops: u64,
}

impl IoCostModel {
    /// `rbps=… rseqiops=… rrandiops=…` and `wbps=… wseqiops=… wrandiops=…`.
    pub fn lines(&self) -> (String, String) {
        (
            format!(
                "rbps={} rseqiops={} rrandiops={}",
                self.rbps, self.rseqiops, self.rrandiops
            ),
            format!(
                "wbps={} wseqiops={} wrandiops={}",
                self.wbps, self.wseqiops, self.wrandiops
            ),
        )
    }

    /// The six parameters in kernel-file order.
    pub fn params(&self) -> [(&'static str, u64); 6] {
        [
            ("rbps", self.rbps),
            ("rseqiops", self.rseqiops),
            ("rrandiops", self.rrandiops),
            ("wbps", self.wbps),
            ("wseqiops", self.wseqiops),
            ("wrandiops", self.wrandiops),
        ]
    }

    /// Same parameters, ignoring `ctrl`/`model`.
    pub fn same_params(&self, other: &IoCostModel) -> bool {
        self.params() == other.params()
    }
}

/// io.cost QoS parameters. `enable` and `ctrl` only come from the kernel file (parameter files
/// leave them 0/empty); percentiles and vrates are rounded to 2 decimals, latencies are µs.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostQos {
    pub enable: u32,
    pub ctrl: String,
    pub rpct: f64,
    pub rlat: u64,
    pub wpct: f64,
    pub wlat: u64,
    pub min: f64,
    pub max: f64,
}

impl IoCostQos {
    /// `rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 min=60.00 max=100.00`.
    pub fn line(&self) -> String {
        format!(
            "rpct={:.2} rlat={} wpct={:.2} wlat={} min={:.2} max={:.2}",
            self.rpct, self.rlat, self.wpct, self.wlat, self.min, self.max
        )
    }

    /// The same QoS with the floats rounded to 2 decimals.
    pub fn rounded(&self) -> IoCostQos {
        IoCostQos {
            rpct: round2(self.rpct),
            wpct: round2(self.wpct),
            min: round2(self.min),
            max: round2(self.max),
            ..self.clone()
        }
    }

    /// Same parameters after rounding, ignoring `enable`/`ctrl`.
    pub fn same_params(&self, other: &IoCostQos) -> bool {
        let (a, b) = (self.rounded(), other.rounded());
        (a.rpct, a.rlat, a.wpct, a.wlat, a.min, a.max)
            == (b.rpct, b.rlat, b.wpct, b.wlat, b.min, b.max)
    }
}

/// Serde adapter writing an [`IoCostModel`] as the six parameters only (bench.json, records).
pub mod model_params {
    use super::IoCostModel;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Params {
        rbps: u64,
        rseqiops: u64,
        rrandiops: u64,
        wbps: u64,
        wseqiops: u64,
        wrandiops: u64,
    }

    pub fn serialize<S: Serializer>(m: &IoCostModel, s: S) -> Result<S::Ok, S::Error> {
        Params {
            rbps: m.rbps,
            rseqiops: m.rseqiops,
            rrandiops: m.rrandiops,
            wbps: m.wbps,
            wseqiops: m.wseqiops,
            wrandiops: m.wrandiops,
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<IoCostModel, D::Error> {
        IoCostModel::deserialize(d)
    }
}

/// Serde adapter writing an [`IoCostQos`] as the six parameters only; reading rounds.
pub mod qos_params {
    use super::{round2, IoCostQos};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Params {
        rpct: f64,
        rlat: u64,
        wpct: f64,
        wlat: u64,
        min: f64,
        max: f64,
    }

    pub fn serialize<S: Serializer>(q: &IoCostQos, s: S) -> Result<S::Ok, S::Error> {
        Params {
            rpct: round2(q.rpct),
            rlat: q.rlat,
            wpct: round2(q.wpct),
            wlat: q.wlat,
            min: round2(q.min),
            max: round2(q.max),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<IoCostQos, D::Error> {
        Ok(IoCostQos::deserialize(d)?.rounded())
    }
}

/// The io.cost parameters of a device as bench.json and iocost-params records hold them.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostKnobs {
    /// `MAJ:MIN`; empty when never benchmarked.
    pub devnr: String,
    #[serde(with = "model_params")]
    pub model: IoCostModel,
    #[serde(with = "qos_params")]
    pub qos: IoCostQos,
    /// Ours: the model was measured with upstream's fio job shapes (`iocost-params:
    /// jobs=upstream`); left out when not, so the section reads as upstream's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub upstream_jobs: bool,
    /// Ours: the model was measured by fio's libaio engine, as upstream's script measures it
    /// (`iocost-params:engine=fio`), not by ours; left out when not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fio_engine: bool,
}

/// The kernel's io.cost state of a device, as reports and sysinfo carry it.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoCostState {
    pub vrate: f64,
    pub model: IoCostModel,
    pub qos: IoCostQos,
}

/// What can go wrong with io.cost that a user has to act on.
#[derive(Debug, thiserror::Error)]
pub enum IoCostError {
    #[error(
        "--iocost-from-sys: iocost is not enabled for device {devnr} in {} \
         (enable it, or drop --iocost-from-sys to use bench.json)",
        path.display()
    )]
    DisabledForFromSys { devnr: DevNr, path: PathBuf },
}

fn model_path(paths: &HostPaths) -> PathBuf {
    paths.cgroup().join("io.cost.model")
}

fn qos_path(paths: &HostPaths) -> PathBuf {
    paths.cgroup().join("io.cost.qos")
}

fn device_line(
    path: &Path,
    text: &str,
    devnr: DevNr,
) -> Result<Option<BTreeMap<String, String>>, KernelFileError> {
    Ok(parse_nested_keyed(path, text)?.remove(&devnr.to_string()))
}

fn text_field(
    path: &Path,
    key: &str,
    kv: &BTreeMap<String, String>,
    field: &str,
) -> Result<String, KernelFileError> {
    kv.get(field)
        .cloned()
        .ok_or_else(|| KernelFileError::Missing {
            path: path.to_path_buf(),
            msg: format!("the {} line has no {}=", key, field),
        })
}

/// Parses io.cost.model text for `devnr`: no line for the device gives all zero/empty, a line
/// missing a key is an error.
pub fn parse_model(path: &Path, text: &str, devnr: DevNr) -> Result<IoCostModel, KernelFileError> {
    let Some(kv) = device_line(path, text, devnr)? else {
        return Ok(IoCostModel::default());
    };
    let key = devnr.to_string();
    let num = |f: &str| nested_num::<u64>(path, &key, &kv, f);
    Ok(IoCostModel {
        ctrl: text_field(path, &key, &kv, "ctrl")?,
        model: text_field(path, &key, &kv, "model")?,
        rbps: num("rbps")?,
        rseqiops: num("rseqiops")?,
        rrandiops: num("rrandiops")?,
        wbps: num("wbps")?,
        wseqiops: num("wseqiops")?,
        wrandiops: num("wrandiops")?,
    })
}

/// Parses io.cost.qos text for `devnr` like [`parse_model`]; floats come back rounded.
pub fn parse_qos(path: &Path, text: &str, devnr: DevNr) -> Result<IoCostQos, KernelFileError> {
    let Some(kv) = device_line(path, text, devnr)? else {
        return Ok(IoCostQos::default());
    };
    let key = devnr.to_string();
    let float = |f: &str| nested_num::<f64>(path, &key, &kv, f).map(round2);
    let int = |f: &str| nested_num::<u64>(path, &key, &kv, f);
    Ok(IoCostQos {
        enable: int("enable")? as u32,
        ctrl: text_field(path, &key, &kv, "ctrl")?,
        rpct: float("rpct")?,
        rlat: int("rlat")?,
        wpct: float("wpct")?,
        wlat: int("wlat")?,
        min: float("min")?,
        max: float("max")?,
    })
}

/// The root `io.cost.model` entry of `devnr`.
pub fn read_model(paths: &HostPaths, devnr: DevNr) -> Result<IoCostModel, KernelFileError> {
    let path = model_path(paths);
    parse_model(&path, &read_file(&path)?, devnr)
}

/// The root `io.cost.qos` entry of `devnr`.
pub fn read_qos(paths: &HostPaths, devnr: DevNr) -> Result<IoCostQos, KernelFileError> {
    let path = qos_path(paths);
    parse_qos(&path, &read_file(&path)?, devnr)
}

/// `cost.vrate` of `devnr` in the root `io.stat` (percent; 0 when iocost doesn't report it).
pub fn read_vrate(paths: &HostPaths, devnr: DevNr) -> Result<f64, KernelFileError> {
    let path = paths.cgroup().join("io.stat");
    let stat = parse_io_stat(&path, &read_file(&path)?)?;
    Ok(stat
        .get(&devnr)
        .and_then(|kv| kv.get("cost.vrate"))
        .copied()
        .unwrap_or(0.0))
}

/// vrate, model and QoS of `devnr`, as a report snapshot.
pub fn read_state(paths: &HostPaths, devnr: DevNr) -> Result<IoCostState, KernelFileError> {
    Ok(IoCostState {
        vrate: read_vrate(paths, devnr)?,
        model: read_model(paths, devnr)?,
        qos: read_qos(paths, devnr)?,
    })
}

/// `--iocost-from-sys`: the kernel's model and QoS for `devnr`; iocost must be enabled there.
pub fn knobs_from_sys(paths: &HostPaths, devnr: DevNr) -> anyhow::Result<IoCostKnobs> {
    let qos = read_qos(paths, devnr)?;
    if qos.enable == 0 {
        let e = IoCostError::DisabledForFromSys {
            devnr,
            path: qos_path(paths),
        };
        return Err(UsageError::new(e.to_string()).into());
    }
    Ok(IoCostKnobs {
        devnr: devnr.to_string(),
        model: read_model(paths, devnr)?,
        qos: qos.rounded(),
        upstream_jobs: false,
        fio_engine: false,
    })
}

/// `MAJ:MIN model=linear rbps=… rseqiops=… rrandiops=… wbps=… wseqiops=… wrandiops=…`.
pub fn model_line(devnr: DevNr, m: &IoCostModel) -> String {
    let mut s = format!("{} model=linear", devnr);
    for (k, v) in m.params() {
        s += &format!(" {}={}", k, v);
    }
    s
}

/// `MAJ:MIN rpct=%.2f rlat=%d wpct=%.2f wlat=%d min=%.2f max=%.2f`.
pub fn qos_line(devnr: DevNr, q: &IoCostQos) -> String {
    format!("{} {}", devnr, q.rounded().line())
}

/// `MAJ:MIN enable=0|1`.
pub fn enable_line(devnr: DevNr, on: bool) -> String {
    format!("{} enable={}", devnr, on as u32)
}

/// The io.cost.model write that brings back `cur` (`ctrl=auto`, or the user parameters).
pub fn restore_model_line(devnr: DevNr, cur: &IoCostModel) -> String {
    if cur.ctrl == "user" {
        format!(
            "{} ctrl=user {}",
            devnr,
            model_line(devnr, cur)
                .split_once(' ')
                .map_or("", |(_, rest)| rest)
        )
    } else {
        format!("{} ctrl=auto", devnr)
    }
}

/// The io.cost.qos write that brings back `cur`. Any parameter after `ctrl=auto` would switch
/// the kernel back to user control, so the auto form carries none.
pub fn restore_qos_line(devnr: DevNr, cur: &IoCostQos) -> String {
    if cur.ctrl == "user" {
        format!(
            "{} enable={} ctrl=user {}",
            devnr,
            cur.enable,
            cur.rounded().line()
        )
    } else {
        format!("{} enable={} ctrl=auto", devnr, cur.enable)
    }
}

/// Reads `devnr`'s current state from `path` with `parse`; unless `unchanged` says it is
/// already what we want, journals the write that restores it (`restore`) and then writes
/// `line`. Returns whether it wrote.
fn update<T>(
    path: &Path,
    devnr: DevNr,
    parse: fn(&Path, &str, DevNr) -> Result<T, KernelFileError>,
    unchanged: impl FnOnce(&T) -> bool,
    restore: fn(DevNr, &T) -> String,
    line: &str,
    journal: &mut dyn ChangeJournal,
) -> anyhow::Result<bool> {
    let cur = parse(path, &read_file(path)?, devnr)?;
    if unchanged(&cur) {
        return Ok(false);
    }
    journal.record(path, &restore(devnr, &cur))?;
    write_file(path, line)?;
    Ok(true)
}

/// Writes `model` for `devnr` unless the kernel already has exactly it under user control;
/// the journal first gets the write that restores the current state. Returns whether it wrote.
pub fn write_model(
    paths: &HostPaths,
    devnr: DevNr,
    model: &IoCostModel,
    journal: &mut dyn ChangeJournal,
) -> anyhow::Result<bool> {
    update(
        &model_path(paths),
        devnr,
        parse_model,
        |cur| cur.ctrl == "user" && cur.same_params(model),
        restore_model_line,
        &model_line(devnr, model),
        journal,
    )
}

/// Writes the QoS parameters of `qos` (not `enable`) for `devnr`, like [`write_model`].
pub fn write_qos(
    paths: &HostPaths,
    devnr: DevNr,
    qos: &IoCostQos,
    journal: &mut dyn ChangeJournal,
) -> anyhow::Result<bool> {
    update(
        &qos_path(paths),
        devnr,
        parse_qos,
        |cur| cur.ctrl == "user" && cur.same_params(qos),
        restore_qos_line,
        &qos_line(devnr, qos),
        journal,
    )
}

/// Turns iocost on or off for `devnr`. Returns whether it wrote.
pub fn set_enable(
    paths: &HostPaths,
    devnr: DevNr,
    on: bool,
    journal: &mut dyn ChangeJournal,
) -> anyhow::Result<bool> {
    update(
        &qos_path(paths),
        devnr,
        parse_qos,
        |cur| (cur.enable != 0) == on,
        restore_qos_line,
        &enable_line(devnr, on),
        journal,
    )
}

/// The slowest device we accept as a benchmark target, per model parameter (spec: 125 MiB/s,
/// 280 IOPS).
pub const ABS_MIN_IO_PERF: IoCostModel = IoCostModel {
    ctrl: String::new(),
    model: String::new(),
    rbps: 125 << 20,
    rseqiops: 280,
    rrandiops: 280,
    wbps: 125 << 20,
    wseqiops: 280,
    wrandiops: 280,
};

/// The vrate (percent, 2 decimals) below which `model` would be slower than
/// [`ABS_MIN_IO_PERF`] in some parameter. Zero parameters (an unset model) are skipped.
pub fn abs_min_vrate(model: &IoCostModel) -> f64 {
    let ratio = ABS_MIN_IO_PERF
        .params()
        .iter()
        .zip(model.params().iter())
        .filter(|(_, (_, m))| *m > 0)
        .map(|((_, min), (_, m))| *min as f64 / *m as f64)
        .fold(0.0, f64::max);
    round2(ratio * 100.0)
}

/// A QoS configuration relative to a base: `off` turns iocost off; `None` fields keep the
/// base's value. Used by `--iocost-qos` and by the iocost-qos bench, whose records store it as
/// `ovr: {"off", "rpct", "rlat", "wpct", "wlat", "min", "max"}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QosOverride {
    pub off: bool,
    pub rpct: Option<f64>,
    pub rlat: Option<u64>,
    pub wpct: Option<f64>,
    pub wlat: Option<u64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

pub const QOS_KEYS: &[&str] = &["rpct", "rlat", "wpct", "wlat", "min", "max", "vrate"];

/// The vrate range (%) the kernel takes for `min` and `max` (it clamps others into it).
pub const VRATE_PCT_MIN: f64 = 1.0;
pub const VRATE_PCT_MAX: f64 = 10000.0;

impl QosOverride {
    pub fn off() -> Self {
        Self {
            off: true,
            ..Default::default()
        }
    }

    /// Parses `K=V,K=V,...` (`--iocost-qos`).
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() {
            return Err(format!(
                "empty QoS override (accepted: K=V,... with keys {})",
                QOS_KEYS.join(", ")
            ));
        }
        let mut pairs = Vec::new();
        for tok in s.split(',').filter(|t| !t.is_empty()) {
            match tok.split_once('=') {
                Some((k, v)) => pairs.push((k, v)),
                None => {
                    return Err(format!(
                        "{:?} is not KEY=VALUE (accepted: K=V,... with keys {})",
                        tok,
                        QOS_KEYS.join(", ")
                    ))
                }
            }
        }
        Self::from_pairs(pairs)
    }

    /// Builds an override from key/value pairs: rpct/wpct percentiles (0-100), rlat/wlat
    /// (usecs), min/max vrate percentages (1 to 10000, min ≤ max) and vrate (sets min and max; can't be
    /// combined with them). Floats are rounded to 2 decimals. Unknown keys are errors.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, String> {
        let mut o = QosOverride::default();
        let mut vrate = None;
        let keyed = |k: &str, e: String| {
            if e.starts_with('"') {
                format!("{}={}", k, e)
            } else {
                format!("{}: {}", k, e)
            }
        };
        for (k, v) in pairs {
            let float = || parse_float(v).map(round2).map_err(|e| keyed(k, e));
            let int = || parse_int(v).map_err(|e| keyed(k, e));
            match k {
                "rpct" | "wpct" => {
                    let p = float()?;
                    if !(0.0..=100.0).contains(&p) {
                        return Err(format!("{}={} must be between 0 and 100", k, v));
                    }
                    if k == "rpct" {
                        o.rpct = Some(p);
                    } else {
                        o.wpct = Some(p);
                    }
                }
                "rlat" => o.rlat = Some(int()?),
                "wlat" => o.wlat = Some(int()?),
                "min" | "max" | "vrate" => {
                    let p = float()?;
                    // The kernel clamps into this range without a word: a value outside
                    // would be stored as one QoS and run as another.
                    if !(VRATE_PCT_MIN..=VRATE_PCT_MAX).contains(&p) {
                        return Err(format!(
                            "{}={} is outside io.cost's vrate range, 1 to 10000 (%)",
                            k, v
                        ));
                    }
                    match k {
                        "min" => o.min = Some(p),
                        "max" => o.max = Some(p),
                        _ => vrate = Some(p),
                    }
                }
                _ => {
                    return Err(format!(
                        "unknown QoS key {:?} (accepted: {})",
                        k,
                        QOS_KEYS.join(", ")
                    ))
                }
            }
        }
        if let Some(v) = vrate {
            if o.min.is_some() || o.max.is_some() {
                return Err("vrate sets both min and max; don't combine it with min or max".into());
            }
            o.min = Some(v);
            o.max = Some(v);
        }
        if let (Some(min), Some(max)) = (o.min, o.max) {
            if min > max {
                return Err(format!("min={} must not be above max={}", min, max));
            }
        }
        Ok(o)
    }

    pub fn is_empty(&self) -> bool {
        *self == QosOverride::default()
    }

    /// `base` with this override on top, rounded. `off` gives the base with `enable=0`; any
    /// other override means iocost on (`enable=1`).
    pub fn apply(&self, base: &IoCostQos) -> IoCostQos {
        if self.off {
            return IoCostQos {
                enable: 0,
                ..base.rounded()
            };
        }
        IoCostQos {
            enable: 1,
            ctrl: base.ctrl.clone(),
            rpct: self.rpct.unwrap_or(base.rpct),
            rlat: self.rlat.unwrap_or(base.rlat),
            wpct: self.wpct.unwrap_or(base.wpct),
            wlat: self.wlat.unwrap_or(base.wlat),
            min: self.min.unwrap_or(base.min),
            max: self.max.unwrap_or(base.max),
        }
        .rounded()
    }

    /// `iocost=off`, or all six QoS fields of base ⊕ override with overridden ones bracketed.
    pub fn describe(&self, base: &IoCostQos) -> String {
        if self.off {
            return "iocost=off".into();
        }
        fn item(name: &str, ovr: Option<String>, base: String) -> String {
            match ovr {
                Some(v) => format!("[{}={}]", name, v),
                None => format!("{}={}", name, base),
            }
        }
        let pct = |v: f64| format!("{:.2}", round2(v));
        [
            item("rpct", self.rpct.map(pct), pct(base.rpct)),
            item(
                "rlat",
                self.rlat.map(|v| v.to_string()),
                base.rlat.to_string(),
            ),
            item("wpct", self.wpct.map(pct), pct(base.wpct)),
            item(
                "wlat",
                self.wlat.map(|v| v.to_string()),
                base.wlat.to_string(),
            ),
            item("min", self.min.map(pct), pct(base.min)),
            item("max", self.max.map(pct), pct(base.max)),
        ]
        .join(" ")
    }
}

#[cfg(test)]
mod tests;
