//! cgroup2 access on a root given at construction: the bench slice layout and its knobs,
//! controller enabling, moving processes, and readers for the stat and pressure files
//! (`files`: the kernel-file readers; `slices`: the slice layout and its memory policy).
//!
//! Writes into cgroups we create need no journal entry (removing the cgroup undoes them); a
//! write that changes a cgroup that existed before (the root's `cgroup.subtree_control`, a slice
//! left by someone else) first hands the old value to a [`ChangeJournal`].

use super::change_journal::ChangeJournal;
use super::systemd::Manager;
use super::HostPaths;
use anyhow::Context;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod files;
mod slices;

pub use files::*;
pub use slices::*;

/// cgroup2 below a root directory (`/sys/fs/cgroup` on a real host). On a systemd host the
/// units of our layout (`SLICE/rd-NAME.service`) are transient scopes (`SLICE/rd-NAME.scope`):
/// [`CgroupFs::path`] finds them there and [`CgroupFs::move_pid`] has systemd create them.
#[derive(Debug, Clone)]
pub struct CgroupFs {
    root: PathBuf,
    systemd: Option<Arc<dyn Manager>>,
}

impl PartialEq for CgroupFs {
    fn eq(&self, o: &Self) -> bool {
        self.root == o.root && self.systemd.is_some() == o.systemd.is_some()
    }
}

impl Eq for CgroupFs {}

impl CgroupFs {
    pub fn new(paths: &HostPaths) -> Self {
        Self {
            root: paths.cgroup(),
            systemd: paths.systemd().cloned(),
        }
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            systemd: None,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether systemd manages these cgroups.
    pub fn under_systemd(&self) -> bool {
        self.systemd.is_some()
    }

    /// The directory of cgroup `cg` (relative, e.g. `workload.slice/hashd.service`; `""` and
    /// `-.slice` are the root).
    pub fn path(&self, cg: &str) -> PathBuf {
        let cg = cg.trim_matches('/');
        if cg.is_empty() || cg == "-.slice" {
            self.root.clone()
        } else if self.systemd.is_some() {
            self.root.join(crate::system::systemd::cgroup_of(cg))
        } else {
            self.root.join(cg)
        }
    }

    fn file(&self, cg: &str, name: &str) -> PathBuf {
        self.path(cg).join(name)
    }

    /// Whether a cgroup2 hierarchy is mounted at the root.
    pub fn is_cgroup2(&self) -> bool {
        self.root.join("cgroup.controllers").is_file()
    }

    fn word_set(&self, cg: &str, name: &str) -> Result<BTreeSet<String>, KernelFileError> {
        let text = read_file(&self.file(cg, name))?;
        Ok(text.split_whitespace().map(str::to_string).collect())
    }

    /// `cgroup.controllers`: the controllers available to `cg`'s children.
    pub fn controllers(&self, cg: &str) -> Result<BTreeSet<String>, KernelFileError> {
        self.word_set(cg, "cgroup.controllers")
    }

    /// `cgroup.subtree_control`: the controllers enabled for `cg`'s children.
    pub fn subtree_control(&self, cg: &str) -> Result<BTreeSet<String>, KernelFileError> {
        self.word_set(cg, "cgroup.subtree_control")
    }

    /// Enables `ctrls` for the children of `cg`, writing only the missing ones. When `owned` is
    /// false (a cgroup we didn't create, like the root) the journal first gets the current
    /// controller list (restored by difference). Returns the controllers this call enabled.
    pub fn enable_controllers(
        &self,
        cg: &str,
        ctrls: &[Controller],
        owned: bool,
        journal: &mut dyn ChangeJournal,
    ) -> anyhow::Result<Vec<Controller>> {
        let avail = self.controllers(cg)?;
        let enabled = self.subtree_control(cg)?;
        let mut missing: Vec<Controller> = Vec::new();
        for c in ctrls {
            if enabled.contains(c.name()) || missing.contains(c) {
                continue;
            }
            if !avail.contains(c.name()) {
                return Err(KernelFileError::ControllerUnavailable {
                    path: self.file(cg, "cgroup.controllers"),
                    ctrl: c.name().to_string(),
                    avail: avail.iter().cloned().collect::<Vec<_>>().join(" "),
                }
                .into());
            }
            missing.push(*c);
        }
        if missing.is_empty() {
            return Ok(missing);
        }
        let path = self.file(cg, "cgroup.subtree_control");
        let enable = missing
            .iter()
            .map(|c| format!("+{}", c.name()))
            .collect::<Vec<_>>()
            .join(" ");
        if !owned {
            // The journal restores subtree_control from the old list by difference.
            let old: Vec<&str> = enabled.iter().map(String::as_str).collect();
            journal.record(&path, &old.join(" "))?;
        }
        write_file(&path, &enable)?;
        Ok(missing)
    }

    /// Creates cgroup `cg` (and missing parents) and tells the journal about every directory
    /// created. Returns whether `cg` itself was created.
    pub fn create(&self, cg: &str, journal: &mut dyn ChangeJournal) -> anyhow::Result<bool> {
        let target = self.path(cg);
        if target.is_dir() {
            return Ok(false);
        }
        let mut missing = Vec::new();
        let mut p = target.as_path();
        while !p.is_dir() && p != self.root {
            missing.push(p.to_path_buf());
            match p.parent() {
                Some(parent) => p = parent,
                None => break,
            }
        }
        for dir in missing.iter().rev() {
            match std::fs::create_dir(dir) {
                Ok(()) => journal.created_dir(dir)?,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(KernelFileError::Create {
                        path: dir.clone(),
                        source,
                    }
                    .into())
                }
            }
        }
        Ok(true)
    }

