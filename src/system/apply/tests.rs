//! `apply` on a host tree in a temp dir, with a stand-in for udev and systemd's iocost tool
//! that does what they do: `systemd-hwdb update` compiles the hwdb files in name order, a
//! re-trigger looks the disk up by udev's key and, when it gets solutions, writes the one
//! systemd picks into the knobs.

use super::exec::{execute, undo, Steps, Tools};
use super::solutions::Solutions;
use super::state::STATE_FILE;
use super::*;
use crate::system::iocost;
use std::path::Path;

const HWDB: &str = include_str!(
    "../../../tests/fixtures/results/Samsung_SSD_970_PRO_512GB.format-hwdb.iocost-tune.txt"
);
const OLD_MODEL: &str =
    "8:0 ctrl=auto model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6";
const OLD_QOS: &str =
    "8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00";

const BOOT: Steps = Steps {
    now: false,
    boot: true,
};
const NOW: Steps = Steps {
    now: true,
    boot: false,
};

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn get(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap_or_default()
}

/// A host with one SCSI disk, sda, whose sysfs model is `RB Test HDD` and udev's `RB_Test_HDD`.
fn host() -> (tempfile::TempDir, HostPaths) {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    put(r, "sys/block/sda/dev", "8:0\n");
    put(r, "sys/block/sda/size", "2097152\n");
    put(r, "sys/block/sda/device/model", "RB Test HDD     \n");
    put(r, "sys/block/sda/device/rev", "2.5+\n");
    put(r, "sys/block/sda/queue/rotational", "1\n");
    std::fs::create_dir_all(r.join("sys/class/block/sda")).unwrap();
    put(
        r,
        "run/udev/data/b8:0",
        "E:ID_MODEL=RB_Test_HDD\nE:ID_REVISION=2.5+\n",
    );
    put(r, "sys/fs/cgroup/io.cost.model", OLD_MODEL);
    put(r, "sys/fs/cgroup/io.cost.qos", OLD_QOS);
    put(r, "usr/lib/udev/iocost", "");
    put(r, "usr/lib/udev/rules.d/90-iocost.rules", "");
    let hp = HostPaths::under(r);
    (d, hp)
}

/// The result's hwdb lines, for the model `RB Test HDD` as sysfs names it.
fn result_source() -> Source {
    Source {
        what: "r.json (iocost-tune)".into(),
        records: hwdb::parse(&HWDB.replace("Samsung SSD 970 PRO 512GB", "RB Test HDD")).unwrap(),
        measured: Some(("RB Test HDD".into(), "2.5+".into())),
        measured_dev: Some("sdb".into()),
    }
}

/// udev and systemd's iocost, as far as apply sees them. As udevd, it looks at a new hwdb.bin
/// only when told to reload (the real one checks at most every 3 s, so a trigger right after
/// an update may still see the old one).
#[derive(Default)]
struct FakeSystemd {
    calls: Vec<String>,
    compiled: Vec<hwdb::Record>,
    loaded: Vec<hwdb::Record>,
}

impl Tools for FakeSystemd {
    fn run(&mut self, hp: &HostPaths, argv: &[&str]) -> anyhow::Result<()> {
        self.calls.push(argv.join(" "));
        let dir = hp.path(HWDB_DIR);
        match argv {
            ["systemd-hwdb", "update"] => {
                let mut files: Vec<_> = std::fs::read_dir(&dir)
                    .map(|rd| rd.flatten().map(|e| e.path()).collect())
                    .unwrap_or_default();
                files.sort();
                self.compiled.clear();
                for f in files {
                    let text = std::fs::read_to_string(f)?;
                    self.compiled
                        .extend(hwdb::parse(&text).map_err(anyhow::Error::msg)?);
                }
            }
            ["udevadm", "control", "--reload"] => self.loaded = self.compiled.clone(),
            ["udevadm", "trigger", "--action=change", "--settle", sys] => {
                assert_eq!(*sys, "/sys/class/block/sda");
                let data = hp.path("run/udev/data/b8:0");
                let kept: Vec<String> = std::fs::read_to_string(&data)?
                    .lines()
                    .filter(|l| !l.starts_with("E:IOCOST_"))
                    .map(str::to_string)
                    .collect();
                let props = udev::properties(hp, DevNr::new(8, 0)).unwrap();
                let key = UdevIds::of(&props).unwrap().key();
                let found = hwdb::lookup(&self.loaded, &key);
                let mut text = kept.join("\n") + "\n";
                for (k, v) in &found {
                    text += &format!("E:{}={}\n", k, v);
                }
                std::fs::write(&data, text)?;
                if let Some(sols) = Solutions::from_props(&found).map_err(anyhow::Error::msg)? {
                    let s = sols.choose(None).map_err(anyhow::Error::msg)?;
                    let (r, w) = s.model.lines();
                    let cg = hp.cgroup();
                    std::fs::write(
                        cg.join("io.cost.qos"),
                        format!("8:0 enable=1 ctrl=user {}", s.qos.line()),
                    )?;
                    std::fs::write(
                        cg.join("io.cost.model"),
                        format!("8:0 ctrl=user model=linear {} {}", r, w),
                    )?;
                }
            }
            _ => panic!("unexpected {:?}", argv),
        }
        Ok(())
    }
}

