//! Resource-stat (`--rstat`) tables: per-slice distributions of CPU, memory, IO and pressure,
//! plus the cgroup `memory.stat` / `io.stat` and system `/proc/vmstat` counters.
//!
//! The study stores one distribution (the [`PCT_LABELS`] percentiles, mean and stdev) per
//! quantity. Here they are parsed into compact fixed-size arrays — the key lists below decide
//! which keys exist, in which order they print, and how. `format::rstat` renders them as
//! percentile tables; keys marked hidden only show with `--rstat --rstat`.

use crate::units::PCT_LABELS;
use crate::units::{format_count, format_size};
use anyhow::Result;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;

/// Number of entries of one distribution: the percentiles of [`PCT_LABELS`], mean and stdev.
pub const NR_PCTS: usize = 13;

/// One distribution, indexed like [`PCT_LABELS`].
pub type Dist = [f64; NR_PCTS];

/// Plain level value printed as a binary size.
const LEVEL: u8 = 0;
/// Cumulative counter: the study turns it into a per-second rate.
const CUM: u8 = 1 << 0;
/// Shown only from detail level 2.
const HIDDEN: u8 = 1 << 1;
/// Printed as a decimal count instead of a binary size.
const COUNT: u8 = 1 << 2;

/// One key of a `memory.stat`, `io.stat` or `vmstat` table.
#[derive(Debug, Clone, Copy)]
pub struct StatKey {
    pub name: &'static str,
    flags: u8,
}

impl StatKey {
    /// The study should report the counter's per-second rate rather than its level.
    pub fn is_cumulative(&self) -> bool {
        self.flags & CUM != 0
    }

    /// Shown only with `--rstat --rstat`.
    pub fn is_hidden(&self) -> bool {
        self.flags & HIDDEN != 0
    }

    /// Printed with [`format_count`] rather than [`format_size`].
    pub fn is_count(&self) -> bool {
        self.flags & COUNT != 0
    }

    pub fn shown_at(&self, level: u8) -> bool {
        level >= 2 || !self.is_hidden()
    }

    /// The value as this key prints it.
    pub fn format(&self, v: f64) -> String {
        if self.is_count() {
            format_count(v)
        } else {
            format_size(v)
        }
    }
}

const fn key(name: &'static str, flags: u8) -> StatKey {
    StatKey { name, flags }
}

/// cgroup `memory.stat` keys in print order.
pub static MEMORY_STAT_KEYS: &[StatKey] = &[
    key("anon", LEVEL),
    key("file", LEVEL),
    key("kernel_stack", HIDDEN),
    key("pagetables", HIDDEN),
    key("percpu", HIDDEN),
    key("sock", HIDDEN),
    key("shmem", HIDDEN),
    key("file_mapped", HIDDEN),
    key("file_dirty", LEVEL),
    key("file_writeback", LEVEL),
    key("anon_thp", HIDDEN),
    key("file_thp", HIDDEN),
    key("shmem_thp", HIDDEN),
    key("inactive_anon", LEVEL),
    key("active_anon", LEVEL),
    key("inactive_file", LEVEL),
    key("active_file", LEVEL),
    key("unevictable", HIDDEN),
    key("slab_reclaimable", HIDDEN),
    key("slab_unreclaimable", HIDDEN),
    key("slab", HIDDEN),
    key("workingset_refault_anon", CUM),
    key("workingset_refault_file", CUM),
    key("workingset_activate_anon", CUM),
    key("workingset_activate_file", CUM),
    key("workingset_restore_anon", CUM),
    key("workingset_restore_file", CUM),
    key("workingset_nodereclaim", CUM),
    key("pgfault", CUM),
    key("pgmajfault", CUM),
    key("pgrefill", CUM),
    key("pgscan", CUM),
    key("pgsteal", CUM),
    key("pgactivate", CUM | HIDDEN),
    key("pgdeactivate", CUM | HIDDEN),
    key("pglazyfree", CUM | HIDDEN),
    key("pglazyfreed", CUM | HIDDEN),
    key("thp_fault_alloc", CUM | HIDDEN),
    key("thp_collapse_alloc", CUM | HIDDEN),
];

/// cgroup `io.stat` keys (summed over devices) in print order.
pub static IO_STAT_KEYS: &[StatKey] = &[
    key("rbytes", CUM),
    key("rios", CUM | COUNT),
    key("wbytes", CUM),
    key("wios", CUM | COUNT),
    key("dbytes", CUM),
    key("dios", CUM | COUNT),
    key("cost.vrate", LEVEL),
    key("cost.usage", CUM | COUNT),
    key("cost.wait", CUM | COUNT),
    key("cost.indebt", CUM | COUNT),
    key("cost.indelay", CUM | COUNT),
];

