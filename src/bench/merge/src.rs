//! What `merge` hands a bench: one entry of one source file, and whether the merge rejected it
//! (with the reason `merge-info` shows). The procedure itself is this
//! folder's `mod.rs`.

use crate::result::Entry;

/// `merge`'s options.
#[derive(Debug, Clone, Copy, Default)]
pub struct MergeOpts {
    pub by_id: bool,
    pub ignore_versions: bool,
    pub ignore_sysreqs: bool,
    pub multiple: bool,
    /// Merge runs that used our time-savers with upstream-faithful ones.
    pub merge_time_savers: bool,
    /// Merge runs whose hashd made lean requests (ours, the default) with runs whose hashd
    /// made them as upstream's does.
    pub merge_lean_requests: bool,
    /// Merge runs whose hashd kept its requests in flight our way (the default) with runs
    /// whose hashd kept them as upstream's does.
    pub merge_our_flow: bool,
    /// Merge runs whose footprints our memory search found (the default) with runs whose
    /// footprints upstream's search found.
    pub merge_our_search: bool,
    /// Merge runs whose io.cost model our iocost-params jobs measured (the default) with runs
    /// whose model upstream's fio jobs measured.
    pub merge_our_jobs: bool,
    /// Merge runs whose io.cost model our IO engine measured (the default) with runs whose
    /// model fio's engine measured.
    pub merge_our_engine: bool,
}

/// Which host facts keep results apart besides kind, versions and memory profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merging {
    pub by_storage_model: bool,
    pub by_storage_fwrev: bool,
}

#[derive(Debug, Clone)]
pub struct MergeSrc {
    pub entry: Entry,
    /// The source file as named on the command line.
    pub file: String,
    pub rejected: Option<String>,
}

impl MergeSrc {
    /// The sources still in the merge.
    pub fn accepted(srcs: &[MergeSrc]) -> impl Iterator<Item = &MergeSrc> {
        srcs.iter().filter(|s| s.rejected.is_none())
    }

    /// The merged entry's period: from the earliest start to the latest end of the accepted
    /// sources ((0, 0) without any).
    pub fn period(srcs: &[MergeSrc]) -> (u64, u64) {
        let p = Self::accepted(srcs).fold((u64::MAX, 0), |(a, b), s| {
            (a.min(s.entry.period.0), b.max(s.entry.period.1))
        });
        if p == (u64::MAX, 0) {
            (0, 0)
        } else {
            p
        }
    }
}
