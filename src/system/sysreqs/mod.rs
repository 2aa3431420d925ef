//! System requirements that matter without systemd and oomd: each is checked against the host
//! (through [`HostPaths`]), fixed where a fix exists and the resource isn't `passive=`, and
//! reported in upstream's `sysreqs_report` layout.
//!
//! Every fix goes through the restore [`Journal`], so the host gets its values back at exit.
//! Checks always read the host afresh: after the fix pass they are simply run again.
//!
//! Here: the requirement list, check results and the evaluation (check → fix pass → check);
//! `checks` holds the checks and fixes, `passive` what `passive=` leaves alone, `report` the
//! stored `sysreqs_report` layout, `swap` the swap-device helpers.

use crate::error::UsageError;
use crate::system::restore::{Journal, Remount};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod checks;
mod passive;
mod report;
mod swap;
#[cfg(test)]
mod tests;

pub use checks::Host;
pub use passive::Enforce;
use report::build_report;
pub use report::{record_in, upstream_knows, MissedReqs, SysReqsReport};
pub use swap::{read_swaps, swap_rotational};
#[cfg(test)]
pub use tests::testhost;

/// Requirement names as upstream spells them (`Psi` and `NoZswap` are ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SysReq {
    Controllers,
    MemCgRecursiveProt,
    IoCost,
    IoCostVer,
    NoOtherIoControllers,
    AnonBalance,
    NoCompositeStorage,
    IoSched,
    NoWbt,
    SwapOnScratch,
    Swap,
    NoZswap,
    Psi,
}

impl SysReq {
    pub const ALL: &'static [SysReq] = &[
        SysReq::Controllers,
        SysReq::MemCgRecursiveProt,
        SysReq::IoCost,
        SysReq::IoCostVer,
        SysReq::NoOtherIoControllers,
        SysReq::AnonBalance,
        SysReq::NoCompositeStorage,
        SysReq::IoSched,
        SysReq::NoWbt,
        SysReq::SwapOnScratch,
        SysReq::Swap,
        SysReq::NoZswap,
        SysReq::Psi,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SysReq::Controllers => "Controllers",
            SysReq::MemCgRecursiveProt => "MemCgRecursiveProt",
            SysReq::IoCost => "IoCost",
            SysReq::IoCostVer => "IoCostVer",
            SysReq::NoOtherIoControllers => "NoOtherIoControllers",
            SysReq::AnonBalance => "AnonBalance",
            SysReq::NoCompositeStorage => "NoCompositeStorage",
            SysReq::IoSched => "IoSched",
            SysReq::NoWbt => "NoWbt",
            SysReq::SwapOnScratch => "SwapOnScratch",
            SysReq::Swap => "Swap",
            SysReq::NoZswap => "NoZswap",
            SysReq::Psi => "Psi",
        }
    }

    /// One line on what the requirement is.
    pub fn about(self) -> &'static str {
        match self {
            SysReq::Controllers => {
                "cgroup2 at /sys/fs/cgroup with the cpu, memory and io controllers"
            }
            SysReq::MemCgRecursiveProt => "cgroup2 mounted with memory_recursiveprot",
            SysReq::IoCost => "io.cost present and enabled on the scratch device",
            SysReq::IoCostVer => "io.cost reports cost.usage in the root io.stat",
            SysReq::NoOtherIoControllers => {
                "no io.latency/io.max/io.low settings in the cgroup tree"
            }
            SysReq::AnonBalance => {
                "kernel balances anon and file reclaim (pgscan_anon in /proc/vmstat)"
            }
            SysReq::NoCompositeStorage => "scratch device is not md RAID or device-mapper",
            SysReq::IoSched => "IO scheduler \"none\" on the scratch device",
            SysReq::NoWbt => "writeback throttling off on the scratch device",
            SysReq::SwapOnScratch => "all swap on the scratch device",
            SysReq::Swap => "swap >= 30% of memory, enough of it free, swappiness >= 60",
            SysReq::NoZswap => "zswap off",
            SysReq::Psi => "pressure stall information in /proc/pressure",
        }
    }
}

