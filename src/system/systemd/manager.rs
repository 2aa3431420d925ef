//! What we ask of systemd ([`Manager`]), and the questions built on it.

use anyhow::Result;
use std::collections::BTreeMap;

/// A value of a property given when a transient unit starts (D-Bus types `s`, `t`, `b`, `au`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BusValue {
    Str(String),
    U64(u64),
    Bool(bool),
    Pids(Vec<u32>),
}

/// What we need from systemd.
pub trait Manager: Send + Sync + std::fmt::Debug {
    /// The values of `props` of `unit` as `systemctl show` prints them (a property the unit
    /// doesn't have reads as empty).
    fn show(&self, unit: &str, props: &[&str]) -> Result<BTreeMap<String, String>>;
    /// `systemctl set-property --runtime UNIT ASSIGNMENT…` (`MemoryLow=1G`, `IOWeight=`).
    fn set_runtime(&self, unit: &str, assignments: &[String]) -> Result<()>;
    /// Starts transient unit `unit` (a slice or a scope) with `props`.
    fn start_transient(&self, unit: &str, props: &[(&str, BusValue)]) -> Result<()>;
    fn stop(&self, unit: &str) -> Result<()>;
    fn start(&self, unit: &str) -> Result<()>;
    /// Whether `unit` has the runtime drop-in `set_runtime` writes for `prop`.
    fn has_runtime_dropin(&self, unit: &str, prop: &str) -> bool;
    /// Removes the runtime drop-ins of `unit` for `props` (all of them when `props` is empty).
    fn remove_runtime_dropins(&self, unit: &str, props: &[&str]) -> Result<()>;
}

/// What `show` says about whether a unit exists and runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitState {
    pub active: bool,
    /// Loaded from a unit file, has drop-ins, or is transient: someone defined it.
    pub defined: bool,
}

const STATE_PROPS: &[&str] = &["ActiveState", "FragmentPath", "DropInPaths", "Transient"];

pub fn unit_state(m: &dyn Manager, unit: &str) -> Result<UnitState> {
    let s = m.show(unit, STATE_PROPS)?;
    let get = |k: &str| s.get(k).map(String::as_str).unwrap_or("");
    Ok(UnitState {
        active: matches!(get("ActiveState"), "active" | "activating" | "reloading"),
        defined: !get("FragmentPath").is_empty()
            || !get("DropInPaths").is_empty()
            || get("Transient") == "yes",
    })
}

/// Starts unit `unit` as a transient one; when a unit of that name is still there (a scope
/// whose processes just went away, not yet collected) it is stopped and the start retried.
pub fn start_transient_retrying(
    m: &dyn Manager,
    unit: &str,
    props: &[(&str, BusValue)],
) -> Result<()> {
    let mut tries = 0;
    loop {
        match m.start_transient(unit, props) {
            Ok(()) => return Ok(()),
            Err(e) if tries < 20 && format!("{:#}", e).contains("already") => {
                if tries == 0 {
                    log::debug!("{} still exists; stopping it first", unit);
                    let _ = m.stop(unit);
                }
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) => return Err(e),
        }
    }
}