/// `/proc/vmstat` keys in print order (the kernel's own order, plus `nr_unstable` of older
/// kernels at the end). Page counts print as sizes, as upstream prints them; the events that
/// count things other than pages (inode steals, slab scans, watermark hits, drops, OOM kills,
/// balloon operations) are COUNT. Which keys are shown at level 1, which are cumulative and
/// which are counts follow upstream's report.
pub static VMSTAT_KEYS: &[StatKey] = &[
    key("nr_free_pages", LEVEL),
    key("nr_zone_inactive_anon", HIDDEN),
    key("nr_zone_active_anon", HIDDEN),
    key("nr_zone_inactive_file", HIDDEN),
    key("nr_zone_active_file", HIDDEN),
    key("nr_zone_unevictable", HIDDEN),
    key("nr_zone_write_pending", HIDDEN),
    key("nr_mlock", HIDDEN),
    key("nr_bounce", HIDDEN),
    key("nr_zspages", HIDDEN),
    key("nr_free_cma", HIDDEN),
    key("numa_hit", CUM | HIDDEN),
    key("numa_miss", CUM | HIDDEN),
    key("numa_foreign", CUM | HIDDEN),
    key("numa_interleave", CUM | HIDDEN),
    key("numa_local", CUM | HIDDEN),
    key("numa_other", CUM | HIDDEN),
    key("nr_inactive_anon", LEVEL),
    key("nr_active_anon", LEVEL),
    key("nr_inactive_file", LEVEL),
    key("nr_active_file", LEVEL),
    key("nr_unevictable", LEVEL),
    key("nr_slab_reclaimable", LEVEL),
    key("nr_slab_unreclaimable", LEVEL),
    key("nr_isolated_anon", LEVEL),
    key("nr_isolated_file", LEVEL),
    key("workingset_nodes", LEVEL),
    key("workingset_refault_anon", CUM),
    key("workingset_refault_file", CUM),
    key("workingset_activate_anon", CUM),
    key("workingset_activate_file", CUM),
    key("workingset_restore_anon", CUM),
    key("workingset_restore_file", CUM),
    key("workingset_nodereclaim", CUM),
    key("nr_anon_pages", LEVEL),
    key("nr_mapped", LEVEL),
    key("nr_file_pages", LEVEL),
    key("nr_dirty", LEVEL),
    key("nr_writeback", LEVEL),
    key("nr_writeback_temp", LEVEL),
    key("nr_shmem", LEVEL),
    key("nr_shmem_hugepages", HIDDEN),
    key("nr_shmem_pmdmapped", HIDDEN),
    key("nr_file_hugepages", HIDDEN),
    key("nr_file_pmdmapped", HIDDEN),
    key("nr_anon_transparent_hugepages", HIDDEN),
    key("nr_vmscan_write", HIDDEN),
    key("nr_vmscan_immediate_reclaim", HIDDEN),
    key("nr_dirtied", LEVEL),
    key("nr_written", LEVEL),
    key("nr_kernel_misc_reclaimable", HIDDEN),
    key("nr_foll_pin_acquired", HIDDEN),
    key("nr_foll_pin_released", HIDDEN),
    key("nr_kernel_stack", HIDDEN),
    key("nr_page_table_pages", HIDDEN),
    key("nr_dirty_threshold", HIDDEN),
    key("nr_dirty_background_threshold", HIDDEN),
    key("pgpgin", CUM),
    key("pgpgout", CUM),
    key("pswpin", CUM),
    key("pswpout", CUM),
    key("pgalloc_dma", CUM | HIDDEN),
    key("pgalloc_dma32", CUM | HIDDEN),
    key("pgalloc_normal", CUM | HIDDEN),
    key("pgalloc_movable", CUM | HIDDEN),
    key("allocstall_dma", CUM | HIDDEN),
    key("allocstall_dma32", CUM | HIDDEN),
    key("allocstall_normal", CUM),
    key("allocstall_movable", CUM),
    key("pgskip_dma", CUM | HIDDEN),
    key("pgskip_dma32", CUM | HIDDEN),
    key("pgskip_normal", CUM | HIDDEN),
    key("pgskip_movable", CUM | HIDDEN),
    key("pgfree", CUM | HIDDEN),
    key("pgactivate", CUM | HIDDEN),
    key("pgdeactivate", CUM | HIDDEN),
    key("pglazyfree", CUM | HIDDEN),
    key("pgfault", CUM),
    key("pgmajfault", CUM),
    key("pglazyfreed", CUM | HIDDEN),
    key("pgrefill", CUM | HIDDEN),
    key("pgreuse", CUM | HIDDEN),
    key("pgsteal_kswapd", CUM),
    key("pgsteal_direct", CUM),
    key("pgscan_kswapd", CUM),
    key("pgscan_direct", CUM),
    key("pgscan_direct_throttle", CUM),
    key("pgscan_anon", CUM),
    key("pgscan_file", CUM),
    key("pgsteal_anon", CUM),
    key("pgsteal_file", CUM),
    key("zone_reclaim_failed", CUM | COUNT),
    key("pginodesteal", CUM | COUNT),
    key("slabs_scanned", CUM | COUNT | HIDDEN),
    key("kswapd_inodesteal", CUM | COUNT),
    key("kswapd_low_wmark_hit_quickly", CUM | COUNT | HIDDEN),
    key("kswapd_high_wmark_hit_quickly", CUM | COUNT | HIDDEN),
    key("pageoutrun", CUM | HIDDEN),
    key("pgrotated", CUM | HIDDEN),
    key("drop_pagecache", CUM | COUNT | HIDDEN),
    key("drop_slab", CUM | COUNT | HIDDEN),
    key("oom_kill", CUM | COUNT | HIDDEN),
    key("numa_pte_updates", CUM | HIDDEN),
    key("numa_huge_pte_updates", CUM | HIDDEN),
    key("numa_hint_faults", CUM | HIDDEN),
    key("numa_hint_faults_local", CUM | HIDDEN),
    key("numa_pages_migrated", CUM | HIDDEN),
    key("pgmigrate_success", CUM | HIDDEN),
    key("pgmigrate_fail", CUM | HIDDEN),
    key("thp_migration_success", CUM | HIDDEN),
    key("thp_migration_fail", CUM | HIDDEN),
    key("thp_migration_split", CUM | HIDDEN),
    key("compact_migrate_scanned", CUM | HIDDEN),
    key("compact_free_scanned", CUM | HIDDEN),
    key("compact_isolated", CUM | HIDDEN),
    key("compact_stall", CUM | HIDDEN),
    key("compact_fail", CUM | HIDDEN),
    key("compact_success", CUM | HIDDEN),
    key("compact_daemon_wake", CUM | HIDDEN),
    key("compact_daemon_migrate_scanned", CUM | HIDDEN),
    key("compact_daemon_free_scanned", CUM | HIDDEN),
    key("htlb_buddy_alloc_success", CUM | HIDDEN),
    key("htlb_buddy_alloc_fail", CUM | HIDDEN),
    key("unevictable_pgs_culled", CUM | HIDDEN),
    key("unevictable_pgs_scanned", CUM | HIDDEN),
    key("unevictable_pgs_rescued", CUM | HIDDEN),
    key("unevictable_pgs_mlocked", CUM | HIDDEN),
    key("unevictable_pgs_munlocked", CUM | HIDDEN),
    key("unevictable_pgs_cleared", CUM | HIDDEN),
    key("unevictable_pgs_stranded", CUM | HIDDEN),
    key("thp_fault_alloc", CUM | HIDDEN),
    key("thp_fault_fallback", CUM | HIDDEN),
    key("thp_fault_fallback_charge", CUM | HIDDEN),
    key("thp_collapse_alloc", CUM | HIDDEN),
    key("thp_collapse_alloc_failed", CUM | HIDDEN),
    key("thp_file_alloc", CUM | HIDDEN),
    key("thp_file_fallback", CUM | HIDDEN),
    key("thp_file_fallback_charge", CUM | HIDDEN),
    key("thp_file_mapped", CUM | HIDDEN),
    key("thp_split_page", CUM | HIDDEN),
    key("thp_split_page_failed", CUM | HIDDEN),
    key("thp_deferred_split_page", CUM | HIDDEN),
    key("thp_split_pmd", CUM | HIDDEN),
    key("thp_split_pud", CUM | HIDDEN),
    key("thp_zero_page_alloc", CUM | HIDDEN),
    key("thp_zero_page_alloc_failed", CUM | HIDDEN),
    key("thp_swpout", CUM | HIDDEN),
    key("thp_swpout_fallback", CUM | HIDDEN),
    key("balloon_inflate", CUM | COUNT | HIDDEN),
    key("balloon_deflate", CUM | COUNT | HIDDEN),
    key("balloon_migrate", CUM | COUNT | HIDDEN),
    key("swap_ra", CUM | HIDDEN),
    key("swap_ra_hit", CUM | HIDDEN),
    key("nr_unstable", HIDDEN),
];

