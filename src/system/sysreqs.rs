//! System requirements that matter without systemd and oomd: each is checked against the host
//! (through [`HostPaths`]), fixed where a fix exists and the resource isn't `passive=`, and
//! reported in upstream's `sysreqs_report` layout.
//!
//! Every fix goes through the restore [`Journal`], so the host gets its values back at exit.
//! Checks always read the host afresh: after the fix pass they are simply run again.

use crate::error::UsageError;
use crate::system::blockdev::{self, Scratch};
use crate::system::restore::{Journal, Remount};
use crate::system::sysinfo::{self, HostInfo};
use crate::system::HostPaths;
use crate::units::format_size;
use anyhow::Result;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// Which resources we may change; the complement is what `passive=` names. Upstream's layout;
/// a missing field reads as enforced (the header of files without it shows no `passive=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Enforce {
    pub crit_mem_prot: bool,
    pub cpu: bool,
    pub mem: bool,
    pub io: bool,
    pub fs: bool,
    pub oomd: bool,
}

impl Default for Enforce {
    fn default() -> Self {
        Self::all()
    }
}

impl Enforce {
    pub fn all() -> Self {
        Self {
            crit_mem_prot: true,
            cpu: true,
            mem: true,
            io: true,
            fs: true,
            oomd: true,
        }
    }

    pub fn none() -> Self {
        Self {
            crit_mem_prot: false,
            cpu: false,
            mem: false,
            io: false,
            fs: false,
            oomd: false,
        }
    }

    /// From a job spec's `passive=` (tokens separated by `/`: `ALL` = nothing enforced, `all` =
    /// everything but hostcritical memory protection, `cpu`, `mem`, `io`, `fs`, `oomd`, `none`).
    /// The spec grammar has already rejected unknown tokens; they are ignored here.
    pub fn from_passive(passive: Option<&str>) -> Self {
        let mut e = Self::all();
        for tok in passive.unwrap_or("").split('/') {
            match tok {
                "ALL" => e = Self::none(),
                "all" => {
                    e = Self {
                        crit_mem_prot: e.crit_mem_prot,
                        ..Self::none()
                    }
                }
                "cpu" => e.cpu = false,
                "mem" => e.mem = false,
                "io" => e.io = false,
                "fs" => e.fs = false,
                "oomd" => e.oomd = false,
                _ => {}
            }
        }
        e
    }

    /// How the header shows it: `ALL` (nothing enforced), `all` (only hostcritical memory
    /// protection), the `/`-joined resources not enforced, or empty when everything is.
    pub fn passive(&self) -> String {
        let off: Vec<&str> = [
            ("cpu", self.cpu),
            ("mem", self.mem),
            ("io", self.io),
            ("fs", self.fs),
            ("oomd", self.oomd),
        ]
        .iter()
        .filter(|(_, on)| !on)
        .map(|(name, _)| *name)
        .collect();
        if off.len() == 5 {
            if self.crit_mem_prot { "all" } else { "ALL" }.to_string()
        } else {
            off.join("/")
        }
    }

    fn allows(&self, res: Res) -> bool {
        match res {
            Res::Mem => self.mem,
            Res::Io => self.io,
        }
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

/// `sysreqs_report` in upstream's layout. The one definition for writing ours and reading
/// anybody's: every field defaults and requirement names stay strings, since upstream files
/// name requirements this version doesn't check (`Oomd`, `Btrfs`, `DepsBase`, …).
///
/// In memory `satisfied`/`missed` hold every requirement. In the file, the ones upstream's
/// enum doesn't know ([`upstream_knows`]) go to `ext_satisfied`/`ext_missed`: upstream rejects
/// unknown names but ignores unknown fields, so it can still load what we write.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "ReportWire", into = "ReportWire")]
pub struct SysReqsReport {
    pub satisfied: Vec<String>,
    pub missed: MissedReqs,
    pub kernel_version: String,
    /// The versions of the agent and hashd the report came from: ours, both bundled.
    pub agent_version: String,
    pub hashd_version: String,
    pub nr_cpus: usize,
    pub total_memory: u64,
    pub total_swap: u64,
    pub scr_dev: String,
    pub scr_devnr: (u32, u32),
    pub scr_dev_model: String,
    pub scr_dev_fwrev: String,
    pub scr_dev_size: u64,
    pub scr_dev_iosched: String,
    pub enforce: Enforce,
}

/// Records the system requirements of a job in its sysinfo: which were required, which of those
/// were missed (with their messages), and the full report — the ones upstream's list lacks in
/// the `ext_*` fields, so upstream can load the entry.
pub fn record_in(
    si: &mut crate::result::sysinfo::Sysinfo,
    required: &[SysReq],
    eval: &Evaluation,
) -> Result<()> {
    (si.sysreqs, si.ext_sysreqs) = required
        .iter()
        .map(|r| r.name().to_string())
        .partition(|n| upstream_knows(n));
    (si.sysreqs_missed, si.ext_sysreqs_missed) = eval
        .missed_of(required)
        .into_iter()
        .map(|(r, m)| (r.name().to_string(), m))
        .partition(|(n, _)| upstream_knows(n));
    si.sysreqs_report = Some(serde_json::to_value(&eval.report)?);
    Ok(())
}

/// Whether upstream's requirement enum has `name` (so upstream can read a report naming it).
pub fn upstream_knows(name: &str) -> bool {
    !matches!(name, "NoZswap" | "Psi")
}

/// [`SysReqsReport`] as stored, field order as upstream writes it.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct ReportWire {
    satisfied: Vec<String>,
    missed: MissedReqs,
    kernel_version: String,
    agent_version: String,
    hashd_version: String,
    nr_cpus: usize,
    #[serde(deserialize_with = "lenient_u64")]
    total_memory: u64,
    #[serde(deserialize_with = "lenient_u64")]
    total_swap: u64,
    scr_dev: String,
    scr_devnr: (u32, u32),
    scr_dev_model: String,
    scr_dev_fwrev: String,
    #[serde(deserialize_with = "lenient_u64")]
    scr_dev_size: u64,
    scr_dev_iosched: String,
    enforce: Enforce,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    ext_satisfied: Vec<String>,
    #[serde(skip_serializing_if = "MissedReqs::is_empty")]
    ext_missed: MissedReqs,
}

impl From<ReportWire> for SysReqsReport {
    fn from(w: ReportWire) -> Self {
        let mut satisfied = w.satisfied;
        satisfied.extend(w.ext_satisfied);
        let mut missed = w.missed;
        missed.0.extend(w.ext_missed.0);
        Self {
            satisfied,
            missed,
            kernel_version: w.kernel_version,
            agent_version: w.agent_version,
            hashd_version: w.hashd_version,
            nr_cpus: w.nr_cpus,
            total_memory: w.total_memory,
            total_swap: w.total_swap,
            scr_dev: w.scr_dev,
            scr_devnr: w.scr_devnr,
            scr_dev_model: w.scr_dev_model,
            scr_dev_fwrev: w.scr_dev_fwrev,
            scr_dev_size: w.scr_dev_size,
            scr_dev_iosched: w.scr_dev_iosched,
            enforce: w.enforce,
        }
    }
}

impl From<SysReqsReport> for ReportWire {
    fn from(r: SysReqsReport) -> Self {
        let (satisfied, ext_satisfied) = r.satisfied.into_iter().partition(|n| upstream_knows(n));
        let (missed, ext_missed) = r.missed.0.into_iter().partition(|(n, _)| upstream_knows(n));
        Self {
            satisfied,
            missed: MissedReqs(missed),
            kernel_version: r.kernel_version,
            agent_version: r.agent_version,
            hashd_version: r.hashd_version,
            nr_cpus: r.nr_cpus,
            total_memory: r.total_memory,
            total_swap: r.total_swap,
            scr_dev: r.scr_dev,
            scr_devnr: r.scr_devnr,
            scr_dev_model: r.scr_dev_model,
            scr_dev_fwrev: r.scr_dev_fwrev,
            scr_dev_size: r.scr_dev_size,
            scr_dev_iosched: r.scr_dev_iosched,
            enforce: r.enforce,
            ext_satisfied,
            ext_missed: MissedReqs(ext_missed),
        }
    }
}

/// A byte count written as an integer (or, by other writers, as a float or `null`).
fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .unwrap_or(0),
        _ => 0,
    })
}

