use super::*;
use crate::report::iolat_source::IoLatSample;
use crate::report::load_report;
use crate::report::model::HashdReport;
use crate::report::report_path;
use crate::system::blockdev::testutil::put;
use std::sync::Arc;

const DEV: DevNr = DevNr { maj: 8, min: 0 };

/// A host tree with /proc, a cgroup2 root with io.cost for 8:0, and workload.slice.
fn host(root: &Path, cpu_user: u64, workload_usage_usec: u64, rbytes: u64) {
    let hp = HostPaths::under(root);
    put(
        &hp.path("proc/stat"),
        &format!("cpu  {} 0 100 1000 0 0 0 0 0 0\ncpu0 1 0 0 0 0\n", cpu_user),
    );
    put(
        &hp.path("proc/meminfo"),
        "MemTotal: 1000 kB\nMemFree: 400 kB\nSwapTotal: 100 kB\nSwapFree: 60 kB\n",
    );
    put(
        &hp.path("proc/diskstats"),
        &format!("   8 0 sda 10 0 {} 0 5 0 16 0 0 0 0\n", rbytes / 512),
    );
    for p in ["cpu", "memory", "io"] {
        put(
            &hp.path(format!("proc/pressure/{}", p)),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=2000000\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n",
        );
    }
    put(&hp.path("proc/vmstat"), "pgfault 1234\nnr_free_pages 77\n");
    put(&hp.path("proc/sys/vm/swappiness"), "60\n");
    let cg = hp.cgroup();
    put(&cg.join("cgroup.controllers"), "cpu io memory\n");
    put(
        &cg.join("io.stat"),
        &format!(
            "8:0 rbytes={} wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=87.50 \
             cost.usage=5000\n",
            rbytes
        ),
    );
    put(&cg.join("memory.stat"), "anon 4096\nfile 8192\n");
    put(
        &cg.join("io.cost.model"),
        "8:0 ctrl=user model=linear rbps=1000 rseqiops=10 rrandiops=10 wbps=1000 \
         wseqiops=10 wrandiops=10\n",
    );
    put(
        &cg.join("io.cost.qos"),
        "8:0 enable=1 ctrl=user rpct=95.00 rlat=5000 wpct=95.00 wlat=5000 min=50.00 \
         max=150.00\n",
    );
    let w = cg.join("workload.slice");
    put(
        &w.join("cpu.stat"),
        &format!(
            "usage_usec {}\nuser_usec 0\nsystem_usec 1000\n",
            workload_usage_usec
        ),
    );
    put(&w.join("memory.current"), "65536\n");
    put(&w.join("memory.swap.current"), "4096\n");
    put(&w.join("memory.swap.max"), "12288\n");
    put(&w.join("memory.stat"), "anon 1024\nfile 2048\npgfault 5\n");
    put(
        &w.join("io.stat"),
        &format!(
            "8:0 rbytes={} wbytes=512 rios=1 wios=1 dbytes=0 dios=0 cost.usage=2500\n",
            rbytes / 2
        ),
    );
    for p in ["cpu", "memory", "io"] {
        put(
            &w.join(format!("{}.pressure", p)),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=500000\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=250000\n",
        );
    }
    // system.slice exists but has only its core files (no memory/io controllers).
    put(
        &cg.join("system.slice/cpu.stat"),
        "usage_usec 10\nsystem_usec 5\n",
    );
}

struct FakeLat;

impl IoLatSource for FakeLat {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn sample(&mut self) -> Result<IoLatSample> {
        let mut s = IoLatSample::default();
        s.pcts
            .insert("read".into(), [("50".to_string(), 0.001)].into());
        Ok(s)
    }
}

fn dev() -> Option<ScratchDev> {
    Some(ScratchDev {
        name: "sda".into(),
        devnr: DEV,
    })
}

