//! Conformance with upstream's text output: `summary`/`format` of real upstream 2.2 result files
//! must print exactly what upstream resctl-bench 2.2.6 printed (tests/fixtures/results, copied from the community database), apart
//! from the two documented differences: our version in the first header line, and
//! `firmware="…"` without upstream's stray space.

use assert_cmd::Command;
use std::path::PathBuf;

const UPSTREAM_VERSION: &str = "2.2.6";

fn fixtures_dir() -> PathBuf {
    match std::env::var_os("RESCTL_BENCH_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results"),
    }
}

/// The expected text with the two documented substitutions applied.
fn expected(name: &str) -> String {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "can't read fixture {} ({}); set RESCTL_BENCH_FIXTURES to the fixtures directory",
            path.display(),
            e
        )
    });
    with_our_version(&text)
}

/// Upstream's text with our version in the `[... result]` header lines and `firmware="…"`
/// without upstream's stray space.
fn with_our_version(text: &str) -> String {
    let ours = env!("CARGO_PKG_VERSION");
    let text = text
        .lines()
        .map(|line| {
            let line = if line.starts_with('[') && line.contains(" result] ") {
                line.replacen(
                    &format!(" {} result] ", UPSTREAM_VERSION),
                    &format!(" {} result] ", ours),
                    1,
                )
            } else {
                line.to_string()
            };
            line.replace(" firmware =\"", " firmware=\"")
        })
        .collect::<Vec<_>>()
        .join("\n");
    text + "\n"
}

/// Panics with the first differing line (and a little context) if `got` isn't `want`.
fn assert_same_text(what: &str, want: &str, got: &str) {
    if want == got {
        return;
    }
    let w: Vec<&str> = want.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let first = (0..w.len().max(g.len()))
        .find(|&i| w.get(i) != g.get(i))
        .unwrap_or(w.len().min(g.len()));
    let mut msg = format!(
        "{}: output differs from the upstream fixture at line {} (expected {} lines, got {})\n",
        what,
        first + 1,
        w.len(),
        g.len()
    );
    let from = first.saturating_sub(3);
    for i in from..(first + 4) {
        if let Some(l) = w.get(i) {
            msg += &format!("  expected {:>5}: {}\n", i + 1, l);
        }
        if let Some(l) = g.get(i) {
            msg += &format!("  got      {:>5}: {}\n", i + 1, l);
        }
    }
    if w.len() == g.len() {
        let nr_diff = w.iter().zip(&g).filter(|(a, b)| a != b).count();
        msg += &format!("  {} line(s) differ in total\n", nr_diff);
    }
    panic!("{}", msg);
}

fn check(model: &str, args: &[&str], fixture: &str) {
    let want = expected(fixture);
    let result = fixtures_dir().join(format!("{}.json.gz", model));
    let out = Command::cargo_bin("resctl-bench")
        .unwrap()
        .env("TZ", "UTC")
        .arg("-r")
        .arg(&result)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {:?} failed: {}",
        model,
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    let got = String::from_utf8(out.stdout).unwrap();
    assert_same_text(&format!("{} {}", model, args.join(" ")), &want, &got);
}

macro_rules! conformance {
    ($($name:ident: $model:literal, [$($arg:literal),*], $fixture:literal;)*) => {
        $(
            #[test]
            fn $name() {
                check($model, &[$($arg),*], $fixture);
            }
        )*
    };
}