/// The knobs hold the kernel's own control again, as before the first apply.
fn assert_knobs_as_before_apply(root: &Path) {
    assert_eq!(get(root, "sys/fs/cgroup/io.cost.model"), "8:0 ctrl=auto");
    assert_eq!(
        get(root, "sys/fs/cgroup/io.cost.qos"),
        "8:0 enable=0 ctrl=auto"
    );
}

fn wanted(solution: Option<&str>) -> Wanted {
    Wanted {
        solution: solution.map(str::to_string),
        ..Default::default()
    }
}

#[test]
fn the_plan_names_the_disk_as_udev_does() {
    let (_d, hp) = host();
    let p = plan(&hp, &result_source(), &wanted(None)).unwrap();
    assert_eq!(p.dev.name, "sda");
    assert_eq!(p.chosen.name, "naive");
    let text = p.hwdb_text().unwrap();
    assert!(
        text.contains("\nblock:*:name:RB_Test_HDD:fwrev:*:\n  IOCOST_SOLUTIONS=naive\n"),
        "{}",
        text
    );
    assert_eq!(hwdb::parse(&text).unwrap()[0].props.len(), 17);
    let shown = p.describe(&hp);
    assert!(shown.contains("udev names it \"RB_Test_HDD\""), "{}", shown);
    assert!(
        shown.contains("91-iocost-tune-RB_Test_HDD.hwdb"),
        "{}",
        shown
    );
    assert!(
        shown.contains("io.cost.qos:   8:0 enable=1 ctrl=user rpct=99.00 rlat=1415"),
        "{}",
        shown
    );
    let fw = plan(
        &hp,
        &result_source(),
        &Wanted {
            fwrev: true,
            ..wanted(None)
        },
    )
    .unwrap();
    assert!(fw.hwdb_text().unwrap().contains("fwrev:2.5+:"));
}

#[test]
fn boot_has_systemd_apply_it_and_undo_leaves_nothing() {
    let (d, hp) = host();
    let p = plan(&hp, &result_source(), &wanted(Some("bandwidth"))).unwrap();
    let mut sd = FakeSystemd::default();
    let mut out = String::new();
    execute(&hp, &p, BOOT, &mut sd, &mut out).unwrap();
    assert!(
        out.contains("systemd's iocost applied bandwidth to sda"),
        "{}",
        out
    );
    let m = iocost::read_model(&hp, DevNr::new(8, 0)).unwrap();
    assert!(m.same_params(&p.chosen.model));
    assert!(get(d.path(), "run/udev/data/b8:0").contains("E:IOCOST_SOLUTIONS=bandwidth"));
    // Again: our own file is replaced, not refused.
    execute(&hp, &p, BOOT, &mut sd, &mut String::new()).unwrap();

    let mut out = String::new();
    undo(&hp, &mut sd, &mut out).unwrap();
    assert!(out.contains("removed"), "{}", out);
    assert!(std::fs::read_dir(hp.path(HWDB_DIR))
        .unwrap()
        .next()
        .is_none());
    assert_knobs_as_before_apply(d.path());
    assert!(!get(d.path(), "run/udev/data/b8:0").contains("IOCOST"));
    assert!(!d.path().join(STATE_FILE).exists());
    let count = |prefix: &str| sd.calls.iter().filter(|c| c.starts_with(prefix)).count();
    assert_eq!(count("udevadm trigger"), 3);
    // Every hwdb update is loaded by udevd before the next trigger.
    assert_eq!(
        count("udevadm control --reload"),
        count("systemd-hwdb update")
    );
    let mut out = String::new();
    undo(&hp, &mut sd, &mut out).unwrap();
    assert!(out.starts_with("nothing to undo"));
}

#[test]
fn now_writes_what_systemd_would_and_undo_puts_back_the_first_values() {
    let (d, hp) = host();
    let mut sd = FakeSystemd::default();
    for name in ["isolation", "naive"] {
        let p = plan(&hp, &result_source(), &wanted(Some(name))).unwrap();
        execute(&hp, &p, NOW, &mut sd, &mut String::new()).unwrap();
        let (qos, model) = p.knob_lines();
        assert_eq!(get(d.path(), "sys/fs/cgroup/io.cost.qos"), qos);
        assert_eq!(get(d.path(), "sys/fs/cgroup/io.cost.model"), model);
    }
    assert!(sd.calls.is_empty());
    undo(&hp, &mut sd, &mut String::new()).unwrap();
    assert_knobs_as_before_apply(d.path());
    assert!(
        sd.calls.is_empty(),
        "no file, no hwdb update: {:?}",
        sd.calls
    );
}

