//! `db import` and `db build` over the real community files in tests/fixtures: the database's
//! layout (the paths the community database has for these files), importing twice, the files it
//! refuses, and a build whose hwdb input equals upstream's `format iocost-tune:hwdb` of
//! upstream's merge, whose final file holds each model once, and which two builds make alike.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The community's three KINGSTON results and the three of tests/fixtures/results.
fn sources() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = [
        "result-379baf356ca0065c51ff132133a6ae8a",
        "result-822f39afe43520c995c90f2b33e573e8",
        "result-be18472fbf855f3eecf546b564bd88ee",
    ]
    .iter()
    .map(|n| fixtures().join(format!("merge/KINGSTON_SA2000M8250G/{}.json.gz", n)))
    .collect();
    for m in [
        "INTEL_SSDPEKKA256G7",
        "Samsung_SSD_970_PRO_512GB",
        "WD_BLACK_SN850X_1000GB",
    ] {
        v.push(fixtures().join(format!("results/{}.json.gz", m)));
    }
    v
}

/// Where the community database holds those six files.
const COMMUNITY_PATHS: &[&str] = &[
    "2.2/KINGSTON_SA2000M8250G/result-379baf356ca0065c51ff132133a6ae8a.json.gz",
    "2.2/KINGSTON_SA2000M8250G/result-822f39afe43520c995c90f2b33e573e8.json.gz",
    "2.2/KINGSTON_SA2000M8250G/result-be18472fbf855f3eecf546b564bd88ee.json.gz",
    "2.2/INTEL_SSDPEKKA256G7/result-4170ede4ef4102003c24e1d17329a8b4.json.gz",
    "2.2/Samsung_SSD_970_PRO_512GB/result-ebe34772ba27ddc583499a1cebf35440.json.gz",
    "2.2/WD_BLACK_SN850X_1000GB/result-7fa4cc209cbcb8add6fcb143707e6e48.json.gz",
];

fn bin() -> Command {
    let mut c = Command::cargo_bin("resctl-bench").unwrap();
    c.env_remove("SOURCE_DATE_EPOCH");
    c
}

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn import(db: &Path, srcs: &[PathBuf]) -> std::process::Output {
    bin()
        .arg("db")
        .arg("import")
        .arg(db)
        .args(srcs)
        .output()
        .unwrap()
}

#[test]
fn import_files_as_the_community_does_and_again_imports_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let out = import(&db, &sources());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("6 imported, 0 already there, 0 refused"),
        "{}",
        stdout
    );
    let results: Vec<String> = files(&db)
        .into_iter()
        .filter(|f| f.ends_with(".json.gz"))
        .collect();
    let mut want: Vec<String> = COMMUNITY_PATHS.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(results, want);
    // Filed byte for byte, each with its metadata.
    for (src, rel) in sources().iter().zip(COMMUNITY_PATHS) {
        assert_eq!(
            std::fs::read(src).unwrap(),
            std::fs::read(db.join(rel)).unwrap(),
            "{}",
            rel
        );
        let meta = db.join(rel.replace(".json.gz", ".json.metadata"));
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
        assert_eq!(m["version"], "2.2");
        assert_eq!(m["model_name"].as_str(), rel.split('/').nth(1));
        assert!(m["source"]
            .as_str()
            .unwrap()
            .ends_with(&*src.file_name().unwrap().to_string_lossy()));
    }
    let before = files(&db);
    let again = import(&db, &sources());
    assert!(again.status.success());
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.contains("0 imported, 6 already there, 0 refused"),
        "{}",
        stdout
    );
    assert_eq!(stdout.matches("already there").count(), 7, "{}", stdout);
    assert_eq!(files(&db), before);
}

/// The INTEL fixture's entries, changed by `edit`, as a plain JSON file in `dir`.
fn edited(dir: &Path, name: &str, edit: impl Fn(&mut Vec<serde_json::Value>)) -> PathBuf {
    use std::io::Read;
    let gz = std::fs::File::open(fixtures().join("results/INTEL_SSDPEKKA256G7.json.gz")).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .unwrap();
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    edit(&mut entries);
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_vec(&entries).unwrap()).unwrap();
    p
}