conformance! {
    intel_summary_iocost_params: "INTEL_SSDPEKKA256G7", ["summary", "iocost-params"],
        "INTEL_SSDPEKKA256G7.summary.iocost-params.txt";
    intel_format_iocost_params: "INTEL_SSDPEKKA256G7", ["format", "iocost-params"],
        "INTEL_SSDPEKKA256G7.format.iocost-params.txt";
    intel_summary_iocost_qos: "INTEL_SSDPEKKA256G7", ["summary", "iocost-qos"],
        "INTEL_SSDPEKKA256G7.summary.iocost-qos.txt";
    intel_format_iocost_qos: "INTEL_SSDPEKKA256G7", ["format", "iocost-qos"],
        "INTEL_SSDPEKKA256G7.format.iocost-qos.txt";
    samsung_summary_iocost_params: "Samsung_SSD_970_PRO_512GB", ["summary", "iocost-params"],
        "Samsung_SSD_970_PRO_512GB.summary.iocost-params.txt";
    samsung_format_iocost_params: "Samsung_SSD_970_PRO_512GB", ["format", "iocost-params"],
        "Samsung_SSD_970_PRO_512GB.format.iocost-params.txt";
    samsung_summary_iocost_qos: "Samsung_SSD_970_PRO_512GB", ["summary", "iocost-qos"],
        "Samsung_SSD_970_PRO_512GB.summary.iocost-qos.txt";
    samsung_format_iocost_qos: "Samsung_SSD_970_PRO_512GB", ["format", "iocost-qos"],
        "Samsung_SSD_970_PRO_512GB.format.iocost-qos.txt";
    wd_summary_iocost_params: "WD_BLACK_SN850X_1000GB", ["summary", "iocost-params"],
        "WD_BLACK_SN850X_1000GB.summary.iocost-params.txt";
    wd_format_iocost_params: "WD_BLACK_SN850X_1000GB", ["format", "iocost-params"],
        "WD_BLACK_SN850X_1000GB.format.iocost-params.txt";
    wd_summary_iocost_qos: "WD_BLACK_SN850X_1000GB", ["summary", "iocost-qos"],
        "WD_BLACK_SN850X_1000GB.summary.iocost-qos.txt";
    wd_format_iocost_qos: "WD_BLACK_SN850X_1000GB", ["format", "iocost-qos"],
        "WD_BLACK_SN850X_1000GB.format.iocost-qos.txt";
    samsung_format_rstat2_subfull_iocost_qos: "Samsung_SSD_970_PRO_512GB",
        ["format", "--rstat", "--rstat", "iocost-qos:sub-full"],
        "Samsung_SSD_970_PRO_512GB.format-rstat2-subfull.iocost-qos.txt";
    intel_summary_iocost_tune: "INTEL_SSDPEKKA256G7", ["summary", "iocost-tune"],
        "INTEL_SSDPEKKA256G7.summary.iocost-tune.txt";
    intel_format_iocost_tune: "INTEL_SSDPEKKA256G7", ["format", "iocost-tune"],
        "INTEL_SSDPEKKA256G7.format.iocost-tune.txt";
    intel_high_level_iocost_tune: "INTEL_SSDPEKKA256G7", ["format", "iocost-tune:high-level"],
        "INTEL_SSDPEKKA256G7.format-high-level.iocost-tune.txt";
    intel_hwdb_iocost_tune: "INTEL_SSDPEKKA256G7", ["format", "iocost-tune:hwdb"],
        "INTEL_SSDPEKKA256G7.format-hwdb.iocost-tune.txt";
    samsung_summary_iocost_tune: "Samsung_SSD_970_PRO_512GB", ["summary", "iocost-tune"],
        "Samsung_SSD_970_PRO_512GB.summary.iocost-tune.txt";
    samsung_format_iocost_tune: "Samsung_SSD_970_PRO_512GB", ["format", "iocost-tune"],
        "Samsung_SSD_970_PRO_512GB.format.iocost-tune.txt";
    samsung_high_level_iocost_tune: "Samsung_SSD_970_PRO_512GB", ["format", "iocost-tune:high-level"],
        "Samsung_SSD_970_PRO_512GB.format-high-level.iocost-tune.txt";
    samsung_hwdb_iocost_tune: "Samsung_SSD_970_PRO_512GB", ["format", "iocost-tune:hwdb"],
        "Samsung_SSD_970_PRO_512GB.format-hwdb.iocost-tune.txt";
    wd_summary_iocost_tune: "WD_BLACK_SN850X_1000GB", ["summary", "iocost-tune"],
        "WD_BLACK_SN850X_1000GB.summary.iocost-tune.txt";
    wd_format_iocost_tune: "WD_BLACK_SN850X_1000GB", ["format", "iocost-tune"],
        "WD_BLACK_SN850X_1000GB.format.iocost-tune.txt";
    wd_high_level_iocost_tune: "WD_BLACK_SN850X_1000GB", ["format", "iocost-tune:high-level"],
        "WD_BLACK_SN850X_1000GB.format-high-level.iocost-tune.txt";
    wd_hwdb_iocost_tune: "WD_BLACK_SN850X_1000GB", ["format", "iocost-tune:hwdb"],
        "WD_BLACK_SN850X_1000GB.format-hwdb.iocost-tune.txt";
}

/// Without specs every entry with a result is printed in file order.
#[test]
fn summary_without_specs_prints_every_entry_in_file_order() {
    let result = fixtures_dir().join("INTEL_SSDPEKKA256G7.json.gz");
    let params = expected("INTEL_SSDPEKKA256G7.summary.iocost-params.txt");
    let qos = expected("INTEL_SSDPEKKA256G7.summary.iocost-qos.txt");
    let tune = expected("INTEL_SSDPEKKA256G7.summary.iocost-tune.txt");
    let out = Command::cargo_bin("resctl-bench")
        .unwrap()
        .env("TZ", "UTC")
        .arg("-r")
        .arg(&result)
        .arg("summary")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_same_text(
        "summary (all entries)",
        &(params + &qos + &tune),
        &String::from_utf8(out.stdout).unwrap(),
    );
}

#[test]
fn unmatched_format_spec_is_a_usage_error() {
    let result = fixtures_dir().join("INTEL_SSDPEKKA256G7.json.gz");
    Command::cargo_bin("resctl-bench")
        .unwrap()
        .arg("-r")
        .arg(&result)
        .args(["summary", "iocost-qos:id=nope"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicates::str::contains(
            "no matching result for job[iocost-qos:nope]",
        ));
}

fn layout_2_1_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/iocost-qos-2.1-layout.json")
}

