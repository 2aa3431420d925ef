//! The unit properties a slice's knobs map to, in the forms systemd takes them: a
//! `set-property` assignment and a value of a transient unit; and back from what `systemctl
//! show` prints to the assignment that restores it.

use super::manager::BusValue;

/// systemd's "no limit" for memory properties.
pub const INFINITY: u64 = u64::MAX;

/// One property of a slice, with the value we want.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitProp {
    pub name: &'static str,
    /// `None`: the property's "no limit" (`infinity`).
    pub value: Option<u64>,
}

impl UnitProp {
    pub fn new(name: &'static str, value: Option<u64>) -> Self {
        Self { name, value }
    }

    /// The value as `systemctl show` prints it, for comparing with the current one.
    pub fn shown(&self) -> String {
        match self.value {
            Some(v) => v.to_string(),
            None => "infinity".into(),
        }
    }

    /// `NAME=VALUE` for `systemctl set-property`.
    pub fn assignment(&self) -> String {
        format!("{}={}", self.name, self.shown())
    }

    pub fn bus(&self) -> (&'static str, BusValue) {
        (self.name, BusValue::U64(self.value.unwrap_or(INFINITY)))
    }
}

/// What restores a property from the value `systemctl show` printed before we changed it:
/// `[not set]` (a weight left to the default) is the empty assignment, which resets it.
pub fn restore_assignment(name: &str, shown: &str) -> String {
    match shown.trim() {
        "[not set]" => format!("{}=", name),
        v => format!("{}={}", name, v),
    }
}

/// The prefix of the units of our layout (upstream's names: `rd-hashd-A.service`, …).
pub const UNIT_PREFIX: &str = "rd-";

/// The stem of `SLICE/rd-NAME.service`, a unit of our layout directly in a slice.
fn our_unit(cg: &str) -> Option<(&str, &str)> {
    let (slice, unit) = cg.split_once('/')?;
    let stem = unit.strip_suffix(".service")?;
    (slice.ends_with(".slice") && stem.starts_with(UNIT_PREFIX) && !stem.contains('/'))
        .then_some((slice, stem))
}

/// The processes' scope for cgroup `cg` of our layout: `SLICE/rd-NAME.service` (a unit upstream
/// runs as a service) is the scope `rd-NAME.scope` in `SLICE`; a bare `SLICE` (a process of ours
/// moved into the slice itself) gets a scope of its own, `resctl-bench-PID.scope`. Other paths
/// are not ours to place through systemd.
pub fn scope_for(cg: &str, pid: u32) -> Option<(String, String)> {
    let cg = cg.trim_matches('/');
    if let Some((slice, stem)) = our_unit(cg) {
        return Some((slice.to_string(), format!("{}.scope", stem)));
    }
    (!cg.contains('/') && cg.ends_with(".slice") && cg != "-.slice")
        .then(|| (cg.to_string(), format!("resctl-bench-{}.scope", pid)))
}

/// Where the cgroup of unit path `cg` is on a systemd host: `SLICE/rd-NAME.service` of our
/// layout runs as the scope `SLICE/rd-NAME.scope`; anything else is where it says.
pub fn cgroup_of(cg: &str) -> String {
    let t = cg.trim_matches('/');
    match our_unit(t) {
        Some((slice, stem)) => format!("{}/{}.scope", slice, stem),
        None => t.to_string(),
    }
}

/// The properties of a transient scope holding `pid` in `slice`: collected once it ends, with
/// the accounting the reports read (cpu.stat, memory.*, io.stat of its own cgroup).
pub fn scope_props(slice: &str, pid: u32) -> Vec<(&'static str, BusValue)> {
    vec![
        ("PIDs", BusValue::Pids(vec![pid])),
        ("Slice", BusValue::Str(slice.to_string())),
        ("CollectMode", BusValue::Str("inactive-or-failed".into())),
        ("CPUAccounting", BusValue::Bool(true)),
        ("MemoryAccounting", BusValue::Bool(true)),
        ("IOAccounting", BusValue::Bool(true)),
        (
            "Description",
            BusValue::Str("resctl-bench: a process of a running benchmark".into()),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_and_restores() {
        let p = UnitProp::new("MemoryLow", Some(1 << 30));
        assert_eq!(p.assignment(), "MemoryLow=1073741824");
        assert_eq!(
            UnitProp::new("MemoryHigh", None).assignment(),
            "MemoryHigh=infinity"
        );
        assert_eq!(
            UnitProp::new("MemorySwapMax", None).bus(),
            ("MemorySwapMax", BusValue::U64(u64::MAX))
        );
        assert_eq!(restore_assignment("IOWeight", "[not set]"), "IOWeight=");
        assert_eq!(restore_assignment("MemoryLow", "0"), "MemoryLow=0");
        assert_eq!(
            restore_assignment("MemoryHigh", "infinity"),
            "MemoryHigh=infinity"
        );
    }

    #[test]
    fn our_units_run_as_scopes() {
        assert_eq!(
            scope_for("workload.slice/rd-hashd-A.service", 7),
            Some(("workload.slice".into(), "rd-hashd-A.scope".into()))
        );
        assert_eq!(
            scope_for("/hostcritical.slice", 42),
            Some(("hostcritical.slice".into(), "resctl-bench-42.scope".into()))
        );
        assert_eq!(
            scope_for("user.slice/user-0.slice/session-1.scope", 1),
            None
        );
        assert_eq!(scope_for("-.slice", 1), None);
        assert_eq!(scope_for("system.slice/a/b.service", 1), None);
        assert_eq!(scope_for("system.slice/ssh.service", 1), None);
        assert_eq!(
            cgroup_of("system.slice/resctl-bench-vm.service"),
            "system.slice/resctl-bench-vm.service"
        );
        assert_eq!(
            cgroup_of("system.slice/rd-sysload-mem-hog.service"),
            "system.slice/rd-sysload-mem-hog.scope"
        );
        assert_eq!(cgroup_of("workload.slice"), "workload.slice");
        assert_eq!(
            cgroup_of("user.slice/user-0.slice/session-1.scope"),
            "user.slice/user-0.slice/session-1.scope"
        );
    }
}