#[test]
fn a_community_file_reaches_the_disk_only_under_udevs_name() {
    let (d, hp) = host();
    // As the community writes it: the model as sysfs has it, which udev's key never matches.
    let community = HWDB.replace("Samsung SSD 970 PRO 512GB", "RB Test HDD");
    put(d.path(), "etc/udev/hwdb.d/90-iocost-tune.hwdb", &community);
    let src = Source {
        what: "90-iocost-tune.hwdb".into(),
        records: hwdb::parse(&community).unwrap(),
        measured: None,
        measured_dev: None,
    };
    let mut sd = FakeSystemd::default();
    sd.run(&hp, &["systemd-hwdb", "update"]).unwrap();
    sd.run(
        &hp,
        &[
            "udevadm",
            "trigger",
            "--action=change",
            "--settle",
            "/sys/class/block/sda",
        ],
    )
    .unwrap();
    assert!(!get(d.path(), "run/udev/data/b8:0").contains("IOCOST"));
    let p = plan(&hp, &src, &wanted(Some("isolation"))).unwrap();
    execute(&hp, &p, BOOT, &mut sd, &mut String::new()).unwrap();
    let q = iocost::read_qos(&hp, DevNr::new(8, 0)).unwrap();
    assert!(q.same_params(&p.chosen.qos) && q.enable == 1);
    undo(&hp, &mut sd, &mut String::new()).unwrap();
    assert_eq!(
        get(d.path(), "etc/udev/hwdb.d/90-iocost-tune.hwdb"),
        community
    );
}

#[test]
fn what_cant_be_done_is_refused_before_anything_changes() {
    let (d, hp) = host();
    let src = result_source();
    let err = |r: anyhow::Result<Plan>| format!("{:#}", r.unwrap_err());
    assert!(err(plan(&hp, &src, &wanted(Some("fast"))))
        .contains("no solution \"fast\" (accepted: isolation,"));
    let other = Wanted {
        dev: Some("sdz".into()),
        ..wanted(None)
    };
    assert!(err(plan(&hp, &src, &other))
        .contains("-D sdz: no such whole disk (disks: sda (\"RB Test HDD\"))"));
    let fw = Source {
        measured: Some(("RB Test HDD".into(), "9.9".into())),
        ..result_source()
    };
    let e = err(plan(
        &hp,
        &fw,
        &Wanted {
            fwrev: true,
            ..wanted(None)
        },
    ));
    assert!(
        e.contains("no disk here is model \"RB Test HDD\" with firmware \"9.9\""),
        "{}",
        e
    );

    let p = plan(&hp, &src, &wanted(None)).unwrap();
    let mut sd = FakeSystemd::default();
    let refused = |hp: &HostPaths, steps: Steps, sd: &mut FakeSystemd| {
        let e = execute(hp, &p, steps, sd, &mut String::new()).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2, "{:#}", e);
        assert!(!d.path().join(STATE_FILE).exists());
        assert_eq!(get(d.path(), "sys/fs/cgroup/io.cost.model"), OLD_MODEL);
        format!("{:#}", e)
    };
    let boot = Steps {
        now: true,
        boot: true,
    };
    put(
        d.path(),
        "etc/udev/hwdb.d/91-iocost-tune-RB_Test_HDD.hwdb",
        "block:*:\n  X=1\n",
    );
    assert!(refused(&hp, boot, &mut sd).contains("apply didn't write it"));
    std::fs::remove_file(p.hwdb_path(&hp)).unwrap();
    std::fs::remove_file(d.path().join("usr/lib/udev/rules.d/90-iocost.rules")).unwrap();
    assert!(refused(&hp, boot, &mut sd).contains("has no iocost tool"));
    std::fs::remove_file(d.path().join("sys/fs/cgroup/io.cost.qos")).unwrap();
    assert!(refused(
        &hp,
        Steps {
            now: true,
            boot: false
        },
        &mut sd
    )
    .contains("no io.cost"));
    assert!(sd.calls.is_empty());
    // A file whose record for the disk doesn't read: the key is named, not "no solutions".
    let bad = "block:*:name:RB_Test_HDD:fwrev:*:\n  IOCOST_SOLUTIONS=naive\n  \
               IOCOST_MODEL_NAIVE=rbps=1\n  IOCOST_QOS_NAIVE=rpct=1\n";
    let src = Source {
        what: "bad.hwdb".into(),
        records: hwdb::parse(bad).unwrap(),
        measured: None,
        measured_dev: None,
    };
    let e = err(plan(&hp, &src, &wanted(None)));
    assert!(
        e.contains("bad.hwdb: IOCOST_MODEL_NAIVE: rseqiops= is missing"),
        "{}",
        e
    );
    let no_udev = Plan {
        udev: None,
        ..p.clone()
    };
    assert!(no_udev
        .hwdb_text()
        .unwrap_err()
        .contains("udev has no model for sda"));
}