/// Runs resctl-bench with `-r path` and `args` (TZ=UTC); its stdout, after checking it exited 0.
fn output_ok(path: &std::path::Path, args: &[&str]) -> String {
    let out = Command::cargo_bin("resctl-bench")
        .unwrap()
        .env("TZ", "UTC")
        .arg("-r")
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_ok(args: &[&str]) -> String {
    output_ok(&layout_2_1_file(), args)
}

/// Upstream 2.2.6 can't read its own 2.1 files (`missing field swap_bytes` in the resource
/// stats of storage and mem-hog results; older sysinfo lacks `zswap_enabled`, the agent's
/// `enforce` and the IO scheduler). We render them.
#[test]
fn layout_2_1_summary_iocost_qos() {
    let out = run_ok(&["summary", "iocost-qos:id=ssd-2.1"]);
    for want in [
        "[iocost-qos ",
        "\"ssd-2.1\" 2021-05-03 00:00:00 - 02:00:00",
        "IO info: dev=sda(8:0) model=\"OLD SSD\" firmware=\"1.0\" size=238G",
        "         iocost QoS: rpct=95.00 rlat=10000 wpct=95.00 wlat=20000 min=50.00 max=50.00",
        "Params: hash_size=1.2M rps_max=2000 log_bps=1.0M\n",
        "[00] QoS: iocost=off mem_profile=16\n",
        "[01] QoS: rpct=95.00 rlat=10000 wpct=95.00 wlat=20000 [min=50.00] [max=50.00]\n",
        "[00]   1.500     FAIL         -       -:     -          -       5.0\n",
        "[01]   1.200    1.100      95.0     2.0:   5.0       80.0       5.0\n",
        "[01]  686u: 2.6m/ 135m   686u: 2.6m/ 135m   686u: 2.6m/ 135m   686u: 2.6m/ 135m\n",
    ] {
        assert!(out.contains(want), "missing {:?} in:\n{}", want, out);
    }
    let redacted = out.replacen(env!("CARGO_PKG_VERSION"), "<VERSION>", 1);
    insta::assert_snapshot!("layout_2_1_summary_iocost_qos", redacted);
}

#[test]
fn layout_2_1_format_sub_full_iocost_qos() {
    let out = run_ok(&["format", "--rstat", "iocost-qos:id=ssd-2.1,sub-full"]);
    for want in [
        "RUN 01 - Storage\n",
        "Memory offloading: factor=1.200@16 usage/stdev=10.2G/0 size/stdev=12.3G/0 missing=0%\n",
        "IO BPS: read_final=100M write_final=50.0M read_all=100M write_all=50.0M\n",
        "Resource stat:\n",
        "Slice resource stat:\n",
        "Params: load=1 speed=2x size=9.6G-12.3G intvs=10\n",
        "        hashd memory size 11.3G/12.3G can be protected at isol-05 >= 90.00%\n",
        "Result: A successful full mem-hog run was not recorded\n",
        "        Failed to find size to keep isol-05 above 90.00% in [9.6G, 15.4G]\n",
        "QoS result: MOF=1.200@16(0.800x) vrate=50.00:0.00 missing=5.00%\n",
        "            aMOF=1.100@16(0.733x) isol-05=95.00% lat_imp=2.00%:5.00 work_csv=80.00%\n",
    ] {
        assert!(out.contains(want), "missing {:?} in:\n{}", want, out);
    }
}

type Mangle = fn(&mut serde_json::Value);

/// A result entry we can't read gives one clear error line and exit code 2, never a panic or
/// partial output.
#[test]
fn malformed_result_entry_is_one_line_usage_error() {
    let text = std::fs::read_to_string(layout_2_1_file()).unwrap();
    let base: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases: [(&str, Mangle, &str); 5] = [
        (
            "runs of the wrong type",
            |e| e["result"]["runs"] = "oops".into(),
            "the stored result is not in a layout this version can read",
        ),
        (
            "unknown protection scenario",
            |e| e["result"]["runs"][1]["prot"]["scenarios"][0] = serde_json::json!({"Weird": {}}),
            "unknown variant `Weird`",
        ),
        (
            "no baseline run",
            |e| e["result"]["runs"][0] = serde_json::Value::Null,
            "the first run isn't the iocost-off baseline",
        ),
        (
            "no runs yet",
            |e| {
                e["result"]["runs"] = serde_json::json!([]);
                e["record"]["runs"] = serde_json::json!([]);
            },
            "the entry has no finished runs yet; re-run the same command to continue it",
        ),
        (
            "absurd vrate grid",
            |e| e["spec"]["props"][0]["vrate-intvs"] = "1000000000000".into(),
            "vrate-intvs=1000000000000 is more than this version handles",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (what, mangle, msg) in cases {
        let mut v = base.clone();
        mangle(&mut v[0]);
        let path = dir.path().join("bad.json");
        std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
        let out = Command::cargo_bin("resctl-bench")
            .unwrap()
            .arg("-r")
            .arg(&path)
            .args(["summary", "iocost-qos:id=ssd-2.1"])
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {}", what, stderr);
        assert!(out.stdout.is_empty(), "{}: printed output", what);
        assert_eq!(stderr.lines().count(), 1, "{}: {}", what, stderr);
        assert!(stderr.contains(msg), "{}: {}", what, stderr);
    }
}

/// The 2.1 layout file with its mem-hog-tune records judged at another percentile, as 2.1-era
/// files are (`"isol_pct": "01"`); the p01 isolation of the tuned run is 0.91.
fn layout_2_1_with_isol_pct(dir: &std::path::Path, pct: &str) -> PathBuf {
    let text = std::fs::read_to_string(layout_2_1_file()).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    for run in v[0]["record"]["runs"].as_array_mut().unwrap() {
        run["prot"]["scenarios"][0]["MemHogTune"]["isol_pct"] = pct.into();
    }
    v[0]["result"]["runs"][1]["prot"]["scenarios"][0]["MemHogTune"]["final_run"]["isol"]["01"] =
        0.91.into();
    let path = dir.join("isol-01.json");
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    path
}

/// Upstream printed the isolation column at the percentile the records were judged at (`01` in
/// 2.1-era files), not at today's default `05`.
#[test]
fn isolation_percentile_comes_from_the_mem_hog_tune_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = layout_2_1_with_isol_pct(dir.path(), "01");
    let out = output_ok(&path, &["summary", "iocost-qos:id=ssd-2.1"]);
    assert!(
        out.contains("         MOF     aMOF  isol-01%       lat-imp%  work-csv%  missing%\n"),
        "{}",
        out
    );
    assert!(
        out.contains("[01]   1.200    1.100      91.0     2.0:   5.0       80.0       5.0\n"),
        "{}",
        out
    );
    assert!(!out.contains("isol-05"), "{}", out);
    let out = output_ok(&path, &["format", "iocost-qos:id=ssd-2.1,sub-full"]);
    for want in [
        "            aMOF=1.100@16(0.733x) isol-01=91.00% lat_imp=2.00%:5.00 work_csv=80.00%\n",
        "        hashd memory size 11.3G/12.3G can be protected at isol-01 >= 90.00%\n",
    ] {
        assert!(out.contains(want), "missing {:?} in:\n{}", want, out);
    }
    assert!(!out.contains("isol-05"), "{}", out);
}

/// 2.1-layout resource stats have no `swap_bytes`: upstream 2.1 printed no swap row.
#[test]
fn layout_2_1_rstat_tables_have_no_swap_row() {
    let out = run_ok(&[
        "format",
        "--rstat",
        "--rstat",
        "iocost-qos:id=ssd-2.1,sub-full",
    ]);
    assert!(out.contains("\nmem "), "{}", out);
    assert!(!out.contains("\nswap "), "{}", out);
}

#[path = "common/upstream.rs"]
mod upstream;

/// The upstream-compatibility checker itself passes on upstream's own 2.2 files, and catches
/// what upstream 2.2.6 refused in our storage results: requirements it doesn't know in the
/// report, and no agent/hashd versions.
#[test]
fn upstream_layout_checker_accepts_upstream_files_and_catches_what_it_refuses() {
    for model in MODELS {
        let path = fixtures_dir().join(format!("{}.json.gz", model));
        let bytes = resctl_bench::result::read_bytes(&path).unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        for e in v.as_array().unwrap() {
            assert_eq!(upstream::problems(e), Vec::<String>::new(), "{}", model);
        }
    }
    let bad = serde_json::json!({
        "spec": {"kind": "hashd-params"},
        "sysinfo": {"bench_version": "x", "sysreqs": ["Psi"], "sysreqs_missed": {},
                    "sysreqs_report": {"satisfied": ["NoZswap"], "missed": {}},
                    "iocost": {}, "hashd": null, "mem": {}, "swappiness": 60,
                    "zswap_enabled": false},
        "record": {}, "result": {}
    });
    let p = upstream::problems(&bad).join("\n");
    for want in [
        "\"Psi\"",
        "\"NoZswap\"",
        "\"agent_version\"",
        "\"hashd_version\"",
        "\"rps_max\"",
    ] {
        assert!(p.contains(want), "{} not caught:\n{}", want, p);
    }
}

/// What we write for a job's sysinfo — every requirement we check required, some missed — is
/// loadable by upstream: our extra requirements sit in fields of their own, and we still read
/// them back (the header lists them as missed).
#[test]
fn sysinfo_we_write_is_loadable_by_upstream_and_reads_back_whole() {
    use resctl_bench::system::sysreqs::{MissedReqs, SysReq, SysReqsReport};
    let report = SysReqsReport {
        satisfied: vec!["IoCost".into(), "Psi".into()],
        missed: MissedReqs(vec![
            ("NoWbt".into(), vec!["wbt is on".into()]),
            ("NoZswap".into(), vec!["zswap is on".into()]),
        ]),
        agent_version: "x".into(),
        hashd_version: "x".into(),
        ..Default::default()
    };
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["satisfied"], serde_json::json!(["IoCost"]));
    assert_eq!(json["ext_satisfied"], serde_json::json!(["Psi"]));
    assert_eq!(
        json["ext_missed"],
        serde_json::json!({"NoZswap": ["zswap is on"]})
    );
    let back: SysReqsReport = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, report);

    use resctl_bench::system::sysreqs::{Check, Evaluation};
    let check = |req, missed: &[&str]| Check {
        req,
        missed: missed.iter().map(|m| m.to_string()).collect(),
        fix: None,
        warnings: Vec::new(),
        by_hand: None,
    };
    let eval = Evaluation {
        checks: vec![
            check(SysReq::IoCost, &[]),
            check(SysReq::Psi, &[]),
            check(SysReq::NoWbt, &["wbt is on"]),
            check(SysReq::NoZswap, &["zswap is on"]),
        ],
        fixed: Vec::new(),
        report,
    };
    let mut si = resctl_bench::result::sysinfo::Sysinfo::current(None, false);
    resctl_bench::system::sysreqs::record_in(&mut si, SysReq::ALL, &eval).unwrap();
    // Jobs that touch the host record the io.cost state (the session's own test checks it).
    si.iocost = Some(serde_json::json!({"vrate": 0.0, "model": {}, "qos": {}}));
    let si = serde_json::to_value(&si).unwrap();
    assert_eq!(si["ext_sysreqs"], serde_json::json!(["NoZswap", "Psi"]));
    assert_eq!(
        si["ext_sysreqs_missed"],
        serde_json::json!({"NoZswap": ["zswap is on"]})
    );
    let entry = serde_json::json!({"spec": {"kind": "selftest"}, "sysinfo": si});
    assert_eq!(upstream::problems(&entry), Vec::<String>::new());
}