#[test]
fn report_assembly_from_a_temp_tree() {
    let t = tempfile::tempdir().unwrap();
    host(t.path(), 100, 1_000_000, 1 << 20);
    let hp = HostPaths::under(t.path());
    let mut s = Sampler::new(hp.clone(), dev(), Some(Box::new(FakeLat)));
    let shared = ReportShared {
        state: RunnerState::BenchHashd,
        ..Default::default()
    };
    s.prime(&shared);
    // One second later: 1 s more user time (of 2 s total), workload 0.5 s, 1 MiB read.
    std::thread::sleep(Duration::from_millis(20));
    host(t.path(), 200, 1_500_000, 2 << 20);
    let rep = s.build(9, &shared);
    assert_eq!(rep.seq, 9);
    assert_eq!(rep.state, RunnerState::BenchHashd);
    let names: Vec<&str> = rep.usages.keys().map(String::as_str).collect();
    assert_eq!(names, ["-.slice", "system.slice", "workload.slice"]);
    let root = &rep.usages["-.slice"];
    assert_eq!(root.cpu_usage_base, 13.0);
    assert_eq!(root.cpu_usage, 3.0);
    assert!((root.cpu_util - 1.0).abs() < 1e-9, "{}", root.cpu_util);
    assert_eq!(root.mem_bytes, 600 * 1024);
    assert_eq!(root.swap_bytes, 40 * 1024);
    assert_eq!(root.swap_free, 60 * 1024);
    assert_eq!(root.io_rbytes, 2 << 20);
    assert!(root.io_rbps > 0);
    assert_eq!(root.io_usage, 0.005);
    assert_eq!(root.io_stalls, (2.0, 1.0));
    assert_eq!(root.io_pressures, (0.0, 0.0));
    let w = &rep.usages["workload.slice"];
    assert_eq!(w.cpu_usage, 1.5);
    assert_eq!(w.cpu_usage_base, 13.0);
    assert!((w.cpu_util - 0.5).abs() < 1e-9, "{}", w.cpu_util);
    assert_eq!((w.mem_bytes, w.swap_bytes), (65536, 4096));
    assert_eq!(w.swap_free, 8192);
    assert_eq!(w.io_rbytes, 1 << 20);
    assert_eq!(w.io_wbytes, 512);
    assert_eq!(w.io_usage, 0.0025);
    assert_eq!(w.cpu_stalls, (0.5, 0.25));
    let sys = &rep.usages["system.slice"];
    assert_eq!((sys.mem_bytes, sys.io_rbytes), (0, 0));
    assert_eq!(sys.swap_free, 60 * 1024);
    // memory.stat / io.stat for the slices that exist and have them.
    assert_eq!(rep.mem_stat["-.slice"]["file"], 8192.0);
    assert_eq!(rep.mem_stat["workload.slice"]["pgfault"], 5.0);
    assert!(!rep.mem_stat.contains_key("system.slice"));
    assert_eq!(rep.io_stat["-.slice"]["cost.vrate"], 87.5);
    assert_eq!(rep.io_stat["workload.slice"]["rbytes"], (1 << 20) as f64);
    assert_eq!(rep.vmstat["pgfault"], 1234.0);
    assert_eq!(rep.iocost.vrate, 87.5);
    assert_eq!(rep.iocost.model.model, "linear");
    assert_eq!((rep.iocost.qos.enable, rep.iocost.qos.max), (1, 150.0));
    assert_eq!(rep.swappiness, 60);
    assert!(!rep.zswap_enabled);
    assert_eq!(rep.iolat_at("read", "50"), Some(0.001));
    assert!(!rep.iolat_unavailable);
}

#[test]
fn no_cgroup2_reports_the_system_only() {
    let t = tempfile::tempdir().unwrap();
    host(t.path(), 100, 0, 0);
    let hp = HostPaths::under(t.path());
    std::fs::remove_file(hp.cgroup().join("cgroup.controllers")).unwrap();
    let mut s = Sampler::new(hp, dev(), None);
    let rep = s.build(0, &ReportShared::default());
    let names: Vec<&str> = rep.usages.keys().map(String::as_str).collect();
    assert_eq!(names, ["-.slice"]);
    assert!(rep.mem_stat.is_empty() && rep.io_stat.is_empty());
    assert_eq!(rep.iocost, Default::default());
    assert!(rep.iolat_unavailable && rep.iolat.is_empty());
    // First reading: levels but no rates.
    assert_eq!(rep.usages["-.slice"].cpu_util, 0.0);
    assert_eq!(rep.usages["-.slice"].cpu_usage, 2.0);
}

#[test]
fn extra_units_and_units_that_vanish() {
    let t = tempfile::tempdir().unwrap();
    host(t.path(), 100, 1_000_000, 0);
    let hp = HostPaths::under(t.path());
    let svc = hp.cgroup().join("workload.slice/hashd-A.service");
    put(&svc.join("cpu.stat"), "usage_usec 7\nsystem_usec 1\n");
    let mut s = Sampler::new(hp.clone(), None, None);
    let shared = ReportShared {
        units: vec!["workload.slice/hashd-A.service".into()],
        ..Default::default()
    };
    let rep = s.build(0, &shared);
    assert_eq!(rep.usages["hashd-A.service"].cpu_usage, 7e-6);
    assert!(!rep.usages.contains_key("workload.slice/hashd-A.service"));
    // Without a device: no io.stat lines, no iocost.
    assert!(rep.io_stat.is_empty());
    std::fs::remove_dir_all(hp.cgroup().join("workload.slice")).unwrap();
    let rep = s.build(0, &shared);
    assert!(!rep.usages.contains_key("workload.slice"));
    assert!(!rep.mem_stat.contains_key("workload.slice"));
}

#[test]
fn a_live_hashd_reader_is_read_at_each_report_and_the_copy_stands_in_without_it() {
    let t = tempfile::tempdir().unwrap();
    host(t.path(), 100, 1_000_000, 0);
    let mut s = Sampler::new(HostPaths::under(t.path()), None, None);
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let c = count.clone();
    let mut shared = ReportShared::default();
    shared.hashd[0].nr_done = 7;
    shared.hashd[1].nr_done = 9;
    shared.hashd_live[0] = Some(LiveHashd(Arc::new(move || {
        let n = c.fetch_add(10, std::sync::atomic::Ordering::SeqCst) + 10;
        // Every third read there is no fresh status.
        (n % 30 != 0).then(|| HashdReport {
            nr_done: n,
            ..HashdReport::default()
        })
    })));
    let done: Vec<(u64, u64)> = (0..3)
        .map(|_| {
            let r = s.build(0, &shared);
            (r.hashd[0].nr_done, r.hashd[1].nr_done)
        })
        .collect();
    assert_eq!(done, [(10, 9), (20, 9), (7, 9)]);
}

