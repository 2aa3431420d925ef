//! The host setups benches run on (see `system::session`), shared by their descriptors.

use super::SystemNeeds;
use crate::system::sysreqs::SysReq;

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