/// An iocost-tune entry in the 2.1 layout (series points as `points`, a line as `left`/`right`
/// of its slope): made from the Samsung fixture's entry, it prints the same solutions and its
/// graphs draw the three segments.
#[test]
fn layout_2_1_iocost_tune_prints_its_solutions() {
    let all = fixture_entries("Samsung_SSD_970_PRO_512GB");
    let mut tune = all
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["spec"]["kind"] == "iocost-tune")
        .unwrap()
        .clone();
    for (_, ds) in tune["result"]["data"].as_object_mut().unwrap() {
        let ds = ds.as_object_mut().unwrap();
        let points = ds.remove("data").unwrap();
        ds.insert("points".into(), points);
        let lines = ds["lines"]["points"].as_array().unwrap().clone();
        let range = ds["lines"]["range"].clone();
        // The slope's ends: 2.2's first vertex and the one before the last.
        let (l, r) = (
            lines[0].clone(),
            lines[lines.len().saturating_sub(2)].clone(),
        );
        ds.insert(
            "lines".into(),
            serde_json::json!({"range": range, "left": l, "right": r}),
        );
    }
    tune["result"].as_object_mut().unwrap().remove("remarks");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tune-2.1.json");
    std::fs::write(&path, serde_json::to_vec(&vec![tune]).unwrap()).unwrap();
    let want = expected("Samsung_SSD_970_PRO_512GB.summary.iocost-tune.txt");
    let solutions = &want[want.find("Solutions").unwrap()..want.find("Remarks").unwrap()];
    let out = output_ok(&path, &["summary", "iocost-tune"]);
    assert!(out.contains(solutions), "{}", out);
    assert!(!out.contains("Remarks"), "{}", out);
    let out = output_ok(&path, &["format", "iocost-tune"]);
    assert!(
        out.contains("vrate 7.9-122.9 (min=1.471 max=1.813 infls=50.4 err=0.006)"),
        "{}",
        out
    );
}

