//! The per-second reporter in a VM guest with cgroup2 io, iocost and swap: 60 s next to a CPU
//! spinner and an O_DIRECT random-read + fdatasync-write load on the scratch disk must leave a
//! report for at least 98 % of the seconds. One boot. Runs only with RESCTL_BENCH_VM_TESTS=1.

mod common;

use common::{enabled, vm_command, vm_output};
use serde_json::Value;
use std::time::Instant;

const SECS: u64 = 60;

#[test]
fn vm_reporter_covers_98_percent_of_seconds_under_cpu_and_io_load() {
    if !enabled() {
        return;
    }
    let t = Instant::now();
    let cwd = tempfile::tempdir().unwrap();
    let out = vm_output(|| {
        let mut c = vm_command(cwd.path(), "2G", "5min");
        c.args(["-v", "--"])
            .args(["__reporter", "--dir", "bench", "--secs", &SECS.to_string()])
            .args(["--load", "cpu,io"]);
        c
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}", stderr);
    let j: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({}):\n{}\nstderr:\n{}",
            e,
            String::from_utf8_lossy(&out.stdout),
            stderr
        )
    });
    let accel = if stderr.contains("(KVM)") {
        "KVM"
    } else {
        "TCG"
    };
    let expected = j["expected"].as_u64().unwrap();
    let present = j["present"].as_u64().unwrap();
    let hwm_kib = j["mem_kib"]["VmHWM"].as_u64().unwrap();
    eprintln!(
        "reporter in the guest ({}, debug build): {}/{} seconds, missing {}, thread CPU {:.2}% \
         of one CPU, pass mean {:.1} ms max {:.1} ms, peak RSS {:.1} MiB; test {:.1}s",
        accel,
        present,
        expected,
        j["missing"],
        j["thread_cpu_pct"].as_f64().unwrap(),
        j["pass_ms_mean"].as_f64().unwrap(),
        j["pass_ms_max"].as_f64().unwrap(),
        hwm_kib as f64 / 1024.0,
        t.elapsed().as_secs_f64()
    );

    // The window is the whole run, and ≥ 98 % of it has a loadable report.
    assert!(expected >= SECS - 2, "{}", j);
    assert!(present * 100 >= expected * 98, "{}", j);
    assert!(hwm_kib <= 20 << 10, "{}", j);

    // The load ran.
    let load = &j["load"];
    assert!(load["errors"].as_array().unwrap().is_empty(), "{}", load);
    assert!(load["written_bytes"].as_u64().unwrap() > 0, "{}", load);
    assert!(load["read_ios"].as_u64().unwrap() > 0, "{}", load);

    // The newest report sees it, and the guest's cgroup2 io controller.
    let last = &j["last"];
    let root = &last["root"];
    assert!(root["cpu_util"].as_f64().unwrap() > 0.3, "{}", last);
    assert!(root["io_rbytes"].as_u64().unwrap() > 0, "{}", last);
    assert!(root["io_wbytes"].as_u64().unwrap() > 0, "{}", last);
    assert!(
        root["io_rbps"].as_u64().unwrap() + root["io_wbps"].as_u64().unwrap() > 0,
        "{}",
        last
    );
    assert!(
        last["io_stat"]
            .as_array()
            .unwrap()
            .contains(&"-.slice".into()),
        "{}",
        last
    );
    assert!(last["vmstat_keys"].as_u64().unwrap() > 50, "{}", last);
}