/// What a resource-stat row shows and how.
#[derive(Clone, Copy)]
pub enum RowFmt {
    Pct,
    Size,
}

/// Names of the main table's rows, in print order, with their formatter.
pub const MAIN_ROWS: [(&str, RowFmt); 12] = [
    ("cpu%", RowFmt::Pct),
    ("sys%", RowFmt::Pct),
    ("mem", RowFmt::Size),
    ("swap", RowFmt::Size),
    ("io%", RowFmt::Pct),
    ("rbps", RowFmt::Size),
    ("wbps", RowFmt::Size),
    ("cpu-some%", RowFmt::Pct),
    ("mem-some%", RowFmt::Pct),
    ("mem-full%", RowFmt::Pct),
    ("io-some%", RowFmt::Pct),
    ("io-full%", RowFmt::Pct),
];

/// Distributions of one keyed stat file, stored in the order of its key list. Keys absent from
/// the data stay all-zero (and so print as a row of `-`); keys not in the list are dropped.
#[derive(Debug, Clone, Default)]
pub struct KeyedDists {
    dists: Vec<Dist>,
    /// The data had at least one entry (used to leave out `vmstat` for non-root slices).
    pub present: bool,
}

impl KeyedDists {
    /// Every distribution, in key-list order.
    pub fn dists(&self) -> &[Dist] {
        &self.dists
    }

