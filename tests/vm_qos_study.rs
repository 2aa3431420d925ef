//! `qos-study` end to end in a `resctl-bench vm` guest (RESCTL_BENCH_VM_TESTS=1, `sata-ssd`,
//! `--quick`): a nested iocost-params measures the io.cost model, the services run alone,
//! then `none` and `iocost-high-client` once each. Both profiles' rows have numbers, the
//! client's p99 under iocost-high-client is lower than under none, the report prints both
//! rows and
//! `format --plot` draws the study's four SVGs.
//!
//! The guest's log goes to `target/vm-qos-study.log`.

mod common;

use common::{enabled, release_bin, vm_command, vm_output};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn summary(result: &Path, args: &[&str]) -> String {
    let out = Command::new(release_bin())
        .arg("-r")
        .arg(result)
        .arg("summary")
        .args(args)
        .arg("qos-study")
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn vm_qos_study_iocost_protects_the_client() {
    if !enabled() {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    // In the working directory: the only one the guest shares.
    let result = cwd.path().join("r.json");
    let t = Instant::now();
    let out = vm_output(|| {
        let mut c = vm_command(cwd.path(), "2G", "20min");
        c.args(["--disk-profile", "sata-ssd", "--", "--quick", "-r"])
            .arg(&result)
            .args(["run", "qos-study:profiles=none/iocost-high-client"]);
        c
    });
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    let _ = std::fs::write(target.join("vm-qos-study.log"), &out.stderr);
    eprintln!(
        "vm --disk-profile sata-ssd -- run qos-study: {:?} in {:.0}s",
        out.status.code(),
        t.elapsed().as_secs_f64()
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::keep_result(&result, "qos-study");
    let text = summary(&result, &[]);
    eprintln!("{}", text);
    let v: Value = serde_json::from_str(&summary(&result, &["-o", "json"])).unwrap();
    let recs = v["records"].as_array().unwrap();
    let row = |name: &str| {
        recs.iter()
            .find(|r| r["profile"] == name)
            .unwrap_or_else(|| panic!("no {} record in {:?}", name, recs))
            .clone()
    };
    let num = |r: &Value, k: &str| {
        r[k].as_f64()
            .filter(|v| *v > 0.0)
            .unwrap_or_else(|| panic!("{} is not a positive number in {}", k, r))
    };
    for name in ["alone", "none", "iocost-high-client"] {
        let r = row(name);
        for k in ["client_iops", "client_lat_p99_us", "bg_bps", "bg_secs"] {
            num(&r, k);
        }
    }
    let (none, hc) = (row("none"), row("iocost-high-client"));
    assert!(
        num(&hc, "client_lat_p99_us") < num(&none, "client_lat_p99_us"),
        "client p99 under iocost-high-client {} us, under none {} us",
        hc["client_lat_p99_us"],
        none["client_lat_p99_us"]
    );
    for name in ["none ", "iocost-high-client "] {
        assert!(text.lines().any(|l| l.starts_with(name)), "{}", text);
    }
    let plots = cwd.path().join("plots");
    let st = Command::new(release_bin())
        .arg("-r")
        .arg(&result)
        .arg("format")
        .arg("--plot")
        .arg(&plots)
        .arg("qos-study")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let svgs: Vec<String> = std::fs::read_dir(&plots)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    for part in ["client-iops", "client-lat", "client-time", "bg-progress"] {
        assert!(
            svgs.iter().any(|n| n.contains(part)),
            "{}: {:?}",
            part,
            svgs
        );
    }
}
