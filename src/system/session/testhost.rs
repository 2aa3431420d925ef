//! A fake host for tests of code that needs a [`Session`]: a good host tree with the bench
//! slices' knob files, session options working in `<root>/work`, and every requirement.

use super::*;

use crate::system::blockdev::testutil::put;
use crate::system::sysreqs::testhost::good_host;

/// The fake host with the knob files of the root and of pre-existing bench slices (the
/// fake tree can't create knob files like the kernel does).
pub(crate) fn host() -> (tempfile::TempDir, HostPaths) {
    let (t, hp) = good_host();
    let cg = hp.cgroup();
    put(&cg.join("cgroup.subtree_control"), "memory\n");
    for s in [
        "hostcritical.slice",
        "workload.slice",
        "system.slice",
        "balloon.slice",
    ] {
        for (k, v) in [
            ("cpu.weight", "100"),
            ("io.weight", "default 100"),
            ("memory.min", "0"),
            ("memory.low", "0"),
            ("memory.high", "max"),
            ("memory.swap.max", "max"),
        ] {
            put(&cg.join(s).join(k), &format!("{}\n", v));
        }
    }
    (t, hp)
}

pub(crate) fn opts(hp: &HostPaths) -> SessionOpts {
    SessionOpts {
        dir: hp.path("work"),
        dev: Some("nvme0n1".into()),
        force: false,
        mem_profile: None,
        mem_avail: None,
        mem_margin: 0.25,
        swappiness: None,
        rep_retention: 7 * 24 * 3600,
        keep_reports: false,
        clear_reports: false,
        iocost_from_sys: false,
        iocost_qos: None,
        hashd: Default::default(),
    }
}

pub(crate) fn needs() -> Needs {
    Needs {
        sysreqs: SysReq::ALL.to_vec(),
        mem_profile: true,
        enforce: Enforce::all(),
    }
}