#[test]
fn import_refuses_a_damaged_a_wrong_bench_and_a_2_1_file_in_one_line_each() {
    let tmp = tempfile::tempdir().unwrap();
    let good = fixtures().join("results/Samsung_SSD_970_PRO_512GB.json.gz");
    let damaged = tmp.path().join("damaged.json.gz");
    let bytes = std::fs::read(fixtures().join("results/INTEL_SSDPEKKA256G7.json.gz")).unwrap();
    std::fs::write(&damaged, &bytes[..bytes.len() / 3]).unwrap();
    let wrong = edited(tmp.path(), "params-only.json", |e| {
        e.retain(|x| x["spec"]["kind"] == "iocost-params")
    });
    let old = edited(tmp.path(), "old.json", |e| {
        for x in e.iter_mut() {
            x["sysinfo"]["bench_version"] = "2.1.2 x86_64-unknown-linux-gnu".into();
        }
    });
    let planted = edited(tmp.path(), "planted.json", |e| {
        for x in e.iter_mut() {
            x["sysinfo"]["sysreqs_report"]["scr_dev_model"] = "../../etc".into();
        }
    });
    let db = tmp.path().join("db");
    let out = import(
        &db,
        &[
            damaged.clone(),
            good,
            wrong.clone(),
            old.clone(),
            planted.clone(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines.len(),
        5,
        "one line per refused file and the closing one:\n{}",
        err
    );
    for (i, (f, why)) in [
        (&damaged, "gzip"),
        (
            &wrong,
            "no finished iocost-tune result (it holds iocost-params)",
        ),
        (
            &old,
            "made by resctl-bench 2.1.2: results before 2.2 give no hwdb solutions",
        ),
        (&planted, "can't name a folder"),
    ]
    .iter()
    .enumerate()
    {
        assert!(
            lines[i].starts_with(&f.display().to_string()),
            "{}",
            lines[i]
        );
        assert!(
            lines[i].contains(why) && lines[i].ends_with("; not imported"),
            "{}",
            lines[i]
        );
    }
    assert!(
        lines[4].starts_with("error: db import: 4 of 5 file(s) refused"),
        "{}",
        lines[4]
    );
    // The good one was filed all the same, and nothing else.
    assert_eq!(files(&db).len(), 2, "{:?}", files(&db));
    assert!(!tmp.path().join("etc").exists());
}

fn build(db: &Path, out: &Path, epoch: Option<&str>) -> std::process::Output {
    let mut c = bin();
    if let Some(e) = epoch {
        c.env("SOURCE_DATE_EPOCH", e);
    }
    c.arg("db")
        .arg("build")
        .arg(db)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn build_gives_upstreams_hwdb_lines_each_model_once_and_the_same_files_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    assert!(import(&db, &sources()).status.success());
    let out = tmp.path().join("out");
    let o = build(&db, &out, Some("1700000000"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let input =
        std::fs::read_to_string(out.join("hwdb-inputs/iocost-tune-2.2-KINGSTON_SA2000M8250G.hwdb"))
            .unwrap();
    let upstream = std::fs::read_to_string(
        fixtures().join("merge/KINGSTON_SA2000M8250G/merged.format-hwdb.txt"),
    )
    .unwrap();
    assert_eq!(input, upstream);
    let hwdb = std::fs::read_to_string(out.join("90-iocost-tune.hwdb")).unwrap();
    assert!(
        hwdb.starts_with("# This file is auto-generated on Tue, 14 Nov 2023 22:13:20 +0000.\n"),
        "{}",
        hwdb
    );
    for m in [
        "INTEL SSDPEKKA256G7",
        "KINGSTON SA2000M8250G",
        "Samsung SSD 970 PRO 512GB",
        "WD_BLACK SN850X 1000GB",
    ] {
        let key = format!("block:*:name:{}:fwrev:*:\n", m);
        assert_eq!(hwdb.matches(&key).count(), 1, "{}:\n{}", m, hwdb);
        assert!(hwdb.contains(&input), "the pick's input whole");
    }
    // Read back as udev would: one record per model, each device of those models finds its
    // solutions.
    let recs = resctl_bench::system::hwdb::parse(&hwdb).unwrap();
    assert_eq!(recs.len(), 4);
    for (m, fw) in [
        ("KINGSTON SA2000M8250G", "S5Z42105"),
        ("WD_BLACK SN850X 1000GB", "620361WD"),
    ] {
        let key = resctl_bench::system::hwdb::device_key("/devices/pci0/nvme/nvme0/nvme0n1", m, fw);
        let props = resctl_bench::system::hwdb::lookup(&recs, &key);
        let sols = props
            .get("IOCOST_SOLUTIONS")
            .unwrap_or_else(|| panic!("{}: {:?}", m, props));
        for s in sols.split(' ') {
            let k = s.to_uppercase().replace('-', "_");
            assert!(
                props.contains_key(&format!("IOCOST_MODEL_{}", k)),
                "{} {}",
                m,
                s
            );
            assert!(
                props.contains_key(&format!("IOCOST_QOS_{}", k)),
                "{} {}",
                m,
                s
            );
        }
    }
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        table
            .lines()
            .filter(|l| l.contains("yes: the only version"))
            .count(),
        4,
        "{}",
        table
    );
    for f in [
        "summary.txt",
        "merged-results/2.2-KINGSTON_SA2000M8250G-merged-results.json.gz",
        "plots/2.2-KINGSTON_SA2000M8250G-iocost-tune.html",
        "plots/2.2-KINGSTON_SA2000M8250G-iocost-tune-MOF.svg",
    ] {
        assert!(out.join(f).is_file(), "{}: {:?}", f, files(&out));
    }
    // The same database at the same date: the same bytes; built again into the same folder.
    let second = tmp.path().join("second");
    assert!(build(&db, &second, Some("1700000000")).status.success());
    assert_eq!(files(&out), files(&second));
    for f in files(&out) {
        assert!(
            std::fs::read(out.join(&f)).unwrap() == std::fs::read(second.join(&f)).unwrap(),
            "{} differs",
            f
        );
    }
    assert!(build(&db, &out, None).status.success());
    assert_eq!(files(&out), files(&second));
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.iter().all(|n| !n.starts_with('.')), "{:?}", left);
}

#[test]
fn build_refuses_what_is_no_database_and_goes_on_past_a_bad_model() {
    let tmp = tempfile::tempdir().unwrap();
    let one_line = |o: &std::process::Output, want: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}", err);
        assert_eq!(err.lines().count(), 1, "{}", err);
        assert!(err.contains(want), "{}", err);
    };
    let out = tmp.path().join("out");
    one_line(
        &build(&tmp.path().join("missing"), &out, None),
        "no such folder",
    );
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("notes.txt"), "x").unwrap();
    one_line(&build(&home, &out, None), "is not a database");
    assert!(!out.exists());
    // A model whose file is damaged fails; the others are built.
    let db = tmp.path().join("db");
    assert!(import(&db, &sources()[..4]).status.success());
    let bad = db.join("2.2/Broken_Model");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("result-0123.json.gz"), b"\x1f\x8bnot gzip").unwrap();
    let o = build(&db, &out, None);
    assert_eq!(o.status.code(), Some(2));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("Broken_Model") && l.contains("FAILED: result-0123.json.gz")),
        "{}",
        table
    );
    let hwdb = std::fs::read_to_string(out.join("90-iocost-tune.hwdb")).unwrap();
    assert!(
        hwdb.contains("name:KINGSTON SA2000M8250G:") && hwdb.contains("name:INTEL SSDPEKKA256G7:")
    );
    // A pick of a version the model doesn't have changes nothing.
    let before = std::fs::read(out.join("summary.txt")).unwrap();
    let mut c = bin();
    let o = c
        .args(["db", "build"])
        .arg(&db)
        .arg("--out")
        .arg(&out)
        .args(["--pick", "INTEL_SSDPEKKA256G7=2.9"])
        .output()
        .unwrap();
    one_line(&o, "--pick INTEL_SSDPEKKA256G7=2.9");
    assert_eq!(std::fs::read(out.join("summary.txt")).unwrap(), before);
}

