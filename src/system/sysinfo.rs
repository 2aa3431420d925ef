//! Host facts for the header and `sysreqs_report`: kernel release, CPU count, memory and swap
//! sizes, swappiness and zswap state.

use crate::system::HostPaths;
use crate::util::fs::read_trim;
use anyhow::{Context, Result};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostInfo {
    pub kernel_version: String,
    pub nr_cpus: usize,
    /// Bytes.
    pub total_memory: u64,
    pub total_swap: u64,
    pub free_swap: u64,
    /// `None` when /proc/sys/vm/swappiness can't be read.
    pub swappiness: Option<u32>,
    pub zswap_enabled: bool,
}

/// /proc/meminfo as bytes per key (`kB` values multiplied out, unitless counts kept).
pub fn read_meminfo(hp: &HostPaths) -> Result<BTreeMap<String, u64>> {
    let p = hp.path("proc/meminfo");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    parse_meminfo(&text).with_context(|| format!("parsing {}", p.display()))
}

pub fn parse_meminfo(text: &str) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (key, rest) = line
            .split_once(':')
            .with_context(|| format!("malformed line {:?}", line))?;
        let v = meminfo_value(rest).with_context(|| format!("malformed value in {:?}", line))?;
        out.insert(key.trim().to_string(), v);
    }
    Ok(out)
}

/// The bytes of one /proc/meminfo value (what follows `Key:`): `kB` multiplied out, unitless
/// counts kept; `None` if there is no number.
pub fn meminfo_value(rest: &str) -> Option<u64> {
    let mut it = rest.split_whitespace();
    let v: u64 = it.next()?.parse().ok()?;
    Some(match it.next() {
        Some("kB") => v.saturating_mul(1024),
        _ => v,
    })
}

/// Counts CPUs in a list like `0-3,6,8-9`.
pub fn count_cpu_list(s: &str) -> Option<usize> {
    let mut n = 0;
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                n += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<usize>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

/// Logical CPUs online (sysfs), falling back to /proc/cpuinfo.
pub fn nr_cpus(hp: &HostPaths) -> usize {
    if let Some(n) = read_trim(&hp.path("sys/devices/system/cpu/online"))
        .and_then(|s| count_cpu_list(&s))
        .filter(|n| *n > 0)
    {
        return n;
    }
    read_trim(&hp.path("proc/cpuinfo"))
        .map(|t| t.lines().filter(|l| l.starts_with("processor")).count())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

pub fn swappiness(hp: &HostPaths) -> Option<u32> {
    read_trim(&hp.path("proc/sys/vm/swappiness")).and_then(|s| s.parse().ok())
}

/// `Y`/`1` in /sys/module/zswap/parameters/enabled; absent = off.
pub fn zswap_enabled(hp: &HostPaths) -> bool {
    read_trim(&hp.path("sys/module/zswap/parameters/enabled")).is_some_and(|s| s == "Y" || s == "1")
}

impl HostInfo {
    pub fn read(hp: &HostPaths) -> Result<Self> {
        let mem = read_meminfo(hp)?;
        let kp = hp.path("proc/sys/kernel/osrelease");
        Ok(Self {
            kernel_version: read_trim(&kp).with_context(|| format!("reading {}", kp.display()))?,
            nr_cpus: nr_cpus(hp),
            total_memory: mem.get("MemTotal").copied().unwrap_or(0),
            total_swap: mem.get("SwapTotal").copied().unwrap_or(0),
            free_swap: mem.get("SwapFree").copied().unwrap_or(0),
            swappiness: swappiness(hp),
            zswap_enabled: zswap_enabled(hp),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::blockdev::testutil::put;

    #[test]
    fn reads_host_info_from_a_fake_tree() {
        let t = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(t.path());
        put(
            &hp.path("proc/meminfo"),
            "MemTotal:       32768000 kB\nMemFree:  1 kB\nSwapTotal:      16384000 kB\nSwapFree:       16000000 kB\nHugePages_Total:       0\n",
        );
        put(&hp.path("proc/sys/kernel/osrelease"), "6.1.0-test\n");
        put(&hp.path("sys/devices/system/cpu/online"), "0-7,16-23\n");
        put(&hp.path("proc/sys/vm/swappiness"), "30\n");
        put(&hp.path("sys/module/zswap/parameters/enabled"), "Y\n");
        let h = HostInfo::read(&hp).unwrap();
        assert_eq!(h.kernel_version, "6.1.0-test");
        assert_eq!(h.nr_cpus, 16);
        assert_eq!(h.total_memory, 32768000 * 1024);
        assert_eq!(h.total_swap, 16384000 * 1024);
        assert_eq!(h.free_swap, 16000000 * 1024);
        assert_eq!(h.swappiness, Some(30));
        assert!(h.zswap_enabled);
    }

    #[test]
    fn cpu_count_falls_back_to_cpuinfo() {
        let t = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(t.path());
        put(
            &hp.path("proc/cpuinfo"),
            "processor\t: 0\nmodel\t: x\n\nprocessor\t: 1\n",
        );
        assert_eq!(nr_cpus(&hp), 2);
        put(&hp.path("sys/devices/system/cpu/online"), "garbage");
        assert_eq!(nr_cpus(&hp), 2);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0-3,5\n"), Some(5));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
    }

    #[test]
    fn malformed_meminfo_is_an_error() {
        assert!(parse_meminfo("MemTotal 5 kB\n").is_err());
        assert!(parse_meminfo("MemTotal: lots kB\n").is_err());
        let t = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(t.path());
        assert!(HostInfo::read(&hp).is_err());
    }
}
