//! An in-memory systemd for unit tests: units with properties, runtime drop-ins, transient
//! units and a log of every call.

use super::manager::{BusValue, Manager};
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

#[derive(Debug, Clone, Default)]
pub struct FakeUnit {
    pub props: BTreeMap<String, String>,
    pub active: bool,
    pub transient: bool,
    /// A unit file: the unit is defined even when inactive.
    pub fragment: bool,
    pub dropins: BTreeSet<String>,
}

#[derive(Debug, Default)]
pub struct FakeSystemd {
    pub units: Mutex<BTreeMap<String, FakeUnit>>,
    pub calls: Mutex<Vec<String>>,
}

/// The values an unset property of a fresh unit shows.
fn default_prop(name: &str) -> &'static str {
    match name {
        "CPUWeight" | "IOWeight" => "[not set]",
        "MemoryHigh" | "MemoryMax" | "MemorySwapMax" => "infinity",
        _ => "0",
    }
}

impl FakeSystemd {
    /// A host with system.slice active (as every systemd host has it) and `active` services.
    pub fn new(active: &[&str]) -> Self {
        let f = Self::default();
        f.add("system.slice", true, true);
        for u in active {
            f.add(u, true, true);
        }
        f
    }

    pub fn add(&self, unit: &str, active: bool, fragment: bool) {
        self.units.lock().unwrap().insert(
            unit.to_string(),
            FakeUnit {
                active,
                fragment,
                ..Default::default()
            },
        );
    }

    pub fn unit(&self, unit: &str) -> Option<FakeUnit> {
        self.units.lock().unwrap().get(unit).cloned()
    }

    /// The value `show` gives for `prop` of `unit`.
    pub fn prop(&self, unit: &str, prop: &str) -> String {
        self.show(unit, &[prop]).unwrap().remove(prop).unwrap()
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn log(&self, s: String) {
        self.calls.lock().unwrap().push(s);
    }
}

impl Manager for FakeSystemd {
    fn show(&self, unit: &str, props: &[&str]) -> Result<BTreeMap<String, String>> {
        let units = self.units.lock().unwrap();
        let u = units.get(unit).cloned().unwrap_or_default();
        Ok(props
            .iter()
            .map(|p| {
                let v = match *p {
                    "ActiveState" => if u.active { "active" } else { "inactive" }.to_string(),
                    "FragmentPath" if u.fragment => format!("/lib/systemd/system/{}", unit),
                    "FragmentPath" => String::new(),
                    "DropInPaths" => u
                        .dropins
                        .iter()
                        .map(|d| format!("/run/systemd/system.control/{}.d/50-{}.conf", unit, d))
                        .collect::<Vec<_>>()
                        .join(" "),
                    "Transient" => if u.transient { "yes" } else { "no" }.to_string(),
                    name => u
                        .props
                        .get(name)
                        .cloned()
                        .unwrap_or_else(|| default_prop(name).to_string()),
                };
                (p.to_string(), v)
            })
            .collect())
    }

    fn set_runtime(&self, unit: &str, assignments: &[String]) -> Result<()> {
        self.log(format!("set-property {} {}", unit, assignments.join(" ")));
        let mut units = self.units.lock().unwrap();
        let u = units.entry(unit.to_string()).or_default();
        for a in assignments {
            let Some((k, v)) = a.split_once('=') else {
                bail!("bad assignment {:?}", a);
            };
            if v.is_empty() {
                u.props.remove(k);
            } else {
                u.props.insert(k.to_string(), v.to_string());
            }
            u.dropins.insert(k.to_string());
        }
        Ok(())
    }

    fn start_transient(&self, unit: &str, props: &[(&str, BusValue)]) -> Result<()> {
        let mut units = self.units.lock().unwrap();
        if units.get(unit).is_some_and(|u| u.active) {
            bail!("Unit {} was already loaded or has a fragment file.", unit);
        }
        self.log(format!("start-transient {}", unit));
        let mut u = FakeUnit {
            active: true,
            transient: true,
            ..Default::default()
        };
        for (k, v) in props {
            let text = match v {
                BusValue::Str(s) => s.clone(),
                BusValue::U64(u64::MAX) => "infinity".into(),
                BusValue::U64(n) => n.to_string(),
                BusValue::Bool(b) => if *b { "yes" } else { "no" }.into(),
                BusValue::Pids(p) => format!("{:?}", p),
            };
            u.props.insert(k.to_string(), text);
        }
        units.insert(unit.to_string(), u);
        Ok(())
    }

    fn stop(&self, unit: &str) -> Result<()> {
        self.log(format!("stop {}", unit));
        let mut units = self.units.lock().unwrap();
        let transient = units.get(unit).is_some_and(|u| u.transient);
        if transient {
            units.remove(unit);
        } else if let Some(u) = units.get_mut(unit) {
            u.active = false;
        }
        Ok(())
    }

    fn start(&self, unit: &str) -> Result<()> {
        self.log(format!("start {}", unit));
        let mut units = self.units.lock().unwrap();
        match units.get_mut(unit) {
            Some(u) => u.active = true,
            None => bail!("Unit {} not found.", unit),
        }
        Ok(())
    }

    fn has_runtime_dropin(&self, unit: &str, prop: &str) -> bool {
        self.unit(unit).is_some_and(|u| u.dropins.contains(prop))
    }

    fn remove_runtime_dropins(&self, unit: &str, props: &[&str]) -> Result<()> {
        self.log(format!("remove-dropins {} {}", unit, props.join(" ")));
        if let Some(u) = self.units.lock().unwrap().get_mut(unit) {
            if props.is_empty() {
                u.dropins.clear();
            } else {
                for p in props {
                    u.dropins.remove(*p);
                }
            }
        }
        Ok(())
    }
}