#[test]
fn a_plain_file_is_stored_gzipped_under_the_md5_of_its_bytes() {
    use md5::Digest;
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let plain = edited(tmp.path(), "intel.json", |_| {});
    let bytes = std::fs::read(&plain).unwrap();
    let md5: String = md5::Md5::digest(&bytes)
        .iter()
        .map(|b| format!("{:02x}", b))
        .collect();
    let db = tmp.path().join("db");
    assert!(import(&db, std::slice::from_ref(&plain)).status.success());
    let stored = db.join(format!("2.2/INTEL_SSDPEKKA256G7/result-{}.json.gz", md5));
    let mut back = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&stored).unwrap())
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, bytes);
    let again = import(&db, &[plain]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 imported, 1 already there"));
}

/// A KINGSTON result relabelled to a newer firmware: the newest firmware's own merge has its
/// points and fewer than the whole model's, so it is kept and its `hwdb-fwrev` lines follow.
#[test]
fn the_newest_firmwares_own_merge_is_kept_when_it_differs() {
    use std::io::{Read, Write};
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    assert!(import(&db, &sources()[..3]).status.success());
    let dir = db.join("2.2/KINGSTON_SA2000M8250G");
    let first = dir.join("result-379baf356ca0065c51ff132133a6ae8a.json.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&first).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    for e in entries.iter_mut() {
        e["sysinfo"]["sysreqs_report"]["scr_dev_fwrev"] = "S5Z42106".into();
    }
    std::fs::remove_file(&first).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&serde_json::to_vec(&entries).unwrap())
        .unwrap();
    std::fs::write(dir.join("result-newer.json.gz"), gz.finish().unwrap()).unwrap();
    let out = tmp.path().join("out");
    let o = build(&db, &out, None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("S5Z42106: ") && table.contains(" points, kept"),
        "{}",
        table
    );
    let input =
        std::fs::read_to_string(out.join("hwdb-inputs/iocost-tune-2.2-KINGSTON_SA2000M8250G.hwdb"))
            .unwrap();
    let (whole, fw) = input
        .split_once("\n\n")
        .expect("a blank line before the firmware's lines");
    assert!(
        whole.contains("block:*:name:KINGSTON SA2000M8250G:fwrev:*:"),
        "{}",
        input
    );
    assert!(
        fw.contains("block:*:name:KINGSTON SA2000M8250G:fwrev:S5Z42106:"),
        "{}",
        input
    );
    assert!(out
        .join("merged-results/2.2-KINGSTON_SA2000M8250G-S5Z42106-merged-results.json.gz")
        .is_file());
    let hwdb = std::fs::read_to_string(out.join("90-iocost-tune.hwdb")).unwrap();
    assert!(hwdb.contains(&input));
}
