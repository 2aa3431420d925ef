//! cgroup2 access on a root given at construction: the bench slice layout and its knobs,
//! controller enabling, moving processes, and readers for the stat and pressure files.
//!
//! Writes into cgroups we create need no journal entry (removing the cgroup undoes them); a
//! write that changes a cgroup that existed before (the root's `cgroup.subtree_control`, a slice
//! left by someone else) first hands the old value to a [`ChangeJournal`].

use super::journal_api::ChangeJournal;
use super::HostPaths;
use crate::error::UsageError;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const PAGE: u64 = 4 * KIB;

/// What went wrong reading or writing a kernel file; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum KernelFileError {
    #[error("can't read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("can't write {value:?} to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: std::io::Error,
    },
    #[error("can't create cgroup {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: line {line}: {msg}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{}: {msg}", path.display())]
    Missing { path: PathBuf, msg: String },
    #[error(
        "the cgroup2 controller {ctrl:?} is not available in {} (it lists: {avail}); \
         enable it in the kernel or the parent cgroup",
        path.display()
    )]
    ControllerUnavailable {
        path: PathBuf,
        ctrl: String,
        avail: String,
    },
}

fn parse_err(path: &Path, line: usize, msg: impl Into<String>) -> KernelFileError {
    KernelFileError::Parse {
        path: path.to_path_buf(),
        line,
        msg: msg.into(),
    }
}

/// Reads a whole kernel file.
pub fn read_file(path: &Path) -> Result<String, KernelFileError> {
    std::fs::read_to_string(path).map_err(|source| KernelFileError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `value` to a kernel file in one write (the kernel parses each write on its own).
pub fn write_file(path: &Path, value: &str) -> Result<(), KernelFileError> {
    use std::io::Write;
    // O_TRUNC is what a shell `echo >` does; kernfs ignores it, plain files (tests) need it.
    let res = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()));
    res.map_err(|source| KernelFileError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

/// `MAJ:MIN` of a block device, as io.stat and io.cost.* key their lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DevNr {
    pub maj: u32,
    pub min: u32,
}

impl DevNr {
    pub fn new(maj: u32, min: u32) -> Self {
        Self { maj, min }
    }
}

impl fmt::Display for DevNr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.maj, self.min)
    }
}

impl FromStr for DevNr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "{:?} is not a device number (accepted: MAJ:MIN like 259:0)",
                s
            )
        };
        let (maj, min) = s.split_once(':').ok_or_else(bad)?;
        Ok(Self {
            maj: maj.parse().map_err(|_| bad())?,
            min: min.parse().map_err(|_| bad())?,
        })
    }
}

/// A flat keyed file (`key value` per line: cpu.stat, memory.stat) as a map.
pub fn parse_flat_keyed(path: &Path, text: &str) -> Result<BTreeMap<String, u64>, KernelFileError> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut toks = line.split_whitespace();
        let (Some(key), Some(val), None) = (toks.next(), toks.next(), toks.next()) else {
            return Err(parse_err(
                path,
                i + 1,
                format!("{:?} is not \"KEY VALUE\"", line),
            ));
        };
        let v = val
            .parse::<u64>()
            .map_err(|_| parse_err(path, i + 1, format!("{}: {:?} is not a count", key, val)))?;
        map.insert(key.to_string(), v);
    }
    Ok(map)
}

/// A nested keyed file (`KEY k=v k=v …` per line: io.stat, io.cost.*, *.pressure) as
/// `KEY → {k → v}`, values left as text.
pub fn parse_nested_keyed(
    path: &Path,
    text: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, KernelFileError> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut toks = line.split_whitespace();
        let Some(key) = toks.next() else { continue };
        let mut kv = BTreeMap::new();
        for tok in toks {
            let (k, v) = tok.split_once('=').ok_or_else(|| {
                parse_err(path, i + 1, format!("{:?} after {} is not k=v", tok, key))
            })?;
            kv.insert(k.to_string(), v.to_string());
        }
        map.insert(key.to_string(), kv);
    }
    Ok(map)
}

