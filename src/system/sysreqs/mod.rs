//! System requirements: each is checked against the host
//! (through [`HostPaths`]), fixed where a fix exists and the resource isn't `passive=`, and
//! reported in upstream's `sysreqs_report` layout.
//!
//! Every fix goes through the restore [`Journal`], so the host gets its values back at exit.
//! Checks always read the host afresh: after the fix pass they are simply run again.
//!
//! Here: the requirement list, check results and the evaluation (check → fix pass → check);
//! `req` the requirements and what a check finds, `checks` holds the checks and fixes, `passive` what `passive=` leaves alone, `report` the
//! stored `sysreqs_report` layout, `swap` the swap-device helpers.

use crate::system::restore::Journal;
use anyhow::Result;
use std::collections::BTreeMap;

mod checks;
mod passive;
mod report;
mod req;
mod swap;
#[cfg(test)]
mod tests;

pub use checks::Host;
pub use passive::Enforce;
use report::build_report;
pub use report::{record_in, upstream_knows, Evaluation, MissedReqs, SysReqsReport};
pub use req::{ByHand, Check, Fix, FixAction, Res, SysReq};
pub use swap::{read_swaps, swap_rotational};
#[cfg(test)]
pub use tests::testhost;

fn apply(journal: &Journal, fix: &Fix) -> Result<String> {
    match &fix.action {
        FixAction::Write { path, value } => {
            let old = journal.set(path, value)?;
            Ok(format!("{}: {:?} -> {:?}", path.display(), old, value))
        }
        FixAction::StopUnits { units } => {
            for u in units {
                journal.stop_unit(u)?;
            }
            Ok(format!(
                "stopped {} (started again at the end)",
                units.join(" ")
            ))
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