impl std::fmt::Display for SysReq {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The resource a fix belongs to (what `passive=` can switch off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Res {
    Mem,
    Io,
}

impl Res {
    pub fn name(self) -> &'static str {
        match self {
            Res::Mem => "mem",
            Res::Io => "io",
        }
    }
}

/// A change that would satisfy (part of) a requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixAction {
    Write { path: PathBuf, value: String },
    Remount { remount: Remount, new: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    pub res: Res,
    pub action: FixAction,
}

impl std::fmt::Display for Fix {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match &self.action {
            FixAction::Write { path, value } => {
                write!(f, "write {:?} to {}", value, path.display())
            }
            FixAction::Remount { remount, new } => {
                write!(f, "remount {} with {}", remount.target.display(), new)
            }
        }
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub req: SysReq,
    /// Why it is missed; empty = satisfied.
    pub missed: Vec<String>,
    /// What the fix pass would do about it.
    pub fix: Option<Fix>,
    /// Worth telling but not a miss (composite storage named by `--dev`).
    pub warnings: Vec<String>,
}

impl Check {
    fn new(req: SysReq) -> Self {
        Self {
            req,
            missed: Vec::new(),
            fix: None,
            warnings: Vec::new(),
        }
    }

    fn miss(mut self, msg: impl Into<String>) -> Self {
        self.missed.push(msg.into());
        self
    }

    pub fn satisfied(&self) -> bool {
        self.missed.is_empty()
    }
}

/// What the fix pass changed and how each requirement stands afterwards.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub checks: Vec<Check>,
    /// `(requirement, what was done)` for each fix applied.
    pub fixed: Vec<(SysReq, String)>,
    pub report: SysReqsReport,
}

impl Evaluation {
    pub fn missed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.satisfied())
    }

    /// The misses among `required`, as stored in an entry's `sysreqs_missed`.
    pub fn missed_of(&self, required: &[SysReq]) -> BTreeMap<SysReq, Vec<String>> {
        self.missed()
            .filter(|c| required.contains(&c.req))
            .map(|c| (c.req, c.missed.clone()))
            .collect()
    }

    /// Fails (usage error, exit 2) when any of `required` is missed, unless `force`, in which
    /// case the misses are logged as warnings.
    pub fn enforce_required(&self, required: &[SysReq], force: bool) -> Result<()> {
        let missed = self.missed_of(required);
        if missed.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = missed
            .iter()
            .map(|(r, m)| format!("{} ({})", r, m.join("; ")))
            .collect();
        if force {
            for l in &list {
                log::warn!(
                    "missed system requirement {}; continuing because of --force",
                    l
                );
            }
            return Ok(());
        }
        Err(UsageError::new(format!(
            "system requirements missed: {}; fix them (`resctl-bench deps` lists all) or pass --force",
            list.join(", ")
        ))
        .into())
    }
}

fn apply(journal: &Journal, fix: &Fix) -> Result<String> {
    match &fix.action {
        FixAction::Write { path, value } => {
            let old = journal.set(path, value)?;
            Ok(format!("{}: {:?} -> {:?}", path.display(), old, value))
        }
        FixAction::Remount { remount, new } => {
            journal.remount(remount, new)?;
            Ok(format!(
                "remounted {}: {:?} -> {:?}",
                remount.target.display(),
                remount.old,
                new
            ))
        }
    }
}

/// Checks every requirement; with a journal, first fixes what `enforce` allows (recording each
/// change) and checks again. A fix that fails adds its error to the requirement's messages.
pub fn evaluate(host: &Host, enforce: Enforce, journal: Option<&Journal>) -> Result<Evaluation> {
    let mut checks = host.check_all();
    let mut fixed = Vec::new();
    if let Some(journal) = journal {
        let mut failures: BTreeMap<SysReq, Vec<String>> = BTreeMap::new();
        let mut applied = false;
        for c in &checks {
            let Some(fix) = &c.fix else { continue };
            if !enforce.allows(fix.res) {
                log::info!("{}: not fixing ({} is passive)", c.req, fix.res.name());
                continue;
            }
            match apply(journal, fix) {
                Ok(what) => {
                    log::info!("{}: {}", c.req, what);
                    fixed.push((c.req, what));
                    applied = true;
                }
                Err(e) => {
                    failures
                        .entry(c.req)
                        .or_default()
                        .push(format!("fixing failed: {:#}", e));
                }
            }
        }
        if applied {
            checks = host.check_all();
        }
        for c in &mut checks {
            if let Some(f) = failures.remove(&c.req) {
                c.missed.extend(f);
            }
        }
    }
    let report = build_report(host, &checks, enforce)?;
    Ok(Evaluation {
        checks,
        fixed,
        report,
    })
}
