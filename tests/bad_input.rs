//! Bad input found by trying the binary as a careful user would: each case exits 0, 1 or 2
//! with one clear line, never panics (101) and never hangs (every command has a timeout).

#[allow(dead_code)] // each test file uses a part of the shared helpers
mod common;

use assert_cmd::Command;
use common::broken_pipe;
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn bin(cwd: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(cwd).env_remove("RUST_LOG");
    c.timeout(Duration::from_secs(30));
    c
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `args` in `cwd`; asserts exit 2 with one error line containing `want`.
fn usage_error(cwd: &Path, args: &[&str], want: &str) {
    let out = bin(cwd).args(args).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{:?}: {}", args, err);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{:?}: {}", args, err);
    assert!(
        errors[0].contains(want),
        "{:?}: want {:?} in {}",
        args,
        want,
        err
    );
}

#[test]
fn durations_too_long_for_the_clock_are_refused() {
    let d = tempfile::tempdir().unwrap();
    for spec in [
        "io:dur=99999999999999999999",
        "io:dur=600000000000Y",
        "io:ramp=99999999999999999999",
        "systest:hold=101Y",
    ] {
        usage_error(
            d.path(),
            &["-r", "r.json", "run", spec],
            "longer than 100Y, the longest duration accepted",
        );
    }
}

#[test]
fn counts_are_echoed_as_given() {
    let d = tempfile::tempdir().unwrap();
    for (spec, want) in [
        ("io:qd=99999999999", "qd=99999999999 is not from 1 to 4096"),
        (
            "io:workers=99999999999",
            "workers=99999999999 is not from 1 to 1024",
        ),
        (
            "io:rw=randrw,rwmix=99999999999",
            "rwmix=99999999999 is not from 0 to 100",
        ),
        (
            "io:batch=99999999999",
            "batch=99999999999 is not from 0 to qd",
        ),
    ] {
        usage_error(d.path(), &["-r", "r.json", "run", spec], want);
    }
}

