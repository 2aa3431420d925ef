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
    /// What it leaves alone when its spec says nothing (`passive=` tokens; a spec's own
    /// `passive=` adds to them): `storage` enforces only hostcritical memory protection, as
    /// upstream's (io.cost and writeback throttling stay as the host has them).
    pub passive: &'static str,
}

impl SystemNeeds {
    /// What a job of this bench enforces: its default, then its spec's `passive=`.
    pub fn enforce(&self, spec_passive: Option<&str>) -> Enforce {
        match (self.passive, spec_passive) {
            ("", p) => Enforce::from_passive(p),
            (d, None) => Enforce::from_passive(Some(d)),
            (d, Some(p)) => Enforce::from_passive(Some(&format!("{}/{}", d, p))),
        }
    }
}

/// Everything: protection and iocost-qos depend on all of it.
pub const ALL: SystemNeeds = SystemNeeds {
    sysreqs: SysReq::ALL,
    mem_profile: true,
    measures_avail: false,
    passive: "",
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
    passive: "",
};

/// `storage`: what hashd sizing needs, with only hostcritical memory protection enforced
/// (upstream's storage job runs so: io.cost off and writeback throttling on, as booted).
pub const STORAGE: SystemNeeds = SystemNeeds {
    passive: "all",
    ..MEM
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
    passive: "",
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_enforces_only_hostcritical_memory_protection_unless_told_less() {
        let e = STORAGE.enforce(None);
        assert!(e.crit_mem_prot && !e.io && !e.mem && !e.cpu);
        assert_eq!(e.passive(), "all");
        assert_eq!(STORAGE.enforce(Some("ALL")), Enforce::none());
        assert_eq!(MEM.enforce(None), Enforce::all());
        assert!(!MEM.enforce(Some("io")).io && MEM.enforce(Some("io")).mem);
    }
}
