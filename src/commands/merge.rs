//! `merge SOURCE...`: the sources' mergeable entries merged into the `--result` file (replaced
//! whole, under its lock), and the `merge-info` entry printed.

use super::shared::{Globals, require_result, LOG};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Merge the results of many hosts (e.g. iocost-tune per device model) into the file given
/// with --result
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The result files to merge
    #[arg(value_name = "SOURCE", required = true)]
    pub sources: Vec<PathBuf>,
    /// Keep entries with different ids apart
    #[arg(long = "by-id")]
    pub by_id: bool,
    /// Merge results of different bench, agent and hashd versions
    #[arg(long = "ignore-versions")]
    pub ignore_versions: bool,
    /// Merge results of runs that missed system requirements
    #[arg(long = "ignore-sysreqs")]
    pub ignore_sysreqs: bool,
    /// Keep every group of each kind, not only the one with the most sources
    #[arg(long = "multiple")]
    pub multiple: bool,
    /// Merge results measured with this tool's time-savers (iocost-qos's mof-hint and
    /// the others) with upstream-faithful ones; kept apart otherwise
    #[arg(long = "merge-time-savers")]
    pub merge_time_savers: bool,
    /// Merge results whose hashd made lean requests (this tool's default) with results
    /// whose hashd made them as upstream's does (upstream's, or `storage-requests=upstream`);
    /// kept apart otherwise
    #[arg(long = "merge-lean-requests")]
    pub merge_lean_requests: bool,
    /// Merge results whose hashd kept its requests in flight our way (this tool's default)
    /// with results whose hashd kept them as upstream's does (upstream's, or
    /// `storage-flow=upstream`); kept apart otherwise
    #[arg(long = "merge-our-flow")]
    pub merge_our_flow: bool,
    /// Merge results whose footprints our memory search found (this tool's default) with
    /// results whose footprints upstream's search found (upstream's, or
    /// `storage-search=upstream`); kept apart otherwise
    #[arg(long = "merge-our-search")]
    pub merge_our_search: bool,
    /// Merge results whose io.cost model our iocost-params jobs measured (this tool's
    /// default) with results whose model upstream's fio jobs measured (upstream's, or
    /// `iocost-params:jobs=upstream`); kept apart otherwise
    #[arg(long = "merge-our-jobs")]
    pub merge_our_jobs: bool,
    /// Merge results whose io.cost model our IO engine measured (this tool's default) with
    /// results whose model fio's engine measured (upstream's, or `iocost-params:engine=fio`);
    /// kept apart otherwise
    #[arg(long = "merge-our-engine")]
    pub merge_our_engine: bool,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", LOG[0], LOG[1]]);

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    let out = require_result(g.config, "merge")?;
    // Held from before anything is read to the save: a second merge into the same file stops
    // at once, and the output (which may also be a source) is replaced only as it was read.
    let _lock = crate::result::lock::ResultLock::acquire(&out)?;
    let target = crate::result::save::resolve_trusted(&out)?;
    let expect = crate::result::save::FileId::at(&target)
        .with_context(|| format!("checking {}", out.display()))?;
    let mut files = Vec::new();
    for src in &a.sources {
        files.push((src.display().to_string(), crate::result::load_existing(src)?));
    }
    let opts = crate::bench::merge::MergeOpts {
        by_id: a.by_id,
        ignore_versions: a.ignore_versions,
        ignore_sysreqs: a.ignore_sysreqs,
        multiple: a.multiple,
        merge_time_savers: a.merge_time_savers,
        merge_lean_requests: a.merge_lean_requests,
        merge_our_flow: a.merge_our_flow,
        merge_our_search: a.merge_our_search,
        merge_our_jobs: a.merge_our_jobs,
        merge_our_engine: a.merge_our_engine,
    };
    let entries = crate::bench::merge::merge(&files, &opts, crate::util::now())?;
    crate::result::save::save_entries_over(&out, expect, &entries)?;
    let mut text = String::new();
    let opts = crate::format::FormatOpts {
        full: true,
        ..Default::default()
    };
    crate::bench::results::show::format_entry(&mut text, &entries[0], &opts)?;
    crate::util::out::out_text(&text);
    Ok(())
}
