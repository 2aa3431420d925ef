//! What upstream resctl-bench 2.2.6 needs to load an entry we write: the fields it has no
//! default for (as its 2.2 result files in `tests/fixtures/results` carry them) and only the
//! requirement names its enum knows. Unknown fields it ignores; an unknown requirement name or
//! a missing field makes it refuse the whole file.

use serde_json::Value;

/// Upstream 2.2's system requirement names.
pub const SYSREQS: &[&str] = &[
    "Controllers",
    "Freezer",
    "MemCgRecursiveProt",
    "MemShadowInodeProt",
    "IoCost",
    "IoCostVer",
    "NoOtherIoControllers",
    "AnonBalance",
    "Btrfs",
    "BtrfsAsyncDiscard",
    "NoCompositeStorage",
    "IoSched",
    "NoWbt",
    "SwapOnScratch",
    "Swap",
    "Oomd",
    "NoSysOomd",
    "HostCriticalServices",
    "DepsBase",
    "DepsIoCostCoefGen",
    "DepsSide",
    "DepsLinuxBuild",
];

pub const SYSINFO: &[&str] = &[
    "bench_version",
    "sysreqs",
    "sysreqs_missed",
    "sysreqs_report",
    "iocost",
    "hashd",
    "mem",
    "swappiness",
    "zswap_enabled",
];

pub const SYSREQS_REPORT: &[&str] = &[
    "satisfied",
    "missed",
    "kernel_version",
    "agent_version",
    "hashd_version",
    "nr_cpus",
    "total_memory",
    "total_swap",
    "scr_dev",
    "scr_devnr",
    "scr_dev_model",
    "scr_dev_fwrev",
    "scr_dev_size",
    "scr_dev_iosched",
    "enforce",
];

pub const MEM: &[&str] = &["profile", "avail", "share", "target"];

pub const HASHD_KNOBS: &[&str] = &[
    "hash_size",
    "rps_max",
    "mem_size",
    "mem_frac",
    "chunk_pages",
    "fake_cpu_load",
];

pub const STORAGE_RECORD: &[&str] = &[
    "period",
    "final_mem_probe_periods",
    "base_hashd_knobs",
    "mem",
    "mem_usages",
    "mem_sizes",
];

pub const STORAGE_RESULT: &[&str] = &[
    "mem_offload_factor",
    "mem_usage",
    "mem_usage_stdev",
    "mem_size",
    "mem_size_stdev",
    "all_rstat",
    "final_rstat",
    "iolat",
    "nr_reports",
];

fn missing(what: &str, v: &Value, keys: &[&str], problems: &mut Vec<String>) {
    for k in keys {
        if v.get(k).is_none() {
            problems.push(format!("{}: no {:?}", what, k));
        }
    }
}

fn names_known(what: &str, names: Vec<&str>, problems: &mut Vec<String>) {
    for n in names {
        if !SYSREQS.contains(&n) {
            problems.push(format!(
                "{}: requirement {:?} upstream doesn't know",
                what, n
            ));
        }
    }
}

fn keys(v: &Value) -> Vec<&str> {
    match v {
        Value::Object(m) => m.keys().map(String::as_str).collect(),
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Why upstream 2.2.6 would refuse `entry` (a result-file entry as JSON); empty if it loads.
pub fn problems(entry: &Value) -> Vec<String> {
    let mut p = Vec::new();
    let si = &entry["sysinfo"];
    missing("sysinfo", si, SYSINFO, &mut p);
    missing("sysinfo.mem", &si["mem"], MEM, &mut p);
    names_known("sysinfo.sysreqs", keys(&si["sysreqs"]), &mut p);
    names_known(
        "sysinfo.sysreqs_missed",
        keys(&si["sysreqs_missed"]),
        &mut p,
    );
    let rep = &si["sysreqs_report"];
    if !rep.is_null() {
        missing("sysreqs_report", rep, SYSREQS_REPORT, &mut p);
        names_known("sysreqs_report.satisfied", keys(&rep["satisfied"]), &mut p);
        names_known("sysreqs_report.missed", keys(&rep["missed"]), &mut p);
    }
    if !si["hashd"].is_null() {
        missing("sysinfo.hashd", &si["hashd"], HASHD_KNOBS, &mut p);
    }
    match entry["spec"]["kind"].as_str() {
        Some("storage") => {
            missing("storage record", &entry["record"], STORAGE_RECORD, &mut p);
            missing("storage record mem", &entry["record"]["mem"], MEM, &mut p);
            let knobs = &entry["record"]["base_hashd_knobs"];
            missing("storage record knobs", knobs, HASHD_KNOBS, &mut p);
            missing("storage result", &entry["result"], STORAGE_RESULT, &mut p);
        }
        Some("hashd-params") => {
            missing("hashd-params record", &entry["record"], HASHD_KNOBS, &mut p);
        }
        _ => {}
    }
    p
}
