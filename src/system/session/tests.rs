//! Session tests against the fake host.

use super::testhost::{host, needs, opts};
use super::*;
use crate::system::bench_json::{BenchKnobs, HashdKnobs};
use crate::system::blockdev::testutil::put;
use std::sync::Arc;

fn get(p: &std::path::Path) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

#[test]
fn start_fixes_records_and_finish_restores() {
    let (_t, hp) = host();
    let sw = hp.path("proc/sys/vm/swappiness");
    let sched = hp.path("sys/block/nvme0n1/queue/scheduler");
    put(&sw, "10\n");
    put(&sched, "[mq-deadline] none\n");
    let s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    assert_eq!(get(&sw), "60");
    assert_eq!(get(&sched), "none");
    assert!(hp.path("work/restore.json").exists());
    let si = s
        .sysinfo(Sysinfo::default(), &[SysReq::Swap, SysReq::IoSched], true)
        .unwrap();
    assert_eq!(si.sysreqs, vec!["Swap", "IoSched"]);
    assert!(si.sysreqs_missed.is_empty());
    let rep = si.sysreqs_report.as_ref().unwrap();
    assert_eq!(rep["scr_dev"], "nvme0n1");
    assert_eq!(rep["kernel_version"], "6.1.0-fake");
    // Upstream 2.2.6 needs both versions and only knows its own requirement names: ours
    // (`NoZswap`, `Psi`) are stored beside them.
    assert_eq!(rep["agent_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(rep["hashd_version"], env!("CARGO_PKG_VERSION"));
    let names = |v: &serde_json::Value| -> Vec<String> {
        match v {
            serde_json::Value::Array(a) => {
                a.iter().map(|n| n.as_str().unwrap().to_string()).collect()
            }
            serde_json::Value::Object(m) => m.keys().cloned().collect(),
            _ => Vec::new(),
        }
    };
    let stored: Vec<String> = [&rep["satisfied"], &rep["missed"]]
        .into_iter()
        .flat_map(names)
        .collect();
    assert!(
        stored.iter().all(|n| sysreqs::upstream_knows(n)),
        "{:?}",
        stored
    );
    let ext: Vec<String> = [&rep["ext_satisfied"], &rep["ext_missed"]]
        .into_iter()
        .flat_map(names)
        .collect();
    assert!(ext.contains(&"Psi".to_string()), "{:?}", ext);
    let all = s.sysinfo(Sysinfo::default(), SysReq::ALL, true).unwrap();
    assert!(all.sysreqs.iter().all(|n| sysreqs::upstream_knows(n)));
    assert_eq!(all.ext_sysreqs, vec!["NoZswap", "Psi"]);
    assert_eq!(si.swappiness, 60);
    // The pre-existing slices got upstream's knobs, journaled.
    let sys_cpu = hp.cgroup().join("system.slice/cpu.weight");
    let bal_swap = hp.cgroup().join("balloon.slice/memory.swap.max");
    assert_eq!(get(&sys_cpu), "10");
    assert_eq!(get(&bal_swap), "0");
    // Profile off: the machine's size.
    assert_eq!(si.mem.profile, 0);
    assert_eq!(si.mem.share, 32 << 30);
    s.finish().unwrap();
    assert_eq!(get(&sw), "10");
    assert_eq!(get(&sched), "mq-deadline");
    assert_eq!(get(&sys_cpu), "100");
    assert_eq!(get(&bal_swap), "max");
    assert!(!hp.path("work/restore.json").exists());
}

#[test]
fn missed_requirements_abort_unless_forced_and_restore() {
    let (_t, hp) = host();
    let sw = hp.path("proc/sys/vm/swappiness");
    put(&sw, "10\n");
    // Unfixable: no pgscan_anon.
    put(&hp.path("proc/vmstat"), "pgscan_file 1\n");
    let err = Session::start(hp.clone(), &opts(&hp), &needs())
        .err()
        .unwrap();
    assert!(err.downcast_ref::<crate::error::UsageError>().is_some());
    let msg = err.to_string();
    assert!(msg.contains("AnonBalance"), "{}", msg);
    assert_eq!(msg.lines().count(), 1);
    // The fix made before the gate was restored when the session was dropped.
    assert_eq!(get(&sw), "10");
    let mut o = opts(&hp);
    o.force = true;
    let s = Session::start(hp.clone(), &o, &needs()).unwrap();
    let si = s
        .sysinfo(Sysinfo::default(), &[SysReq::AnonBalance], false)
        .unwrap();
    assert!(si.sysreqs_missed.contains_key("AnonBalance"));
    drop(s);
    assert_eq!(get(&sw), "10");
}

#[test]
fn passive_jobs_get_no_fixes() {
    let (_t, hp) = host();
    let sw = hp.path("proc/sys/vm/swappiness");
    put(&sw, "10\n");
    let n = Needs {
        enforce: Enforce::from_passive(Some("mem")),
        ..needs()
    };
    let mut o = opts(&hp);
    o.force = true;
    let mut s = Session::start(hp.clone(), &o, &n).unwrap();
    assert_eq!(get(&sw), "10");
    assert!(s.evaluation().report.missed.contains("Swap"));
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(get(&sw), "60");
    s.finish().unwrap();
    assert_eq!(get(&sw), "10");
}

#[test]
fn swappiness_option_wins_over_the_fix_and_is_restored() {
    let (_t, hp) = host();
    let sw = hp.path("proc/sys/vm/swappiness");
    put(&sw, "10\n");
    let mut o = opts(&hp);
    o.swappiness = Some(30);
    let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
    assert_eq!(get(&sw), "30");
    // Every job's fix pass writes 60 again; the option is applied after it.
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(get(&sw), "30");
    assert_eq!(
        s.sysinfo(Sysinfo::default(), &[], false)
            .unwrap()
            .swappiness,
        30
    );
    s.finish().unwrap();
    assert_eq!(get(&sw), "10");
}

/// A bench.json for the fake scratch device (nvme0n1, 259:0).
const BENCH_JSON: &str = r#"// written by resctl-demo
{
  "hashd_seq": 1,
  "iocost_seq": 2,
  "hashd": {"rps_max": 1005, "mem_size": 1000000, "mem_frac": 0.5},
  "iocost": {
"devnr": "259:0",
"model": {"rbps": 3235739592, "rseqiops": 343800, "rrandiops": 376893,
          "wbps": 2219232034, "wseqiops": 239923, "wrandiops": 241421},
"qos": {"rpct": 95.0, "rlat": 12042, "wpct": 95.0, "wlat": 13664,
        "min": 60.004, "max": 100.0}
  },
  "iocost_dev_model": "Fake SSD 970",
  "iocost_dev_fwrev": "1B2QEXP7",
  "iocost_dev_size": 512110190592
}
"#;

const MODEL_LINE: &str = "259:0 model=linear rbps=3235739592 rseqiops=343800 \
                          rrandiops=376893 wbps=2219232034 wseqiops=239923 wrandiops=241421";
const KERNEL_MODEL: &str = "259:0 ctrl=auto model=linear rbps=1000 rseqiops=2000 \
                            rrandiops=3000 wbps=4000 wseqiops=5000 wrandiops=6000\n";

/// The fake host with an io.cost.model and, when given, a bench.json in the work dir.
fn iocost_host(bench_json: Option<&str>) -> (tempfile::TempDir, HostPaths) {
    let (t, hp) = host();
    put(&hp.cgroup().join("io.cost.model"), KERNEL_MODEL);
    if let Some(b) = bench_json {
        put(&hp.path("work/bench.json"), b);
    }
    (t, hp)
}

fn qos_file(hp: &HostPaths) -> String {
    get(&hp.cgroup().join("io.cost.qos"))
}

fn model_file(hp: &HostPaths) -> String {
    get(&hp.cgroup().join("io.cost.model"))
}

fn rb_bench(hp: &HostPaths) -> BenchKnobs {
    crate::system::bench_json::read_knobs(&hp.path("work/rb-bench.json"))
        .unwrap()
        .unwrap()
}

#[test]
fn benchmarked_iocost_params_are_written_and_restored() {
    let (_t, hp) = iocost_host(Some(BENCH_JSON));
    let (model0, qos0) = (model_file(&hp), qos_file(&hp));
    let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    // Nothing is written before a job starts.
    assert_eq!(model_file(&hp), model0);
    assert!(!hp.path("work/rb-bench.json").exists());
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(model_file(&hp), MODEL_LINE);
    assert_eq!(
        qos_file(&hp),
        "259:0 rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 min=60.00 max=100.00"
    );
    let rb = rb_bench(&hp);
    assert_eq!((rb.iocost_seq, rb.hashd.rps_max), (2, 1005));
    assert_eq!(s.bench_knobs().unwrap().iocost.qos.min, 60.0);
    s.finish().unwrap();
    // The kernel had auto control: restoring says so (the real kernel then shows the
    // original lines again).
    assert_eq!(model_file(&hp), "259:0 ctrl=auto");
    assert_eq!(qos_file(&hp), "259:0 enable=1 ctrl=auto");
    assert_ne!(qos_file(&hp), qos0);
    // bench.json is never rewritten by a run that commits nothing.
    assert_eq!(
        std::fs::read_to_string(hp.path("work/bench.json")).unwrap(),
        BENCH_JSON
    );
}

#[test]
fn without_bench_json_iocost_is_only_enabled() {
    let (_t, hp) = iocost_host(None);
    let qos = hp.cgroup().join("io.cost.qos");
    put(
        &qos,
        "259:0 enable=0 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n",
    );
    // A passive=io start fixes nothing; the job then enforces io.
    let n = Needs {
        enforce: Enforce::from_passive(Some("io")),
        ..needs()
    };
    let mut o = opts(&hp);
    o.force = true;
    let mut s = Session::start(hp.clone(), &o, &n).unwrap();
    s.knobs.io_enforced = true;
    s.write_iocost().unwrap();
    assert_eq!(qos_file(&hp), "259:0 enable=1");
    assert_eq!(model_file(&hp), KERNEL_MODEL.trim());
    s.finish().unwrap();
    assert_eq!(qos_file(&hp), "259:0 enable=0 ctrl=auto");

    // Through prepare_job on a host where iocost is already on: nothing to write, and
    // rb-bench.json holds the defaults.
    let (_t, hp) = iocost_host(None);
    let (model0, qos0) = (model_file(&hp), qos_file(&hp));
    let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!((model_file(&hp), qos_file(&hp)), (model0, qos0));
    assert_eq!(rb_bench(&hp).iocost_seq, 0);
    s.finish().unwrap();
}

#[test]
fn passive_io_jobs_leave_iocost_alone() {
    let (_t, hp) = iocost_host(Some(BENCH_JSON));
    let (model0, qos0) = (model_file(&hp), qos_file(&hp));
    let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    s.prepare_job(Enforce::from_passive(Some("io")), false)
        .unwrap();
    assert_eq!((model_file(&hp), qos_file(&hp)), (model0, qos0));
    // The working copy is still handed over.
    assert_eq!(rb_bench(&hp).iocost_seq, 2);
    s.finish().unwrap();
}

#[test]
fn hashd_overrides_reach_the_working_copy_not_bench_json() {
    let (_t, hp) = iocost_host(Some(BENCH_JSON));
    let mut o = opts(&hp);
    o.hashd = crate::system::bench_json::HashdOverride {
        size: Some(250_000),
        fake_cpu_load: Some(true),
    };
    let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    let h = &s.bench_knobs().unwrap().hashd;
    assert_eq!(
        (h.rps_max, h.mem_size, h.mem_frac, h.fake_cpu_load),
        (1005, 1_000_000, 0.25, true)
    );
    let rb = rb_bench(&hp);
    assert_eq!((rb.hashd.mem_frac, rb.hashd.fake_cpu_load), (0.25, true));
    s.finish().unwrap();
    assert_eq!(
        std::fs::read_to_string(hp.path("work/bench.json")).unwrap(),
        BENCH_JSON
    );
}

#[test]
fn iocost_qos_override_goes_on_top() {
    let (_t, hp) = iocost_host(Some(BENCH_JSON));
    let mut o = opts(&hp);
    o.iocost_qos = Some(QosOverride::parse("min=50,max=50").unwrap());
    let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(model_file(&hp), MODEL_LINE);
    assert_eq!(
        qos_file(&hp),
        "259:0 rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 min=50.00 max=50.00"
    );
    assert_eq!(rb_bench(&hp).iocost.qos.max, 50.0);
    s.finish().unwrap();
    // The override never reaches bench.json.
    assert_eq!(
        std::fs::read_to_string(hp.path("work/bench.json")).unwrap(),
        BENCH_JSON
    );

    // Without benchmarked parameters it goes on top of the kernel's QoS.
    let (_t, hp) = iocost_host(None);
    let mut o = opts(&hp);
    o.iocost_qos = Some(QosOverride::parse("rpct=90,vrate=75").unwrap());
    let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(
        qos_file(&hp),
        "259:0 rpct=90.00 rlat=250000 wpct=0.00 wlat=250000 min=75.00 max=75.00"
    );
    assert_eq!(model_file(&hp), KERNEL_MODEL.trim());
    s.finish().unwrap();
    assert_eq!(qos_file(&hp), "259:0 enable=1 ctrl=auto");
}

#[test]
fn iocost_from_sys_uses_the_kernels_lines() {
    // bench.json's parameters are replaced by the kernel's.
    let (_t, hp) = iocost_host(Some(BENCH_JSON));
    let mut o = opts(&hp);
    o.iocost_from_sys = true;
    let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(
        model_file(&hp),
        "259:0 model=linear rbps=1000 rseqiops=2000 rrandiops=3000 wbps=4000 \
         wseqiops=5000 wrandiops=6000"
    );
    assert_eq!(
        qos_file(&hp),
        "259:0 rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00"
    );
    let rb = rb_bench(&hp);
    assert_eq!((rb.iocost_seq, rb.iocost.model.rbps), (2, 1000));
    s.finish().unwrap();

    // No bench.json: from-sys counts as benchmarked (seq 1).
    let (_t, hp) = iocost_host(None);
    let mut o = opts(&hp);
    o.iocost_from_sys = true;
    let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(rb_bench(&hp).iocost_seq, 1);
    assert!(model_file(&hp).starts_with("259:0 model=linear rbps=1000 "));
    s.finish().unwrap();
}

#[test]
fn bench_json_for_another_device_is_a_usage_error() {
    let (_t, hp) = iocost_host(Some(&BENCH_JSON.replace("Fake SSD 970", "Other SSD")));
    let sw = hp.path("proc/sys/vm/swappiness");
    put(&sw, "10\n");
    let err = Session::start(hp.clone(), &opts(&hp), &needs())
        .err()
        .unwrap();
    assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_USAGE);
    let msg = err.to_string();
    assert_eq!(msg.lines().count(), 1, "{}", msg);
    assert!(
        msg.contains("try removing") && msg.contains("bench.json"),
        "{}",
        msg
    );
    // Refused before any change.
    assert_eq!(get(&sw), "10");
    assert!(!hp.path("work/rb-bench.json").exists());
}

#[test]
fn applied_params_reach_the_kernel_and_revert_to_the_job_start() {
    let (_t, hp) = iocost_host(Some(BENCH_JSON));
    let qos = hp.cgroup().join("io.cost.qos");
    let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    // What the kernel shows after the writes (the fake tree keeps the written lines).
    let kernelize = || {
        put(
            &qos,
            &format!(
                "259:0 enable=1 ctrl=user {}\n",
                qos_file(&hp).split_once(' ').unwrap().1
            ),
        );
        let model = hp.cgroup().join("io.cost.model");
        put(
            &model,
            &format!(
                "259:0 ctrl=user {}\n",
                model_file(&hp).split_once(' ').unwrap().1
            ),
        );
    };
    kernelize();
    let mut new = s.bench_knobs().unwrap().iocost.clone();
    new.qos.rpct = 99.0;
    s.apply_iocost(new, false).unwrap();
    assert!(qos_file(&hp).contains("rpct=99.00"), "{}", qos_file(&hp));
    assert_eq!(rb_bench(&hp).iocost_seq, 3);
    kernelize();
    s.apply_hashd(HashdKnobs::default(), false).unwrap();
    assert_eq!(rb_bench(&hp).hashd_seq, 2);
    s.revert_knobs().unwrap();
    assert!(qos_file(&hp).contains("rpct=95.00"), "{}", qos_file(&hp));
    let rb = rb_bench(&hp);
    assert_eq!((rb.iocost_seq, rb.hashd_seq), (2, 1));
    s.finish().unwrap();
    assert_eq!(qos_file(&hp), "259:0 enable=1 ctrl=auto");
}

#[test]
fn own_cgroup_from_proc_self_cgroup() {
    assert_eq!(own_cgroup("0::/\n").as_deref(), Some(""));
    assert_eq!(
        own_cgroup("1:name=systemd:/x\n0::/user.slice/a.scope\n").as_deref(),
        Some("user.slice/a.scope")
    );
    assert_eq!(own_cgroup("1:cpu:/\n"), None);
}

#[test]
fn systemd_hosts_are_refused_without_force() {
    let (_t, hp) = host();
    std::fs::create_dir_all(hp.path("run/systemd/system")).unwrap();
    let err = Session::start(hp.clone(), &opts(&hp), &needs())
        .err()
        .unwrap();
    assert!(err.to_string().contains("systemd"), "{}", err);
    assert!(!hp.path("work/restore.json").exists());
}

#[test]
fn too_big_a_profile_fails_before_any_change() {
    let (_t, hp) = host();
    let sw = hp.path("proc/sys/vm/swappiness");
    put(&sw, "10\n");
    let mut o = opts(&hp);
    o.mem_profile = Some(64);
    o.mem_avail = Some(30 << 30);
    let err = Session::start(hp.clone(), &o, &needs()).err().unwrap();
    assert!(err.to_string().contains("lower --mem-profile"), "{}", err);
    assert_eq!(get(&sw), "10");
}

#[test]
fn passive_mem_jobs_run_without_workload_protection() {
    let (_t, hp) = host();
    let mut o = opts(&hp);
    o.mem_profile = Some(16);
    o.mem_avail = Some(20 << 30);
    let low = hp.cgroup().join("workload.slice/memory.low");
    let mut s = Session::start(hp.clone(), &o, &needs()).unwrap();
    let protected = (cgroup::workload_mem_low(12 << 30, 0.25) / 4096 * 4096).to_string();
    assert_eq!(get(&low), protected);
    s.prepare_job(Enforce::from_passive(Some("mem")), false)
        .unwrap();
    assert_eq!(get(&low), "0");
    // The next job enforcing mem gets it back; the end restores the host's value.
    s.prepare_job(Enforce::all(), false).unwrap();
    assert_eq!(get(&low), protected);
    s.finish().unwrap();
    assert_eq!(get(&low), "0");
}

#[test]
fn iocost_off_and_queue_knobs_for_a_job_come_back() {
    let (_t, hp) = iocost_host(None);
    let nomerges = hp.path("sys/block/nvme0n1/queue/nomerges");
    put(&nomerges, "0\n");
    let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    s.prepare_job(Enforce::all(), false).unwrap();
    let on = qos_file(&hp);
    assert!(on.contains("enable=1"), "{}", on);
    s.iocost_off_for_job().unwrap();
    assert!(qos_file(&hp).contains("enable=0"), "{}", qos_file(&hp));
    assert_eq!(s.set_scratch_queue_knob("nomerges", "1").unwrap(), "0");
    assert_eq!(get(&nomerges), "1");
    // Set back by hand (a nested measurement does), then restored with the rest.
    s.set_scratch_queue_knob("nomerges", "0").unwrap();
    s.set_scratch_queue_knob("nomerges", "2").unwrap();
    s.finish().unwrap();
    assert_eq!(get(&nomerges), "0");
    assert!(!qos_file(&hp).contains("enable=0"), "{}", qos_file(&hp));
}

/// On a systemd host (a fake one): the unused slices are transient units with the knobs as
/// properties, system.slice gets them at runtime, a bench's cgroup is a journaled scope, and
/// the end stops every unit we started and puts system.slice's properties back, drop-ins
/// included.
#[test]
fn systemd_host_slices_are_units_and_all_is_restored() {
    use crate::system::systemd::fake::FakeSystemd;
    use crate::system::systemd::Manager;
    let (_t, hp) = host();
    let sd = Arc::new(FakeSystemd::new(&["systemd-journald.service"]));
    let hp = hp.with_systemd(sd.clone());
    let mut s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    for slice in ["hostcritical.slice", "workload.slice", "balloon.slice"] {
        let u = sd.unit(slice).unwrap();
        assert!(u.transient && u.active, "{}: {:?}", slice, u);
    }
    assert_eq!(sd.prop("hostcritical.slice", "MemoryMin"), "805306368");
    assert_eq!(sd.prop("balloon.slice", "MemorySwapMax"), "0");
    assert_eq!(sd.prop("system.slice", "CPUWeight"), "10");
    assert_eq!(sd.prop("system.slice", "IOWeight"), "50");
    assert!(sd.has_runtime_dropin("system.slice", "CPUWeight"));
    // The memory protection of a job enforcing mem, set at runtime on the transient slice.
    s.prepare_job(Enforce::all(), false).unwrap();
    // A bench's cgroup: journaled now, created by systemd when its process is placed.
    s.create_cgroup("workload.slice/rd-hashd-A.service")
        .unwrap();
    assert!(s.create_cgroup("workload.slice/other").is_err());
    let changes = s.journal().changes();
    assert!(
        changes.iter().any(|c| matches!(c,
            crate::system::restore::Change::TransientUnit { unit, .. } if unit == "rd-hashd-A.scope")),
        "{:?}",
        changes
    );
    let fs = CgroupFs::new(&hp);
    assert!(fs
        .path("workload.slice/rd-hashd-A.service")
        .ends_with("workload.slice/rd-hashd-A.scope"));
    fs.move_pid("workload.slice/rd-hashd-A.service", 4242)
        .unwrap();
    assert_eq!(
        sd.prop("rd-hashd-A.scope", "Slice"),
        "workload.slice",
        "{:?}",
        sd.calls()
    );
    s.finish().unwrap();
    for unit in [
        "hostcritical.slice",
        "workload.slice",
        "balloon.slice",
        "rd-hashd-A.scope",
    ] {
        assert!(sd.unit(unit).is_none(), "{} left: {:?}", unit, sd.calls());
    }
    assert_eq!(sd.prop("system.slice", "CPUWeight"), "[not set]");
    assert_eq!(sd.prop("system.slice", "IOWeight"), "[not set]");
    assert!(!sd.has_runtime_dropin("system.slice", "CPUWeight"));
    assert!(sd.unit("systemd-journald.service").unwrap().active);
    assert!(!hp.path("work/restore.json").exists());
}

/// A run killed without restoring leaves its journal; the next session on the same directory
/// stops the units and reverts the properties before it sets up its own.
#[test]
fn systemd_changes_of_a_killed_run_are_restored_at_the_next_start() {
    use crate::system::systemd::fake::FakeSystemd;
    use crate::system::systemd::{BusValue, Manager};
    let (_t, hp) = host();
    let sd = Arc::new(FakeSystemd::new(&["systemd-oomd.service"]));
    let hp = hp.with_systemd(sd.clone());
    // What the killed run left: a scope with a process, a property, a stopped OOM killer.
    sd.start_transient(
        "rd-sysload-mem-hog.scope",
        &[("PIDs", BusValue::Pids(vec![77]))],
    )
    .unwrap();
    sd.set_runtime("system.slice", &["IOWeight=50".into()])
        .unwrap();
    sd.stop("systemd-oomd.service").unwrap();
    let left = r#"{"pid": 1, "changes": [
        {"kind": "stopped_unit", "unit": "systemd-oomd.service"},
        {"kind": "unit_prop", "unit": "system.slice", "prop": "IOWeight",
         "restore": "IOWeight=", "dropin": false},
        {"kind": "transient_unit", "unit": "rd-sysload-mem-hog.scope"}]}"#;
    std::fs::create_dir_all(hp.path("work")).unwrap();
    std::fs::write(hp.path("work/restore.json"), left).unwrap();
    let s = Session::start(hp.clone(), &opts(&hp), &needs()).unwrap();
    assert!(sd.unit("rd-sysload-mem-hog.scope").is_none());
    assert!(sd.unit("systemd-oomd.service").unwrap().active);
    s.finish().unwrap();
    assert_eq!(sd.prop("system.slice", "IOWeight"), "[not set]");
    assert!(!sd.has_runtime_dropin("system.slice", "IOWeight"));
}