#[test]
fn pruner_deletes_by_name_and_link_points_at_newest() {
    let t = tempfile::tempdir().unwrap();
    let rdir = t.path().join("report.d");
    std::fs::create_dir_all(&rdir).unwrap();
    for s in [5, 95, 96, 97, 98] {
        put(&report_path(&rdir, s), "{}");
    }
    let (mut p, n) = Pruner::start(&rdir, 4, 100).unwrap();
    assert_eq!(n, 2);
    assert_eq!(p.after_write(101), 1);
    assert!(!report_path(&rdir, 96).exists());
    assert!(report_path(&rdir, 97).exists());
    assert_eq!(p.after_write(101), 0);
    // A long gap falls back to a listing.
    assert_eq!(p.after_write(10_000), 2);

    let mut rep = Report::new(1, RunnerState::Running);
    rep.vmstat.insert("x".into(), 1.0);
    write_report(&rdir, 200, &rep).unwrap();
    // A staging link left behind by a killed run is replaced.
    std::os::unix::fs::symlink("nowhere", t.path().join("report.json.staging")).unwrap();
    update_link(t.path(), 200).unwrap();
    write_report(&rdir, 201, &rep).unwrap();
    update_link(t.path(), 201).unwrap();
    let link = t.path().join(REPORT_LINK);
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        PathBuf::from("report.d/201.json")
    );
    assert_eq!(load_report(&link).unwrap().vmstat["x"], 1.0);

    put(&rdir.join(".7.json.tmp"), "{");
    put(&rdir.join("notes.txt"), "keep");
    assert_eq!(clear_reports(&rdir).unwrap(), 2);
    let left: Vec<_> = std::fs::read_dir(&rdir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["notes.txt"]);
}

#[test]
fn thread_writes_reports_and_stops_on_drop() {
    let t = tempfile::tempdir().unwrap();
    host(t.path(), 100, 1_000_000, 0);
    let dir = t.path().join("bench");
    let rdir = dir.join("report.d");
    std::fs::create_dir_all(&rdir).unwrap();
    put(&report_path(&rdir, 1000), "{}");
    let mut cfg = ReporterConfig::new(HostPaths::under(t.path()), &dir);
    cfg.dev = dev();
    cfg.seq = 4;
    cfg.fill = Some(Box::new(|r: &mut Report| r.hashd[0].rps = 42.0));
    let h = Reporter::start(cfg).unwrap();
    // The old report is past the 7-day retention.
    assert!(!report_path(&rdir, 1000).exists());
    h.set_state(RunnerState::Running);
    std::thread::sleep(Duration::from_millis(2100));
    let st = h.stop().unwrap();
    assert!(st.written >= 1, "{:?}", st);
    assert_eq!(st.pruned, 1);
    let last = st.last_sec.unwrap();
    let rep = load_report(&report_path(&rdir, last)).unwrap();
    assert_eq!(rep.seq, 4);
    assert_eq!(rep.state, RunnerState::Running);
    assert_eq!(rep.hashd[0].rps, 42.0);
    assert_eq!(rep.timestamp.0.timestamp() as u64, last);
    assert!(rep.usages.contains_key("workload.slice"));
    assert!(st.cpu_secs > 0.0);

    // Dropping the handle stops the thread too.
    let cfg = ReporterConfig::new(HostPaths::under(t.path()), &dir);
    let h = Reporter::start(cfg).unwrap();
    drop(h);
}

#[test]
fn a_stop_at_a_sample_time_leaves_no_expected_second_unwritten() {
    // The stop races the wait for the sample time; whichever wins, every second the stats
    // count as expected must have its report.
    let t = tempfile::tempdir().unwrap();
    host(t.path(), 100, 1_000_000, 0);
    let dir = t.path().join("bench");
    let rdir = dir.join("report.d");
    for offset_ms in [-1.0, 0.0, 0.3, 1.0] {
        let h = Reporter::start(ReporterConfig::new(HostPaths::under(t.path()), &dir)).unwrap();
        let now = unix_now();
        let first = now.floor() + 1.0 + SAMPLE_AT.as_secs_f64();
        let stop_at = first + offset_ms / 1000.0;
        std::thread::sleep(Duration::from_secs_f64((stop_at - now).max(0.0)));
        let st = h.stop().unwrap();
        for sec in st.expected_range() {
            assert!(
                report_path(&rdir, sec).exists(),
                "offset {} ms: {} expected but not written: {:?}",
                offset_ms,
                sec,
                st
            );
        }
    }
}
