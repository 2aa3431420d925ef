//! Resource-stat (`--rstat`) tables: per-slice distributions of CPU, memory, IO and pressure,
//! plus the cgroup `memory.stat` / `io.stat` and system `/proc/vmstat` counters.
//!
//! The study stores one distribution (the [`PCT_LABELS`] percentiles, mean and stdev) per
//! quantity. Here they are parsed into compact fixed-size arrays — the key lists below decide
//! which keys exist, in which order they print, and how — and rendered as percentile tables.
//!
//! Detail levels: 1 (`--rstat`) adds the `memory.stat`, `io.stat` and (for slices that carry it)
//! `vmstat` tables to the main one; 2 (`--rstat --rstat`) also shows the keys marked hidden.

use crate::format::text::{pct_table_header, pct_table_row};
use crate::units::PCT_LABELS;
use crate::units::{format_count, format_pct, format_size};
use anyhow::{Context, Result};
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

    fn shown_at(&self, level: u8) -> bool {
        level >= 2 || !self.is_hidden()
    }

    fn format(&self, v: f64) -> String {
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
enum RowFmt {
    Pct,
    Size,
}

/// Names of the main table's rows, in print order, with their formatter.
const MAIN_ROWS: [(&str, RowFmt); 12] = [
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

    fn main_rows(&self) -> [Option<&Dist>; 12] {
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

    /// Renders the `[TITLE]` table and, from `level` 1, the `[TITLE - memory.stat]`,
    /// `[TITLE - io.stat]` and (when the data has it) `[TITLE - vmstat]` tables. Every table is
    /// followed by one blank line.
    pub fn format(&self, out: &mut String, title: &str, level: u8) {
        let width = label_width(level);

        pct_table_header(out, &format!("[{}]", title), width, PCT_LABELS);
        for ((name, fmt), dist) in MAIN_ROWS.iter().zip(self.main_rows()) {
            let Some(dist) = dist else { continue };
            match fmt {
                RowFmt::Pct => pct_table_row(out, name, width, dist, format_pct),
                RowFmt::Size => pct_table_row(out, name, width, dist, format_size),
            }
        }
        out.push('\n');

        if level == 0 {
            return;
        }
        let keyed = [
            ("memory.stat", MEMORY_STAT_KEYS, &self.mem_stat, true),
            ("io.stat", IO_STAT_KEYS, &self.io_stat, true),
            ("vmstat", VMSTAT_KEYS, &self.vmstat, self.vmstat.present),
        ];
        for (name, keys, dists, show) in keyed {
            if !show {
                continue;
            }
            pct_table_header(out, &format!("[{} - {}]", title, name), width, PCT_LABELS);
            for (key, dist) in keys.iter().zip(dists.dists.iter()) {
                if key.shown_at(level) {
                    pct_table_row(out, key.name, width, dist, |v| key.format(v));
                }
            }
            out.push('\n');
        }
    }
}

/// Label column width of every table of a block: the longest row name shown at `level` across
/// all key lists (whether or not the slice has that table), at least 10.
fn label_width(level: u8) -> usize {
    let main = MAIN_ROWS.iter().map(|(name, _)| name.len());
    if level == 0 {
        return main.max().unwrap_or(0).max(10);
    }
    let keyed = [MEMORY_STAT_KEYS, IO_STAT_KEYS, VMSTAT_KEYS]
        .into_iter()
        .flatten()
        .filter(|k| k.shown_at(level))
        .map(|k| k.name.len());
    main.chain(keyed).max().unwrap_or(0).max(10)
}

/// Renders one resource-stat block (see [`ResourceStat::format`]) from the study's JSON.
pub fn format_table(out: &mut String, title: &str, rstat: &RawValue, level: u8) -> Result<()> {
    let rs = ResourceStat::parse(rstat)
        .with_context(|| format!("reading the resource stat of [{}]", title))?;
    rs.format(out, title, level);
    Ok(())
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
    use serde_json::Value;
    use std::io::Read;
    use std::sync::OnceLock;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results/");
    const MODEL: &str = "Samsung_SSD_970_PRO_512GB";

    /// The `iocost-qos` entry's `result.runs` of the Samsung fixture.
    fn runs() -> &'static [Value] {
        static RUNS: OnceLock<Vec<Value>> = OnceLock::new();
        RUNS.get_or_init(|| {
            let path = format!("{}{}.json.gz", FIXTURES, MODEL);
            let mut json = String::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap())
                .read_to_string(&mut json)
                .unwrap();
            let entries: Vec<Value> = serde_json::from_str(&json).unwrap();
            let qos = entries
                .into_iter()
                .find(|e| e["spec"]["kind"] == "iocost-qos")
                .unwrap();
            match &qos["result"]["runs"] {
                Value::Array(runs) => runs.clone(),
                _ => panic!("no runs"),
            }
        })
    }

    fn fixture_text() -> &'static str {
        static TEXT: OnceLock<String> = OnceLock::new();
        TEXT.get_or_init(|| {
            let path = format!("{}{}.format-rstat2-subfull.iocost-qos.txt", FIXTURES, MODEL);
            std::fs::read_to_string(path).unwrap()
        })
    }

    /// The text of the `nth` section that starts after the line `start` + a blank line and ends
    /// right before the next line beginning with `end`.
    fn fixture_section(start: &str, end: &str, nth: usize) -> &'static str {
        let text = fixture_text();
        let marker = format!("\n{}\n\n", start);
        let (pos, _) = text.match_indices(&marker).nth(nth).unwrap();
        let body = &text[pos + marker.len()..];
        let stop = body.find(&format!("\n{}", end)).unwrap();
        &body[..stop + 1]
    }

    fn raw(v: &Value) -> Box<RawValue> {
        RawValue::from_string(serde_json::to_string(v).unwrap()).unwrap()
    }

    fn render(blocks: &[(&str, &Value)], level: u8) -> String {
        let mut out = String::new();
        for (title, v) in blocks {
            format_table(&mut out, title, &raw(v), level).unwrap();
        }
        out
    }

    fn assert_same(got: &str, want: &str) {
        if got != want {
            for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
                assert_eq!(g, w, "first difference at line {}", i + 1);
            }
            assert_eq!(
                got.lines().count(),
                want.lines().count(),
                "line counts differ"
            );
            assert_eq!(got, want);
        }
    }

    fn check_storage(run: usize) {
        let stor = &runs()[run]["stor"];
        let got = render(
            &[("ALL", &stor["all_rstat"]), ("FINAL", &stor["final_rstat"])],
            2,
        );
        assert_same(&got, fixture_section("Resource stat:", "IO BPS:", run));
    }

    fn check_mem_hog(run: usize) {
        let fr = &runs()[run]["prot"]["scenarios"][0]["MemHogTune"]["final_run"];
        let got = render(
            &[
                ("ROOT", &fr["root_rstat"]),
                ("WORKLOAD", &fr["work_rstat"]),
                ("SYSTEM", &fr["sys_rstat"]),
            ],
            2,
        );
        let want = fixture_section("Slice resource stat:", "Isolation and Request", run);
        assert_same(&got, want);
    }

    #[test]
    fn storage_all_and_final_run_00() {
        check_storage(0);
    }

    #[test]
    fn storage_all_and_final_run_13() {
        check_storage(13);
    }

    #[test]
    fn mem_hog_slices_run_00() {
        check_mem_hog(0);
    }

    #[test]
    fn mem_hog_slices_run_17() {
        check_mem_hog(17);
    }

    #[test]
    fn every_run_matches_fixture() {
        for run in 0..25 {
            check_storage(run);
            check_mem_hog(run);
        }
    }

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
        assert_eq!(label_width(0), 10);
        assert_eq!(label_width(1), 24);
        assert_eq!(label_width(2), 30);
    }

    /// A distribution JSON object with every label set to `v`.
    fn dist_json(v: f64) -> String {
        let fields: Vec<String> = PCT_LABELS
            .iter()
            .map(|p| format!("\"{}\": {}", p, v))
            .collect();
        format!("{{{}}}", fields.join(", "))
    }

    fn synthetic_rstat(with_vmstat: bool) -> Box<RawValue> {
        let d = dist_json(2048.0);
        let pct = dist_json(0.5);
        let vmstat = if with_vmstat {
            format!(
                "{{\"nr_free_pages\": {d}, \"nr_zone_active_anon\": {d}, \"slabs_scanned\": {c}, \
                 \"pgscan_kswapd\": {d}, \"not_a_vmstat_key\": {d}}}",
                d = d,
                c = dist_json(12345.0)
            )
        } else {
            "{}".into()
        };
        let json = format!(
            "{{\"cpu_util\": {pct}, \"cpu_sys\": {pct}, \"mem_bytes\": {d}, \"swap_bytes\": {d}, \
             \"io_util\": {pct}, \"io_bps\": [{d}, {d}], \"psi_cpu\": {pct}, \
             \"psi_mem\": [{pct}, {pct}], \"psi_io\": [{pct}, {pct}], \
             \"mem_stat\": {{\"anon\": {d}, \"kernel_stack\": {d}, \"unknown_key\": {d}}}, \
             \"io_stat\": {{\"rios\": {c}, \"rbytes\": {d}}}, \"vmstat\": {vm}, \
             \"future_field\": [1, 2, 3]}}",
            pct = pct,
            d = d,
            c = dist_json(1500.0),
            vm = vmstat
        );
        RawValue::from_string(json).unwrap()
    }

    #[test]
    fn level_1_hides_hidden_keys_and_narrows_labels() {
        let mut out = String::new();
        format_table(&mut out, "ROOT", &synthetic_rstat(true), 1).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        let w = 24;
        let header = |t: &str| {
            format!(
                "{:<w$}    min   p01   p05   p10   p25   p50   p75   p90   p95   p99   max  mean stdev",
                t,
                w = w
            )
        };
        let row = |name: &str, cell: &str| {
            format!(
                "{:<w$}  {}",
                name,
                format!("{:>5} ", cell).repeat(13),
                w = w
            )
        };
        assert_eq!(lines[0], header("[ROOT]"));
        assert_eq!(lines[1], row("cpu%", "50.00"));
        assert_eq!(lines[3], row("mem", "2048"));
        assert_eq!(lines[12], row("io-full%", "50.00"));
        assert_eq!(lines[13], "");
        assert_eq!(lines[14], header("[ROOT - memory.stat]"));
        assert_eq!(lines[15], row("anon", "2048"));
        // kernel_stack is hidden at level 1: file follows anon directly.
        assert_eq!(lines[16], row("file", "-"));
        let names = |from: usize| -> Vec<&str> {
            lines[from..]
                .iter()
                .take_while(|l| !l.is_empty())
                .map(|l| l.split_whitespace().next().unwrap())
                .collect()
        };
        let mem_names = names(15);
        let visible: Vec<&str> = MEMORY_STAT_KEYS
            .iter()
            .filter(|k| !k.is_hidden())
            .map(|k| k.name)
            .collect();
        assert_eq!(mem_names, visible);
        assert!(!out.contains("kernel_stack"));
        assert!(!out.contains("unknown_key"));

        let io_at = 15 + mem_names.len() + 1;
        assert_eq!(lines[io_at], header("[ROOT - io.stat]"));
        assert_eq!(lines[io_at + 1], row("rbytes", "2048"));
        assert_eq!(lines[io_at + 2], row("rios", "1.5k"));
        assert_eq!(names(io_at + 1).len(), 11);

        let vm_at = io_at + 1 + 11 + 1;
        assert_eq!(lines[vm_at], header("[ROOT - vmstat]"));
        assert_eq!(lines[vm_at + 1], row("nr_free_pages", "2048"));
        let vm_names = names(vm_at + 1);
        assert_eq!(vm_names.len(), 47);
        assert!(!vm_names.contains(&"nr_zone_active_anon"));
        assert!(!vm_names.contains(&"slabs_scanned"));
        assert!(out.ends_with(" \n\n"));
        assert_eq!(lines.len(), vm_at + 1 + 47 + 1);
    }

    #[test]
    fn level_2_shows_hidden_keys_with_their_formats() {
        let mut out = String::new();
        format_table(&mut out, "ALL", &synthetic_rstat(true), 2).unwrap();
        let row = |name: &str, cell: &str| {
            format!("{:<30}  {}\n", name, format!("{:>5} ", cell).repeat(13))
        };
        assert!(out.contains(&row("kernel_stack", "2048")));
        assert!(out.contains(&row("nr_zone_active_anon", "2048")));
        assert!(out.contains(&row("slabs_scanned", "12.3k")));
        assert!(out.contains(&row("compact_daemon_migrate_scanned", "-")));
        assert!(!out.contains("not_a_vmstat_key"));
    }

    /// Event counters upstream prints base 10 (`1030` → `1.0k`), and a rate that overflowed
    /// the units (a counter reset reads as 2^64) prints `INF`.
    #[test]
    fn event_counts_print_base_10_and_overflowed_values_inf() {
        let json = format!(
            "{{\"mem_bytes\": {big}, \"swap_bytes\": {d}, \"vmstat\": {{\
             \"kswapd_high_wmark_hit_quickly\": {c}, \"kswapd_low_wmark_hit_quickly\": {c}, \
             \"drop_pagecache\": {c}, \"oom_kill\": {c}, \"balloon_migrate\": {c}, \
             \"pageoutrun\": {c}, \"pgrotated\": {big}}}}}",
            big = dist_json(u64::MAX as f64),
            d = dist_json(2048.0),
            c = dist_json(1030.0)
        );
        let mut out = String::new();
        format_table(&mut out, "ALL", &RawValue::from_string(json).unwrap(), 2).unwrap();
        let row = |name: &str, cell: &str| {
            format!("{:<30}  {}\n", name, format!("{:>5} ", cell).repeat(13))
        };
        for name in [
            "kswapd_high_wmark_hit_quickly",
            "kswapd_low_wmark_hit_quickly",
            "drop_pagecache",
            "oom_kill",
            "balloon_migrate",
        ] {
            assert!(out.contains(&row(name, "1.0k")), "{} in\n{}", name, out);
        }
        // A page-event counter stays a size, as upstream prints it.
        assert!(out.contains(&row("pageoutrun", "1030")));
        assert!(out.contains(&row("pgrotated", "INF")));
        assert!(out.contains(&row("mem", "INF")));
        assert!(out.contains(&row("swap", "2048")));
    }

    #[test]
    fn slices_without_vmstat_have_no_vmstat_table() {
        let mut out = String::new();
        format_table(&mut out, "WORKLOAD", &synthetic_rstat(false), 2).unwrap();
        assert!(out.contains("[WORKLOAD - io.stat]"));
        assert!(!out.contains("vmstat"));
        // The label column stays as wide as the widest key of any list.
        assert!(out.starts_with(&format!("{:<30}    min", "[WORKLOAD]")));
    }

    #[test]
    fn missing_keys_print_as_dashes() {
        let rs = RawValue::from_string(
            "{\"cpu_util\": {\"00\": 0.25, \"100\": null}, \"mem_stat\": {}, \"vmstat\": {\"x\": {}}}"
                .into(),
        )
        .unwrap();
        let mut out = String::new();
        format_table(&mut out, "ROOT", &rs, 2).unwrap();
        let dashes = "    - ".repeat(13);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[1],
            format!("{:<30}  25.00 {}", "cpu%", "    0 ".repeat(12))
        );
        // No `swap_bytes` (the 2.1 layout): no swap row, as upstream 2.1 printed it.
        assert!(!out.contains("\nswap "));
        for l in &lines[2..12] {
            assert!(l.ends_with(&dashes), "{}", l);
        }
        assert_eq!(lines[12], "");
        // Every memory.stat, io.stat and (present but with unknown keys only) vmstat key.
        let rows = out.lines().filter(|l| l.ends_with(&dashes)).count();
        assert_eq!(rows, 10 + 39 + 11 + 154);
        assert!(out.contains("[ROOT - vmstat]"));
    }

    #[test]
    fn level_0_prints_only_the_main_table() {
        let mut out = String::new();
        format_table(&mut out, "ROOT", &synthetic_rstat(true), 0).unwrap();
        assert_eq!(out.lines().count(), 14);
        assert!(out.starts_with("[ROOT]        min"));
        assert!(out.ends_with("\n\n"));
    }

    #[test]
    fn malformed_rstat_names_the_table() {
        for bad in [
            "[1, 2]",
            "{\"cpu_util\": 3}",
            "{\"io_bps\": [{}]}",
            "{\"mem_stat\": {\"anon\": {\"00\": \"x\"}}}",
        ] {
            let rs = RawValue::from_string(bad.into()).unwrap();
            let err = format_table(&mut String::new(), "SYSTEM", &rs, 1).unwrap_err();
            assert!(
                format!("{:#}", err).contains("resource stat of [SYSTEM]"),
                "{:#}",
                err
            );
        }
    }
}
