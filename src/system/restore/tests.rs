use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn restore_never_kills_this_process_with_its_slice() {
    // A fake cgroup tree: this process in hostcritical.slice, as a run is.
    let t = tmp();
    let slice = t.path().join("hostcritical.slice");
    std::fs::create_dir(&slice).unwrap();
    let me = std::process::id().to_string();
    std::fs::write(slice.join("cgroup.procs"), format!("1\n{}\n", me)).unwrap();
    std::fs::write(t.path().join("cgroup.procs"), "").unwrap();
    leave_cgroup(&slice).unwrap();
    assert_eq!(
        std::fs::read_to_string(t.path().join("cgroup.procs")).unwrap(),
        me
    );
    // Not in the cgroup: nothing is written.
    std::fs::write(slice.join("cgroup.procs"), "1\n").unwrap();
    std::fs::write(t.path().join("cgroup.procs"), "").unwrap();
    leave_cgroup(&slice).unwrap();
    assert_eq!(
        std::fs::read_to_string(t.path().join("cgroup.procs")).unwrap(),
        ""
    );
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn put(p: &Path, s: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, s).unwrap();
}

fn get(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

fn fake_remount(r: &Remount, data: &str) -> Result<()> {
    // The "mount" is a file under the target holding the options.
    std::fs::write(r.target.join("opts"), data)?;
    Ok(())
}

#[test]
fn set_records_before_writing_and_restores_on_drop() {
    let t = tmp();
    let knob = t.path().join("proc/sys/vm/swappiness");
    put(&knob, "30\n");
    let dir = t.path().join("work");
    {
        let j = Journal::open(&dir).unwrap();
        assert_eq!(j.set(&knob, "60").unwrap(), "30");
        assert_eq!(get(&knob), "60");
        let saved: JournalFile = serde_json::from_str(&get(&dir.join(JOURNAL_FILE))).unwrap();
        assert_eq!(
            saved.changes,
            vec![Change::Write {
                path: knob.clone(),
                old: "30".into()
            }]
        );
        assert_eq!(saved.pid, std::process::id());
    }
    assert_eq!(get(&knob), "30");
    assert!(!dir.join(JOURNAL_FILE).exists());
}

#[test]
fn restore_order_is_reverse_and_first_old_value_wins() {
    let t = tmp();
    let a = t.path().join("a");
    let b = t.path().join("b");
    put(&a, "a0");
    put(&b, "b0");
    let j = Journal::open(&t.path().join("w")).unwrap();
    j.set(&a, "a1").unwrap();
    j.set(&b, "b1").unwrap();
    j.set(&a, "a2").unwrap();
    let ch = j.changes();
    assert_eq!(ch.len(), 2);
    assert_eq!(
        ch[0],
        Change::Write {
            path: a.clone(),
            old: "a0".into()
        }
    );
    let d = t.path().join("cg");
    std::fs::create_dir(&d).unwrap();
    j.record_created_dir(&d).unwrap();
    j.restore_all().unwrap();
    assert_eq!(get(&a), "a0");
    assert_eq!(get(&b), "b0");
    assert!(!d.exists());
    assert!(j.changes().is_empty());
}

#[test]
fn reverse_order_undoes_dependent_changes() {
    // A directory created first and a file created in it later: the file's restore (removing
    // it) must happen before the directory's.
    let t = tmp();
    let j = Journal::open(&t.path().join("w")).unwrap();
    let d = t.path().join("sub.slice");
    std::fs::create_dir(&d).unwrap();
    j.record_created_dir(&d).unwrap();
    let inner = d.join("child");
    std::fs::create_dir(&inner).unwrap();
    j.record_created_dir(&inner).unwrap();
    j.restore_all().unwrap();
    assert!(!d.exists());
}

#[test]
fn keyed_files_keep_one_record_per_device() {
    let t = tmp();
    let qos = t.path().join("io.cost.qos");
    let both = "8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n\
         8:16 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 max=100.00\n";
    put(&qos, both);
    let j = Journal::open(&t.path().join("w")).unwrap();
    j.set(&qos, "8:0 enable=1").unwrap();
    // The kernel keeps listing every device; the fake file only keeps the last write.
    put(&qos, both);
    j.set(&qos, "8:16 enable=0").unwrap();
    j.set(&qos, "8:0 enable=0").unwrap();
    let ch = j.changes();
    assert_eq!(ch.len(), 2);
    assert_eq!(
        ch[0],
        Change::Write {
            path: qos.clone(),
            old: "8:0 enable=0 ctrl=auto".into()
        }
    );
    assert!(
        matches!(&ch[1], Change::Write { old, .. } if old.starts_with("8:16 enable=1 ctrl=user"))
    );
    // Under ctrl=auto the parameters are the kernel's: restoring them would make them user's.
    assert_eq!(
        undo_value(
            &qos,
            "8:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n",
            "8:0 enable=1"
        ),
        "8:0 enable=0 ctrl=auto"
    );
    assert_eq!(
        undo_value(
            &t.path().join("io.cost.model"),
            "8:0 ctrl=auto model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6\n",
            "8:0 ctrl=user rbps=9"
        ),
        "8:0 ctrl=auto"
    );
    // A device without a line is undone by disabling.
    assert_eq!(undo_value(&qos, "", "259:0 enable=1"), "259:0 enable=0");
    j.restore_all().unwrap();
    // The fake file only keeps the last write: the oldest record is restored last.
    assert!(get(&qos).starts_with("8:0 enable=0 ctrl=auto"));
}

#[test]
fn scheduler_records_the_selected_entry() {
    let t = tmp();
    let s = t.path().join("sys/block/sda/queue/scheduler");
    put(&s, "mq-deadline kyber [bfq] none\n");
    let j = Journal::open(&t.path().join("w")).unwrap();
    assert_eq!(j.set(&s, "none").unwrap(), "bfq");
    j.restore_all().unwrap();
    assert_eq!(get(&s), "bfq");
}

#[test]
fn subtree_control_restores_by_difference() {
    let t = tmp();
    let sc = t.path().join("cgroup.subtree_control");
    put(&sc, "cpu memory\n");
    let mut j = Journal::open(&t.path().join("w")).unwrap();
    ChangeJournal::record(&mut j, &sc, "memory pids").unwrap();
    j.restore_all().unwrap();
    assert_eq!(get(&sc), "+pids -cpu");
}

#[test]
fn remount_is_journaled_and_undone() {
    let t = tmp();
    let target = t.path().join("cgroup");
    std::fs::create_dir(&target).unwrap();
    let r = Remount {
        target: target.clone(),
        source: "cgroup2".into(),
        fstype: "cgroup2".into(),
        mount_opts: "rw,nosuid,nodev,noexec,relatime".into(),
        old: "rw,nsdelegate".into(),
    };
    let j = Journal::open_with(&t.path().join("w"), fake_remount).unwrap();
    j.remount(&r, "rw,nsdelegate,memory_recursiveprot").unwrap();
    assert_eq!(
        get(&target.join("opts")),
        "rw,nsdelegate,memory_recursiveprot"
    );
    drop(j);
    assert_eq!(get(&target.join("opts")), "rw,nsdelegate");
    assert_eq!(
        mount_flags(&r.mount_opts),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RELATIME
    );
}

#[test]
fn leftover_journal_is_restored_at_next_open() {
    let t = tmp();
    let knob = t.path().join("wbt_lat_usec");
    put(&knob, "2000\n");
    let dir = t.path().join("w");
    let j = Journal::open(&dir).unwrap();
    j.set(&knob, "0").unwrap();
    // Simulate a crash: the process dies without restoring.
    std::mem::forget(j);
    assert_eq!(get(&knob), "0");
    assert!(dir.join(JOURNAL_FILE).exists());
    // The forgotten journal still holds the lock within this process; flock locks belong to
    // the open file, so a new open file is a new lock owner only after the old fd closes.
    // Emulate the dead process by writing the same journal to a fresh directory.
    let dir2 = t.path().join("w2");
    std::fs::create_dir(&dir2).unwrap();
    std::fs::copy(dir.join(JOURNAL_FILE), dir2.join(JOURNAL_FILE)).unwrap();
    let j2 = Journal::open(&dir2).unwrap();
    assert_eq!(get(&knob), "2000");
    assert!(j2.changes().is_empty());
    assert!(!dir2.join(JOURNAL_FILE).exists());
}

#[test]
fn second_open_of_a_locked_dir_fails() {
    let t = tmp();
    let _j = Journal::open(t.path()).unwrap();
    let err = Journal::open(t.path()).err().unwrap().to_string();
    assert!(err.contains("in use by another resctl-bench"), "{}", err);
}

#[test]
fn malformed_journal_is_an_error_not_a_panic() {
    let t = tmp();
    put(
        &t.path().join(JOURNAL_FILE),
        "{\"changes\": [ {\"kind\": \"bogus\"",
    );
    let err = format!("{:#}", Journal::open(t.path()).err().unwrap());
    assert!(err.contains("not a restore journal"), "{}", err);
    // The file is left for the user.
    assert!(t.path().join(JOURNAL_FILE).exists());
    put(&t.path().join(JOURNAL_FILE), "[1,2]");
    assert!(Journal::open(t.path()).is_err());
    put(&t.path().join(JOURNAL_FILE), "\n");
    assert!(Journal::open(t.path()).is_ok());
}

#[test]
fn vanished_paths_are_dropped_failed_ones_kept() {
    let t = tmp();
    let gone = t.path().join("gone");
    put(&gone, "1");
    let dir_knob = t.path().join("adir");
    std::fs::create_dir(&dir_knob).unwrap();
    let dir = t.path().join("w");
    let j = Journal::open(&dir).unwrap();
    j.set(&gone, "2").unwrap();
    // Writing to a directory fails with something other than NotFound.
    j.record_old(&dir_knob, "x").unwrap();
    std::fs::remove_file(&gone).unwrap();
    let err = format!("{:#}", j.restore_all().err().unwrap());
    assert!(err.contains("failed to restore 1 host change"), "{}", err);
    assert_eq!(j.changes().len(), 1);
    assert!(dir.join(JOURNAL_FILE).exists());
    std::fs::remove_dir(&dir_knob).unwrap();
    j.restore_all().unwrap();
    assert!(!dir.join(JOURNAL_FILE).exists());
}

#[test]
fn write_file_never_creates() {
    let t = tmp();
    assert!(write_file(&t.path().join("nope"), "1").is_err());
    assert!(!t.path().join("nope").exists());
}

static REMOUNTS: AtomicUsize = AtomicUsize::new(0);
fn counting_remount(_: &Remount, _: &str) -> Result<()> {
    REMOUNTS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[test]
fn change_kinds_round_trip_through_json() {
    let t = tmp();
    let dir = t.path().join("w");
    let r = Remount {
        target: t.path().to_path_buf(),
        source: "s".into(),
        fstype: "f".into(),
        mount_opts: "rw".into(),
        old: "rw".into(),
    };
    let j = Journal::open_with(&dir, counting_remount).unwrap();
    j.remount(&r, "rw,x").unwrap();
    let text = get(&dir.join(JOURNAL_FILE));
    assert!(text.contains("\"kind\": \"remount\""), "{}", text);
    j.restore_all().unwrap();
    assert_eq!(REMOUNTS.load(Ordering::SeqCst), 2);
}
