//! The `io` bench on the test machine: a real job on a test file (written once, then reused),
//! its report and headline numbers, and bad specs and targets refused in one line, exit 2.

use assert_cmd::Command;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

/// `args` with the result file in `dir`, and `--dir dir` for `run`.
fn run(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(BIN);
    if args[0] == "run" {
        c.arg("-d").arg(dir);
    }
    let out = c
        .arg("-r")
        .arg(dir.join("r.json"))
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_job_runs_reports_and_reuses_its_test_file() {
    let d = tempfile::tempdir().unwrap();
    let (rc, out, err) = run(
        d.path(),
        &[
            "run",
            "io:id=a,rw=randread,qd=4,dur=1s,file-size=8M,pcts=50/99/99.9",
        ],
    );
    assert_eq!(rc, 0, "{}{}", out, err);
    assert!(err.contains("writing the test file"), "{}", err);
    assert!(
        out.contains("randread: bs=4K qd=4 workers=1 direct"),
        "{}",
        out
    );
    assert!(out.contains("50.00th=["), "{}", out);
    let md = std::fs::metadata(d.path().join("scratch/io-testfile")).unwrap();
    assert_eq!(md.len(), 8 << 20);

    // A second job reuses the file; mixed IO reports both directions.
    let (rc, out, err) = run(
        d.path(),
        &[
            "run",
            "io:id=b,rw=randrw,rwmix=70,qd=2,batch=0,workers=2,size=2M,file-size=8M",
        ],
    );
    assert_eq!(rc, 0, "{}{}", out, err);
    assert!(!err.contains("writing the test file"), "{}", err);
    assert!(
        out.contains("  read: IOPS=") && out.contains("  write: IOPS="),
        "{}",
        out
    );
    assert!(out.contains("worker   1  : IOPS="), "{}", out);
    assert!(out.contains("bs=4K qd=2 batch=2 workers=2"), "{}", out);

    let (rc, out, _) = run(d.path(), &["summary", "-o", "json", "io:id=a"]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &v["records"][0];
    assert_eq!(row["kind"], "io");
    assert!(row["read_iops"].as_f64().unwrap() > 0.0, "{}", row);
    assert!(row["read_clat_p99_us"].as_f64().unwrap() > 0.0, "{}", row);
    assert_eq!(row["write_iops"].as_f64(), Some(0.0));
    assert!(row["write_lat_mean_us"].is_null(), "{}", row);

    // The stored document: versioned, with buckets that add up to the IO count.
    let text = std::fs::read_to_string(d.path().join("r.json")).unwrap();
    let entries: serde_json::Value = serde_json::from_str(&text).unwrap();
    let io = &entries[0]["result"]["io"];
    assert_eq!(io["version"], 1);
    let n: u64 = io["read"]["clat"]["bins"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(n, io["read"]["ios"].as_u64().unwrap());
}

#[test]
fn bad_specs_and_targets_are_one_line_exit_2() {
    let d = tempfile::tempdir().unwrap();
    for (spec, want) in [
        (
            "io:rw=randread,rwmix=70",
            "rwmix is for rw and randrw, not rw=randread",
        ),
        (
            "io:dur=1s,size=1M",
            "dur and size both stop the job; give one",
        ),
        ("io:bs=1000", "direct IO needs multiples of 512 bytes"),
        (
            "io:pcts=0/50",
            "pcts=\"0/50\": expected percentiles above 0",
        ),
        ("io:qd=0", "qd=0 is not from 1 to 4096"),
        (
            "io:qd=4,batch=8",
            "batch=8 is above qd=4 (accepted: 0 = qd, or 1 to qd)",
        ),
        (
            "io:arrivals=poisson",
            "arrivals only applies with rate-iops or rate-bps",
        ),
        ("io:rw=sideways", "rw"),
        (
            "io:target=/nonexistent/x,dur=1s",
            "IO target /nonexistent/x: No such file",
        ),
    ] {
        let (rc, out, err) = run(d.path(), &["run", spec]);
        assert_eq!(rc, 2, "{}: {}{}", spec, out, err);
        let last = err.trim_end().lines().last().unwrap_or("");
        assert!(
            last.starts_with("error: ") && last.contains(want),
            "{}: {}",
            spec,
            err
        );
    }
}

#[test]
fn a_job_file_is_generated_run_and_reported_per_job() {
    let d = tempfile::tempdir().unwrap();
    let jobs = d.path().join("jobs.toml");
    let jobs_s = jobs.to_str().unwrap();
    let (rc, out, err) = run(
        d.path(),
        &[
            "run",
            "--generate",
            jobs_s,
            "io:id=r1,qd=2,dur=1s,file-size=8M",
            "io:id=w4,rw=randwrite,qd=4,dur=1s,file-size=8M",
        ],
    );
    assert_eq!(rc, 0, "{}{}", out, err);
    let text = std::fs::read_to_string(&jobs).unwrap();
    assert!(text.contains("# qd = 1"), "{}", text);
    assert!(
        text.contains("[[job]]\nname = \"w4\"\nrw = \"randwrite\""),
        "{}",
        text
    );
    assert!(
        !d.path().join("r.json").exists(),
        "--generate ran something"
    );
    // The second job starts with the first; the command line overrides both.
    std::fs::write(
        &jobs,
        text.replace("name = \"w4\"", "name = \"w4\"\ntogether = true"),
    )
    .unwrap();
    let spec = format!("io:id=f,jobs={},pcts=50/99", jobs_s);
    let (rc, out, err) = run(d.path(), &["run", &spec]);
    assert_eq!(rc, 0, "{}{}", out, err);
    assert!(out.contains("job r1:\nrandread: bs=4K qd=2"), "{}", out);
    assert!(
        out.contains("job w4 (with the job before it):\nrandwrite: bs=4K qd=4"),
        "{}",
        out
    );
    assert!(
        out.contains("50.00th=[") && !out.contains("99.90th=["),
        "{}",
        out
    );

    let (rc, out, _) = run(d.path(), &["summary", "-o", "json", "io:id=f"]);
    assert_eq!(rc, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["records"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{}", out);
    assert_eq!((&rows[0]["job"], &rows[0]["qd"]), (&"r1".into(), &2.into()));
    assert_eq!((&rows[1]["job"], &rows[1]["qd"]), (&"w4".into(), &4.into()));
    assert!(rows[1]["write_iops"].as_f64().unwrap() > 0.0, "{}", out);
    let (rc, out, _) = run(d.path(), &["summary", "-o", "csv", "io:id=f"]);
    assert_eq!(rc, 0);
    assert_eq!(out.lines().count(), 3, "{}", out);
    assert!(
        out.lines().next().unwrap().contains(",job,engine,"),
        "{}",
        out
    );

    // A file that isn't a job file, and --generate of another bench: one line, exit 2.
    std::fs::write(&jobs, "[[job]]\nqdd = 3\n").unwrap();
    let (rc, _, err) = run(d.path(), &["run", &format!("io:jobs={}", jobs_s)]);
    assert_eq!(rc, 2, "{}", err);
    assert!(
        err.contains("unknown property \"qdd\"; did you mean qd?"),
        "{}",
        err
    );
    let (rc, _, err) = run(d.path(), &["run", "--generate", jobs_s, "storage"]);
    assert_eq!(rc, 2, "{}", err);
    assert!(err.contains("writes io job files"), "{}", err);
    let (rc, _, err) = run(
        d.path(),
        &["run", "--generate", jobs_s, "io:id=a", "io:id=a,qd=2"],
    );
    assert_eq!(rc, 2, "{}", err);
    assert!(err.contains("two specs have id=a"), "{}", err);
}

/// `devtime` on a test file on this machine's disk: the device's time from the block layer's
/// trace where tracefs is there, else (as on the machines this project is built on) from the
/// kernel's count alone, said so in the report; either way the disk served our direct reads.
#[test]
fn devtime_reports_the_disk_with_or_without_a_trace() {
    // Under target/, on a block device (a temporary directory can be on tmpfs).
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (rc, out, err) = run(
        d.path(),
        &["run", "io:devtime,direct,qd=2,dur=1s,file-size=8M"],
    );
    if rc == 2 && err.contains("/proc/diskstats has no line for it") {
        eprintln!(
            "the target directory isn't on a block device here: skipped\n{}",
            err
        );
        return;
    }
    assert_eq!(rc, 0, "{}{}", out, err);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("r.json")).unwrap()).unwrap();
    let io = &doc[0]["record"]["io"];
    let ours = io["read"]["ios"].as_u64().unwrap();
    let counted = io["dev"]["kernel"]["read"]["n"].as_u64().unwrap();
    // Every one of our reads, and whatever else the disk did meanwhile.
    assert!(
        ours > 0 && counted >= ours * 98 / 100,
        "{} counted, {} ours",
        counted,
        ours
    );
    let untraced = io["dev"]["untraced"].as_str().unwrap_or("");
    if untraced.is_empty() {
        assert!(
            out.contains("block layer dispatch to completion"),
            "{}",
            out
        );
        assert!(out.contains("    read  kernel's count ("), "{}", out);
        assert!(out.contains(", device="), "{}", out);
    } else {
        assert!(
            out.contains(&format!("not traced: {}):", untraced)),
            "{}",
            out
        );
        assert!(out.contains(", device and queue="), "{}", out);
        assert!(err.contains("devtime: no trace of disk"), "{}", err);
    }
    // The summary's row: where the time went, one column each (a sweep's CSV table).
    let (rc, json_out, err) = run(d.path(), &["summary", "-o", "json", "io"]);
    assert_eq!(rc, 0, "{}", err);
    let v: serde_json::Value = serde_json::from_str(&json_out).unwrap();
    let row = &v["records"][0];
    let us = |k: &str| {
        row[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{} in {}", k, row))
    };
    let (lat, slat, clat) = (
        us("read_lat_mean_us"),
        us("read_slat_mean_us"),
        us("read_clat_mean_us"),
    );
    // (`lat` also holds the moments between an IO's creation and its submission call.)
    assert!(
        slat + clat <= 1.01 * lat && slat + clat >= 0.8 * lat,
        "{}",
        row
    );
    assert!(us("read_dev_alloc_mean_us") > 0.0, "{}", row);
    assert_eq!(
        row["read_dev_mean_us"].is_null(),
        !untraced.is_empty(),
        "{}",
        row
    );
    // No writes of ours: the disk's writes meanwhile are not this job's.
    assert!(row["write_dev_alloc_mean_us"].is_null(), "{}", row);
}
