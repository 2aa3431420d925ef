//! The block printed above every entry's report: job kind, version, id and period, then what the
//! entry's `sysinfo` tells about the host (kernel, memory, scratch device, io.cost, hashd).
//!
//! The sysinfo model here is read-only and lenient: every field has a default so files written
//! by older versions (or by us, before the agent ran) still get a header.

use crate::error::UsageError;
use crate::result::sysinfo::MemProfile;
use crate::result::Entry;
use crate::system::bench_json::HashdKnobs;
use crate::units::format_size;
use anyhow::Result;
use chrono::TimeZone;
use serde::Deserialize;
use std::fmt::Write;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct HeaderSysInfo {
    pub sysreqs_missed: MissedReqs,
    /// Our requirements upstream doesn't know, missed (printed with the others).
    pub ext_sysreqs_missed: MissedReqs,
    pub sysreqs_report: Option<SysReqsReport>,
    pub iocost: IoCostSnapshot,
    pub hashd: Option<HashdKnobs>,
    pub mem: MemProfile,
    pub swappiness: u32,
    pub zswap_enabled: bool,
    /// Our mark of a `--quick` run (absent in upstream files).
    pub quick: bool,
}

/// `sysreqs_report` and `enforce`: the one (lenient) definition, shared with the code that
/// writes them.
pub use crate::system::sysreqs::{Enforce, MissedReqs, SysReqsReport};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct IoCostSnapshot {
    pub model: IoCostModel,
    pub qos: IoCostQos,
}

/// io.cost model and QoS: the shared types of `system::iocost`, which read both the sysinfo
/// layout and the parameter-only layout of records.
pub use crate::system::iocost::{IoCostModel, IoCostQos};

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

/// The header block of one entry, ending with a blank line: the title line, then — when the
/// entry records the host — the system, the IO device, hashd's parameters and the requirements
/// missed.
pub fn format_header(out: &mut String, entry: &Entry, si: &HeaderSysInfo) {
    title(out, entry, si);
    let Some(rep) = &si.sysreqs_report else {
        return;
    };
    system_info(out, rep, si);
    io_info(out, rep, si);
    hashd_params(out, si);
    missed_sysreqs(out, si);
}

/// `[KIND VERSION result] [quick] ["ID"] START - END`.
fn title(out: &mut String, entry: &Entry, si: &HeaderSysInfo) {
    let _ = write!(
        out,
        "[{} {} result] ",
        entry.spec.kind,
        env!("CARGO_PKG_VERSION")
    );
    if si.quick {
        out.push_str("quick ");
    }
    if let Some(id) = &entry.spec.id {
        let _ = write!(out, "\"{}\" ", id);
    }
    let _ = writeln!(
        out,
        "{} - {}\n",
        local_time(entry.period.0, "%Y-%m-%d %T"),
        local_time(entry.period.1, "%T")
    );
}

fn system_info(out: &mut String, rep: &SysReqsReport, si: &HeaderSysInfo) {
    let _ = writeln!(out, "System info: kernel=\"{}\"", rep.kernel_version);
    let _ = writeln!(
        out,
        "             nr_cpus={} memory={} swap={} swappiness={}{}",
        rep.nr_cpus,
        format_size(rep.total_memory as f64),
        format_size(rep.total_swap as f64),
        si.swappiness,
        if si.zswap_enabled { " zswap" } else { "" }
    );
    if si.mem.profile > 0 {
        let _ = writeln!(
            out,
            "             mem_profile={} (avail={} share={} target={})",
            si.mem.profile,
            format_size(si.mem.avail as f64),
            format_size(si.mem.share as f64),
            format_size(si.mem.target as f64)
        );
    }
    let passive = rep.enforce.passive();
    if !passive.is_empty() {
        let _ = writeln!(out, "             passive={}", passive);
    }
    out.push('\n');
}

fn io_info(out: &mut String, rep: &SysReqsReport, si: &HeaderSysInfo) {
    let missed = |name: &str| rep.missed.contains(name);
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
        format_size(rep.scr_dev_size as f64)
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
}

fn hashd_params(out: &mut String, si: &HeaderSysInfo) {
    if let Some(h) = &si.hashd {
        let _ = writeln!(
            out,
            "hashd params: hash_size={} rps_max={} mem_actual={} chunk_pages={}{}\n",
            format_size(h.hash_size as f64),
            h.rps_max,
            format_size(h.mem_size as f64 * h.mem_frac),
            h.chunk_pages,
            if h.fake_cpu_load {
                " fake_cpu_load"
            } else {
                ""
            }
        );
    }
}

fn missed_sysreqs(out: &mut String, si: &HeaderSysInfo) {
    let all_missed: Vec<&(String, Vec<String>)> = si
        .sysreqs_missed
        .0
        .iter()
        .chain(&si.ext_sysreqs_missed.0)
        .collect();
    if !all_missed.is_empty() {
        let names: Vec<&str> = all_missed.iter().map(|(n, _)| n.as_str()).collect();
        let _ = writeln!(out, "Missed sysreqs: {}", names.join(", "));
        for (_, msgs) in all_missed {
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
        let m: MissedReqs =
            serde_json::from_str(r#"{"Swap":["no swap"],"NoWbt":["wbt on","x"]}"#).unwrap();
        assert_eq!(m.0[0].0, "Swap");
        assert_eq!(m.0[1].1, vec!["wbt on", "x"]);
    }

    fn first_line(sysinfo: &str) -> String {
        let json = format!(
            r#"[{{"spec":{{"kind":"storage","id":null,"props":[{{}}]}},"period":[0,60],"sysinfo":{},"record":null,"result":null}}]"#,
            sysinfo
        );
        let entries =
            crate::result::parse_entries(std::path::Path::new("t.json"), json.as_bytes()).unwrap();
        let si = HeaderSysInfo::parse(&entries[0]).unwrap();
        let mut out = String::new();
        format_header(&mut out, &entries[0], &si);
        out.lines().next().unwrap().to_string()
    }

    #[test]
    fn quick_runs_say_so_on_the_first_line() {
        let quick = first_line(r#"{"quick":true}"#);
        let plain = first_line("{}");
        let prefix = format!("[storage {} result] ", env!("CARGO_PKG_VERSION"));
        assert!(quick.starts_with(&format!("{}quick ", prefix)), "{}", quick);
        assert!(
            plain.starts_with(&prefix) && !plain.contains("quick"),
            "{}",
            plain
        );
        assert_eq!(quick.replacen("quick ", "", 1), plain);
    }
}