/// A nested-keyed value as a number, or an error naming the file, the line key and the field.
pub fn nested_num<T: FromStr>(
    path: &Path,
    key: &str,
    kv: &BTreeMap<String, String>,
    field: &str,
) -> Result<T, KernelFileError> {
    let Some(v) = kv.get(field) else {
        return Err(KernelFileError::Missing {
            path: path.to_path_buf(),
            msg: format!("the {} line has no {}=", key, field),
        });
    };
    v.parse().map_err(|_| KernelFileError::Missing {
        path: path.to_path_buf(),
        msg: format!("{} {}={:?} is not a number", key, field, v),
    })
}

/// A single-number file (memory.current, memory.swap.current).
pub fn parse_single_u64(path: &Path, text: &str) -> Result<u64, KernelFileError> {
    let t = text.trim();
    t.parse()
        .map_err(|_| parse_err(path, 1, format!("{:?} is not a count", t)))
}

/// The cgroup2 controllers we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Controller {
    Cpu,
    Io,
    Memory,
}

impl Controller {
    pub const ALL: [Controller; 3] = [Controller::Cpu, Controller::Io, Controller::Memory];

    pub fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Io => "io",
            Controller::Memory => "memory",
        }
    }
}

/// Which `*.pressure` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PressureKind {
    Cpu,
    Memory,
    Io,
}

impl PressureKind {
    pub fn file(self) -> &'static str {
        match self {
            PressureKind::Cpu => "cpu.pressure",
            PressureKind::Memory => "memory.pressure",
            PressureKind::Io => "io.pressure",
        }
    }
}

/// One line of a pressure file; `total` is cumulative stall time in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PressureLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total: u64,
}

/// A `*.pressure` file; `full` is `None` where the kernel doesn't report it (cpu on old
/// kernels).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    pub some: PressureLine,
    pub full: Option<PressureLine>,
}

pub fn parse_pressure(path: &Path, text: &str) -> Result<Pressure, KernelFileError> {
    let map = parse_nested_keyed(path, text)?;
    let line = |key: &str| -> Result<Option<PressureLine>, KernelFileError> {
        let Some(kv) = map.get(key) else {
            return Ok(None);
        };
        Ok(Some(PressureLine {
            avg10: nested_num(path, key, kv, "avg10")?,
            avg60: nested_num(path, key, kv, "avg60")?,
            avg300: nested_num(path, key, kv, "avg300")?,
            total: nested_num(path, key, kv, "total")?,
        }))
    };
    let some = line("some")?.ok_or_else(|| KernelFileError::Missing {
        path: path.to_path_buf(),
        msg: "no \"some\" line".into(),
    })?;
    Ok(Pressure {
        some,
        full: line("full")?,
    })
}

/// The cpu.stat values the reports use (microseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    pub usage_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
}

/// io.stat: per device, every `k=v` as a number (`rbytes`, `wios`, `cost.vrate`, …).
pub type IoStat = BTreeMap<DevNr, BTreeMap<String, f64>>;

pub fn parse_io_stat(path: &Path, text: &str) -> Result<IoStat, KernelFileError> {
    let mut out = IoStat::new();
    for (key, kv) in parse_nested_keyed(path, text)? {
        let dev: DevNr = key.parse().map_err(|e: String| KernelFileError::Missing {
            path: path.to_path_buf(),
            msg: e,
        })?;
        let mut vals = BTreeMap::new();
        for k in kv.keys() {
            vals.insert(k.clone(), nested_num::<f64>(path, &key, &kv, k)?);
        }
        out.insert(dev, vals);
    }
    Ok(out)
}

/// A memory knob: `None` is 0 for protections (memory.min/low) and `max` for limits
/// (memory.high, memory.swap.max).
pub type MemKnob = Option<u64>;

/// The slices the benches use, directly below the cgroup2 root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Slice {
    HostCritical,
    Workload,
    System,
    Balloon,
    Sideload,
}

impl Slice {
    pub fn name(self) -> &'static str {
        match self {
            Slice::HostCritical => "hostcritical.slice",
            Slice::Workload => "workload.slice",
            Slice::System => "system.slice",
            Slice::Balloon => "balloon.slice",
            Slice::Sideload => "sideload.slice",
        }
    }
}

/// Turns a knob file's text into the form we compare against (and journal).
type Normalize = fn(&str) -> String;

/// Target knobs of one slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceConfig {
    pub slice: Slice,
    pub cpu_weight: u32,
    pub io_weight: u32,
    pub mem_min: MemKnob,
    pub mem_low: MemKnob,
    pub mem_high: MemKnob,
    /// `memory.swap.max`; `None` leaves the knob alone.
    pub swap_max: Option<MemKnob>,
}

