//! The host setups benches run on (see `system::session`), shared by their descriptors.

use crate::system::sysreqs::SysReq;

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
}

/// Everything: protection and iocost-qos depend on all of it.
pub const ALL: SystemNeeds = SystemNeeds {
    sysreqs: SysReq::ALL,
    mem_profile: true,
    measures_avail: false,
};

/// hashd sizing and MOF: memory management and swap on the measured device.
pub const MEM: SystemNeeds = SystemNeeds {
    sysreqs: &[
        SysReq::Controllers,
        SysReq::AnonBalance,
        SysReq::SwapOnScratch,
        SysReq::Swap,
        SysReq::NoSysOomd,
        SysReq::NoZswap,
        SysReq::Psi,
    ],
    mem_profile: true,
    measures_avail: true,
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
};
