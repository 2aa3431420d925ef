//! `pack`: the tarball holds the result file and the per-second reports of the merged entry
//! periods, under `<stem>-report.d/`.

use assert_cmd::Command;
use std::io::Read;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn entry(kind: &str, start: u64, end: u64) -> String {
    format!(
        r#"{{"spec":{{"kind":"{}","id":null,"passive":null,"props":[{{}}]}},
            "period":[{},{}],"sysinfo":{{}},"record":null,"result":null}}"#,
        kind, start, end
    )
}

fn members(tarball: &Path) -> Vec<(String, Vec<u8>)> {
    let f = std::fs::File::open(tarball).unwrap();
    let mut ar = tar::Archive::new(flate2::read::GzDecoder::new(f));
    ar.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (name, data)
        })
        .collect()
}

fn setup(result_name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let json = format!(
        "[{},{},{},{}]",
        entry("a", 100, 103),
        entry("b", 102, 105),
        entry("c", 200, 201),
        entry("d", 0, 0)
    );
    let res = tmp.path().join(result_name);
    if result_name.ends_with(".gz") {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(json.as_bytes()).unwrap();
        std::fs::write(&res, enc.finish().unwrap()).unwrap();
    } else {
        std::fs::write(&res, json).unwrap();
    }
    let rep = tmp.path().join("top/report.d");
    std::fs::create_dir_all(&rep).unwrap();
    for t in [99, 100, 101, 103, 104, 105, 200, 300] {
        std::fs::write(rep.join(format!("{}.json", t)), format!("{{\"t\":{}}}", t)).unwrap();
    }
    std::fs::create_dir(tmp.path().join("out")).unwrap();
    (tmp, res)
}

#[test]
fn pack_collects_reports_of_merged_periods() {
    for (name, stem) in [("res.json", "res"), ("res.json.gz", "res")] {
        let (tmp, res) = setup(name);
        let out = Command::new(BIN)
            .current_dir(tmp.path().join("out"))
            .arg("-r")
            .arg(&res)
            .arg("--dir")
            .arg(tmp.path().join("top"))
            .arg("pack")
            .assert()
            .success();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        // [100,105) has 100 101 103 104 (102 missing); [200,201) has 200.
        assert!(stderr.contains("5 reports packed, 1 missing"), "{}", stderr);

        let tarball = tmp.path().join(format!("out/{}.tar.gz", stem));
        let m = members(&tarball);
        let names: Vec<&str> = m.iter().map(|(n, _)| n.as_str()).collect();
        let want: Vec<String> = std::iter::once(name.to_string())
            .chain(
                [100, 101, 103, 104, 200]
                    .iter()
                    .map(|t| format!("{}-report.d/{}.json", stem, t)),
            )
            .collect();
        assert_eq!(names, want);
        assert_eq!(m[0].1, std::fs::read(&res).unwrap());
        assert_eq!(m[3].1, b"{\"t\":103}");
        // Nothing else left in the output directory (the temp file was renamed).
        assert_eq!(
            std::fs::read_dir(tmp.path().join("out")).unwrap().count(),
            1
        );
    }
}

#[test]
fn pack_of_missing_result_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["-r", "nope.json", "pack"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("nope.json: result file doesn't exist"),
        "{}",
        stderr
    );
}

/// What `resctl-bench vm … -r r.json run …` leaves: the result and, beside it, the reports in
/// `r-report.d/` (the guest's report.d is mounted there); no report.d under `--dir`.
#[test]
fn pack_after_a_vm_run_finds_the_reports_beside_the_result() {
    let tmp = tempfile::tempdir().unwrap();
    let res = tmp.path().join("r.json");
    std::fs::write(&res, format!("[{}]", entry("storage", 100, 104))).unwrap();
    let rep = tmp.path().join("r-report.d");
    std::fs::create_dir(&rep).unwrap();
    for t in 100..104 {
        std::fs::write(rep.join(format!("{}.json", t)), format!("{{\"t\":{}}}", t)).unwrap();
    }
    let out = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["-r", "r.json", "-d", "work", "pack"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("4 reports packed, 0 missing"), "{}", stderr);
    let names: Vec<String> = members(&tmp.path().join("r.tar.gz"))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            "r.json",
            "r-report.d/100.json",
            "r-report.d/101.json",
            "r-report.d/102.json",
            "r-report.d/103.json"
        ]
    );

    // The reports gone: exit 2 naming the run and where pack looked; --allow-missing packs
    // the result alone.
    std::fs::remove_dir_all(&rep).unwrap();
    std::fs::remove_file(tmp.path().join("r.tar.gz")).unwrap();
    let out = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["-r", "r.json", "-d", "work", "pack"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(
        stderr,
        "error: pack: no per-second reports for job[storage:-] (4 s from 100) in work/report.d \
         or r-report.d; give the run's --dir, or --allow-missing to pack without them\n"
    );
    assert!(!tmp.path().join("r.tar.gz").exists());
    let out = Command::new(BIN)
        .current_dir(tmp.path())
        .args(["-r", "r.json", "-d", "work", "pack", "--allow-missing"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("0 reports packed, 4 missing"), "{}", stderr);
}
