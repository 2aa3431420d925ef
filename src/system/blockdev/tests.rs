use super::testutil::*;
use super::*;

const MOUNTINFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 259:2 / / rw,relatime - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
30 27 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
40 27 0:40 / /data rw,relatime shared:9 master:2 - btrfs /dev/sdb1 rw,ssd,space_cache=v2
41 27 0:41 /sub /my\\040dir rw - btrfs /dev/root rw
42 27 0:42 / /ovl rw - overlay overlay rw,lowerdir=/a
";

fn fake() -> (tempfile::TempDir, HostPaths) {
    let t = tempfile::tempdir().unwrap();
    let hp = HostPaths::under(t.path());
    put(&hp.path("proc/self/mountinfo"), MOUNTINFO);
    add_disk(
        &hp,
        "nvme0n1",
        259,
        0,
        &[("nvme0n1p1", 1), ("nvme0n1p2", 2)],
    );
    add_disk(&hp, "sdb", 8, 16, &[("sdb1", 17)]);
    add_disk(&hp, "vda", 254, 0, &[]);
    (t, hp)
}

#[test]
fn parses_mountinfo() {
    let m = parse_mountinfo(MOUNTINFO, "mi").unwrap();
    assert_eq!(m.len(), 6);
    assert_eq!(m[2].fstype, "cgroup2");
    assert_eq!(m[2].mount_point, PathBuf::from("/sys/fs/cgroup"));
    assert!(m[2].has_super_opt("memory_recursiveprot"));
    assert_eq!(m[2].mount_opts, "rw,nosuid,nodev,noexec,relatime");
    assert_eq!(m[3].source, "/dev/sdb1");
    assert_eq!(m[4].mount_point, PathBuf::from("/my dir"));
    assert_eq!(m[4].root, "/sub");
    assert_eq!(m[1].devnr, (259, 2));
}

#[test]
fn malformed_mountinfo_is_an_error() {
    for bad in [
        "1 2 3",
        "1 2 x:y / / rw - ext4 /dev/a rw",
        "1 2 8:0 / / rw ext4 /dev/a rw",
    ] {
        let e = parse_mountinfo(bad, "mi").err().unwrap().to_string();
        assert!(e.contains("mi:1: malformed"), "{}", e);
    }
}

#[test]
fn splits_dev_t() {
    assert_eq!(split_dev(0xfe00), (254, 0));
    assert_eq!(split_dev((259 << 8) | 5), (259, 5));
    // Large minors live in the high bits.
    assert_eq!(split_dev(0x1_0000_0803), (8, 0x100003));
}

#[test]
fn partition_devnr_maps_to_whole_disk() {
    let (_t, hp) = fake();
    let pd = device_of_devnr(&hp, (259, 2), Path::new("/")).unwrap();
    assert_eq!(pd.disk, "nvme0n1");
    assert_eq!(pd.part, "nvme0n1p2");
    assert_eq!(pd.mount_point, Some(PathBuf::from("/")));
    assert_eq!(whole_disk_of_devnr(&hp, (254, 0)).unwrap(), "vda");
}

#[test]
fn anonymous_devnr_uses_the_mount_source() {
    let (_t, hp) = fake();
    let pd = device_of_devnr(&hp, (0, 40), Path::new("/data/x")).unwrap();
    assert_eq!((pd.disk.as_str(), pd.part.as_str()), ("sdb", "sdb1"));
}

#[test]
fn dev_root_is_resolved_through_the_command_line() {
    let (_t, hp) = fake();
    put(
        &hp.path("proc/cmdline"),
        "BOOT_IMAGE=/vmlinuz root=PARTUUID=abcd ro quiet\n",
    );
    symlink("../../nvme0n1p1", &hp.path("dev/disk/by-partuuid/abcd"));
    let pd = device_of_devnr(&hp, (0, 41), Path::new("/my dir/a")).unwrap();
    assert_eq!(
        (pd.disk.as_str(), pd.part.as_str()),
        ("nvme0n1", "nvme0n1p1")
    );
    put(&hp.path("proc/cmdline"), "root=/dev/sdb1\n");
    assert_eq!(
        device_of_devnr(&hp, (0, 41), Path::new("/")).unwrap().disk,
        "sdb"
    );
}

#[test]
fn mapper_source_resolves_to_dm_device() {
    let (_t, hp) = fake();
    add_disk(&hp, "dm-0", 253, 0, &[]);
    symlink("../dm-0", &hp.path("dev/mapper/vg-data"));
    put(
        &hp.path("proc/self/mountinfo"),
        "50 1 0:50 / /vol rw - xfs /dev/mapper/vg-data rw\n",
    );
    let pd = device_of_devnr(&hp, (0, 50), Path::new("/vol")).unwrap();
    assert_eq!(pd.disk, "dm-0");
}

