//! `apply`: an io.cost solution of a result (or of a hwdb file) onto this host's device — shown
//! by default, written now with `--now`, installed for systemd to apply at every boot with
//! `--boot`, and put back with `--undo` (`system::apply`).

use super::shared::{print_out, require_result, Globals, LOG};
use crate::error::UsageError;
use crate::system::apply::exec::{self, HostTools, Steps};
use crate::system::apply::{self, Source, Wanted};
use crate::system::{hwdb, HostPaths};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Apply an io.cost solution to its device: show it (default), now, at every boot, or undo
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The solution (default: the one systemd picks, `naive` when there, else the first listed)
    pub solution: Option<String>,
    /// Write the solution's model and QoS into io.cost.model and io.cost.qos now
    #[arg(long)]
    pub now: bool,
    /// Install it as a hwdb file for systemd's iocost to apply at every boot (and now)
    #[arg(long)]
    pub boot: bool,
    /// Put back what apply changed: its files removed, the knobs' earlier values written back
    #[arg(long, conflicts_with_all = ["now", "boot", "solution", "hwdb", "fwrev"])]
    pub undo: bool,
    /// Take the solutions from a hwdb file (e.g. the community's 90-iocost-tune.hwdb) instead
    /// of the result file's iocost-tune
    #[arg(long, value_name = "FILE")]
    pub hwdb: Option<PathBuf>,
    /// Also require the device's firmware revision to be the result's, and name it in the
    /// hwdb line (as `format iocost-tune:hwdb-fwrev` does)
    #[arg(long)]
    pub fwrev: bool,
}

pub const OPTIONS: Option<&[&str]> = Some(&["result", "dev", LOG[0], LOG[1]]);

/// The biggest hwdb file read (the community's whole file is ~100 KiB).
const HWDB_LIMIT: u64 = 16 << 20;

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    let hp = HostPaths::real();
    let mut out = String::new();
    if a.undo {
        exec::undo(&hp, &mut HostTools, &mut out)?;
        return print_out(&out);
    }
    let src = match &a.hwdb {
        Some(path) => hwdb_source(path)?,
        None => result_source(&require_result(g.config, "apply")?)?,
    };
    let wanted = Wanted {
        solution: a.solution.clone(),
        dev: g.given.dev.clone(),
        fwrev: a.fwrev,
    };
    let plan = apply::plan(&hp, &src, &wanted)?;
    if !(a.now || a.boot) {
        out.push_str(&plan.describe(&hp));
        out.push_str("nothing changed: --now applies it now, --boot at every boot (and now)\n");
        return print_out(&out);
    }
    let steps = Steps {
        now: a.now,
        boot: a.boot,
    };
    let res = exec::execute(&hp, &plan, steps, &mut HostTools, &mut out);
    print_out(&out)?;
    res
}

/// A hwdb file's records.
fn hwdb_source(path: &Path) -> Result<Source> {
    let what = "hwdb file";
    let Some(file) = crate::util::fs::open_regular(path, what)? else {
        crate::usage_bail!("--hwdb {}: no such file", path.display());
    };
    let bytes = crate::util::fs::read_limited(file, path, what, HWDB_LIMIT)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        UsageError::new(format!("--hwdb {}: not UTF-8 text", path.display()))
    })?;
    let records = hwdb::parse(&text)
        .map_err(|e| UsageError::new(format!("--hwdb {}: {}", path.display(), e)))?;
    Ok(Source {
        what: path.display().to_string(),
        records,
        measured: None,
        measured_dev: None,
    })
}

/// The last finished iocost-tune entry of a result file, as its hwdb lines.
fn result_source(path: &Path) -> Result<Source> {
    let entries = crate::result::load_existing(path)?;
    let Some(entry) = entries
        .iter()
        .rev()
        .find(|e| e.spec.kind == "iocost-tune" && e.result.is_some() && !e.incomplete)
    else {
        crate::usage_bail!(
            "{}: no finished iocost-tune result to apply (run iocost-tune on it, or merge \
             results into one, or give a hwdb file with --hwdb)",
            path.display()
        );
    };
    let specs = crate::bench::parse_format_specs(&["iocost-tune:hwdb".to_string()])?;
    let text = crate::bench::results::show::format_entries(
        std::slice::from_ref(entry),
        &specs,
        true,
        0,
    )?;
    let records = hwdb::parse(&text).map_err(|e| {
        anyhow::anyhow!("{}: its hwdb lines don't read back: {}", path.display(), e)
    })?;
    let rep = crate::format::header::HeaderSysInfo::parse(entry)?
        .sysreqs_report
        .unwrap_or_default();
    if rep.scr_dev_model.trim().is_empty() {
        crate::usage_bail!(
            "{}: its iocost-tune result names no device model, so it can't be matched to a disk",
            path.display()
        );
    }
    Ok(Source {
        what: format!("{} (iocost-tune)", path.display()),
        records,
        measured: Some((rep.scr_dev_model.trim().to_string(), rep.scr_dev_fwrev.trim().to_string())),
        measured_dev: Some(rep.scr_dev).filter(|d| !d.is_empty()),
    })
}
