use super::super::change_journal::{MemJournal, NoJournal};
use super::*;
use std::fs;

struct Tree {
    _tmp: tempfile::TempDir,
    paths: HostPaths,
    cg: CgroupFs,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let paths = HostPaths::under(tmp.path());
    let cg = CgroupFs::new(&paths);
    fs::create_dir_all(cg.root()).unwrap();
    fs::write(
        cg.root().join("cgroup.controllers"),
        "cpuset cpu io memory pids\n",
    )
    .unwrap();
    fs::write(cg.root().join("cgroup.subtree_control"), "memory pids\n").unwrap();
    Tree {
        _tmp: tmp,
        paths,
        cg,
    }
}

fn put(cg: &CgroupFs, rel: &str, text: &str) {
    let p = cg.path("").join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn knobs(cg: &CgroupFs, slice: &str) {
    put(cg, &format!("{}/cpu.weight", slice), "100\n");
    put(cg, &format!("{}/io.weight", slice), "default 100\n");
    put(cg, &format!("{}/memory.min", slice), "0\n");
    put(cg, &format!("{}/memory.low", slice), "0\n");
    put(cg, &format!("{}/memory.high", slice), "max\n");
    put(cg, &format!("{}/memory.swap.max", slice), "max\n");
}

fn text(p: PathBuf) -> String {
    fs::read_to_string(p).unwrap()
}

#[test]
fn devnr_round_trip() {
    let d: DevNr = "259:3".parse().unwrap();
    assert_eq!(d, DevNr::new(259, 3));
    assert_eq!(d.to_string(), "259:3");
    assert!("259".parse::<DevNr>().is_err());
    assert!("a:b".parse::<DevNr>().is_err());
}

#[test]
fn workload_mem_low_uses_margin() {
    assert_eq!(workload_mem_low(12 << 30, 0.25), 9 << 30);
    assert_eq!(workload_mem_low(8 << 30, 0.0), 8 << 30);
    let l = bench_slices(9 << 30);
    let names: Vec<&str> = l.iter().map(|c| c.slice.name()).collect();
    assert_eq!(
        names,
        [
            "hostcritical.slice",
            "workload.slice",
            "system.slice",
            "balloon.slice"
        ]
    );
    assert_eq!((l[1].cpu_weight, l[1].io_weight), (100, 500));
    assert_eq!((l[2].cpu_weight, l[2].io_weight), (10, 50));
    assert_eq!(l[0].mem_min, Some(768 << 20));
    assert_eq!(sideload_slice().cpu_weight, 1);
}

#[test]
fn setup_slices_journals_existing_slices() {
    let t = tree();
    let mut j = MemJournal::default();
    let layout = bench_slices((9 << 30) + 123);
    // A plain directory gets no knob files (a kernel would add them): the first write
    // fails, naming the file, after the journal heard about the created cgroup.
    let err = t.cg.setup_slices(&layout, &mut j).unwrap_err();
    assert!(format!("{:#}", err).contains("hostcritical.slice/cpu.weight"));
    assert_eq!(j.created, vec![t.cg.path("hostcritical.slice")]);
    assert!(j.records.is_empty());

    // Slices that already exist (someone else's) with default knobs.
    let t = tree();
    for c in &layout {
        fs::create_dir(t.cg.path(c.slice.name())).unwrap();
        knobs(&t.cg, c.slice.name());
    }
    let mut j = MemJournal::default();
    let setup = t.cg.setup_slices(&layout, &mut j).unwrap();
    assert!(setup.created.is_empty());
    let wl = t.cg.path("workload.slice");
    assert_eq!(text(wl.join("io.weight")), "default 500");
    assert_eq!(text(wl.join("cpu.weight")), "100\n"); // unchanged, not rewritten
    assert_eq!(text(wl.join("memory.low")), (9u64 << 30).to_string());
    let hc = t.cg.path("hostcritical.slice");
    assert_eq!(text(hc.join("memory.min")), (768u64 << 20).to_string());
    assert_eq!(text(hc.join("cpu.weight")), "10");
    assert_eq!(
        text(t.cg.path("balloon.slice").join("memory.swap.max")),
        "0"
    );
    assert_eq!(
        text(t.cg.path("system.slice").join("io.weight")),
        "default 50"
    );
    // The slices existed, so every change was journaled with the old value first.
    assert!(j
        .records
        .contains(&(wl.join("io.weight"), "default 100".to_string())));
    assert!(j
        .records
        .contains(&(hc.join("memory.min"), "0".to_string())));
    assert_eq!(j.records.len(), setup.written.len());

    // Second run: nothing to change.
    let mut j2 = MemJournal::default();
    let again = t.cg.setup_slices(&layout, &mut j2).unwrap();
    assert!(again.written.is_empty() && j2.records.is_empty());
}

#[test]
fn owned_slices_write_without_journal() {
    let t = tree();
    struct Populate<'a>(&'a CgroupFs, MemJournal);
    impl ChangeJournal for Populate<'_> {
        fn record(&mut self, path: &Path, old: &str) -> anyhow::Result<()> {
            self.1.record(path, old)
        }
        fn created_dir(&mut self, path: &Path) -> anyhow::Result<()> {
            // Play the kernel: a new cgroup comes with its knob files.
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            knobs(self.0, &name);
            self.1.created_dir(path)
        }
    }
    let mut j = Populate(&t.cg, MemJournal::default());
    let setup = t.cg.setup_slices(&bench_slices(1 << 30), &mut j).unwrap();
    assert_eq!(setup.created.len(), 4);
    assert_eq!(j.1.created.len(), 4);
    assert!(j.1.records.is_empty());
    assert_eq!(text(t.cg.path("workload.slice/memory.low")), "1073741824");
}

