//! The journal's systemd changes: unit properties set at runtime, transient units we start and
//! units we stop, each recorded before it is made and undone through the journal's
//! [`Manager`].

use super::{lock, Change, Journal};
use crate::system::systemd::{self, restore_assignment, BusValue, Manager, UnitProp};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::Arc;

impl Journal {
    /// The systemd this journal restores unit changes through.
    pub fn systemd(&self) -> Arc<dyn Manager> {
        lock(&self.inner).systemd.clone()
    }

    /// Sets `props` of `unit` at runtime, each recorded first with the value it had; props that
    /// already have their value are left alone. Returns the `NAME=VALUE`s changed.
    pub fn set_unit_props(&self, unit: &str, props: &[UnitProp]) -> Result<Vec<String>> {
        let mut inner = lock(&self.inner);
        let sd = inner.systemd.clone();
        let names: Vec<&str> = props.iter().map(|p| p.name).collect();
        let cur = sd
            .show(unit, &names)
            .with_context(|| format!("reading the properties of {}", unit))?;
        let mut changed = Vec::new();
        let mut added = Vec::new();
        for p in props {
            let old = cur.get(p.name).map(String::as_str).unwrap_or("");
            if old == p.shown() {
                continue;
            }
            let rec = Change::UnitProp {
                unit: unit.to_string(),
                prop: p.name.to_string(),
                restore: restore_assignment(p.name, old),
                dropin: sd.has_runtime_dropin(unit, p.name),
            };
            added.push(Self::push(&mut inner, rec)?);
            changed.push(p.assignment());
        }
        if changed.is_empty() {
            return Ok(changed);
        }
        if let Err(e) = sd.set_runtime(unit, &changed) {
            for a in added.into_iter().rev() {
                Self::unpush(&mut inner, a);
            }
            return Err(e).with_context(|| format!("setting {} of {}", changed.join(" "), unit));
        }
        log::debug!("{}: {}", unit, changed.join(" "));
        Ok(changed)
    }

    /// Starts transient unit `unit` with `props` after recording it (stopped at restore).
    /// `cgroup`: its directory, for leaving it before it is stopped.
    pub fn start_transient(
        &self,
        unit: &str,
        props: &[(&str, BusValue)],
        cgroup: Option<PathBuf>,
    ) -> Result<()> {
        let mut inner = lock(&self.inner);
        let sd = inner.systemd.clone();
        let added = self.record_transient_locked(&mut inner, unit, cgroup)?;
        if let Err(e) = systemd::start_transient_retrying(sd.as_ref(), unit, props) {
            Self::unpush(&mut inner, added);
            return Err(e).with_context(|| format!("starting transient unit {}", unit));
        }
        Ok(())
    }

    /// Records a transient unit someone else starts for us (the scope a process of ours is
    /// placed into), so that it is stopped at restore, also after a crash.
    pub fn record_transient(&self, unit: &str) -> Result<()> {
        let mut inner = lock(&self.inner);
        self.record_transient_locked(&mut inner, unit, None)
            .map(|_| ())
    }

    fn record_transient_locked(
        &self,
        inner: &mut super::Inner,
        unit: &str,
        cgroup: Option<PathBuf>,
    ) -> Result<bool> {
        Self::push(
            inner,
            Change::TransientUnit {
                unit: unit.to_string(),
                cgroup,
            },
        )
    }

    /// Stops `unit` for the run after recording it (started again at restore).
    pub fn stop_unit(&self, unit: &str) -> Result<()> {
        let mut inner = lock(&self.inner);
        let sd = inner.systemd.clone();
        let added = Self::push(
            &mut inner,
            Change::StoppedUnit {
                unit: unit.to_string(),
            },
        )?;
        if let Err(e) = sd.stop(unit) {
            Self::unpush(&mut inner, added);
            return Err(e).with_context(|| format!("stopping {}", unit));
        }
        log::info!("stopped {} for the run", unit);
        Ok(())
    }
}
