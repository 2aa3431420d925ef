//! The requirements, what a check finds about one, and the fix it proposes.

use crate::system::restore::Remount;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    NoSysOomd,
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
        SysReq::NoSysOomd,
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
            SysReq::NoSysOomd => "NoSysOomd",
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
            SysReq::NoSysOomd => {
                "no other OOM killer running (systemd-oomd, earlyoom, nohang, oomd)"
            }
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
    Oomd,
}

impl Res {
    pub fn name(self) -> &'static str {
        match self {
            Res::Mem => "mem",
            Res::Io => "io",
            Res::Oomd => "oomd",
        }
    }
}

/// A change that would satisfy (part of) a requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixAction {
    Write {
        path: PathBuf,
        value: String,
    },
    Remount {
        remount: Remount,
        new: String,
    },
    /// Stop these systemd units for the run (started again at the end).
    StopUnits {
        units: Vec<String>,
    },
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
            FixAction::StopUnits { units } => {
                write!(f, "stop {} for the run", units.join(" "))
            }
        }
    }
}

/// What only the user can do about a miss (no fix pass creates swap space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByHand {
    /// At least this many more bytes of swap on the scratch device.
    AddSwap { bytes: u64 },
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
    /// What the user would do about the miss, where the fix pass can't.
    pub by_hand: Option<ByHand>,
}

impl Check {
    pub(super) fn new(req: SysReq) -> Self {
        Self {
            req,
            missed: Vec::new(),
            fix: None,
            warnings: Vec::new(),
            by_hand: None,
        }
    }

    pub(super) fn miss(mut self, msg: impl Into<String>) -> Self {
        self.missed.push(msg.into());
        self
    }

    pub fn satisfied(&self) -> bool {
        self.missed.is_empty()
    }
}