#[test]
fn enable_controllers_journals_root() {
    let t = tree();
    let mut j = MemJournal::default();
    let added =
        t.cg.enable_controllers("", &Controller::ALL, false, &mut j)
            .unwrap();
    assert_eq!(added, vec![Controller::Cpu, Controller::Io]);
    assert_eq!(text(t.cg.root().join("cgroup.subtree_control")), "+cpu +io");
    assert_eq!(
        j.records,
        vec![(
            t.cg.root().join("cgroup.subtree_control"),
            "memory pids".into()
        )]
    );

    // Nothing missing: no write, no record.
    fs::write(
        t.cg.root().join("cgroup.subtree_control"),
        "cpu io memory\n",
    )
    .unwrap();
    let mut j = MemJournal::default();
    assert!(t
        .cg
        .enable_controllers("", &Controller::ALL, false, &mut j)
        .unwrap()
        .is_empty());
    assert!(j.records.is_empty());

    // Unavailable controller.
    fs::write(t.cg.root().join("cgroup.controllers"), "cpu memory\n").unwrap();
    fs::write(t.cg.root().join("cgroup.subtree_control"), "\n").unwrap();
    let e =
        t.cg.enable_controllers("", &Controller::ALL, false, &mut NoJournal)
            .unwrap_err();
    assert!(format!("{}", e).contains("controller \"io\" is not available"));
}

#[test]
fn create_and_move() {
    let t = tree();
    let mut j = MemJournal::default();
    assert!(t.cg.create("workload.slice/hashd.service", &mut j).unwrap());
    assert_eq!(
        j.created,
        vec![
            t.cg.path("workload.slice"),
            t.cg.path("workload.slice/hashd.service")
        ]
    );
    assert!(!t.cg.create("workload.slice", &mut j).unwrap());
    put(&t.cg, "workload.slice/hashd.service/cgroup.procs", "");
    t.cg.move_pid("workload.slice/hashd.service", 1234).unwrap();
    assert_eq!(
        t.cg.procs("workload.slice/hashd.service").unwrap(),
        vec![1234]
    );
    let e = t.cg.move_pid("nope.slice", 1).unwrap_err();
    assert!(e.to_string().contains("nope.slice/cgroup.procs"));
}

#[test]
fn reads_stat_files() {
    let t = tree();
    let s = "workload.slice";
    put(
        &t.cg,
        "workload.slice/cpu.stat",
        "usage_usec 1000\nuser_usec 700\nsystem_usec 300\nnr_periods 0\n",
    );
    put(&t.cg, "workload.slice/memory.current", "4096\n");
    put(&t.cg, "workload.slice/memory.swap.current", "0\n");
    put(
        &t.cg,
        "workload.slice/memory.stat",
        "anon 100\nfile 200\npgmajfault 3\n",
    );
    put(
        &t.cg,
        "workload.slice/io.stat",
        "259:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0 cost.vrate=98.50 \
         cost.usage=5 cost.wait=6 cost.indebt=0 cost.indelay=0\n8:16 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0\n",
    );
    put(
        &t.cg,
        "workload.slice/io.pressure",
        "some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=77\n",
    );
    put(
        &t.cg,
        "workload.slice/cpu.pressure",
        "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n",
    );
    put(&t.cg, "workload.slice/memory.high", "max\n");
    put(&t.cg, "workload.slice/memory.low", "1048576\n");

    let c = t.cg.read_cpu_stat(s).unwrap();
    assert_eq!((c.usage_usec, c.user_usec, c.system_usec), (1000, 700, 300));
    assert_eq!(t.cg.read_memory_current(s).unwrap(), 4096);
    assert_eq!(t.cg.read_swap_current(s).unwrap(), 0);
    assert_eq!(t.cg.read_memory_stat(s).unwrap()["file"], 200);
    let io = t.cg.read_io_stat(s).unwrap();
    let d = &io[&DevNr::new(259, 0)];
    assert_eq!((d["rbytes"], d["wios"], d["cost.vrate"]), (10.0, 2.0, 98.5));
    assert_eq!(d["cost.usage"], 5.0);
    assert_eq!(io[&DevNr::new(8, 16)]["rios"], 3.0);
    let p = t.cg.read_pressure(s, PressureKind::Io).unwrap();
    assert_eq!((p.some.avg10, p.some.total), (1.5, 12345));
    assert_eq!(p.full.unwrap().total, 77);
    assert!(t
        .cg
        .read_pressure(s, PressureKind::Cpu)
        .unwrap()
        .full
        .is_none());
    assert_eq!(t.cg.read_mem_knob(s, "memory.high").unwrap(), None);
    assert_eq!(t.cg.read_mem_knob(s, "memory.low").unwrap(), Some(1 << 20));
}

