//! The fix pass: what `deps --fix`/`run` change, journal and restore, and what they leave
//! alone (passive tokens, failed fixes, other OOM killers).

use super::*;

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
    // Tokens merge into a bench's default; `none` goes back to everything.
    let base = Enforce::from_passive(Some("cpu/mem/io/fs"));
    assert_eq!(base.merge_passive(None), base);
    let e = base.merge_passive(Some("oomd"));
    assert!(e.crit_mem_prot && !e.mem && !e.oomd);
    assert_eq!(base.merge_passive(Some("none")), Enforce::all());
    assert_eq!(
        base.merge_passive(Some("none/io")),
        Enforce::from_passive(Some("io"))
    );
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
