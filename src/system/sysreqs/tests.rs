//! Requirement tests against a fake host that satisfies everything, broken one thing at a
//! time.

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

#[allow(unused_imports)]
use crate::error::UsageError;
use crate::system::blockdev::testutil::{put, symlink};
#[allow(unused_imports)]
use crate::system::blockdev::Scratch;
use crate::system::blockdev::{detect, split_dev};
use crate::system::restore::Journal;
use crate::system::restore::{Change, Remount};
use crate::system::sysreqs::*;
use crate::system::HostPaths;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use testhost::*;

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

mod fix;
