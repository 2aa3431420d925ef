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

/// systemd-oomd or earlyoom running is a miss; on a systemd host the fix stops their active
/// units (socket first) for the run and the restore starts them again; `passive=oomd` leaves
/// them alone; without systemd the user is told to stop them.
#[test]
fn other_oom_killers_are_stopped_for_the_run() {
    use crate::system::systemd::fake::FakeSystemd;
    use std::sync::Arc;
    let (t, hp) = testhost::good_host();
    assert!(check(&hp, SysReq::NoSysOomd).satisfied());
    put(&hp.path("proc/412/comm"), "systemd-oomd\n");
    put(&hp.path("proc/988/comm"), "earlyoom\n");
    put(&hp.path("proc/1/comm"), "systemd\n");
    let c = assert_missed(&hp, SysReq::NoSysOomd, "systemd-oomd is running (pid 412)");
    assert!(c.missed.iter().any(|m| m.contains("earlyoom is running")));
    assert!(c.fix.is_none());
    assert!(c.missed.iter().any(|m| m.contains("stop it for the run")));

    let sd = Arc::new(FakeSystemd::new(&[
        "systemd-oomd.service",
        "systemd-oomd.socket",
        "earlyoom.service",
    ]));
    let hp = hp.with_systemd(sd.clone());
    let c = check(&hp, SysReq::NoSysOomd);
    assert_eq!(
        c.fix.as_ref().map(|f| &f.action),
        Some(&FixAction::StopUnits {
            units: vec![
                "earlyoom.service".into(),
                "systemd-oomd.socket".into(),
                "systemd-oomd.service".into()
            ]
        })
    );
    let s = scratch(&hp);
    let host = Host {
        hp: &hp,
        scratch: Ok(&s),
    };
    let journal =
        Journal::open_with_systemd(&t.path().join("w"), fake_remount, sd.clone()).unwrap();
    let ev = evaluate(&host, Enforce::from_passive(Some("oomd")), Some(&journal)).unwrap();
    assert!(ev.fixed.is_empty());
    assert!(sd.unit("systemd-oomd.service").unwrap().active);
    evaluate(&host, Enforce::all(), Some(&journal)).unwrap();
    for u in [
        "systemd-oomd.socket",
        "systemd-oomd.service",
        "earlyoom.service",
    ] {
        assert!(!sd.unit(u).unwrap().active, "{}", u);
    }
    journal.restore_all().unwrap();
    for u in [
        "systemd-oomd.socket",
        "systemd-oomd.service",
        "earlyoom.service",
    ] {
        assert!(sd.unit(u).unwrap().active, "{}", u);
    }
    let starts: Vec<String> = sd
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("start "))
        .collect();
    // Reverse order: the service before its socket.
    assert_eq!(
        starts,
        vec![
            "start systemd-oomd.service",
            "start systemd-oomd.socket",
            "start earlyoom.service"
        ]
    );
}
