//! The per-second reporter on this host (`__reporter`): files, contents, the report.json link,
//! retention and --keep-reports. The host needs no cgroup2: what is missing is left out.

use serde_json::Value;
use std::path::Path;
use std::process::Output;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn reporter(dir: &Path, args: &[&str]) -> (Output, Value) {
    let out = std::process::Command::new(BIN)
        .arg("__reporter")
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{}: {}", e, String::from_utf8_lossy(&out.stdout));
    });
    (out, j)
}

fn report_secs(rdir: &Path) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(rdir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json")?.parse().ok())
        .collect();
    v.sort();
    v
}

#[test]
fn reporter_writes_a_report_a_second_and_honours_retention() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("bench");
    let rdir = dir.join("report.d");
    std::fs::create_dir_all(&rdir).unwrap();
    std::fs::write(rdir.join("1000.json"), "{}").unwrap();

    // 5 s next to a CPU spinner, keeping old reports.
    let (_, j) = reporter(&dir, &["--secs", "5", "--load", "cpu", "--keep-reports"]);
    assert!(
        rdir.join("1000.json").exists(),
        "--keep-reports deleted a report"
    );
    let secs: Vec<u64> = report_secs(&rdir)
        .into_iter()
        .filter(|s| *s != 1000)
        .collect();
    assert!(secs.len() >= 4, "{:?}\n{}", secs, j);
    assert_eq!(j["present"], j["expected"], "{}", j);
    assert!(j["expected"].as_u64().unwrap() >= 4, "{}", j);
    assert!(j["missing"].as_array().unwrap().is_empty(), "{}", j);

    let mut prev_base = 0.0;
    for (i, sec) in secs.iter().enumerate() {
        let path = rdir.join(format!("{}.json", sec));
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // Named after the second it was taken in, about half a second into it.
        let ts = chrono::DateTime::parse_from_rfc3339(r["timestamp"].as_str().unwrap()).unwrap();
        assert_eq!(ts.timestamp() as u64, *sec);
        let frac = ts.timestamp_subsec_millis();
        assert!((400..1000).contains(&frac), "{} ms into the second", frac);
        let root = &r["usages"]["-.slice"];
        let base = root["cpu_usage_base"].as_f64().unwrap();
        assert!(base > prev_base, "{} after {}", base, prev_base);
        prev_base = base;
        let util = root["cpu_util"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&util), "{}", util);
        if i > 0 {
            // A spinning thread keeps at least one CPU busy.
            let ncpu = std::thread::available_parallelism().unwrap().get() as f64;
            assert!(util >= 0.8 / ncpu, "cpu_util {} with {} CPUs", util, ncpu);
        }
        assert!(root["mem_bytes"].as_u64().unwrap() > 0);
        assert!(r["vmstat"]["pgfault"].as_f64().unwrap() > 0.0);
        assert!(r["swappiness"].as_u64().is_some());
        // Without a latency source the report says so instead of holding zeros.
        assert_eq!(r["iolat_unavailable"], true);
    }
    // The link points at the newest report.
    let link = std::fs::read_link(dir.join("report.json")).unwrap();
    assert_eq!(
        link,
        Path::new("report.d").join(format!("{}.json", secs.last().unwrap()))
    );
    let cpu_pct = j["thread_cpu_pct"].as_f64().unwrap();
    assert!(cpu_pct > 0.0 && cpu_pct < 10.0, "{}", j);

    // 4 s keeping 2 s: the old reports (and the stale one) go. With the /proc/diskstats
    // latency source: no percentiles, and the reports say so.
    let (_, j) = reporter(
        &dir,
        &[
            "--secs",
            "4",
            "--rep-retention",
            "2",
            "--iolat",
            "diskstats",
        ],
    );
    let left = report_secs(&rdir);
    assert!(!left.contains(&1000), "{:?}", left);
    assert!(!left.iter().any(|s| secs.contains(s)), "{:?}", left);
    assert!((2..=4).contains(&left.len()), "{:?}\n{}", left, j);
    let pruned = j["stats"]["pruned"].as_u64().unwrap();
    assert!(pruned > secs.len() as u64, "{}", j);
    assert_eq!(j["last"]["iolat_unavailable"], true, "{}", j);
}

#[test]
fn reporter_rejects_bad_arguments() {
    let t = tempfile::tempdir().unwrap();
    for args in [
        &["--secs", "0"][..],
        &["--secs", "1", "--load", "disk"],
        &["--secs", "1", "--rep-retention", "0"],
        &["--secs", "1", "--iolat", "bpf"],
    ] {
        let out = std::process::Command::new(BIN)
            .arg("__reporter")
            .arg("--dir")
            .arg(t.path())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{:?}", args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{:?}: {}", args, err);
    }
}
