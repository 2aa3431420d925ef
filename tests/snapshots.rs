//! Snapshots of the text the binary prints that no conformance test pins: `--help`, `help run`,
//! the end of a run, the `doc` listing, and `summary`/`format` of a standalone `storage` entry
//! (built from the first storage run of a real upstream iocost-qos result). `cargo insta review`
//! shows a change.

use assert_cmd::Command;
use serde_json::{json, Value};
use std::io::Read;

fn bin() -> Command {
    Command::cargo_bin("resctl-bench").unwrap()
}

fn stdout(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Our version in the header line would churn the snapshot on every release.
fn without_version(text: &str) -> String {
    text.replace(env!("CARGO_PKG_VERSION"), "VERSION")
}

#[test]
fn help() {
    insta::assert_snapshot!("help", stdout(&["--help"]));
    // `help run` and `run --help` print the same.
    let run = stdout(&["help", "run"]);
    assert_eq!(run, stdout(&["run", "--help"]));
    insta::assert_snapshot!("help_run", run);
    // Other subcommands list only the global options they read.
    for sub in [
        "study", "solve", "format", "summary", "pack", "deps", "doc", "vm", "compare",
    ] {
        let help = stdout(&["help", sub]);
        assert!(!help.contains("--mem-profile"), "{}: {}", sub, help);
        assert!(help.contains("--logfile"), "{}: {}", sub, help);
    }
    insta::assert_snapshot!("help_summary", stdout(&["help", "summary"]));
}

#[test]
fn doc_listing() {
    insta::assert_snapshot!("doc_listing", stdout(&["doc"]));
}

/// A result file with one `storage` entry: the record and result of the baseline storage run
/// of the Samsung fixture's iocost-qos entry, with that entry's sysinfo and period.
fn storage_result_file(dir: &std::path::Path) -> std::path::PathBuf {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/results/Samsung_SSD_970_PRO_512GB.json.gz"
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(fixture).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap();
    let qos = entries
        .iter()
        .find(|e| e["spec"]["kind"] == "iocost-qos")
        .unwrap();
    let entry = json!({
        "spec": {"kind": "storage", "id": null, "passive": null, "props": [{"loops": "1"}]},
        "period": qos["period"],
        "sysinfo": qos["sysinfo"],
        "record": qos["record"]["runs"][0]["stor"],
        "result": qos["result"]["runs"][0]["stor"],
    });
    let path = dir.join("storage.json");
    std::fs::write(&path, serde_json::to_vec(&json!([entry])).unwrap()).unwrap();
    path
}

#[test]
fn storage_summary_and_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = storage_result_file(dir.path());
    let file = file.to_str().unwrap();
    for (name, args) in [
        ("storage_summary", vec!["summary"]),
        ("storage_format", vec!["format"]),
        ("storage_format_rstat", vec!["format", "--rstat"]),
    ] {
        let mut all = vec!["-r", file];
        all.extend(args);
        insta::assert_snapshot!(name, without_version(&stdout(&all)));
    }
}

/// Dates, times and measured step times vary from run to run.
fn without_clock(text: &str) -> String {
    text.lines()
        .map(|l| {
            let mut l = l.to_string();
            if let Some(at) = l.find(" result] ") {
                let head_end = l[at..].find("] ").map(|i| at + i + 2).unwrap();
                let id_end = if l[head_end..].starts_with('"') {
                    head_end + 1 + l[head_end + 1..].find('"').unwrap() + 2
                } else {
                    head_end
                };
                l.replace_range(id_end.., "DATE TIME - TIME");
            }
            if let Some(at) = l.find("mean step time ") {
                l.replace_range(at + "mean step time ".len().., "T");
            }
            l + "\n"
        })
        .collect()
}

/// What a run ends with: the summaries of its jobs on stdout, after everything else, and the
/// command for their full reports as the last line on stderr.
#[test]
fn end_of_run_block() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args([
            "-r",
            "r.json",
            "run",
            "selftest:steps=1,step-time=0",
            "selftest:id=b,steps=2,step-time=0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let block = format!(
        "{}{}\n",
        String::from_utf8(out.stdout).unwrap(),
        stderr.lines().last().unwrap()
    );
    insta::assert_snapshot!("end_of_run", without_clock(&without_version(&block)));
}

/// `summary -o json|csv`: the upstream fixtures (iocost-params and iocost-qos records) and a
/// storage entry.
#[test]
fn export_records() {
    let dir = tempfile::tempdir().unwrap();
    let storage = storage_result_file(dir.path());
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/results/Samsung_SSD_970_PRO_512GB.json.gz"
    );
    for (name, file) in [("samsung", fixture), ("storage", storage.to_str().unwrap())] {
        for fmt in ["json", "csv"] {
            let text = stdout(&["-r", file, "summary", "-o", fmt]);
            if fmt == "json" {
                let doc: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(doc["export_version"], 1);
            }
            insta::assert_snapshot!(format!("export_{}_{}", name, fmt), without_version(&text));
        }
    }
}