/// The three fixture files' device models.
const MODELS: [&str; 3] = [
    "INTEL_SSDPEKKA256G7",
    "Samsung_SSD_970_PRO_512GB",
    "WD_BLACK_SN850X_1000GB",
];

/// A gzip'd result file's entries as JSON.
fn gz_entries(path: &std::path::Path) -> serde_json::Value {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A fixture file's entries as JSON.
fn fixture_entries(model: &str) -> serde_json::Value {
    gz_entries(&fixtures_dir().join(format!("{}.json.gz", model)))
}

/// The merge fixture's folder and its source files' names, sorted.
fn merge_sources() -> (PathBuf, Vec<String>) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/merge/KINGSTON_SA2000M8250G");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("result-") && n.ends_with(".json.gz"))
        .collect();
    names.sort();
    (dir, names)
}

/// `solve iocost-tune` on a fixture whose solutions, remarks and fitted lines were emptied
/// derives them again: every iocost-tune output is upstream's again, byte for byte.
#[test]
fn solve_iocost_tune_derives_upstreams_solutions_again() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let mut all = fixture_entries(model);
        for e in all.as_array_mut().unwrap() {
            if e["spec"]["kind"] != "iocost-tune" {
                continue;
            }
            let res = e["result"].as_object_mut().unwrap();
            res.insert("solutions".into(), serde_json::json!({}));
            res.insert("remarks".into(), serde_json::json!([]));
            for (_, ds) in res["data"].as_object_mut().unwrap() {
                ds["lines"] = serde_json::json!({"points": [], "range": [0.0, 0.0]});
                ds["error"] = serde_json::json!(0.0);
            }
        }
        let path = dir.path().join(format!("{}.json", model));
        std::fs::write(&path, serde_json::to_vec(&all).unwrap()).unwrap();
        output_ok(&path, &["solve", "iocost-tune"]);
        for (args, fixture) in [
            (&["summary", "iocost-tune"][..], "summary"),
            (&["format", "iocost-tune"][..], "format"),
            (
                &["format", "iocost-tune:high-level"][..],
                "format-high-level",
            ),
            (&["format", "iocost-tune:hwdb"][..], "format-hwdb"),
        ] {
            let want = expected(&format!("{}.{}.iocost-tune.txt", model, fixture));
            let got = output_ok(&path, args);
            assert_same_text(&format!("{} re-solved, {}", model, fixture), &want, &got);
        }
    }
}