    /// The distribution of `name`, if it is in `keys` (the list this was parsed with).
    pub fn get(&self, keys: &[StatKey], name: &str) -> Option<&Dist> {
        let idx = keys.iter().position(|k| k.name == name)?;
        self.dists.get(idx)
    }
}

/// The resource statistics of one slice over one period.
#[derive(Debug, Clone, Default)]
pub struct ResourceStat {
    pub cpu_util: Dist,
    pub cpu_sys: Dist,
    pub mem_bytes: Dist,
    /// `None` in 2.1-layout results, which predate the swap row; it isn't printed then.
    pub swap_bytes: Option<Dist>,
    pub io_util: Dist,
    /// read, write
    pub io_bps: [Dist; 2],
    pub psi_cpu: Dist,
    /// some, full
    pub psi_mem: [Dist; 2],
    /// some, full
    pub psi_io: [Dist; 2],
    pub mem_stat: KeyedDists,
    pub io_stat: KeyedDists,
    pub vmstat: KeyedDists,
}

impl ResourceStat {
    /// Parses the study's JSON object of one slice.
    pub fn parse(raw: &RawValue) -> Result<Self> {
        let mut de = serde_json::Deserializer::from_str(raw.get());
        let rs = de.deserialize_map(ResourceStatVisitor)?;
        de.end()?;
        Ok(rs)
    }

    /// The main table's distributions, in [`MAIN_ROWS`] order (`None`: not in this layout).
    pub fn main_rows(&self) -> [Option<&Dist>; 12] {
        [
            Some(&self.cpu_util),
            Some(&self.cpu_sys),
            Some(&self.mem_bytes),
            self.swap_bytes.as_ref(),
            Some(&self.io_util),
            Some(&self.io_bps[0]),
            Some(&self.io_bps[1]),
            Some(&self.psi_cpu),
            Some(&self.psi_mem[0]),
            Some(&self.psi_mem[1]),
            Some(&self.psi_io[0]),
            Some(&self.psi_io[1]),
        ]
    }
}

/// Position of a percentile label (`"00"` … `"stdev"`) in a [`Dist`].
fn pct_index(label: &str) -> Option<usize> {
    PCT_LABELS.iter().position(|p| *p == label)
}

/// A distribution in the result file: `{"00": v, "01": v, …, "mean": v, "stdev": v}`. Absent
/// labels read as 0, as do `null` values (how JSON writers store NaN); unknown labels are ignored.
struct DistDe(Dist);

impl<'de> Deserialize<'de> for DistDe {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = DistDe;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map from percentile labels to numbers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DistDe, A::Error> {
                let mut dist = [0.0; NR_PCTS];
                while let Some(idx) = map.next_key_seed(KeyLookup(pct_index))? {
                    match idx {
                        Some(i) => dist[i] = map.next_value::<Option<f64>>()?.unwrap_or(0.0),
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(DistDe(dist))
            }
        }
        d.deserialize_map(V)
    }
}

