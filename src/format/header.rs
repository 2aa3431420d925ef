//! The block printed above every entry's report: job kind, version, id and period, then what the
//! entry's `sysinfo` tells about the host (kernel, memory, scratch device, io.cost, hashd).
//!
//! The sysinfo model here is read-only and lenient: every field has a default so files written
//! by older versions (or by us, before the agent ran) still get a header.

use crate::error::UsageError;
use crate::result::Entry;
use crate::units::format_size;
use anyhow::Result;
use chrono::TimeZone;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt::{self, Write};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct HeaderSysInfo {
    pub sysreqs_missed: OrderedMissed,
    pub sysreqs_report: Option<SysReqsReport>,
    pub iocost: IoCostSnapshot,
    pub hashd: Option<HashdKnobs>,
    pub mem: MemInfo,
    pub swappiness: u32,
    pub zswap_enabled: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct SysReqsReport {
    pub missed: KeyList,
    pub kernel_version: String,
    pub nr_cpus: u64,
    pub total_memory: f64,
    pub total_swap: f64,
    pub scr_dev: String,
    pub scr_devnr: (u64, u64),
    pub scr_dev_model: String,
    pub scr_dev_fwrev: String,
    pub scr_dev_size: f64,
    pub scr_dev_iosched: String,
    pub enforce: Option<Enforce>,
}

/// Which resources the agent enforced; the complement is shown as `passive=`.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct Enforce {
    pub crit_mem_prot: bool,
    pub cpu: bool,
    pub mem: bool,
    pub io: bool,
    pub fs: bool,
    pub oomd: bool,
}

impl Default for Enforce {
    fn default() -> Self {
        Self {
            crit_mem_prot: true,
            cpu: true,
            mem: true,
            io: true,
            fs: true,
            oomd: true,
        }
    }
}