/// A stderr that is a pipe nobody reads, or closed at start: the error still sets exit 2, no
/// panic about printing.
#[test]
fn a_closed_or_broken_stderr_is_no_panic() {
    let d = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .current_dir(d.path())
        .args(["-r", "missing.json", "summary"])
        .stderr(broken_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    let mut c = std::process::Command::new(BIN);
    c.current_dir(d.path())
        .args(["-r", "missing.json", "summary"]);
    // SAFETY: close(2) between fork and exec touches only the child's descriptor table.
    unsafe {
        c.pre_exec(|| {
            libc::close(2);
            Ok(())
        });
    }
    let st = c.status().unwrap();
    assert_eq!(st.code(), Some(2));
    // A run's log into a closed pipe: the run still finishes and saves.
    let out = std::process::Command::new(BIN)
        .current_dir(d.path())
        .args(["-r", "r.json", "run", "selftest:steps=2,step-time=0"])
        .stderr(broken_pipe())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(d.path().join("r.json").is_file());
}

fn write_entries(path: &Path, entries: serde_json::Value) {
    std::fs::write(path, serde_json::to_vec_pretty(&entries).unwrap()).unwrap();
}

fn selftest_entry(period: (u64, u64)) -> serde_json::Value {
    json!({"spec": {"kind": "selftest", "id": null, "passive": null, "props": [{}]},
           "period": [period.0, period.1], "sysinfo": {},
           "record": {"steps": 1}, "result": {"steps": 1}})
}

#[test]
fn pack_of_a_centuries_long_period_ends() {
    let d = tempfile::tempdir().unwrap();
    // A bench that runs with the host set up, so pack looks for its reports.
    let mut e = selftest_entry((0, 99_999_999_999_999));
    e["spec"]["kind"] = json!("storage");
    write_entries(&d.path().join("r.json"), json!([e]));
    std::fs::create_dir_all(d.path().join("r-report.d")).unwrap();
    std::fs::write(d.path().join("r-report.d/5.json"), "{}").unwrap();
    let out = bin(d.path())
        .args(["-r", "r.json", "pack", "--allow-missing"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("1 reports packed"),
        "{}",
        stderr(&out)
    );
}

/// A storage entry whose probe says `mem_frac` 1e300: its report prints, the plot is refused
/// with one line (it used to never end).
#[test]
fn a_plot_of_absurd_values_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let probe = json!({"phase": "mem-up", "mem_frac": 1e300, "rps": 160.0, "lat": 0.05,
        "ratio": 0.96, "converged": true, "end": "converged", "secs": 20, "start": 1000,
        "mem_bytes": 900u64 << 20, "pass": true});
    write_entries(
        &d.path().join("r.json"),
        json!([{
            "spec": {"kind": "storage", "id": null, "passive": null, "props": [{"loops": "1"}]},
            "period": [1000, 1200], "sysinfo": {},
            "record": {"loops": [{"mem_frac": 0.3, "probes": 1, "secs": 60, "quick": true,
                                  "size": 4u64 << 30, "mem_probes": [probe]}],
                       "mem": {"profile": 2, "avail": 3u64 << 30, "share": 1u64 << 30,
                               "target": 896u64 << 20},
                       "mem_usages": [9.0e8], "mem_sizes": [1.2e9]},
            "result": {"mem_offload_factor": 1.33, "mem_usage": 9.0e8, "mem_size": 1.2e9,
                       "mem_usage_stdev": 0, "mem_size_stdev": 0, "nr_reports": [200, 0]},
        }]),
    );
    usage_error(
        d.path(),
        &["-r", "r.json", "format", "--plot", "plots"],
        "a probe's values can't be plotted",
    );
}

/// `--plot` into a place no file can be written: refused before the report is printed.
#[test]
fn a_bad_plot_directory_is_refused_first() {
    let d = tempfile::tempdir().unwrap();
    write_entries(&d.path().join("r.json"), json!([selftest_entry((1, 2))]));
    std::fs::write(d.path().join("file"), "").unwrap();
    let out = bin(d.path())
        .args(["-r", "r.json", "format", "--plot", "file/plots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr(&out).contains("--plot file/plots: can't create the directory"));
}

#[test]
fn a_result_path_ending_in_a_slash_is_refused_before_the_run() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("dir")).unwrap();
    usage_error(
        d.path(),
        &["-r", "dir/new.json/", "run", "selftest:steps=1,step-time=0"],
        "names a directory, not a file",
    );
    assert!(std::fs::read_dir(d.path().join("dir"))
        .unwrap()
        .next()
        .is_none());
}

/// Keys this version doesn't know, at the top of an entry and in its spec, survive a run that
/// saves the file.
#[test]
fn a_run_keeps_what_it_does_not_read() {
    let d = tempfile::tempdir().unwrap();
    let mut other = selftest_entry((1, 2));
    other["spec"]["id"] = json!("old");
    other["spec"]["forward_results_from"] = json!([0]);
    other["note"] = json!({"by": "another writer"});
    write_entries(&d.path().join("r.json"), json!([other]));
    let out = bin(d.path())
        .args(["-r", "r.json", "run", "selftest:steps=1,step-time=0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("r.json")).unwrap()).unwrap();
    let old = saved
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["spec"]["id"] == "old")
        .unwrap();
    assert_eq!(old["note"]["by"], "another writer");
    assert_eq!(old["spec"]["forward_results_from"], json!([0]));
}

#[test]
fn a_logfile_that_fails_says_so_once() {
    let d = tempfile::tempdir().unwrap();
    let out = bin(d.path())
        .args([
            "--logfile",
            "/dev/full",
            "-r",
            "r.json",
            "run",
            "selftest:steps=2,step-time=0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches("warning: --logfile /dev/full: can't write to it")
            .count(),
        1,
        "{}",
        err
    );
}

/// A spec given twice where the file has one such entry: the message says the entry was taken.
#[test]
fn a_spec_given_twice_is_told_apart_from_a_missing_one() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/INTEL_SSDPEKKA256G7.json.gz");
    let d = tempfile::tempdir().unwrap();
    for cmd in ["summary", "format"] {
        usage_error(
            d.path(),
            &[
                "-r",
                fixture.to_str().unwrap(),
                cmd,
                "iocost-params",
                "iocost-params",
            ],
            "no further result for job[iocost-params:-]: the file's 1 matching entry is picked",
        );
    }
}

/// A format property shapes the text report only: `summary -o csv|json|yaml` refuses it rather
/// than printing the same records as without it.
#[test]
fn a_format_property_is_refused_where_it_changes_nothing() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/WD_BLACK_SN850X_1000GB.json.gz");
    let d = tempfile::tempdir().unwrap();
    for out in ["csv", "json", "yaml"] {
        usage_error(
            d.path(),
            &[
                "-r",
                fixture.to_str().unwrap(),
                "summary",
                "-o",
                out,
                "iocost-tune:hwdb",
            ],
            "format property hwdb shapes the text report only",
        );
    }
    let text = bin(d.path())
        .args([
            "-r",
            fixture.to_str().unwrap(),
            "summary",
            "iocost-tune:hwdb",
        ])
        .output()
        .unwrap();
    assert!(text.status.success(), "{}", stderr(&text));
}

/// Two `run io` with the same `--dir` and different result files: the second is refused while
/// the first runs (it used to rewrite the first's test file under it), and the first finishes.
#[test]
fn a_second_run_in_the_same_work_dir_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let spec = "io:rw=randread,dur=3s,file-size=8M,direct=false";
    let first = std::process::Command::new(BIN)
        .current_dir(d.path())
        .args(["-r", "a.json", "-d", "work", "run", spec])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lock = d.path().join("work/.resctl-bench.lock");
    let t = std::time::Instant::now();
    while !lock.exists() {
        assert!(t.elapsed() < Duration::from_secs(20), "no lock after 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    usage_error(
        d.path(),
        &["-r", "b.json", "-d", "work", "run", spec],
        "--dir work is in use by pid",
    );
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(d.path().join("a.json").is_file());
    assert!(!d.path().join("b.json").exists());
    assert!(!lock.exists(), "the lock file is removed at the end");
}

#[test]
fn work_dirs_that_cannot_be_are_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("file"), "").unwrap();
    let spec = "io:dur=1s,file-size=8M,direct=false";
    for (dir, want) in [
        (
            "missing/work",
            "missing isn't a directory; create it or give another --dir",
        ),
        ("file", "--dir file: exists and is not a directory"),
    ] {
        usage_error(d.path(), &["-r", "r.json", "-d", dir, "run", spec], want);
    }
    assert!(!d.path().join("missing").exists());
}