/// Missed requirements by name with their messages, in file order (a JSON object; a list of
/// names or `null` also reads).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MissedReqs(pub Vec<(String, Vec<String>)>);

impl MissedReqs {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names().any(|k| k == name)
    }

    /// The messages of `name`, if it is missed.
    pub fn get(&self, name: &str) -> Option<&[String]> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, m)| m.as_slice())
    }
}

impl Serialize for MissedReqs {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for MissedReqs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MissedReqs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of requirement names to messages, or a list of names")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<MissedReqs, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                    // Messages are strings; anything else in their place is dropped, not fatal.
                    let msgs = match v {
                        serde_json::Value::Array(a) => a
                            .into_iter()
                            .filter_map(|m| m.as_str().map(str::to_string))
                            .collect(),
                        serde_json::Value::String(m) => vec![m],
                        _ => Vec::new(),
                    };
                    out.push((k, msgs));
                }
                Ok(MissedReqs(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<MissedReqs, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = seq.next_element::<String>()? {
                    out.push((k, Vec::new()));
                }
                Ok(MissedReqs(out))
            }
            fn visit_unit<E>(self) -> std::result::Result<MissedReqs, E> {
                Ok(MissedReqs::default())
            }
        }
        d.deserialize_any(V)
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

/// What checks look at.
pub struct Host<'a> {
    pub hp: &'a HostPaths,
    /// The scratch device, or why there is none.
    pub scratch: std::result::Result<&'a Scratch, String>,
}

const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

fn read(p: &Path) -> std::result::Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("can't read {}: {}", p.display(), e))
}