#[test]
fn malformed_files_are_errors_naming_the_file() {
    let t = tree();
    let s = "system.slice";
    let cases: &[(&str, &str, &str)] = &[
        ("cpu.stat", "usage_usec 1\n", "no system_usec"),
        (
            "cpu.stat",
            "usage_usec x\nsystem_usec 1\n",
            "is not a count",
        ),
        ("cpu.stat", "usage_usec\n", "is not \"KEY VALUE\""),
        ("memory.current", "lots\n", "is not a count"),
        ("memory.stat", "anon 1 2\n", "line 1"),
        ("io.stat", "259:0 rbytes\n", "is not k=v"),
        ("io.stat", "259:0 rbytes=x\n", "is not a number"),
        ("io.stat", "sda rbytes=1\n", "not a device number"),
        (
            "io.pressure",
            "full avg10=0 avg60=0 avg300=0 total=1\n",
            "no \"some\"",
        ),
        (
            "io.pressure",
            "some avg10=0 avg60=0 total=1\n",
            "no avg300=",
        ),
        ("memory.high", "maximum\n", "not a size or max"),
    ];
    for (file, content, want) in cases {
        put(&t.cg, &format!("{}/{}", s, file), content);
        let err = match *file {
            "cpu.stat" => t.cg.read_cpu_stat(s).map(|_| ()),
            "memory.current" => t.cg.read_memory_current(s).map(|_| ()),
            "memory.stat" => t.cg.read_memory_stat(s).map(|_| ()),
            "io.stat" => t.cg.read_io_stat(s).map(|_| ()),
            "io.pressure" => t.cg.read_pressure(s, PressureKind::Io).map(|_| ()),
            _ => t.cg.read_mem_knob(s, file).map(|_| ()),
        }
        .unwrap_err()
        .to_string();
        assert!(err.contains(want), "{}: {:?} lacks {:?}", file, err, want);
        assert!(err.contains(&format!("system.slice/{}", file)), "{}", err);
    }
    let missing = t.cg.read_swap_current(s).unwrap_err().to_string();
    assert!(missing.contains("memory.swap.current"), "{}", missing);
}

#[test]
fn systemd_detection() {
    let t = tree();
    assert!(!detect_systemd(&t.paths));
    fs::create_dir_all(t.paths.proc().join("1")).unwrap();
    fs::write(t.paths.proc().join("1/comm"), "init\n").unwrap();
    assert!(!detect_systemd(&t.paths));
    fs::write(t.paths.proc().join("1/comm"), "systemd\n").unwrap();
    assert!(detect_systemd(&t.paths));
    fs::write(t.paths.proc().join("1/comm"), "init\n").unwrap();
    fs::create_dir_all(t.paths.path("run/systemd/system")).unwrap();
    assert!(detect_systemd(&t.paths));
}

/// The bench slices' knobs as systemd properties: weights as they are, protections and limits
/// in whole pages, "no limit" as infinity, swap only where the layout sets it.
#[test]
fn slice_knobs_map_to_unit_properties() {
    let layout = bench_slices(1_000_000_001);
    let props = |s: Slice| -> Vec<String> {
        layout
            .iter()
            .find(|c| c.slice == s)
            .unwrap()
            .unit_props()
            .iter()
            .map(|p| p.assignment())
            .collect()
    };
    assert_eq!(
        props(Slice::HostCritical),
        [
            "CPUWeight=10",
            "IOWeight=100",
            "MemoryMin=805306368",
            "MemoryLow=0",
            "MemoryHigh=infinity"
        ]
    );
    assert_eq!(
        props(Slice::Workload),
        [
            "CPUWeight=100",
            "IOWeight=500",
            "MemoryMin=0",
            "MemoryLow=999997440",
            "MemoryHigh=infinity"
        ]
    );
    assert_eq!(props(Slice::System)[..2], ["CPUWeight=10", "IOWeight=50"]);
    assert_eq!(props(Slice::Balloon).last().unwrap(), "MemorySwapMax=0");
}