/// The memory protection upstream gives hostcritical.slice (768 MiB).
pub const HOSTCRITICAL_MEM_MIN: u64 = 768 * MIB;

/// workload.slice memory.low for a memory profile: `mem_share × (1 − mem_margin)`.
pub fn workload_mem_low(mem_share: u64, mem_margin: f64) -> u64 {
    (mem_share as f64 * (1.0 - mem_margin.clamp(0.0, 1.0))).round() as u64
}

/// The bench slice layout (hostcritical, workload, system, balloon) with upstream's weights and
/// protections; `workload_mem_low` usually from [`workload_mem_low`]. The balloon slice gets no
/// swap so the memory it holds stays resident.
pub fn bench_slices(workload_mem_low: u64) -> Vec<SliceConfig> {
    let cfg = |slice, cpu_weight, io_weight, mem_min, mem_low| SliceConfig {
        slice,
        cpu_weight,
        io_weight,
        mem_min,
        mem_low,
        mem_high: None,
        swap_max: None,
    };
    vec![
        cfg(
            Slice::HostCritical,
            10,
            100,
            Some(HOSTCRITICAL_MEM_MIN),
            None,
        ),
        cfg(Slice::Workload, 100, 500, None, Some(workload_mem_low)),
        cfg(Slice::System, 10, 50, None, None),
        SliceConfig {
            swap_max: Some(Some(0)),
            ..cfg(Slice::Balloon, 100, 100, None, None)
        },
    ]
}

/// sideload.slice, for when sideloads arrive.
pub fn sideload_slice() -> SliceConfig {
    SliceConfig {
        slice: Slice::Sideload,
        cpu_weight: 1,
        io_weight: 1,
        mem_min: None,
        mem_low: None,
        mem_high: None,
        swap_max: None,
    }
}

/// What [`CgroupFs::setup_slices`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SliceSetup {
    /// Cgroups we created (remove them to undo).
    pub created: Vec<PathBuf>,
    /// Knob files whose value we changed.
    pub written: Vec<PathBuf>,
}

fn mem_text(v: MemKnob, unset: &str) -> String {
    match v {
        // The kernel keeps whole pages; write what it will show so re-checks compare equal.
        Some(b) => (b / PAGE * PAGE).to_string(),
        None => unset.to_string(),
    }
}

/// cgroup2 below a root directory (`/sys/fs/cgroup` on a real host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFs {
    root: PathBuf,
}