impl Host<'_> {
    fn cgroup_mount(&self) -> std::result::Result<blockdev::MountEntry, String> {
        let mounts = blockdev::read_mountinfo(self.hp).map_err(|e| format!("{:#}", e))?;
        let m = mounts
            .into_iter()
            .rev()
            .find(|m| m.mount_point == Path::new(CGROUP_MOUNT))
            .ok_or_else(|| format!("nothing is mounted at {}", CGROUP_MOUNT))?;
        if m.fstype != "cgroup2" {
            return Err(format!("{} is {}, not cgroup2", CGROUP_MOUNT, m.fstype));
        }
        Ok(m)
    }

    fn dev(&self) -> std::result::Result<&Scratch, String> {
        match &self.scratch {
            Ok(s) => Ok(s),
            Err(e) => Err(format!("no scratch device: {}", e)),
        }
    }

    fn devnr_str(&self) -> std::result::Result<String, String> {
        self.dev()
            .map(|s| format!("{}:{}", s.dev.devnr.0, s.dev.devnr.1))
    }

    fn queue_file(&self, name: &str) -> std::result::Result<PathBuf, String> {
        Ok(self.dev()?.dev.sys_dir(self.hp).join("queue").join(name))
    }

    /// `enable` of the scratch device's io.cost.qos line (0 without a line).
    fn iocost_enabled(&self) -> std::result::Result<bool, String> {
        let dev = self.devnr_str()?;
        let qos = read(&self.hp.cgroup().join("io.cost.qos"))?;
        Ok(qos
            .lines()
            .find(|l| l.split_whitespace().next() == Some(dev.as_str()))
            .is_some_and(|l| l.split_whitespace().any(|kv| kv == "enable=1")))
    }

    pub fn check(&self, req: SysReq) -> Check {
        let c = Check::new(req);
        match self.check_inner(c.clone()) {
            Ok(c) => c,
            Err(msg) => c.miss(msg),
        }
    }

    fn check_inner(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        match c.req {
            SysReq::Controllers => {
                self.cgroup_mount()?;
                let p = hp.cgroup().join("cgroup.controllers");
                let text = read(&p)?;
                let have: Vec<&str> = text.split_whitespace().collect();
                let lacking: Vec<&str> = ["cpu", "memory", "io"]
                    .into_iter()
                    .filter(|c| !have.contains(c))
                    .collect();
                if !lacking.is_empty() {
                    c = c.miss(format!(
                        "controllers missing from {}: {}",
                        p.display(),
                        lacking.join(", ")
                    ));
                }
            }
            SysReq::MemCgRecursiveProt => {
                let m = self.cgroup_mount()?;
                if !m.has_super_opt("memory_recursiveprot") {
                    let new = if m.super_opts.is_empty() {
                        "memory_recursiveprot".to_string()
                    } else {
                        format!("{},memory_recursiveprot", m.super_opts)
                    };
                    c.fix = Some(Fix {
                        res: Res::Mem,
                        action: FixAction::Remount {
                            remount: Remount {
                                target: hp.path(&m.mount_point),
                                source: m.source.clone(),
                                fstype: m.fstype.clone(),
                                mount_opts: m.mount_opts.clone(),
                                old: m.super_opts.clone(),
                            },
                            new,
                        },
                    });
                    c = c.miss(format!(
                        "cgroup2 at {} is mounted without memory_recursiveprot ({})",
                        CGROUP_MOUNT, m.super_opts
                    ));
                }
            }
            SysReq::IoCost => {
                let qos = hp.cgroup().join("io.cost.qos");
                if !qos.exists() {
                    return Err(format!(
                        "{} doesn't exist: the kernel lacks io.cost (CONFIG_BLK_CGROUP_IOCOST)",
                        qos.display()
                    ));
                }
                let dev = self.devnr_str()?;
                if !self.iocost_enabled()? {
                    c.fix = Some(Fix {
                        res: Res::Io,
                        action: FixAction::Write {
                            path: qos,
                            value: format!("{} enable=1", dev),
                        },
                    });
                    c = c.miss(format!(
                        "io.cost is off on the scratch device {} ({})",
                        self.dev()?.dev.name,
                        dev
                    ));
                }
            }
            SysReq::IoCostVer => {
                let p = hp.cgroup().join("io.stat");
                let stat = read(&p)?;
                let dev = self.devnr_str()?;
                if !self.iocost_enabled()? {
                    return Err(format!(
                        "can't tell: io.cost is off on {} (enabling it is part of IoCost)",
                        dev
                    ));
                }
                let has = stat
                    .lines()
                    .filter(|l| l.split_whitespace().next() == Some(dev.as_str()))
                    .any(|l| l.split_whitespace().any(|kv| kv.starts_with("cost.usage=")));
                if !has {
                    c = c.miss(format!(
                        "{} has no cost.usage for {}: the kernel's io.cost is too old (or the \
                         device has seen no IO yet)",
                        p.display(),
                        dev
                    ));
                }
            }
            SysReq::NoOtherIoControllers => {
                let mut found = Vec::new();
                walk_io_controls(&hp.cgroup(), &hp.cgroup(), &mut found, 0);
                if found.len() > 8 {
                    let more = found.len() - 8;
                    found.truncate(8);
                    found.push(format!("and {} more", more));
                }
                c.missed.extend(found);
            }
            SysReq::AnonBalance => {
                let p = hp.path("proc/vmstat");
                let text = read(&p)?;
                if !text
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some("pgscan_anon"))
                {
                    c = c.miss(format!(
                        "{} has no pgscan_anon: the kernel predates anon/file reclaim balancing (5.8)",
                        p.display()
                    ));
                }
            }
            SysReq::NoCompositeStorage => {
                let s = self.dev()?;
                if s.dev.is_composite() {
                    let msg = format!(
                        "scratch device {} is md RAID or device-mapper; IO control applies to \
                         the disks beneath it",
                        s.dev.name
                    );
                    if s.given {
                        c.warnings.push(msg);
                    } else {
                        c = c.miss(format!("{}; name a disk with --dev", msg));
                    }
                }
            }
            SysReq::IoSched => {
                let p = self.queue_file("scheduler")?;
                let text = read(&p)?;
                let cur = crate::system::restore::bracketed(&text)
                    .unwrap_or_else(|| text.trim().to_string());
                if cur != "none" {
                    c.fix = Some(Fix {
                        res: Res::Io,
                        action: FixAction::Write {
                            path: p,
                            value: "none".into(),
                        },
                    });
                    c = c.miss(format!(
                        "IO scheduler of {} is {:?}, needs \"none\"",
                        self.dev()?.dev.name,
                        cur
                    ));
                }
            }
            SysReq::NoWbt => {
                let p = self.queue_file("wbt_lat_usec")?;
                if p.exists() {
                    let text = read(&p)?;
                    let v: i64 = text
                        .trim()
                        .parse()
                        .map_err(|_| format!("{}: not a number: {:?}", p.display(), text.trim()))?;
                    if v != 0 {
                        c.fix = Some(Fix {
                            res: Res::Io,
                            action: FixAction::Write {
                                path: p,
                                value: "0".into(),
                            },
                        });
                        c = c.miss(format!(
                            "writeback throttling is on for {} (wbt_lat_usec={})",
                            self.dev()?.dev.name,
                            v
                        ));
                    }
                }
            }
            SysReq::SwapOnScratch => {
                let s = self.dev()?;
                for (file, kind) in read_swaps(hp)? {
                    match swap_disk(hp, &file, &kind) {
                        Ok(disk) if disk == s.dev.name => {}
                        Ok(disk) => {
                            c = c.miss(format!(
                                "swap {} is on {}, not on the scratch device {}",
                                file, disk, s.dev.name
                            ))
                        }
                        Err(e) => {
                            c = c.miss(format!("swap {}: can't find its device: {:#}", file, e))
                        }
                    }
                }
            }
            SysReq::Swap => {
                let mem = sysinfo::read_meminfo(hp).map_err(|e| format!("{:#}", e))?;
                let total_mem = mem.get("MemTotal").copied().unwrap_or(0);
                let total = mem.get("SwapTotal").copied().unwrap_or(0);
                let free = mem.get("SwapFree").copied().unwrap_or(0);
                let need_total = (total_mem as f64 * 0.3) as u64;
                let need_free = need_total.min(31 << 30);
                if total < need_total {
                    c = c.miss(format!(
                        "swap is {}, needs at least 30% of memory ({})",
                        format_size(total as f64),
                        format_size(need_total as f64)
                    ));
                }
                if free < need_free {
                    c = c.miss(format!(
                        "free swap is {}, needs at least {} (30% of memory, at most 31G)",
                        format_size(free as f64),
                        format_size(need_free as f64)
                    ));
                }
                let p = hp.path("proc/sys/vm/swappiness");
                let text = read(&p)?;
                let sw: u32 = text
                    .trim()
                    .parse()
                    .map_err(|_| format!("{}: not a number: {:?}", p.display(), text.trim()))?;
                if sw < 60 {
                    c.fix = Some(Fix {
                        res: Res::Mem,
                        action: FixAction::Write {
                            path: p,
                            value: "60".into(),
                        },
                    });
                    c = c.miss(format!("vm.swappiness is {}, needs at least 60", sw));
                }
            }
            SysReq::NoZswap => {
                let p = hp.path("sys/module/zswap/parameters/enabled");
                if sysinfo::zswap_enabled(hp) {
                    c.fix = Some(Fix {
                        res: Res::Mem,
                        action: FixAction::Write {
                            path: p,
                            value: "N".into(),
                        },
                    });
                    c = c.miss("zswap is enabled");
                }
            }
            SysReq::Psi => {
                for what in ["cpu", "memory", "io"] {
                    let p = hp.path("proc/pressure").join(what);
                    if let Err(e) = std::fs::read_to_string(&p) {
                        c = c.miss(format!(
                            "can't read {} ({}): the kernel needs CONFIG_PSI and psi=1",
                            p.display(),
                            e
                        ));
                    }
                }
            }
        }
        Ok(c)
    }

    pub fn check_all(&self) -> Vec<Check> {
        SysReq::ALL.iter().map(|r| self.check(*r)).collect()
    }
}