/// An upstream iocost-tune entry relabelled as each other bench that has a result model: every
/// report refuses it with one line instead of printing a report of zeros.
#[test]
fn a_relabelled_entry_is_not_read_as_another_bench() {
    let all = common::fixture_entries("INTEL_SSDPEKKA256G7");
    let tune = all
        .iter()
        .find(|e| e["spec"]["kind"] == "iocost-tune")
        .unwrap()
        .clone();
    let d = tempfile::tempdir().unwrap();
    for kind in [
        "storage",
        "iocost-params",
        "iocost-qos",
        "protection",
        "hashd-params",
        "io",
    ] {
        let mut e = tune.clone();
        e["spec"]["kind"] = json!(kind);
        e["spec"]["props"] = json!([{}]);
        let file = format!("{}.json", kind);
        write_entries(&d.path().join(&file), json!([e]));
        for cmd in [
            &["summary"][..],
            &["format"],
            &["summary", "-o", "json"],
            &["summary", "-o", "csv"],
        ] {
            let mut args = vec!["-r", file.as_str()];
            args.extend_from_slice(cmd);
            // iocost-qos's model requires its one key itself (its results are megabytes).
            let want = match kind {
                "iocost-qos" => "not in a layout this version can read (missing field `runs`",
                _ => "the stored result is not what a",
            };
            usage_error(d.path(), &args, want);
        }
    }
}

/// An entry with neither record nor result shows as incomplete, as the docs say, instead of
/// being left out.
#[test]
fn an_entry_without_record_or_result_shows_as_incomplete() {
    let d = tempfile::tempdir().unwrap();
    let mut e = selftest_entry((1, 2));
    e["record"] = serde_json::Value::Null;
    e["result"] = serde_json::Value::Null;
    write_entries(&d.path().join("r.json"), json!([e]));
    for args in [
        &["-r", "r.json", "summary"][..],
        &["-r", "r.json", "summary", "selftest"],
    ] {
        let out = bin(d.path()).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("Incomplete: job[selftest:-]: nothing recorded; the run stopped before its first checkpoint"),
            "{}",
            text
        );
    }
}

#[test]
fn values_the_kernel_or_the_engine_would_quietly_change_are_refused() {
    let d = tempfile::tempdir().unwrap();
    for (args, want) in [
        (
            &[
                "--iocost-qos",
                "vrate=0",
                "-r",
                "r.json",
                "run",
                "selftest:steps=1",
            ][..],
            "vrate=0 is outside io.cost's vrate range, 1 to 10000 (%)",
        ),
        (
            &[
                "--iocost-qos",
                "max=0",
                "-r",
                "r.json",
                "run",
                "selftest:steps=1",
            ],
            "max=0 is outside",
        ),
        (
            &[
                "--iocost-qos",
                "vrate=1e9",
                "-r",
                "r.json",
                "run",
                "selftest:steps=1",
            ],
            "vrate=1e9 is outside",
        ),
        (
            &["-r", "r.json", "run", "io:dur=1n"],
            "dur=1n is shorter than 1s, the shortest measurement io takes",
        ),
    ] {
        usage_error(d.path(), args, want);
    }
    assert!(!d.path().join("r.json").exists());
}