/// `compare A B`: two upstream results side by side, the key numbers on one screen, and every
/// number with `--full`.
#[test]
fn compare_table() {
    let compare = |full: bool| {
        let mut cmd = bin();
        cmd.current_dir(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/results"
        ))
        .args([
            "compare",
            "Samsung_SSD_970_PRO_512GB.json.gz",
            "WD_BLACK_SN850X_1000GB.json.gz",
        ]);
        if full {
            cmd.arg("--full");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let short = compare(false);
    assert!(short.lines().count() <= 60, "{}", short);
    // Isolation as summary prints it: a percentage, at the percentile judged.
    assert!(short.contains("isol-05%"), "{}", short);
    assert!(short.contains("  off  "), "{}", short);
    insta::assert_snapshot!("compare", short);
    insta::assert_snapshot!("compare_full", compare(true));
}

/// The progress display off a terminal: a plain line per phase, between the job's own lines.
#[test]
fn progress_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .args(["-r", "r.json", "run", "selftest:steps=3,step-time=0"])
        .output()
        .unwrap();
    assert!(out.status.success());
    // `[HH:MM:SS] ` → `[T] `.
    let stderr: String = String::from_utf8(out.stderr)
        .unwrap()
        .lines()
        .map(|l| match l.find("] ") {
            Some(i) if l.starts_with('[') && i == 9 => format!("[T]{}\n", &l[i + 1..]),
            _ => format!("{}\n", l),
        })
        .collect();
    insta::assert_snapshot!("progress_lines", stderr);
}

/// `format --plot DIR`: a storage entry with probes becomes an SVG (checked by parsing it);
/// one without (upstream's layout) is noted and drawn nowhere.
#[test]
fn plot_of_a_storage_search() {
    let dir = tempfile::tempdir().unwrap();
    let probe = |start: u64, frac: f64, ratio: f64, pass: bool| {
        json!({"phase": "mem-up", "mem_frac": frac, "rps": ratio * 167.0, "lat": 0.05,
               "ratio": ratio, "converged": true, "end": "converged", "secs": 20,
               "start": start, "mem_bytes": 900u64 << 20, "pass": pass})
    };
    let entry = json!({
        "spec": {"kind": "storage", "id": null, "passive": null, "props": [{"loops": "1"}]},
        "period": [1000, 1200], "sysinfo": {},
        "record": {"loops": [{"mem_frac": 0.3, "probes": 3, "secs": 60, "quick": true,
                              "size": 4u64 << 30,
                              "mem_probes": [probe(1000, 0.2, 0.98, true),
                                             probe(1020, 0.4, 0.83, false),
                                             probe(1045, 0.3, 0.96, true)]}],
                   "mem": {"profile": 2, "avail": 3u64 << 30, "share": 1u64 << 30,
                           "target": 896u64 << 20},
                   "mem_usages": [9.0e8], "mem_sizes": [1.2e9]},
        "result": {"mem_offload_factor": 1.33, "mem_usage": 9.0e8, "mem_size": 1.2e9,
                   "mem_usage_stdev": 0, "mem_size_stdev": 0, "nr_reports": [200, 0]},
    });
    let res = dir.path().join("r.json");
    std::fs::write(&res, serde_json::to_vec(&json!([entry])).unwrap()).unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args(["-r", "r.json", "format", "--plot", "plots"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(dir.path().join("plots/r-storage.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.trim().to_string()))
        .collect();
    // The panels, the lines probes are judged by, the answer, and the probes' numbers.
    for want in [
        "footprint (GiB)",
        "RPS (% of rps_max)",
        "latency, p95 (ms)",
        "pass at 92.5 %",
        "target 75 ms",
        "found 1.2G",
    ] {
        assert!(
            texts.iter().any(|t| t == want),
            "no {:?} in {:?}",
            want,
            texts
        );
    }
    let title = texts
        .iter()
        .find(|t| t.contains("memory search"))
        .unwrap_or_else(|| panic!("no title in {:?}", texts));
    assert!(
        title.contains("MOF ") && title.contains("footprint found 1.2G"),
        "{}",
        title
    );
    // The probes are numbered in their verdict's colour: the second failed.
    let numbers = |fill: &str| -> Vec<&str> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text") && n.attribute("fill") == Some(fill))
            .filter_map(|n| n.text().map(str::trim))
            .collect()
    };
    assert_eq!(numbers("#C81E1E"), ["2"]);
    assert_eq!(numbers("#008C3C"), ["1", "3"]);
    // Each probe: a marker at its end in each of the three panels, green or red.
    let circles: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .collect();
    assert_eq!(circles.len(), 9);
    let red = circles
        .iter()
        .filter(|c| c.attribute("fill") == Some("#C81E1E"))
        .count();
    assert_eq!(red, 3, "one failed probe in each panel");

    // Upstream's storage layout has no probes: a note, no file.
    let plain = storage_result_file(dir.path());
    let out = bin()
        .args(["-r", plain.to_str().unwrap(), "format", "--plot"])
        .arg(dir.path().join("none"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to plot"));
    assert_eq!(
        std::fs::read_dir(dir.path().join("none")).unwrap().count(),
        0
    );
}
