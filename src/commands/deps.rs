//! `deps`: the system requirements, checked (and with `--fix` applied and put back).

use super::shared::{LOG, Globals};
use anyhow::Result;

/// Check the system requirements (cgroup2, io.cost, swap, IO scheduler, ...) and list them;
/// exits 1 if any is missed
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also apply the fixes a run applies (through the restore journal) and report the result;
    /// every change is restored when deps exits
    #[arg(long = "fix")]
    pub fix: bool,
}

pub const OPTIONS: Option<&[&str]> = Some(&["dir", "dev", LOG[0], LOG[1]]);

pub fn exec(g: &Globals, a: Args) -> Result<()> {
    let cfg = g.config;
    crate::system::deps::deps_cmd(&cfg.dir, cfg.dev.as_deref(), a.fix)
}