/// `(file name, type)` of each /proc/swaps entry.
pub fn read_swaps(hp: &HostPaths) -> std::result::Result<Vec<(String, String)>, String> {
    let p = hp.path("proc/swaps");
    let text = read(&p)?;
    let mut out = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let mut it = line.split_whitespace();
        match (it.next(), it.next()) {
            (Some(f), Some(t)) => out.push((f.replace("\\040", " "), t.to_string())),
            _ => return Err(format!("{}: malformed line {:?}", p.display(), line)),
        }
    }
    Ok(out)
}

/// Whether any active swap area lives on a rotational disk (hashd's rotational mode counts the
/// swap device as well as the testfiles'). Swaps whose disk can't be found don't count.
pub fn swap_rotational(hp: &HostPaths) -> bool {
    read_swaps(hp)
        .unwrap_or_default()
        .iter()
        .any(|(file, kind)| {
            swap_disk(hp, file, kind)
                .and_then(|disk| blockdev::DevInfo::read(hp, &disk))
                .is_ok_and(|d| d.rotational)
        })
}

/// The whole disk a swap area lives on: a partition's disk, or for a swap file the disk of the
/// filesystem holding it.
fn swap_disk(hp: &HostPaths, file: &str, kind: &str) -> Result<String> {
    if kind == "file" {
        return Ok(blockdev::device_of_path(hp, &hp.path(file))?.disk);
    }
    let name = blockdev::resolve_dev_name(hp, file);
    blockdev::whole_disk_of_name(hp, &name)
}