/// Files written beside the result (a CSV table, a generated io job file) get the result
/// file's checks: a missing directory or a directory or FIFO in the file's place is a usage
/// error, not an I/O error.
#[test]
fn output_files_in_the_wrong_place_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let run = ["-r", "r.json", "run", "selftest:steps=1,step-time=0"];
    assert!(bin(d.path()).args(run).output().unwrap().status.success());
    std::fs::create_dir(d.path().join("dir")).unwrap();
    let fifo =
        std::ffi::CString::new(d.path().join("fifo").as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: plain syscall with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for (path, want) in [
        ("nodir/t.csv", "the directory nodir doesn't exist"),
        ("dir", "is a directory; the CSV file must be a regular file"),
        ("fifo", "is a FIFO; the CSV file must be a regular file"),
    ] {
        let args = [
            "-r", "r.json", "summary", "-o", "csv", "--append", path, "selftest",
        ];
        usage_error(d.path(), &args, want);
    }
    for (path, want) in [
        ("nodir/g.toml", "the directory nodir doesn't exist"),
        (
            "dir",
            "is a directory; the io job file must be a regular file",
        ),
        ("fifo", "is a FIFO; the io job file must be a regular file"),
    ] {
        usage_error(d.path(), &["run", "--generate", path, "io:id=a"], want);
    }
}

/// Was: `-r A summary -r B` was accepted, B silently winning, while `-r A -r B` was refused.
#[test]
fn an_option_given_before_and_after_the_subcommand_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let out = bin(p)
        .args(["-r", "a.json", "run", "selftest:steps=1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    usage_error(
        p,
        &["-r", "a.json", "summary", "-r", "b.json"],
        "--result is given before and after the subcommand",
    );
    usage_error(
        p,
        &["--result=a.json", "summary", "--result", "b.json"],
        "--result is given before and after",
    );
    usage_error(
        p,
        &["-vr", "a.json", "summary", "-ra.json"],
        "--result is given before and after",
    );
    for ok in [
        &["-r", "a.json", "summary"][..],
        &["summary", "-r", "a.json"],
        &["-v", "-r", "a.json", "summary", "-v"],
        &["-r", "summary", "summary"],
    ] {
        let out = bin(p).args(ok).output().unwrap();
        assert_ne!(out.status.code(), Some(101), "{:?}", ok);
        assert!(
            !stderr(&out).contains("before and after"),
            "{:?}: {}",
            ok,
            stderr(&out)
        );
    }
}

/// Was: an error quoting a path or value with a newline spanned several lines.
#[test]
fn an_error_is_one_line_whatever_it_quotes() {
    let d = tempfile::tempdir().unwrap();
    for args in [
        &["-r", "two\nlines.json", "summary"][..],
        &["-r", "r.json", "run", "selftest:id=a\tb\nc"],
        &["--logfile", "no/such\ndir/log", "-r", "r.json", "summary"],
        &[
            "-r",
            "r.json",
            "summary",
            "-o",
            "csv",
            "--append",
            "x\n/y.csv",
        ],
    ] {
        let out = bin(d.path()).args(args).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{:?}: {}", args, err);
        assert_eq!(err.lines().count(), 1, "{:?}: {}", args, err);
        assert!(err.starts_with("error: "), "{:?}: {}", args, err);
    }
}

#[test]
fn apply_refuses_what_it_cant_use_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/Samsung_SSD_970_PRO_512GB.json.gz");
    let fx = fx.to_str().unwrap();
    usage_error(
        d.path(),
        &["-r", fx, "apply", "fastest"],
        "no solution \"fastest\" (accepted: isolation, isolated-bandwidth, bandwidth, naive,",
    );
    usage_error(
        d.path(),
        &["-r", fx, "apply", "-D", "no-such-disk"],
        "-D no-such-disk: no such whole disk",
    );
    // The same file without its iocost-tune entry.
    let mut entries = common::fixture_entries("Samsung_SSD_970_PRO_512GB");
    entries.retain(|e| e["spec"]["kind"] != "iocost-tune");
    std::fs::write(d.path().join("r.json"), json!(entries).to_string()).unwrap();
    usage_error(
        d.path(),
        &["-r", "r.json", "apply"],
        "r.json: no finished iocost-tune result to apply",
    );
    std::fs::write(d.path().join("bad.hwdb"), "block:*:\n  novalue\n").unwrap();
    usage_error(
        d.path(),
        &["apply", "--hwdb", "bad.hwdb"],
        "--hwdb bad.hwdb: line 2: expected KEY=value",
    );
    usage_error(d.path(), &["apply", "--hwdb", "none.hwdb"], "no such file");
    usage_error(
        d.path(),
        &["apply", "--undo", "--boot"],
        "cannot be used with",
    );
    // A merged result is a source like any other: its model is looked for.
    let merge_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/merge/KINGSTON_SA2000M8250G");
    let mut merge = bin(d.path());
    merge.args(["-r", "m.json", "merge"]);
    for e in std::fs::read_dir(merge_dir).unwrap().flatten() {
        if e.path().to_string_lossy().ends_with(".json.gz") {
            merge.arg(e.path());
        }
    }
    merge.timeout(Duration::from_secs(120)).assert().success();
    usage_error(
        d.path(),
        &["-r", "m.json", "apply", "naive"],
        "no disk here is model \"KINGSTON SA2000M8250G\", which m.json (iocost-tune) was measured on",
    );
}