/// Reads a map key and resolves it with the given function without allocating; `None` for
/// keys the function doesn't know.
struct KeyLookup<F>(F);

impl<'de, T, F: Fn(&str) -> Option<T>> DeserializeSeed<'de> for KeyLookup<F> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, T, F: Fn(&str) -> Option<T>> Visitor<'de> for KeyLookup<F> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<T>, E> {
        Ok((self.0)(v))
    }
}

/// A pair of distributions stored as a two-element array (`[read, write]`, `[some, full]`).
fn dist_pair<'de, A: MapAccess<'de>>(map: &mut A) -> Result<[Dist; 2], A::Error> {
    let [a, b] = map.next_value::<[DistDe; 2]>()?;
    Ok([a.0, b.0])
}

/// Parses a keyed stat map into a [`KeyedDists`] ordered by `keys`.
struct KeyedSeed(&'static [StatKey]);

impl<'de> DeserializeSeed<'de> for KeyedSeed {
    type Value = KeyedDists;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<KeyedDists, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for KeyedSeed {
    type Value = KeyedDists;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map from stat keys to distributions")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyedDists, A::Error> {
        let mut kd = KeyedDists {
            dists: vec![[0.0; NR_PCTS]; self.0.len()],
            present: false,
        };
        let keys = self.0;
        while let Some(idx) = map.next_key_seed(KeyLookup(|name: &str| {
            keys.iter().position(|k| k.name == name)
        }))? {
            kd.present = true;
            match idx {
                Some(i) => kd.dists[i] = map.next_value::<DistDe>()?.0,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(kd)
    }
}

struct ResourceStatVisitor;

impl<'de> Visitor<'de> for ResourceStatVisitor {
    type Value = ResourceStat;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a resource stat object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResourceStat, A::Error> {
        let mut rs = ResourceStat {
            mem_stat: empty_keyed(MEMORY_STAT_KEYS),
            io_stat: empty_keyed(IO_STAT_KEYS),
            vmstat: empty_keyed(VMSTAT_KEYS),
            ..Default::default()
        };
        while let Some(field) = map.next_key::<String>()? {
            let dist = match field.as_str() {
                "cpu_util" => &mut rs.cpu_util,
                "cpu_sys" => &mut rs.cpu_sys,
                "mem_bytes" => &mut rs.mem_bytes,
                "swap_bytes" => rs.swap_bytes.insert([0.0; NR_PCTS]),
                "io_util" => &mut rs.io_util,
                "psi_cpu" => &mut rs.psi_cpu,
                "io_bps" => {
                    rs.io_bps = dist_pair(&mut map)?;
                    continue;
                }
                "psi_mem" => {
                    rs.psi_mem = dist_pair(&mut map)?;
                    continue;
                }
                "psi_io" => {
                    rs.psi_io = dist_pair(&mut map)?;
                    continue;
                }
                "mem_stat" => {
                    rs.mem_stat = map.next_value_seed(KeyedSeed(MEMORY_STAT_KEYS))?;
                    continue;
                }
                "io_stat" => {
                    rs.io_stat = map.next_value_seed(KeyedSeed(IO_STAT_KEYS))?;
                    continue;
                }
                "vmstat" => {
                    rs.vmstat = map.next_value_seed(KeyedSeed(VMSTAT_KEYS))?;
                    continue;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
            };
            *dist = map.next_value::<DistDe>()?.0;
        }
        Ok(rs)
    }
}

fn empty_keyed(keys: &[StatKey]) -> KeyedDists {
    KeyedDists {
        dists: vec![[0.0; NR_PCTS]; keys.len()],
        present: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lists_match_upstream_sizes() {
        assert_eq!(MEMORY_STAT_KEYS.len(), 39);
        assert_eq!(IO_STAT_KEYS.len(), 11);
        assert_eq!(VMSTAT_KEYS.len(), 154);
        assert_eq!(VMSTAT_KEYS.iter().filter(|k| !k.is_hidden()).count(), 47);
        for list in [MEMORY_STAT_KEYS, IO_STAT_KEYS, VMSTAT_KEYS] {
            for (i, k) in list.iter().enumerate() {
                assert!(
                    list[..i].iter().all(|o| o.name != k.name),
                    "duplicate {}",
                    k.name
                );
            }
        }
    }
}