/// `merge` of the community database's three KINGSTON_SA2000M8250G results prints what
/// upstream printed for its merge (tests/fixtures/merge), the merge's own time aside.
#[test]
fn merge_of_one_device_model_is_upstreams() {
    let (dir, sources) = merge_sources();
    let tmp = tempfile::tempdir().unwrap();
    let merged = tmp.path().join("merged.json");
    let out = Command::cargo_bin("resctl-bench")
        .unwrap()
        .current_dir(&dir)
        .env("TZ", "UTC")
        .arg("-r")
        .arg(&merged)
        .arg("merge")
        .args(&sources)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The merge-info header carries the merge's time.
    let untimed = |text: &str| {
        text.lines()
            .map(|l| match l.find(" result] ") {
                Some(i) if l.starts_with("[merge-info ") => l[..i].to_string(),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Upstream 2.2.6 loads every entry of the merged file.
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    for e in written.as_array().unwrap() {
        assert_eq!(upstream::problems(e), Vec::<String>::new(), "{}", e["spec"]);
    }
    let printed = String::from_utf8(out.stdout).unwrap();
    let want_summary = std::fs::read_to_string(dir.join("merged.summary.txt")).unwrap();
    let info_end = want_summary.find("\n====").unwrap() + 1;
    assert_same_text(
        "merge (printed merge-info)",
        &untimed(&with_our_version(&want_summary[..info_end])),
        &untimed(&printed),
    );
    for (args, fixture) in [
        (&["summary"][..], "merged.summary.txt"),
        (&["format", "iocost-tune"][..], "merged.format.txt"),
        (
            &["format", "iocost-tune:high-level"][..],
            "merged.format-high-level.txt",
        ),
        (
            &["format", "iocost-tune:hwdb"][..],
            "merged.format-hwdb.txt",
        ),
    ] {
        let want = std::fs::read_to_string(dir.join(fixture)).unwrap();
        let got = output_ok(&merged, args);
        assert_same_text(
            &format!("merged {}", fixture),
            &untimed(&with_our_version(&want)),
            &untimed(&got),
        );
    }
    // Ours on top: the merge's intervals, from the pooled points of the three runs (this
    // model's only solution is the naive one: a fixed range, latency targets that vary).
    let json = output_ok(&merged, &["summary", "-o", "json", "iocost-tune"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let naive = v["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["solution"] == "naive")
        .unwrap_or_else(|| panic!("no naive record: {}", json))
        .clone();
    assert_eq!(
        (naive["vrate_min"].as_f64(), naive["vrate_max"].as_f64()),
        (Some(75.0), Some(100.0))
    );
    assert_eq!(naive["vrate_min_lo"], naive["vrate_min_hi"]);
    let (lo, hi) = (
        naive["rlat_lo"].as_f64().unwrap(),
        naive["rlat_hi"].as_f64().unwrap(),
    );
    let rlat = naive["rlat"].as_f64().unwrap();
    assert!(lo < hi && lo <= rlat && rlat <= hi, "{}", naive);
    assert_eq!(naive["unstable"], false);
    let text = output_ok(&merged, &["format", "iocost-tune:intervals"]);
    assert!(
        text.contains("90% intervals from 200 resamples of 47 configurations"),
        "{}",
        text
    );
}

/// `format --plot DIR iocost-tune`: one SVG per series (its points as circles, rejected ones
/// as crosses, the fitted line) and a page with the solutions table and every graph inline.
#[test]
fn iocost_tune_plots_are_svgs_and_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let result = fixtures_dir().join("Samsung_SSD_970_PRO_512GB.json.gz");
    let out = Command::cargo_bin("resctl-bench")
        .unwrap()
        .arg("-r")
        .arg(&result)
        .args(["format", "iocost-tune", "--plot"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 19, "{:?}", names);
    assert!(names.contains(&"Samsung_SSD_970_PRO_512GB-iocost-tune.html".to_string()));
    let svg = std::fs::read_to_string(
        dir.path()
            .join("Samsung_SSD_970_PRO_512GB-iocost-tune-rlat-99-mean.svg"),
    )
    .unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let circles = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    // 22 points kept (2 rejected, drawn as crosses).
    assert_eq!(circles, 22);
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text().map(|t| t.to_string()))
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("isolated-bandwidth")),
        "{:?}",
        texts
    );
    let html = std::fs::read_to_string(
        dir.path()
            .join("Samsung_SSD_970_PRO_512GB-iocost-tune.html"),
    )
    .unwrap();
    assert!(
        html.contains("<td>rlat-99-q2</td>"),
        "{}",
        &html[..2000.min(html.len())]
    );
    assert!(html.contains("rbps=1793894030"));
    assert_eq!(html.matches("<svg").count(), 18);
}

/// The data series collected from each fixture's iocost-qos entry are, point for point, the
/// ones upstream stored in the file's iocost-tune entry (kept and rejected points together).
#[test]
fn iocost_tune_series_come_from_iocost_qos_as_upstreams() {
    use resctl_bench::bench::iocost_qos::{IoCostQosResult, QosRecord};
    use resctl_bench::bench::iocost_tune::{model::IocostTuneResult, study};
    for model in MODELS {
        let all = fixture_entries(model);
        let entry = |kind: &str| {
            all.as_array()
                .unwrap()
                .iter()
                .find(|e| e["spec"]["kind"] == kind)
                .unwrap()
                .clone()
        };
        let (qos, tune) = (entry("iocost-qos"), entry("iocost-tune"));
        let rec: QosRecord = serde_json::from_value(qos["record"].clone()).unwrap();
        let res: IoCostQosResult = serde_json::from_value(qos["result"].clone()).unwrap();
        let stored: IocostTuneResult = serde_json::from_value(tune["result"].clone()).unwrap();
        let got = study::collect(&rec, &res, &study::default_sels());
        assert_eq!(
            got.data.keys().collect::<Vec<_>>(),
            stored.data.keys().collect::<Vec<_>>(),
            "{}",
            model
        );
        for (sel, s) in &stored.data {
            let mut want: Vec<(f64, f64)> = s
                .data
                .iter()
                .chain(&s.outliers)
                .map(|p| (p.x, p.y))
                .collect();
            want.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let have: Vec<(f64, f64)> = got.data[sel].data.iter().map(|p| (p.x, p.y)).collect();
            assert_eq!(have, want, "{} {}", model, sel);
        }
        assert_eq!(
            (got.isol_pct.as_str(), got.isol_thr, got.mem_profile),
            (
                stored.isol_pct.as_str(),
                stored.isol_thr,
                stored.mem_profile
            ),
            "{}",
            model
        );
        assert_eq!(got.base_model, stored.base_model, "{}", model);
    }
}

/// `run iocost-tune` on a fixture whose iocost-tune entry was taken out derives it again from
/// the iocost-qos run: every output is upstream's but for the time it ran.
#[test]
fn run_iocost_tune_on_an_iocost_qos_result_is_upstreams() {
    let dir = tempfile::tempdir().unwrap();
    for model in MODELS {
        let mut all = fixture_entries(model);
        all.as_array_mut()
            .unwrap()
            .retain(|e| e["spec"]["kind"] != "iocost-tune");
        let path = dir.path().join(format!("{}.json", model));
        std::fs::write(&path, serde_json::to_vec(&all).unwrap()).unwrap();
        output_ok(
            &path,
            &["-d", dir.path().to_str().unwrap(), "run", "iocost-tune"],
        );
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let tune = written
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["spec"]["kind"] == "iocost-tune")
            .unwrap();
        assert_eq!(upstream::problems(tune), Vec::<String>::new());
        assert_eq!(tune["record"]["dfl_qos"], true);
        assert_eq!(tune["record"]["qos_props"][0]["vrate-intvs"], "25");
        // The header's first line carries the time of the run.
        let untimed = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with("[iocost-tune "))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for (args, fixture) in [
            (&["summary", "iocost-tune"][..], "summary"),
            (&["format", "iocost-tune"][..], "format"),
            (&["format", "iocost-tune:hwdb"][..], "format-hwdb"),
        ] {
            let want = expected(&format!("{}.{}.iocost-tune.txt", model, fixture));
            let got = output_ok(&path, args);
            assert_same_text(
                &format!("{} run, {}", model, fixture),
                &untimed(&want),
                &untimed(&got),
            );
        }
    }
}

/// The merge sources as `src<i>.json` in a new directory, source `which`'s iocost-tune
/// entries changed by `change`.
fn tuned_merge_sources(which: usize, change: &dyn Fn(&mut serde_json::Value)) -> tempfile::TempDir {
    let (dir, names) = merge_sources();
    let tmp = tempfile::tempdir().unwrap();
    for (i, n) in names.iter().enumerate() {
        let mut all = gz_entries(&dir.join(n));
        if i == which {
            for e in all.as_array_mut().unwrap() {
                if e["spec"]["kind"] == "iocost-tune" {
                    change(e);
                }
            }
        }
        std::fs::write(tmp.path().join(format!("src{}.json", i)), all.to_string()).unwrap();
    }
    tmp
}

/// What `merge src0.json src1.json src2.json EXTRA...` into `merged.json` in `dir` prints (it
/// must succeed).
fn merge_three(dir: &std::path::Path, extra: &[&str]) -> String {
    let out = Command::cargo_bin("resctl-bench")
        .unwrap()
        .current_dir(dir)
        .args([
            "-r",
            "merged.json",
            "merge",
            "src0.json",
            "src1.json",
            "src2.json",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A result measured with our time-savers stays out of a merge with upstream-faithful ones
/// (merge-info says which) unless `--merge-time-savers` is given.
#[test]
fn merge_keeps_time_saver_runs_apart_unless_told() {
    let tmp = tuned_merge_sources(2, &|e| {
        e["record"]["time_savers"] = serde_json::json!(["mof-hint", "tune-hint"]);
    });
    let merge = |extra: &[&str]| merge_three(tmp.path(), extra);
    let apart = merge(&[]);
    assert_has_lines(
        &apart,
        &[
            "  classifier: dither,vrate-max=125",
            "    + src0.json",
            "    + src1.json",
            "[-] iocost-tune",
            "  classifier: dither,vrate-max=125 (time-savers: mof-hint, tune-hint)",
            "    + src2.json",
        ],
    );
    let together = merge(&["--merge-time-savers"]);
    assert!(!together.contains("time-savers"), "{}", together);
    assert!(!together.contains("[-]"), "{}", together);
    assert_has_lines(
        &together,
        &["    + src0.json", "    + src1.json", "    + src2.json"],
    );
}

/// A run of ours whose hashd made lean requests and kept them in flight our way, whose
/// footprints our memory search found and whose io.cost model our iocost-params jobs measured
/// on our IO engine (the defaults) stays out of a merge with upstream's runs, and one made with
/// `storage-requests=upstream,storage-flow=upstream,storage-search=upstream` on a model
/// measured with `iocost-params:jobs=upstream,engine=fio` goes in, unless
/// `--merge-lean-requests`, `--merge-our-flow`, `--merge-our-search`, `--merge-our-jobs` and
/// `--merge-our-engine` are given (each pools only its own difference).
#[test]
fn merge_keeps_runs_with_our_hashd_search_and_jobs_apart_unless_told() {
    let (dir, names) = merge_sources();
    let tmp = tempfile::tempdir().unwrap();
    for (i, n) in names.iter().enumerate() {
        let mut all = gz_entries(&dir.join(n));
        for e in all.as_array_mut().unwrap() {
            if i > 0 && e["spec"]["kind"] == "iocost-tune" {
                // Ours: the options in sysinfo.
                e["sysinfo"]["bench_args"] = serde_json::json!({"dir": "/var/lib/resctl-bench"});
                if i == 1 {
                    e["record"]["qos_props"][0]["storage-requests"] = "upstream".into();
                    e["record"]["qos_props"][0]["storage-flow"] = "upstream".into();
                    e["record"]["qos_props"][0]["storage-search"] = "upstream".into();
                    e["record"]["upstream_model_jobs"] = true.into();
                    e["record"]["fio_model_engine"] = true.into();
                }
            }
        }
        std::fs::write(tmp.path().join(format!("src{}.json", i)), all.to_string()).unwrap();
    }
    let merge = |extra: &[&str]| merge_three(tmp.path(), extra);
    assert_has_lines(
        &merge(&[]),
        &[
            "  classifier: dither,vrate-max=125",
            "    + src0.json",
            "    + src1.json",
            "[-] iocost-tune",
            "  classifier: dither,vrate-max=125 (lean hashd requests, our request flow, our memory search, our io.cost jobs, our IO engine)",
            "    + src2.json",
        ],
    );
    let all = [
        "--merge-lean-requests",
        "--merge-our-flow",
        "--merge-our-search",
        "--merge-our-jobs",
        "--merge-our-engine",
    ];
    let left = [
        "our request flow, our memory search, our io.cost jobs, our IO engine",
        "lean hashd requests, our memory search, our io.cost jobs, our IO engine",
        "lean hashd requests, our request flow, our io.cost jobs, our IO engine",
        "lean hashd requests, our request flow, our memory search, our IO engine",
        "lean hashd requests, our request flow, our memory search, our io.cost jobs",
    ];
    for (flag, left) in all.iter().zip(left) {
        assert_has_lines(
            &merge(&[flag]),
            &[
                &format!("  classifier: dither,vrate-max=125 ({})", left),
                "    + src2.json",
            ],
        );
    }
    let together = merge(&all);
    assert!(
        !together.contains("lean")
            && !together.contains("flow")
            && !together.contains("search")
            && !together.contains("jobs")
            && !together.contains("engine")
            && !together.contains("[-]"),
        "{}",
        together
    );
    assert_has_lines(
        &together,
        &["    + src0.json", "    + src1.json", "    + src2.json"],
    );
}

/// An adaptive grid's points pool with full grids': how many vrates were measured is not what
/// a merge keeps apart.
#[test]
fn merge_pools_an_adaptive_grid_with_full_ones() {
    let tmp = tuned_merge_sources(1, &|e| {
        let g = &mut e["record"]["qos_props"][0];
        g["vrate-intvs"] = "auto".into();
        g["auto-budget"] = "8".into();
        g["auto-target"] = "12".into();
    });
    let out = Command::cargo_bin("resctl-bench")
        .unwrap()
        .current_dir(tmp.path())
        .args(["-r", "merged.json", "merge", "src0.json", "src1.json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("[-]"), "{}", text);
    assert_has_lines(
        &text,
        &[
            "  classifier: dither,vrate-max=125",
            "    + src0.json",
            "    + src1.json",
        ],
    );
}

fn assert_has_lines(text: &str, lines: &[&str]) {
    for l in lines {
        assert!(
            text.lines().any(|t| t == *l),
            "no line {:?} in:\n{}",
            l,
            text
        );
    }
}