/// Collects non-empty io.latency/io.max/io.low files below `dir`.
fn walk_io_controls(root: &Path, dir: &Path, found: &mut Vec<String>, depth: usize) {
    if depth > 64 {
        return;
    }
    for knob in ["io.latency", "io.max", "io.low"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(knob)) {
            if !text.trim().is_empty() {
                let rel = dir.strip_prefix(root).unwrap_or(dir);
                found.push(format!(
                    "/{}{}{}: {}",
                    rel.display(),
                    if rel.as_os_str().is_empty() { "" } else { "/" },
                    knob,
                    text.trim().replace('\n', "; ")
                ));
            }
        }
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subs: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subs.sort();
    for s in subs {
        walk_io_controls(root, &s, found, depth + 1);
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

fn build_report(host: &Host, checks: &[Check], enforce: Enforce) -> Result<SysReqsReport> {
    let hi = HostInfo::read(host.hp)?;
    let dev = match &host.scratch {
        // Re-read: the fix pass may have changed the scheduler.
        Ok(s) => blockdev::DevInfo::read(host.hp, &s.dev.name).unwrap_or_else(|_| s.dev.clone()),
        Err(_) => blockdev::DevInfo {
            name: String::new(),
            devnr: (0, 0),
            model: String::new(),
            fwrev: String::new(),
            size: 0,
            scheduler: String::new(),
            wbt_lat_usec: None,
            rotational: false,
        },
    };
    Ok(SysReqsReport {
        satisfied: checks
            .iter()
            .filter(|c| c.satisfied())
            .map(|c| c.req.name().to_string())
            .collect(),
        missed: MissedReqs(
            checks
                .iter()
                .filter(|c| !c.satisfied())
                .map(|c| (c.req.name().to_string(), c.missed.clone()))
                .collect(),
        ),
        kernel_version: hi.kernel_version,
        agent_version: env!("CARGO_PKG_VERSION").into(),
        hashd_version: env!("CARGO_PKG_VERSION").into(),
        nr_cpus: hi.nr_cpus,
        total_memory: hi.total_memory,
        total_swap: hi.total_swap,
        scr_dev: dev.name,
        scr_devnr: dev.devnr,
        scr_dev_model: dev.model,
        scr_dev_fwrev: dev.fwrev,
        scr_dev_size: dev.size,
        scr_dev_iosched: dev.scheduler,
        enforce,
    })
}

#[cfg(test)]
pub mod testhost {
    //! A fake host that satisfies every requirement; tests break one thing at a time.
    use crate::system::blockdev::testutil::{add_disk, put};
    use crate::system::HostPaths;

    pub const GIB: u64 = 1 << 30;

    pub fn good_host() -> (tempfile::TempDir, HostPaths) {
        let t = tempfile::tempdir().expect("tempdir");
        let hp = HostPaths::under(t.path());
        put(
            &hp.path("proc/self/mountinfo"),
            "27 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw\n\
             30 27 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
        );
        add_disk(
            &hp,
            "nvme0n1",
            259,
            0,
            &[("nvme0n1p2", 2), ("nvme0n1p3", 3)],
        );
        put(
            &hp.path("sys/block/nvme0n1/queue/scheduler"),
            "mq-deadline kyber [none]\n",
        );
        put(&hp.path("sys/block/nvme0n1/queue/wbt_lat_usec"), "0\n");
        add_disk(&hp, "sda", 8, 0, &[("sda1", 1)]);
        let cg = hp.cgroup();
        put(
            &cg.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        );
        put(
            &cg.join("io.cost.qos"),
            "259:0 enable=1 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n",
        );
        put(
            &cg.join("io.stat"),
            "259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0 cost.vrate=100.00 cost.usage=5 cost.wait=0 cost.indebt=0 cost.indelay=0\n",
        );
        put(&cg.join("workload.slice/io.max"), "");
        put(&cg.join("workload.slice/io.latency"), "");
        put(&cg.join("system.slice/io.max"), "\n");
        put(
            &hp.path("proc/vmstat"),
            "nr_free_pages 1\npgscan_anon 5\npgscan_file 7\n",
        );
        put(
            &hp.path("proc/meminfo"),
            &format!(
                "MemTotal: {} kB\nSwapTotal: {} kB\nSwapFree: {} kB\n",
                32 * GIB / 1024,
                16 * GIB / 1024,
                15 * GIB / 1024
            ),
        );
        put(
            &hp.path("proc/swaps"),
            "Filename\tType\tSize\tUsed\tPriority\n/dev/nvme0n1p3 partition\t16777212\t0\t-2\n",
        );
        put(&hp.path("proc/sys/vm/swappiness"), "60\n");
        put(&hp.path("sys/module/zswap/parameters/enabled"), "N\n");
        for p in ["cpu", "memory", "io"] {
            put(
                &hp.path("proc/pressure").join(p),
                "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
            );
        }
        put(&hp.path("proc/sys/kernel/osrelease"), "6.1.0-fake\n");
        put(&hp.path("sys/devices/system/cpu/online"), "0-3\n");
        (t, hp)
    }
}

#[cfg(test)]
mod tests {
    use super::testhost::*;
    use super::*;
    use crate::system::blockdev::testutil::{put, symlink};
    use crate::system::blockdev::{detect, split_dev};
    use crate::system::restore::Change;
    use std::os::unix::fs::MetadataExt;

    fn scratch(hp: &HostPaths) -> Scratch {
        detect(hp, Path::new("/x"), Some("nvme0n1")).unwrap()
    }

    fn check(hp: &HostPaths, req: SysReq) -> Check {
        let s = scratch(hp);
        Host {
            hp,
            scratch: Ok(&s),
        }
        .check(req)
    }

    fn assert_missed(hp: &HostPaths, req: SysReq, needle: &str) -> Check {
        let c = check(hp, req);
        assert!(
            c.missed.iter().any(|m| m.contains(needle)),
            "{}: expected a miss containing {:?}, got {:?}",
            req,
            needle,
            c.missed
        );
        c
    }

    #[test]
    fn good_host_satisfies_everything() {
        let (_t, hp) = good_host();
        let s = scratch(&hp);
        let host = Host {
            hp: &hp,
            scratch: Ok(&s),
        };
        for c in host.check_all() {
            assert!(c.satisfied(), "{}: {:?}", c.req, c.missed);
            assert!(c.fix.is_none(), "{}", c.req);
        }
        let ev = evaluate(&host, Enforce::all(), None).unwrap();
        assert_eq!(ev.report.satisfied.len(), SysReq::ALL.len());
        assert!(ev.report.missed.is_empty());
        assert_eq!(ev.report.scr_dev, "nvme0n1");
        assert_eq!(ev.report.scr_devnr, (259, 0));
        assert_eq!(ev.report.scr_dev_iosched, "none");
        assert_eq!(ev.report.kernel_version, "6.1.0-fake");
        assert_eq!(ev.report.nr_cpus, 4);
        assert_eq!(ev.report.total_memory, 32 * GIB);
    }

    #[test]
    fn controllers() {
        let (_t, hp) = good_host();
        put(&hp.cgroup().join("cgroup.controllers"), "cpu memory pids\n");
        assert_missed(&hp, SysReq::Controllers, "missing from");
        assert_missed(&hp, SysReq::Controllers, ": io");
        put(
            &hp.path("proc/self/mountinfo"),
            "30 1 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n",
        );
        assert_missed(&hp, SysReq::Controllers, "is tmpfs, not cgroup2");
        put(
            &hp.path("proc/self/mountinfo"),
            "27 1 259:2 / / rw - ext4 /dev/x rw\n",
        );
        assert_missed(
            &hp,
            SysReq::Controllers,
            "nothing is mounted at /sys/fs/cgroup",
        );
    }

    #[test]
    fn recursiveprot_missed_and_fixed_by_remount() {
        let (_t, hp) = good_host();
        put(
            &hp.path("proc/self/mountinfo"),
            "30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        let c = assert_missed(
            &hp,
            SysReq::MemCgRecursiveProt,
            "without memory_recursiveprot",
        );
        let Some(Fix {
            res: Res::Mem,
            action: FixAction::Remount { remount, new },
        }) = c.fix
        else {
            panic!("no remount fix: {:?}", c.fix);
        };
        assert_eq!(new, "rw,nsdelegate,memory_recursiveprot");
        assert_eq!(remount.old, "rw,nsdelegate");
        assert_eq!(remount.mount_opts, "rw,nosuid,nodev");
        assert_eq!(remount.target, hp.path("/sys/fs/cgroup"));
    }

    #[test]
    fn iocost_present_and_enabled() {
        let (_t, hp) = good_host();
        put(
            &hp.cgroup().join("io.cost.qos"),
            "259:0 enable=0 ctrl=auto\n",
        );
        let c = assert_missed(&hp, SysReq::IoCost, "io.cost is off");
        assert_eq!(
            c.fix.unwrap().action,
            FixAction::Write {
                path: hp.cgroup().join("io.cost.qos"),
                value: "259:0 enable=1".into()
            }
        );
        assert_missed(&hp, SysReq::IoCostVer, "can't tell");
        std::fs::remove_file(hp.cgroup().join("io.cost.qos")).unwrap();
        let c = assert_missed(&hp, SysReq::IoCost, "lacks io.cost");
        assert!(c.fix.is_none());
    }

    #[test]
    fn iocost_ver_needs_cost_usage() {
        let (_t, hp) = good_host();
        put(
            &hp.cgroup().join("io.stat"),
            "259:0 rbytes=1 wbytes=2\n8:0 cost.usage=1\n",
        );
        assert_missed(&hp, SysReq::IoCostVer, "no cost.usage for 259:0");
        std::fs::remove_file(hp.cgroup().join("io.stat")).unwrap();
        assert_missed(&hp, SysReq::IoCostVer, "can't read");
    }

    #[test]
    fn other_io_controllers() {
        let (_t, hp) = good_host();
        put(
            &hp.cgroup().join("system.slice/foo.service/io.max"),
            "259:0 rbps=1000 wbps=max\n",
        );
        put(
            &hp.cgroup().join("workload.slice/io.latency"),
            "259:0 target=10000\n",
        );
        let c = assert_missed(
            &hp,
            SysReq::NoOtherIoControllers,
            "/system.slice/foo.service/io.max: 259:0 rbps=1000",
        );
        assert_eq!(c.missed.len(), 2);
        assert!(
            c.missed[1].starts_with("/workload.slice/io.latency"),
            "{:?}",
            c.missed
        );
    }

    #[test]
    fn anon_balance_and_psi() {
        let (_t, hp) = good_host();
        put(&hp.path("proc/vmstat"), "pgscan_file 1\npgscan_anonx 2\n");
        assert_missed(&hp, SysReq::AnonBalance, "no pgscan_anon");
        std::fs::remove_file(hp.path("proc/pressure/io")).unwrap();
        let c = assert_missed(&hp, SysReq::Psi, "pressure/io");
        assert_eq!(c.missed.len(), 1);
    }

    #[test]
    fn composite_storage() {
        let (_t, hp) = good_host();
        crate::system::blockdev::testutil::add_disk(&hp, "dm-0", 253, 0, &[]);
        let given = detect(&hp, Path::new("/x"), Some("dm-0")).unwrap();
        let c = Host {
            hp: &hp,
            scratch: Ok(&given),
        }
        .check(SysReq::NoCompositeStorage);
        assert!(c.satisfied());
        assert!(c.warnings[0].contains("device-mapper"));
        let mut auto = given.clone();
        auto.given = false;
        let c = Host {
            hp: &hp,
            scratch: Ok(&auto),
        }
        .check(SysReq::NoCompositeStorage);
        assert!(c.missed[0].contains("--dev"), "{:?}", c.missed);
    }

    #[test]
    fn iosched_and_wbt() {
        let (_t, hp) = good_host();
        let q = hp.path("sys/block/nvme0n1/queue");
        put(&q.join("scheduler"), "[mq-deadline] kyber none\n");
        put(&q.join("wbt_lat_usec"), "2000\n");
        let c = assert_missed(&hp, SysReq::IoSched, "\"mq-deadline\", needs \"none\"");
        assert_eq!(c.fix.unwrap().res, Res::Io);
        let c = assert_missed(&hp, SysReq::NoWbt, "wbt_lat_usec=2000");
        assert_eq!(
            c.fix.unwrap().action,
            FixAction::Write {
                path: q.join("wbt_lat_usec"),
                value: "0".into()
            }
        );
        put(&q.join("wbt_lat_usec"), "junk\n");
        assert_missed(&hp, SysReq::NoWbt, "not a number");
        std::fs::remove_file(q.join("wbt_lat_usec")).unwrap();
        assert!(check(&hp, SysReq::NoWbt).satisfied());
    }

    #[test]
    fn swap_on_scratch_partitions() {
        let (_t, hp) = good_host();
        put(
            &hp.path("proc/swaps"),
            "Filename Type Size Used Priority\n/dev/nvme0n1p3 partition 1 0 -2\n/dev/sda1 partition 1 0 -3\n",
        );
        let c = assert_missed(
            &hp,
            SysReq::SwapOnScratch,
            "swap /dev/sda1 is on sda, not on the scratch device nvme0n1",
        );
        assert_eq!(c.missed.len(), 1);
        // hashd's rotational mode looks at every swap disk.
        assert!(!swap_rotational(&hp));
        put(
            &hp.path("sys/devices/pci0000:00/block/sda/queue/rotational"),
            "1\n",
        );
        assert!(swap_rotational(&hp));
        put(&hp.path("proc/swaps"), "Filename Type Size Used Priority\n");
        assert!(!swap_rotational(&hp));
        assert!(check(&hp, SysReq::SwapOnScratch).satisfied());
        put(
            &hp.path("proc/swaps"),
            "Filename Type Size Used Priority\n/dev/zram0 partition 1 0 1\n",
        );
        assert_missed(
            &hp,
            SysReq::SwapOnScratch,
            "swap /dev/zram0: can't find its device",
        );
    }

    #[test]
    fn swap_file_counts_as_on_the_disk_of_its_filesystem() {
        let (_t, hp) = good_host();
        // The swap file is a real file in the fake root; its st_dev is faked as a partition of
        // the scratch disk (or, when anonymous, as a btrfs mount of one).
        put(&hp.path("swapfile"), "");
        let (maj, min) = split_dev(std::fs::metadata(hp.path("swapfile")).unwrap().dev());
        if maj == 0 {
            put(
                &hp.path("proc/self/mountinfo"),
                &format!(
                    "60 1 0:{} / / rw - btrfs /dev/nvme0n1p2 rw\n\
                     30 27 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,memory_recursiveprot\n",
                    min
                ),
            );
        } else {
            let _ = std::fs::remove_file(hp.path(format!("sys/dev/block/{}:{}", maj, min)));
            symlink(
                "../../devices/pci0000:00/block/nvme0n1/nvme0n1p2",
                &hp.path(format!("sys/dev/block/{}:{}", maj, min)),
            );
        }
        put(
            &hp.path("proc/swaps"),
            "Filename Type Size Used Priority\n/swapfile file 1 0 -2\n",
        );
        let c = check(&hp, SysReq::SwapOnScratch);
        assert!(c.satisfied(), "{:?}", c.missed);
        // The same file judged against another scratch device is a miss.
        let other = detect(&hp, Path::new("/x"), Some("sda")).unwrap();
        let c = Host {
            hp: &hp,
            scratch: Ok(&other),
        }
        .check(SysReq::SwapOnScratch);
        assert!(
            c.missed[0].contains("is on nvme0n1, not on the scratch device sda"),
            "{:?}",
            c.missed
        );
    }

    #[test]
    fn swap_size_free_and_swappiness() {
        let (_t, hp) = good_host();
        put(
            &hp.path("proc/meminfo"),
            &format!(
                "MemTotal: {} kB\nSwapTotal: {} kB\nSwapFree: {} kB\n",
                32 * GIB / 1024,
                8 * GIB / 1024,
                GIB / 1024
            ),
        );
        put(&hp.path("proc/sys/vm/swappiness"), "10\n");
        let c = check(&hp, SysReq::Swap);
        assert_eq!(c.missed.len(), 3, "{:?}", c.missed);
        assert!(
            c.missed[0].contains("swap is 8.0G, needs at least 30% of memory (9.6G)"),
            "{:?}",
            c.missed
        );
        assert!(c.missed[1].contains("free swap is 1.0G"), "{:?}", c.missed);
        assert!(
            c.missed[2].contains("vm.swappiness is 10"),
            "{:?}",
            c.missed
        );
        assert_eq!(c.fix.unwrap().res, Res::Mem);
        // Free swap needs at most 31G even on a huge machine.
        put(
            &hp.path("proc/meminfo"),
            &format!(
                "MemTotal: {} kB\nSwapTotal: {} kB\nSwapFree: {} kB\n",
                1024 * GIB / 1024,
                400 * GIB / 1024,
                31 * GIB / 1024
            ),
        );
        put(&hp.path("proc/sys/vm/swappiness"), "100\n");
        assert!(check(&hp, SysReq::Swap).satisfied());
    }

    #[test]
    fn zswap() {
        let (_t, hp) = good_host();
        put(&hp.path("sys/module/zswap/parameters/enabled"), "Y\n");
        let c = assert_missed(&hp, SysReq::NoZswap, "zswap is enabled");
        assert_eq!(c.fix.unwrap().res, Res::Mem);
        std::fs::remove_file(hp.path("sys/module/zswap/parameters/enabled")).unwrap();
        assert!(check(&hp, SysReq::NoZswap).satisfied());
    }

    #[test]
    fn no_scratch_device_misses_device_checks_only() {
        let (_t, hp) = good_host();
        let host = Host {
            hp: &hp,
            scratch: Err("overlay".into()),
        };
        let ev = evaluate(&host, Enforce::all(), None).unwrap();
        let missed: Vec<&str> = ev.report.missed.names().collect();
        assert_eq!(
            missed,
            vec![
                "IoCost",
                "IoCostVer",
                "NoCompositeStorage",
                "IoSched",
                "NoWbt",
                "SwapOnScratch"
            ]
        );
        assert!(ev.report.missed.get("IoSched").unwrap()[0].contains("no scratch device: overlay"));
    }

    fn break_fixables(hp: &HostPaths) {
        let q = hp.path("sys/block/nvme0n1/queue");
        put(&q.join("scheduler"), "[mq-deadline] kyber none\n");
        put(&q.join("wbt_lat_usec"), "2000\n");
        put(
            &hp.cgroup().join("io.cost.qos"),
            "259:0 enable=0 ctrl=auto\n",
        );
        put(&hp.path("proc/sys/vm/swappiness"), "30\n");
        put(&hp.path("sys/module/zswap/parameters/enabled"), "Y\n");
        put(
            &hp.path("proc/self/mountinfo"),
            "30 1 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
        );
    }

    /// The fake remount edits the fake mountinfo, as a real remount would change the real one.
    fn fake_remount(r: &Remount, data: &str) -> Result<()> {
        let mi = r
            .target
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("proc/self/mountinfo");
        let text = std::fs::read_to_string(&mi)?;
        let line = text
            .lines()
            .find(|l| l.contains(" /sys/fs/cgroup "))
            .unwrap();
        let (head, _) = line.rsplit_once(' ').unwrap();
        std::fs::write(&mi, text.replace(line, &format!("{} {}", head, data)))?;
        Ok(())
    }

    #[test]
    fn fix_pass_changes_and_journals_then_restores() {
        let (t, hp) = good_host();
        break_fixables(&hp);
        // io.cost "enable" in the fake: the file just takes the written line; emulate the
        // kernel by checking afterwards.
        let s = scratch(&hp);
        let host = Host {
            hp: &hp,
            scratch: Ok(&s),
        };
        let before = evaluate(&host, Enforce::all(), None).unwrap();
        let before_missed: Vec<&str> = before.report.missed.names().collect();
        assert_eq!(
            before_missed,
            vec![
                "MemCgRecursiveProt",
                "IoCost",
                "IoCostVer",
                "IoSched",
                "NoWbt",
                "Swap",
                "NoZswap"
            ]
        );
        let work = t.path().join("work");
        let journal = Journal::open_with(&work, fake_remount).unwrap();
        let ev = evaluate(&host, Enforce::all(), Some(&journal)).unwrap();
        assert!(ev.report.missed.is_empty(), "{:?}", ev.report.missed);
        assert_eq!(ev.fixed.len(), 6, "{:?}", ev.fixed);
        assert_eq!(ev.report.scr_dev_iosched, "none");
        let q = hp.path("sys/block/nvme0n1/queue");
        let get = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(get(q.join("scheduler")), "none");
        assert_eq!(get(q.join("wbt_lat_usec")), "0");
        assert_eq!(get(hp.path("proc/sys/vm/swappiness")), "60");
        assert_eq!(get(hp.path("sys/module/zswap/parameters/enabled")), "N");
        assert_eq!(get(hp.cgroup().join("io.cost.qos")), "259:0 enable=1");
        let changes = journal.changes();
        assert_eq!(changes.len(), 6);
        assert!(changes.contains(&Change::Write {
            path: q.join("scheduler"),
            old: "mq-deadline".into()
        }));
        assert!(changes.contains(&Change::Write {
            path: hp.path("proc/sys/vm/swappiness"),
            old: "30".into()
        }));
        assert!(changes.contains(&Change::Write {
            path: hp.cgroup().join("io.cost.qos"),
            old: "259:0 enable=0 ctrl=auto".into()
        }));
        assert!(matches!(&changes[0], Change::Remount(r) if r.old == "rw,nsdelegate"));
        journal.restore_all().unwrap();
        assert_eq!(get(q.join("scheduler")), "mq-deadline");
        assert_eq!(get(q.join("wbt_lat_usec")), "2000");
        assert_eq!(get(hp.path("proc/sys/vm/swappiness")), "30");
        assert_eq!(get(hp.path("sys/module/zswap/parameters/enabled")), "Y");
        assert!(get(hp.path("proc/self/mountinfo")).contains("cgroup2 cgroup2 rw,nsdelegate\n"));
    }

    #[test]
    fn fix_pass_respects_passive() {
        let (t, hp) = good_host();
        break_fixables(&hp);
        let s = scratch(&hp);
        let host = Host {
            hp: &hp,
            scratch: Ok(&s),
        };
        let journal = Journal::open_with(&t.path().join("w"), fake_remount).unwrap();
        let ev = evaluate(&host, Enforce::from_passive(Some("io")), Some(&journal)).unwrap();
        let missed: Vec<&str> = ev.report.missed.names().collect();
        assert_eq!(missed, vec!["IoCost", "IoCostVer", "IoSched", "NoWbt"]);
        assert_eq!(journal.changes().len(), 3);
        assert!(!ev.report.enforce.io && ev.report.enforce.mem);
        let ev = evaluate(&host, Enforce::from_passive(Some("ALL")), Some(&journal)).unwrap();
        assert_eq!(ev.report.missed.len(), 4);
        assert!(ev.fixed.is_empty());
    }

    fn failing_remount(_: &Remount, _: &str) -> Result<()> {
        anyhow::bail!("remounting: Operation not permitted")
    }

    #[test]
    fn failed_fix_is_reported() {
        let (t, hp) = good_host();
        break_fixables(&hp);
        let s = scratch(&hp);
        let host = Host {
            hp: &hp,
            scratch: Ok(&s),
        };
        let journal = Journal::open_with(&t.path().join("w"), failing_remount).unwrap();
        let ev = evaluate(&host, Enforce::all(), Some(&journal)).unwrap();
        let m = ev.report.missed.get("MemCgRecursiveProt").unwrap();
        assert!(m[0].contains("without memory_recursiveprot"), "{:?}", m);
        assert!(
            m[1].contains("fixing failed: remounting: Operation not permitted"),
            "{:?}",
            m
        );
        assert_eq!(ev.report.missed.len(), 1, "{:?}", ev.report.missed);
        // The failed remount isn't journaled; the other fixes are.
        assert_eq!(journal.changes().len(), 5);
        assert!(!journal
            .changes()
            .iter()
            .any(|c| matches!(c, Change::Remount(_))));
    }

    #[test]
    fn passive_tokens() {
        assert_eq!(Enforce::from_passive(None), Enforce::all());
        assert_eq!(Enforce::from_passive(Some("ALL")), Enforce::none());
        let all = Enforce::from_passive(Some("all"));
        assert!(all.crit_mem_prot && !all.cpu && !all.io && !all.oomd);
        let e = Enforce::from_passive(Some("cpu/io"));
        assert!(!e.cpu && !e.io && e.mem && e.fs);
        assert_eq!(Enforce::from_passive(Some("none")), Enforce::all());
    }

    #[test]
    fn report_uses_upstream_names_and_header_reads_it() {
        let (_t, hp) = good_host();
        put(&hp.path("sys/block/nvme0n1/queue/wbt_lat_usec"), "75000\n");
        let s = scratch(&hp);
        let host = Host {
            hp: &hp,
            scratch: Ok(&s),
        };
        let ev = evaluate(&host, Enforce::from_passive(Some("io")), None).unwrap();
        let v = serde_json::to_value(&ev.report).unwrap();
        assert_eq!(
            v["missed"]["NoWbt"][0],
            "writeback throttling is on for nvme0n1 (wbt_lat_usec=75000)"
        );
        assert_eq!(v["scr_devnr"], serde_json::json!([259, 0]));
        assert_eq!(v["enforce"]["io"], false);
        assert!(v["satisfied"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("Controllers")));
        let hr: SysReqsReport = serde_json::from_value(v).unwrap();
        assert_eq!(hr.missed.names().collect::<Vec<_>>(), vec!["NoWbt"]);
        assert_eq!(hr.enforce.passive(), "io");
        assert_eq!(hr.scr_dev_model, "Fake SSD 970");
        // Round trip.
        let back: SysReqsReport = serde_json::to_value(&ev.report)
            .and_then(serde_json::from_value)
            .unwrap();
        assert_eq!(back, ev.report);
    }

    #[test]
    fn enforce_required_aborts_unless_forced() {
        let (_t, hp) = good_host();
        put(&hp.path("proc/sys/vm/swappiness"), "1\n");
        let s = scratch(&hp);
        let host = Host {
            hp: &hp,
            scratch: Ok(&s),
        };
        let ev = evaluate(&host, Enforce::all(), None).unwrap();
        let e = ev.enforce_required(&[SysReq::Swap], false).err().unwrap();
        assert!(e.downcast_ref::<UsageError>().is_some());
        assert!(e.to_string().contains("Swap (vm.swappiness is 1"), "{}", e);
        assert!(ev.enforce_required(&[SysReq::Swap], true).is_ok());
        assert!(ev.enforce_required(&[SysReq::Psi], false).is_ok());
        assert_eq!(ev.missed_of(&[SysReq::Psi, SysReq::Swap]).len(), 1);
    }
}