impl CgroupFs {
    pub fn new(paths: &HostPaths) -> Self {
        Self {
            root: paths.cgroup(),
        }
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of cgroup `cg` (relative, e.g. `workload.slice/hashd.service`; `""` and
    /// `-.slice` are the root).
    pub fn path(&self, cg: &str) -> PathBuf {
        let cg = cg.trim_matches('/');
        if cg.is_empty() || cg == "-.slice" {
            self.root.clone()
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

    /// Moves process `pid` into cgroup `cg`.
    pub fn move_pid(&self, cg: &str, pid: u32) -> Result<(), KernelFileError> {
        write_file(&self.file(cg, "cgroup.procs"), &pid.to_string())
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

/// Refuses to run benches on a systemd host unless `force`: we'd be changing cgroups systemd
/// manages.
pub fn check_no_systemd(paths: &HostPaths, force: bool) -> anyhow::Result<()> {
    if !detect_systemd(paths) {
        return Ok(());
    }
    if force {
        log::warn!("systemd manages this host's cgroups; continuing because of --force");
        return Ok(());
    }
    Err(UsageError::new(
        "this host runs systemd, which manages the cgroup tree resctl-bench would configure \
         directly; run the benches in a host without systemd (see `resctl-bench vm`) or pass \
         --force to continue anyway",
    )
    .into())
}

#[cfg(test)]
mod tests {
    use super::super::journal_api::{MemJournal, NoJournal};
    use super::*;
    use std::fs;

    struct Tree {
        _tmp: tempfile::TempDir,
        paths: HostPaths,
        cg: CgroupFs,
    }

    fn tree() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HostPaths::under(tmp.path());
        let cg = CgroupFs::new(&paths);
        fs::create_dir_all(cg.root()).unwrap();
        fs::write(
            cg.root().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        fs::write(cg.root().join("cgroup.subtree_control"), "memory pids\n").unwrap();
        Tree {
            _tmp: tmp,
            paths,
            cg,
        }
    }

    fn put(cg: &CgroupFs, rel: &str, text: &str) {
        let p = cg.path("").join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn knobs(cg: &CgroupFs, slice: &str) {
        put(cg, &format!("{}/cpu.weight", slice), "100\n");
        put(cg, &format!("{}/io.weight", slice), "default 100\n");
        put(cg, &format!("{}/memory.min", slice), "0\n");
        put(cg, &format!("{}/memory.low", slice), "0\n");
        put(cg, &format!("{}/memory.high", slice), "max\n");
        put(cg, &format!("{}/memory.swap.max", slice), "max\n");
    }

    fn text(p: PathBuf) -> String {
        fs::read_to_string(p).unwrap()
    }

    #[test]
    fn devnr_round_trip() {
        let d: DevNr = "259:3".parse().unwrap();
        assert_eq!(d, DevNr::new(259, 3));
        assert_eq!(d.to_string(), "259:3");
        assert!("259".parse::<DevNr>().is_err());
        assert!("a:b".parse::<DevNr>().is_err());
    }

    #[test]
    fn workload_mem_low_uses_margin() {
        assert_eq!(workload_mem_low(12 << 30, 0.25), 9 << 30);
        assert_eq!(workload_mem_low(8 << 30, 0.0), 8 << 30);
        let l = bench_slices(9 << 30);
        let names: Vec<&str> = l.iter().map(|c| c.slice.name()).collect();
        assert_eq!(
            names,
            [
                "hostcritical.slice",
                "workload.slice",
                "system.slice",
                "balloon.slice"
            ]
        );
        assert_eq!((l[1].cpu_weight, l[1].io_weight), (100, 500));
        assert_eq!((l[2].cpu_weight, l[2].io_weight), (10, 50));
        assert_eq!(l[0].mem_min, Some(768 << 20));
        assert_eq!(sideload_slice().cpu_weight, 1);
    }

    #[test]
    fn setup_slices_journals_existing_slices() {
        let t = tree();
        let mut j = MemJournal::default();
        let layout = bench_slices((9 << 30) + 123);
        // A plain directory gets no knob files (a kernel would add them): the first write
        // fails, naming the file, after the journal heard about the created cgroup.
        let err = t.cg.setup_slices(&layout, &mut j).unwrap_err();
        assert!(format!("{:#}", err).contains("hostcritical.slice/cpu.weight"));
        assert_eq!(j.created, vec![t.cg.path("hostcritical.slice")]);
        assert!(j.records.is_empty());

        // Slices that already exist (someone else's) with default knobs.
        let t = tree();
        for c in &layout {
            fs::create_dir(t.cg.path(c.slice.name())).unwrap();
            knobs(&t.cg, c.slice.name());
        }
        let mut j = MemJournal::default();
        let setup = t.cg.setup_slices(&layout, &mut j).unwrap();
        assert!(setup.created.is_empty());
        let wl = t.cg.path("workload.slice");
        assert_eq!(text(wl.join("io.weight")), "default 500");
        assert_eq!(text(wl.join("cpu.weight")), "100\n"); // unchanged, not rewritten
        assert_eq!(text(wl.join("memory.low")), (9u64 << 30).to_string());
        let hc = t.cg.path("hostcritical.slice");
        assert_eq!(text(hc.join("memory.min")), (768u64 << 20).to_string());
        assert_eq!(text(hc.join("cpu.weight")), "10");
        assert_eq!(
            text(t.cg.path("balloon.slice").join("memory.swap.max")),
            "0"
        );
        assert_eq!(
            text(t.cg.path("system.slice").join("io.weight")),
            "default 50"
        );
        // The slices existed, so every change was journaled with the old value first.
        assert!(j
            .records
            .contains(&(wl.join("io.weight"), "default 100".to_string())));
        assert!(j
            .records
            .contains(&(hc.join("memory.min"), "0".to_string())));
        assert_eq!(j.records.len(), setup.written.len());

        // Second run: nothing to change.
        let mut j2 = MemJournal::default();
        let again = t.cg.setup_slices(&layout, &mut j2).unwrap();
        assert!(again.written.is_empty() && j2.records.is_empty());
    }

    #[test]
    fn owned_slices_write_without_journal() {
        let t = tree();
        struct Populate<'a>(&'a CgroupFs, MemJournal);
        impl ChangeJournal for Populate<'_> {
            fn record(&mut self, path: &Path, old: &str) -> anyhow::Result<()> {
                self.1.record(path, old)
            }
            fn created_dir(&mut self, path: &Path) -> anyhow::Result<()> {
                // Play the kernel: a new cgroup comes with its knob files.
                let name = path.file_name().unwrap().to_str().unwrap().to_string();
                knobs(self.0, &name);
                self.1.created_dir(path)
            }
        }
        let mut j = Populate(&t.cg, MemJournal::default());
        let setup = t.cg.setup_slices(&bench_slices(1 << 30), &mut j).unwrap();
        assert_eq!(setup.created.len(), 4);
        assert_eq!(j.1.created.len(), 4);
        assert!(j.1.records.is_empty());
        assert_eq!(text(t.cg.path("workload.slice/memory.low")), "1073741824");
    }

    #[test]
    fn enable_controllers_journals_root() {
        let t = tree();
        let mut j = MemJournal::default();
        let added =
            t.cg.enable_controllers("", &Controller::ALL, false, &mut j)
                .unwrap();
        assert_eq!(added, vec![Controller::Cpu, Controller::Io]);
        assert_eq!(text(t.cg.root().join("cgroup.subtree_control")), "+cpu +io");
        assert_eq!(
            j.records,
            vec![(
                t.cg.root().join("cgroup.subtree_control"),
                "memory pids".into()
            )]
        );

        // Nothing missing: no write, no record.
        fs::write(
            t.cg.root().join("cgroup.subtree_control"),
            "cpu io memory\n",
        )
        .unwrap();
        let mut j = MemJournal::default();
        assert!(t
            .cg
            .enable_controllers("", &Controller::ALL, false, &mut j)
            .unwrap()
            .is_empty());
        assert!(j.records.is_empty());

        // Unavailable controller.
        fs::write(t.cg.root().join("cgroup.controllers"), "cpu memory\n").unwrap();
        fs::write(t.cg.root().join("cgroup.subtree_control"), "\n").unwrap();
        let e =
            t.cg.enable_controllers("", &Controller::ALL, false, &mut NoJournal)
                .unwrap_err();
        assert!(format!("{}", e).contains("controller \"io\" is not available"));
    }

    #[test]
    fn create_and_move() {
        let t = tree();
        let mut j = MemJournal::default();
        assert!(t.cg.create("workload.slice/hashd.service", &mut j).unwrap());
        assert_eq!(
            j.created,
            vec![
                t.cg.path("workload.slice"),
                t.cg.path("workload.slice/hashd.service")
            ]
        );
        assert!(!t.cg.create("workload.slice", &mut j).unwrap());
        put(&t.cg, "workload.slice/hashd.service/cgroup.procs", "");
        t.cg.move_pid("workload.slice/hashd.service", 1234).unwrap();
        assert_eq!(
            t.cg.procs("workload.slice/hashd.service").unwrap(),
            vec![1234]
        );
        let e = t.cg.move_pid("nope.slice", 1).unwrap_err();
        assert!(e.to_string().contains("nope.slice/cgroup.procs"));
    }

    #[test]
    fn reads_stat_files() {
        let t = tree();
        let s = "workload.slice";
        put(
            &t.cg,
            "workload.slice/cpu.stat",
            "usage_usec 1000\nuser_usec 700\nsystem_usec 300\nnr_periods 0\n",
        );
        put(&t.cg, "workload.slice/memory.current", "4096\n");
        put(&t.cg, "workload.slice/memory.swap.current", "0\n");
        put(
            &t.cg,
            "workload.slice/memory.stat",
            "anon 100\nfile 200\npgmajfault 3\n",
        );
        put(
            &t.cg,
            "workload.slice/io.stat",
            "259:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0 cost.vrate=98.50 \
             cost.usage=5 cost.wait=6 cost.indebt=0 cost.indelay=0\n8:16 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n",
        );
        put(
            &t.cg,
            "workload.slice/io.pressure",
            "some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=77\n",
        );
        put(
            &t.cg,
            "workload.slice/cpu.pressure",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
        );
        put(&t.cg, "workload.slice/memory.high", "max\n");
        put(&t.cg, "workload.slice/memory.low", "1048576\n");

        let c = t.cg.read_cpu_stat(s).unwrap();
        assert_eq!((c.usage_usec, c.user_usec, c.system_usec), (1000, 700, 300));
        assert_eq!(t.cg.read_memory_current(s).unwrap(), 4096);
        assert_eq!(t.cg.read_swap_current(s).unwrap(), 0);
        assert_eq!(t.cg.read_memory_stat(s).unwrap()["file"], 200);
        let io = t.cg.read_io_stat(s).unwrap();
        let d = &io[&DevNr::new(259, 0)];
        assert_eq!((d["rbytes"], d["wios"], d["cost.vrate"]), (10.0, 2.0, 98.5));
        assert_eq!(d["cost.usage"], 5.0);
        assert_eq!(io[&DevNr::new(8, 16)]["rios"], 3.0);
        let p = t.cg.read_pressure(s, PressureKind::Io).unwrap();
        assert_eq!((p.some.avg10, p.some.total), (1.5, 12345));
        assert_eq!(p.full.unwrap().total, 77);
        assert!(t
            .cg
            .read_pressure(s, PressureKind::Cpu)
            .unwrap()
            .full
            .is_none());
        assert_eq!(t.cg.read_mem_knob(s, "memory.high").unwrap(), None);
        assert_eq!(t.cg.read_mem_knob(s, "memory.low").unwrap(), Some(1 << 20));
    }

    #[test]
    fn malformed_files_are_errors_naming_the_file() {
        let t = tree();
        let s = "system.slice";
        let cases: &[(&str, &str, &str)] = &[
            ("cpu.stat", "usage_usec 1\n", "no system_usec"),
            (
                "cpu.stat",
                "usage_usec x\nsystem_usec 1\n",
                "is not a count",
            ),
            ("cpu.stat", "usage_usec\n", "is not \"KEY VALUE\""),
            ("memory.current", "lots\n", "is not a count"),
            ("memory.stat", "anon 1 2\n", "line 1"),
            ("io.stat", "259:0 rbytes\n", "is not k=v"),
            ("io.stat", "259:0 rbytes=x\n", "is not a number"),
            ("io.stat", "sda rbytes=1\n", "not a device number"),
            (
                "io.pressure",
                "full avg10=0 avg60=0 avg300=0 total=1\n",
                "no \"some\"",
            ),
            (
                "io.pressure",
                "some avg10=0 avg60=0 total=1\n",
                "no avg300=",
            ),
            ("memory.high", "maximum\n", "not a size or max"),
        ];
        for (file, content, want) in cases {
            put(&t.cg, &format!("{}/{}", s, file), content);
            let err = match *file {
                "cpu.stat" => t.cg.read_cpu_stat(s).map(|_| ()),
                "memory.current" => t.cg.read_memory_current(s).map(|_| ()),
                "memory.stat" => t.cg.read_memory_stat(s).map(|_| ()),
                "io.stat" => t.cg.read_io_stat(s).map(|_| ()),
                "io.pressure" => t.cg.read_pressure(s, PressureKind::Io).map(|_| ()),
                _ => t.cg.read_mem_knob(s, file).map(|_| ()),
            }
            .unwrap_err()
            .to_string();
            assert!(err.contains(want), "{}: {:?} lacks {:?}", file, err, want);
            assert!(err.contains(&format!("system.slice/{}", file)), "{}", err);
        }
        let missing = t.cg.read_swap_current(s).unwrap_err().to_string();
        assert!(missing.contains("memory.swap.current"), "{}", missing);
    }

    #[test]
    fn systemd_detection() {
        let t = tree();
        assert!(!detect_systemd(&t.paths));
        assert!(check_no_systemd(&t.paths, false).is_ok());
        fs::create_dir_all(t.paths.proc().join("1")).unwrap();
        fs::write(t.paths.proc().join("1/comm"), "init\n").unwrap();
        assert!(!detect_systemd(&t.paths));
        fs::write(t.paths.proc().join("1/comm"), "systemd\n").unwrap();
        assert!(detect_systemd(&t.paths));
        let e = check_no_systemd(&t.paths, false).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("--force"));
        assert!(check_no_systemd(&t.paths, true).is_ok());
        fs::write(t.paths.proc().join("1/comm"), "init\n").unwrap();
        fs::create_dir_all(t.paths.path("run/systemd/system")).unwrap();
        assert!(detect_systemd(&t.paths));
    }
}
