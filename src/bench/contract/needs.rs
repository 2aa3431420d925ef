//! The host setups benches run on (see `system::session`), shared by their descriptors.

use crate::system::sysreqs::{Enforce, SysReq};

/// The host setup a bench runs on (see `system::session`).
#[derive(Debug)]
pub struct SystemNeeds {
    /// Requirements whose miss aborts the run unless `--force`, listed in the header.
    pub sysreqs: &'static [SysReq],
    /// Whether it runs under the memory profile (balloon of `avail − share`).
    pub mem_profile: bool,
    /// Whether it measures the profile's `avail` itself when that is only estimated (hashd
    /// benches): no balloon is set up for it before it runs then.
    pub measures_avail: bool,
    /// What the job enforces when its spec has no `passive=` (a spec's tokens merge into it).
    pub enforce: Enforce,
}

impl SystemNeeds {
    /// What a job enforces: its spec's `passive=` over the bench's default.
    pub fn enforce_for(&self, passive: Option<&str>) -> Enforce {
        self.enforce.merge_passive(passive)
    }
}

/// Everything: protection and iocost-qos depend on all of it.
pub const ALL: SystemNeeds = SystemNeeds {
    sysreqs: SysReq::ALL,
    mem_profile: true,
    measures_avail: false,
    enforce: Enforce::all(),
};

/// What hashd sizing and MOF need: memory management and swap on the measured device.
const MEM_REQS: &[SysReq] = &[
    SysReq::Controllers,
    SysReq::AnonBalance,
    SysReq::SwapOnScratch,
    SysReq::Swap,
    SysReq::NoSysOomd,
    SysReq::NoZswap,
    SysReq::Psi,
];

/// hashd sizing (`hashd-params`), everything enforced as upstream's.
pub const MEM: SystemNeeds = SystemNeeds {
    sysreqs: MEM_REQS,
    mem_profile: true,
    measures_avail: true,
    enforce: Enforce::all(),
};

/// MOF (`storage`): as upstream's, it leaves the host's io.cost, writeback throttling, IO
/// scheduler, swappiness and workload protection as they are (`passive=cpu/mem/io/fs`, upstream
/// `passive=all`), so its MOF is the device's under the host's own IO setup. Unlike upstream it
/// still stops other OOM killers (`NoSysOomd` is required: a kill would end the search).
pub const STORAGE: SystemNeeds = SystemNeeds {
    sysreqs: MEM_REQS,
    mem_profile: true,
    measures_avail: true,
    enforce: Enforce {
        crit_mem_prot: true,
        cpu: false,
        mem: false,
        io: false,
        fs: false,
        oomd: true,
    },
};

/// io.cost parameter benchmarking: the device and io.cost, at the machine's size.
pub const IO: SystemNeeds = SystemNeeds {
    sysreqs: &[
        SysReq::Controllers,
        SysReq::IoCost,
        SysReq::IoCostVer,
        SysReq::NoOtherIoControllers,
        SysReq::NoCompositeStorage,
        SysReq::IoSched,
        SysReq::NoWbt,
    ],
    mem_profile: false,
    measures_avail: false,
    enforce: Enforce::all(),
};