impl Enforce {
    /// `ALL` (nothing enforced), `all` (only hostcritical memory protection), the `/`-joined
    /// list of resources not enforced, or empty when everything is.
    pub fn passive(&self) -> String {
        let off: Vec<&str> = [
            ("cpu", self.cpu),
            ("mem", self.mem),
            ("io", self.io),
            ("fs", self.fs),
            ("oomd", self.oomd),
        ]
        .iter()
        .filter(|(_, on)| !on)
        .map(|(name, _)| *name)
        .collect();
        if off.len() == 5 {
            if self.crit_mem_prot { "all" } else { "ALL" }.to_string()
        } else {
            off.join("/")
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct IoCostSnapshot {
    pub model: IoCostModel,
    pub qos: IoCostQos,
}

/// io.cost model and QoS: the shared types of `system::iocost`, which read both the sysinfo
/// layout and the parameter-only layout of records.
pub use crate::system::iocost::{IoCostModel, IoCostQos};

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct HashdKnobs {
    pub hash_size: f64,
    pub rps_max: u64,
    pub mem_size: f64,
    pub mem_frac: f64,
    pub chunk_pages: u64,
    pub fake_cpu_load: bool,
}

/// The memory profile a job ran with.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct MemInfo {
    pub profile: u32,
    pub avail: f64,
    pub share: f64,
    pub target: f64,
}

/// Keys of a JSON object in file order (also accepts an array of names).
#[derive(Debug, Default)]
pub struct KeyList(pub Vec<String>);

impl<'de> Deserialize<'de> for KeyList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KeyList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map or list of requirement names")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyList, A::Error> {
                let mut keys = Vec::new();
                while let Some((k, _)) = map.next_entry::<String, IgnoredAny>()? {
                    keys.push(k);
                }
                Ok(KeyList(keys))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KeyList, A::Error> {
                let mut keys = Vec::new();
                while let Some(k) = seq.next_element::<String>()? {
                    keys.push(k);
                }
                Ok(KeyList(keys))
            }
            fn visit_unit<E>(self) -> Result<KeyList, E> {
                Ok(KeyList::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// `sysreqs_missed`: requirement → messages, in file order.
#[derive(Debug, Default)]
pub struct OrderedMissed(pub Vec<(String, Vec<String>)>);

impl<'de> Deserialize<'de> for OrderedMissed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedMissed;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of requirement names to messages")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedMissed, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Option<Vec<String>>>()? {
                    out.push((k, v.unwrap_or_default()));
                }
                Ok(OrderedMissed(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OrderedMissed, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = seq.next_element::<String>()? {
                    out.push((k, Vec::new()));
                }
                Ok(OrderedMissed(out))
            }
            fn visit_unit<E>(self) -> Result<OrderedMissed, E> {
                Ok(OrderedMissed::default())
            }
        }
        d.deserialize_any(V)
    }
}

impl HeaderSysInfo {
    pub fn parse(entry: &Entry) -> Result<Self> {
        serde_json::from_str(entry.sysinfo.get()).map_err(|e| {
            UsageError::new(format!(
                "{}: the stored sysinfo is not in a layout this version can read ({})",
                crate::format::job_name(&entry.spec),
                e
            ))
            .into()
        })
    }
}

fn local_time(ts: u64, fmt: &str) -> String {
    match chrono::Local.timestamp_opt(ts as i64, 0).single() {
        Some(t) => t.format(fmt).to_string(),
        None => ts.to_string(),
    }
}

/// The header block of one entry, ending with a blank line.
pub fn format_header(out: &mut String, entry: &Entry, si: &HeaderSysInfo) {
    let _ = write!(
        out,
        "[{} {} result] ",
        entry.spec.kind,
        env!("CARGO_PKG_VERSION")
    );
    if let Some(id) = &entry.spec.id {
        let _ = write!(out, "\"{}\" ", id);
    }
    let _ = writeln!(
        out,
        "{} - {}\n",
        local_time(entry.period.0, "%Y-%m-%d %T"),
        local_time(entry.period.1, "%T")
    );

    let Some(rep) = &si.sysreqs_report else {
        return;
    };

    let _ = writeln!(out, "System info: kernel=\"{}\"", rep.kernel_version);
    let _ = writeln!(
        out,
        "             nr_cpus={} memory={} swap={} swappiness={}{}",
        rep.nr_cpus,
        format_size(rep.total_memory),
        format_size(rep.total_swap),
        si.swappiness,
        if si.zswap_enabled { " zswap" } else { "" }
    );
    if si.mem.profile > 0 {
        let _ = writeln!(
            out,
            "             mem_profile={} (avail={} share={} target={})",
            si.mem.profile,
            format_size(si.mem.avail),
            format_size(si.mem.share),
            format_size(si.mem.target)
        );
    }
    let passive = rep
        .enforce
        .as_ref()
        .map(|e| e.passive())
        .unwrap_or_default();
    if !passive.is_empty() {
        let _ = writeln!(out, "             passive={}", passive);
    }
    out.push('\n');

    let missed = |name: &str| rep.missed.0.iter().any(|k| k == name);
    let onoff = |b: bool| if b { "on" } else { "off" };
    let iocost_on = si.iocost.qos.enable > 0;
    let _ = writeln!(
        out,
        "IO info: dev={}({}:{}) model=\"{}\" firmware=\"{}\" size={}",
        rep.scr_dev,
        rep.scr_devnr.0,
        rep.scr_devnr.1,
        rep.scr_dev_model,
        rep.scr_dev_fwrev,
        format_size(rep.scr_dev_size)
    );
    let _ = writeln!(
        out,
        "         iosched={} wbt={} iocost={} other={}",
        rep.scr_dev_iosched,
        onoff(missed("NoWbt")),
        onoff(iocost_on),
        onoff(missed("NoOtherIoControllers"))
    );
    if iocost_on {
        let (r, w) = si.iocost.model.lines();
        let _ = writeln!(out, "         iocost model: {}", r);
        let _ = writeln!(out, "                       {}", w);
        let _ = writeln!(out, "         iocost QoS: {}", si.iocost.qos.line());
    }
    out.push('\n');

    if let Some(h) = &si.hashd {
        let _ = writeln!(
            out,
            "hashd params: hash_size={} rps_max={} mem_actual={} chunk_pages={}{}\n",
            format_size(h.hash_size),
            h.rps_max,
            format_size(h.mem_size * h.mem_frac),
            h.chunk_pages,
            if h.fake_cpu_load {
                " fake_cpu_load"
            } else {
                ""
            }
        );
    }

    if !si.sysreqs_missed.0.is_empty() {
        let names: Vec<&str> = si
            .sysreqs_missed
            .0
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        let _ = writeln!(out, "Missed sysreqs: {}", names.join(", "));
        for (_, msgs) in &si.sysreqs_missed.0 {
            for msg in msgs {
                let _ = writeln!(out, "    * {}", msg);
            }
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passive_rendering() {
        let mut e = Enforce::default();
        assert_eq!(e.passive(), "");
        e.io = false;
        assert_eq!(e.passive(), "io");
        e.cpu = false;
        assert_eq!(e.passive(), "cpu/io");
        e.mem = false;
        e.fs = false;
        e.oomd = false;
        assert_eq!(e.passive(), "all");
        e.crit_mem_prot = false;
        assert_eq!(e.passive(), "ALL");
    }

    #[test]
    fn missed_keeps_file_order() {
        let m: OrderedMissed =
            serde_json::from_str(r#"{"Swap":["no swap"],"NoWbt":["wbt on","x"]}"#).unwrap();
        assert_eq!(m.0[0].0, "Swap");
        assert_eq!(m.0[1].1, vec!["wbt on", "x"]);
    }
}