#[test]
fn non_block_filesystem_is_an_error() {
    let (_t, hp) = fake();
    let e = format!(
        "{:#}",
        device_of_devnr(&hp, (0, 42), Path::new("/ovl"))
            .err()
            .unwrap()
    );
    assert!(
        e.contains("overlay filesystem") && e.contains("not a block device"),
        "{}",
        e
    );
    let e = format!(
        "{:#}",
        device_of_devnr(&hp, (0, 99), Path::new("/")).err().unwrap()
    );
    assert!(e.contains("0:99"), "{}", e);
}

#[test]
fn reads_device_info() {
    let (_t, hp) = fake();
    let d = DevInfo::read(&hp, "nvme0n1").unwrap();
    assert_eq!(d.devnr, (259, 0));
    assert_eq!(d.model, "Fake SSD 970");
    assert_eq!(d.fwrev, "1B2QEXP7");
    assert_eq!(d.size, 1000215216 * 512);
    assert_eq!(d.scheduler, "mq-deadline");
    assert_eq!(d.wbt_lat_usec, Some(2000));
    assert!(!d.rotational);
    assert!(!d.is_composite());
}

#[test]
fn virtio_device_without_model_uses_serial_and_rev_fallbacks() {
    let (_t, hp) = fake();
    let d = hp.path("sys/block/vda");
    std::fs::remove_file(d.join("device/model")).unwrap();
    std::fs::remove_file(d.join("device/firmware_rev")).unwrap();
    assert_eq!(DevInfo::read(&hp, "vda").unwrap().model, "<unknown>");
    assert_eq!(DevInfo::read(&hp, "vda").unwrap().fwrev, "<UNKNOWN>");
    put(&d.join("serial"), "scratch0\n");
    put(&d.join("device/rev"), "2.5+\n");
    let i = DevInfo::read(&hp, "vda").unwrap();
    assert_eq!((i.model.as_str(), i.fwrev.as_str()), ("scratch0", "2.5+"));
}

#[test]
fn malformed_device_files_are_errors() {
    let (_t, hp) = fake();
    put(&hp.path("sys/block/sdb/size"), "lots\n");
    assert!(DevInfo::read(&hp, "sdb").is_err());
    put(&hp.path("sys/block/sdb/size"), "8\n");
    put(&hp.path("sys/block/sdb/dev"), "8\n");
    assert!(DevInfo::read(&hp, "sdb").is_err());
    assert!(DevInfo::read(&hp, "nope").is_err());
}

#[test]
fn dev_option_names_disk_or_partition() {
    let (_t, hp) = fake();
    let s = detect(&hp, Path::new("/nonexistent"), Some("sdb")).unwrap();
    assert!(s.given && s.warnings.is_empty());
    assert_eq!(s.dev.name, "sdb");
    let s = detect(&hp, Path::new("/nonexistent"), Some("/dev/nvme0n1p2")).unwrap();
    assert_eq!(s.dev.name, "nvme0n1");
    assert!(s.warnings[0].contains("partition"), "{:?}", s.warnings);
    let e = detect(&hp, Path::new("/x"), Some("sdz")).err().unwrap();
    assert!(e.downcast_ref::<UsageError>().is_some());
    assert!(e.to_string().contains("known: nvme0n1, sdb, vda"), "{}", e);
}

#[test]
fn detects_the_device_backing_a_real_directory() {
    // The temp dir's real device number, faked in sysfs as a partition of a fake disk.
    let (t, hp) = fake();
    let work = t.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let (maj, min) = split_dev(std::fs::metadata(&work).unwrap().dev());
    if maj == 0 {
        // tmpfs/overlay: describe it as a btrfs mount of sdb1.
        put(
            &hp.path("proc/self/mountinfo"),
            &format!("60 1 0:{} / / rw - btrfs /dev/sdb1 rw\n", min),
        );
    } else {
        std::fs::remove_dir_all(hp.path("sys/dev/block")).unwrap();
        std::fs::remove_dir_all(hp.path("sys/class/block")).unwrap();
        add_disk(&hp, "scr", maj, min + 1000, &[("scr1", min)]);
    }
    let (disk, part) = if maj == 0 {
        ("sdb", "sdb1")
    } else {
        ("scr", "scr1")
    };
    // `scratch` doesn't exist: its nearest existing ancestor `work` decides.
    let s = detect(&hp, &work, None).unwrap();
    assert_eq!(s.dev.name, disk);
    assert!(!s.given);
    assert!(
        s.how.contains(&format!("{}, disk {}", part, disk)),
        "{}",
        s.how
    );
}

#[test]
fn composite_devices_warn() {
    let (_t, hp) = fake();
    add_disk(&hp, "md0", 9, 0, &[]);
    let s = detect(&hp, Path::new("/x"), Some("md0")).unwrap();
    assert!(s.dev.is_composite());
    assert!(s.warnings[0].contains("md RAID"), "{:?}", s.warnings);
}

#[test]
fn nearest_existing_ancestor() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(nearest_existing(&t.path().join("a/b/c")), t.path());
}