    /// Moves process `pid` into cgroup `cg`. Under systemd, a unit of our layout or a bare slice
    /// is a transient scope systemd creates with the process in it.
    pub fn move_pid(&self, cg: &str, pid: u32) -> anyhow::Result<()> {
        if let Some(sd) = &self.systemd {
            if let Some((slice, scope)) = crate::system::systemd::scope_for(cg, pid) {
                let props = crate::system::systemd::scope_props(&slice, pid);
                return crate::system::systemd::start_transient_retrying(
                    sd.as_ref(),
                    &scope,
                    &props,
                )
                .with_context(|| format!("placing process {} into {}/{}", pid, slice, scope));
            }
        }
        Ok(write_file(
            &self.file(cg, "cgroup.procs"),
            &pid.to_string(),
        )?)
    }

    /// The processes directly in `cg`.
    pub fn procs(&self, cg: &str) -> Result<Vec<u32>, KernelFileError> {
        let path = self.file(cg, "cgroup.procs");
        let text = read_file(&path)?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                l.trim()
                    .parse()
                    .map_err(|_| parse_err(&path, i + 1, format!("{:?} is not a pid", l)))
            })
            .collect()
    }

    /// Writes `value` to knob `name` of `cg` unless it already reads `current`-equal. `owned`
    /// says whether we created `cg`; if not, the old value goes to the journal first. Returns
    /// whether a write happened.
    fn set_knob(
        &self,
        cg: &str,
        name: &str,
        value: &str,
        owned: bool,
        journal: &mut dyn ChangeJournal,
        normalize: Normalize,
    ) -> anyhow::Result<bool> {
        let path = self.file(cg, name);
        let old = read_file(&path)?;
        let old = normalize(&old);
        if old == value {
            return Ok(false);
        }
        if !owned {
            journal.record(&path, &old)?;
        }
        write_file(&path, value)?;
        Ok(true)
    }

    /// Creates the slices of `layout` and sets their knobs. Slices that already existed are
    /// someone else's: their old knob values go to the journal before each change. The root
    /// must have cpu, io and memory enabled ([`CgroupFs::enable_controllers`]) first, or the
    /// kernel doesn't give the new slices those knob files.
    pub fn setup_slices(
        &self,
        layout: &[SliceConfig],
        journal: &mut dyn ChangeJournal,
    ) -> anyhow::Result<SliceSetup> {
        let mut setup = SliceSetup::default();
        for cfg in layout {
            let cg = cfg.slice.name();
            let owned = self.create(cg, journal)?;
            if owned {
                setup.created.push(self.path(cg));
            }
            let trimmed = |s: &str| s.trim().to_string();
            // io.weight reads "default N" plus per-device overrides; only the default is ours.
            let io_default = |s: &str| {
                s.lines()
                    .find(|l| l.starts_with("default"))
                    .map(|l| l.trim().to_string())
                    .unwrap_or_default()
            };
            let mut knobs: Vec<(&str, String, Normalize)> = vec![
                ("cpu.weight", cfg.cpu_weight.to_string(), trimmed),
                (
                    "io.weight",
                    format!("default {}", cfg.io_weight),
                    io_default,
                ),
                ("memory.min", mem_text(cfg.mem_min, "0"), trimmed),
                ("memory.low", mem_text(cfg.mem_low, "0"), trimmed),
                ("memory.high", mem_text(cfg.mem_high, "max"), trimmed),
            ];
            if let Some(swap) = cfg.swap_max {
                knobs.push(("memory.swap.max", mem_text(swap, "max"), trimmed));
            }
            for (name, value, normalize) in knobs {
                if self.set_knob(cg, name, &value, owned, journal, normalize)? {
                    setup.written.push(self.file(cg, name));
                }
            }
        }
        Ok(setup)
    }

    pub fn read_cpu_stat(&self, cg: &str) -> Result<CpuStat, KernelFileError> {
        let path = self.file(cg, "cpu.stat");
        let map = parse_flat_keyed(&path, &read_file(&path)?)?;
        let get = |k: &str| {
            map.get(k).copied().ok_or_else(|| KernelFileError::Missing {
                path: path.clone(),
                msg: format!("no {} line", k),
            })
        };
        Ok(CpuStat {
            usage_usec: get("usage_usec")?,
            user_usec: map.get("user_usec").copied().unwrap_or(0),
            system_usec: get("system_usec")?,
        })
    }

    pub fn read_memory_current(&self, cg: &str) -> Result<u64, KernelFileError> {
        let path = self.file(cg, "memory.current");
        parse_single_u64(&path, &read_file(&path)?)
    }

    pub fn read_swap_current(&self, cg: &str) -> Result<u64, KernelFileError> {
        let path = self.file(cg, "memory.swap.current");
        parse_single_u64(&path, &read_file(&path)?)
    }

    /// memory.stat as a flat map (`anon`, `file`, `pgmajfault`, …).
    pub fn read_memory_stat(&self, cg: &str) -> Result<BTreeMap<String, u64>, KernelFileError> {
        let path = self.file(cg, "memory.stat");
        parse_flat_keyed(&path, &read_file(&path)?)
    }

    /// memory.events as a flat map (`oom`, `oom_kill`, `high`, …).
    pub fn read_memory_events(&self, cg: &str) -> Result<BTreeMap<String, u64>, KernelFileError> {
        let path = self.file(cg, "memory.events");
        parse_flat_keyed(&path, &read_file(&path)?)
    }

    /// The kernel's OOM kills in `cg` (`oom_kill` of memory.events; 0 when unreadable).
    pub fn oom_kills(&self, cg: &str) -> u64 {
        self.read_memory_events(cg)
            .ok()
            .and_then(|ev| ev.get("oom_kill").copied())
            .unwrap_or(0)
    }

    pub fn read_io_stat(&self, cg: &str) -> Result<IoStat, KernelFileError> {
        let path = self.file(cg, "io.stat");
        parse_io_stat(&path, &read_file(&path)?)
    }

    pub fn read_pressure(&self, cg: &str, kind: PressureKind) -> Result<Pressure, KernelFileError> {
        let path = self.file(cg, kind.file());
        parse_pressure(&path, &read_file(&path)?)
    }

    /// A memory knob (`memory.min`, `memory.high`, …); `max` reads as `None`.
    pub fn read_mem_knob(&self, cg: &str, name: &str) -> Result<MemKnob, KernelFileError> {
        let path = self.file(cg, name);
        let text = read_file(&path)?;
        match text.trim() {
            "max" => Ok(None),
            t => t
                .parse()
                .map(Some)
                .map_err(|_| parse_err(&path, 1, format!("{:?} is not a size or max", t))),
        }
    }
}

/// Whether the host runs systemd as its init: `/run/systemd/system` exists (what
/// `sd_booted()` checks) or PID 1 is named `systemd`.
pub fn detect_systemd(paths: &HostPaths) -> bool {
    if paths.path("run/systemd/system").is_dir() {
        return true;
    }
    std::fs::read_to_string(paths.proc().join("1/comm"))
        .map(|c| c.trim() == "systemd")
        .unwrap_or(false)
}

/// `hp` with systemd attached when systemd manages the host's cgroups (and none was attached
/// yet, as tests attach a fake one).
pub fn managed(hp: HostPaths) -> HostPaths {
    if hp.systemd().is_some() || !detect_systemd(&hp) {
        return hp;
    }
    let sd = Arc::new(super::systemd::Systemctl::new(&hp.root));
    hp.with_systemd(sd)
}

#[cfg(test)]
mod tests;
