//! Bad input generated from what the binary declares, so that a new bench, property or option
//! is covered without a case written for it: huge, tiny and malformed values for every
//! property of every registered bench (`bench::BENCHES`, their shapes), odd paths and values
//! for every global option (the clap command), entries whose record or result is null, of the
//! wrong type or another bench's, or damaged field by field, and closed or broken standard
//! streams for every subcommand. Whatever comes in: exit 0, 1 or 2, one `error:` line when not
//! 0, no panic, no hang.

#[allow(dead_code)] // each test file uses a part of the shared helpers
mod common;

use common::broken_pipe;
use resctl_bench::bench::{self, BENCHES};
use resctl_bench::spec::shape::PropDesc;
use resctl_bench::spec::JobSpec;
use resctl_bench::units::ValueKind;
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

/// Values of every kind: limits of the number types, beyond the units, malformed, empty.
fn odd_values(kind: &ValueKind) -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        "0",
        "-1",
        "1n",
        "nan",
        "inf",
        "-inf",
        "1e308",
        "1e-308",
        "99999999999999999999",
        "18446744073709551616",
        "4294967296",
        "600000000000Y",
        "1E",
        "1024E",
        "100%",
        "1000%",
        "%",
        "0x10",
        "1_000",
        "é",
        "true",
        "maybe",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push("9".repeat(400));
    if let ValueKind::Enum(names) = kind {
        v.extend(names.iter().map(|n| format!("{}x", n)));
    }
    v
}

/// Runs `f` on a thread; a panic or a run over `limit` fails the test naming `what`.
fn bounded<T: Send + 'static>(
    what: String,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(v)) => v,
        Ok(Err(_)) => panic!("{}: panicked", what),
        Err(_) => panic!("{}: still running after {:?}", what, limit),
    }
}

/// Every property of every registered bench (own, forwarded and later groups) with every odd
/// value: validation answers (accepts or refuses with a message), never panics.
#[test]
fn every_property_of_every_bench_takes_any_value() {
    let mut cases = 0;
    for b in BENCHES {
        let d = b.desc();
        let mut keys: Vec<(usize, String, &PropDesc)> = Vec::new();
        for p in d.shape.props {
            keys.push((0, p.key.to_string(), p));
        }
        for f in d.shape.forward {
            for p in f.props {
                keys.push((0, format!("{}{}", f.prefix, p.key), p));
            }
        }
        for p in d.shape.group_props.unwrap_or(&[]) {
            keys.push((1, p.key.to_string(), p));
        }
        for (group, key, p) in keys {
            for value in odd_values(&p.kind) {
                let text = match group {
                    0 => format!("{}:{}={}", d.kind, key, value),
                    _ => format!("{}::{}={}", d.kind, key, value),
                };
                cases += 1;
                let what = text.clone();
                bounded(what, Duration::from_secs(10), move || {
                    if let Ok(spec) = JobSpec::parse(&text) {
                        let _ = bench::validate_run(&spec).map(|_| ());
                        let _ = bench::validate_format(&spec);
                    }
                });
            }
        }
    }
    eprintln!("{} property values across {} benches", cases, BENCHES.len());
    assert!(cases > 1000, "only {} cases", cases);
}

struct Ran {
    code: Option<i32>,
    stderr: String,
}

/// Runs the binary in `cwd` with `args`; stdin empty, killed after 20 s (a hang fails).
fn run(cwd: &Path, args: &[String]) -> Ran {
    let (code, stderr) = common::run_bounded(cwd, args, Duration::from_secs(20));
    Ran { code, stderr }
}

/// Exit 0, 1 or 2; when not 0, exactly one `error:` line; never a panic.
fn assert_answered(args: &[String], r: &Ran) {
    assert!(
        matches!(r.code, Some(0..=2)),
        "{:?}: exit {:?}\n{}",
        args,
        r.code,
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{:?}: {}", args, r.stderr);
    if r.code != Some(0) {
        let errors = r.stderr.lines().filter(|l| l.starts_with("error:")).count();
        assert_eq!(errors, 1, "{:?}:\n{}", args, r.stderr);
    }
}

/// Paths of every awkward sort, all inside `d`: missing parents, a directory (with and without
/// the slash), a FIFO, a symlink loop, a file used as a directory, a name too long, a newline.
fn odd_paths(d: &Path) -> Vec<String> {
    std::fs::create_dir_all(d.join("dir")).unwrap();
    std::fs::write(d.join("file"), "not json").unwrap();
    let fifo = d.join("fifo");
    if !fifo.exists() {
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: plain syscall with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
    let lp = d.join("loop");
    if std::fs::symlink_metadata(&lp).is_err() {
        std::os::unix::fs::symlink("loop", &lp).unwrap();
    }
    let s = |p: PathBuf| p.to_str().unwrap().to_string();
    vec![
        String::new(),
        s(d.join("missing/deeper/x.json")),
        s(d.join("dir")),
        format!("{}/", s(d.join("dir"))),
        s(d.join("dir/new.json/")),
        s(fifo),
        s(lp),
        s(d.join("file/x")),
        s(d.join("file")),
        s(d.join("n".repeat(300))),
        s(d.join("new\nline")),
    ]
}

/// Every global option with odd paths and odd values, under `run` of a bench that doesn't
/// touch the host and under `summary` where that reads the option.
#[test]
fn every_global_option_takes_any_value() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    std::fs::write(d.join("r.json"), "[]").unwrap();
    let cmd = resctl_bench::commands::parse::command();
    let summary_reads = resctl_bench::commands::options_of("summary").unwrap_or(&[]);
    let mut cases = 0;
    for arg in cmd.get_arguments().filter(|a| a.is_global_set()) {
        let id = arg.get_id().as_str();
        let Some(flag) = arg
            .get_long()
            .map(|l| format!("--{}", l))
            .or_else(|| arg.get_short().map(|s| format!("-{}", s)))
        else {
            continue;
        };
        let takes_value = arg.get_action().takes_values();
        let values: Vec<Option<String>> = if !takes_value {
            vec![None]
        } else {
            let mut v: Vec<Option<String>> = odd_paths(d).into_iter().map(Some).collect();
            // The limits of every number type an option may parse, and nonsense; the full
            // list of odd values is the properties' (a process per value here).
            let numbers = [
                "-1",
                "0",
                "nan",
                "1e308",
                "99999999999999999999",
                "600000000000Y",
            ];
            v.extend(numbers.iter().map(|n| Some(n.to_string())));
            v
        };
        for value in values {
            let with = |rest: &[&str]| -> Vec<String> {
                let mut a = vec![flag.clone()];
                a.extend(value.clone());
                if id != "result" {
                    a.extend(["-r".to_string(), "r.json".to_string()]);
                }
                a.extend(rest.iter().map(|s| s.to_string()));
                a
            };
            let mut cmdlines = vec![with(&["run", "selftest:steps=1,step-time=0"])];
            if summary_reads.contains(&id) {
                cmdlines.push(with(&["summary"]));
            }
            for args in cmdlines {
                cases += 1;
                let r = run(d, &args);
                assert_answered(&args, &r);
            }
            // Nothing may have replaced the directory's odd files.
            assert!(d.join("file").is_file() && d.join("dir").is_dir());
        }
    }
    eprintln!("{} option command lines", cases);
    assert!(cases > 200, "only {} cases", cases);
}

/// Real entries of several benches: the upstream fixture's iocost-params and iocost-tune
/// entries, a storage entry of ours with its probes, and an `io` entry this binary measures
/// (one second on a small test file; it needs no root).
fn real_entries() -> Vec<Value> {
    static ENTRIES: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    ENTRIES
        .get_or_init(|| {
            let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/results/INTEL_SSDPEKKA256G7.json.gz");
            let bytes = resctl_bench::result::read_bytes(&fixture).unwrap().unwrap();
            let all: Value = serde_json::from_slice(&bytes).unwrap();
            let mut out: Vec<Value> = all
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["spec"]["kind"] != "iocost-qos")
                .cloned()
                .collect();
            out.push(storage_entry());
            out.push(io_entry());
            out
        })
        .clone()
}

fn storage_entry() -> Value {
    let probe = |start: u64, frac: f64, ratio: f64, pass: bool| {
        json!({"phase": "mem-up", "mem_frac": frac, "rps": ratio * 167.0, "lat": 0.05,
               "ratio": ratio, "converged": true, "end": "converged", "secs": 20,
               "start": start, "mem_bytes": 900u64 << 20, "pass": pass})
    };
    json!({
        "spec": {"kind": "storage", "id": null, "passive": null, "props": [{"loops": "1"}]},
        "period": [1000, 1200], "sysinfo": {},
        "record": {"loops": [{"mem_frac": 0.3, "probes": 2, "secs": 60, "quick": true,
                              "size": 4u64 << 30,
                              "mem_probes": [probe(1000, 0.2, 0.98, true),
                                             probe(1020, 0.4, 0.83, false)]}],
                   "mem": {"profile": 2, "avail": 3u64 << 30, "share": 1u64 << 30,
                           "target": 896u64 << 20},
                   "mem_usages": [9.0e8], "mem_sizes": [1.2e9]},
        "result": {"mem_offload_factor": 1.33, "mem_usage": 9.0e8, "mem_size": 1.2e9,
                   "mem_usage_stdev": 0, "mem_size_stdev": 0, "nr_reports": [200, 0]},
    })
}

fn io_entry() -> Value {
    let t = tempfile::tempdir().unwrap();
    let args: Vec<String> = ["-r", "io.json", "-d", "work", "run"]
        .iter()
        .map(|s| s.to_string())
        .chain(["io:dur=1s,file-size=8M,direct=false".to_string()])
        .collect();
    let r = run(t.path(), &args);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let all: Value =
        serde_json::from_slice(&std::fs::read(t.path().join("io.json")).unwrap()).unwrap();
    all[0].clone()
}

/// Prints `entries` every way the reports do (summary, format with stats, `-o json`,
/// `compare` against itself, `--plot`); errors are fine, panics and hangs are not.
fn print_every_way(what: String, entries: Vec<Value>) {
    bounded(what, Duration::from_secs(20), move || {
        let text = serde_json::to_vec(&Value::Array(entries)).unwrap();
        let Ok(entries) = resctl_bench::result::parse_entries(Path::new("r.json"), &text) else {
            return;
        };
        for full in [false, true] {
            let _ = bench::results::show::format_entries(&entries, &[], full, 2);
        }
        if let Ok(rows) = bench::results::export::records(&entries, &[]) {
            let keys = |kind: &str| bench::find(kind).map_or(&[][..], |b| b.key_numbers());
            for full in [false, true] {
                let opts = bench::results::compare::CompareOpts { full };
                let _ = bench::results::compare::compare(&rows, &rows, ("a", "b"), &keys, opts);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let _ = bench::results::show::plot_entries(&entries, &[], dir.path(), "r");
    });
}

fn entry_of(kind: &str, record: Value, result: Value) -> Value {
    json!({"spec": {"kind": kind, "id": null, "passive": null, "props": [{}]},
           "period": [1700000000u64, 1700000100u64], "sysinfo": {},
           "record": record, "result": result})
}

/// Every registered bench with records and results of every wrong shape, and with the real
/// entries' records and results of other benches.
#[test]
fn every_bench_reads_any_record_and_result() {
    let mut shapes: Vec<Value> = vec![
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(1e300),
        json!("x"),
        json!([]),
        json!({}),
        json!({"runs": null, "data": 1, "scenarios": "x", "mem_offload_factor": "x",
               "hash_size": -1, "rps_max": 1e300, "io": [], "model": null, "qos": 3}),
    ];
    for e in real_entries() {
        shapes.push(e["record"].clone());
        shapes.push(e["result"].clone());
    }
    let mut cases = 0;
    for b in BENCHES {
        let kind = b.desc().kind;
        // Each shape as the record, as the result, and as both.
        for x in &shapes {
            for (rec, res) in [(x, x), (x, &Value::Null), (&Value::Null, x)] {
                cases += 1;
                print_every_way(
                    format!("{} record {} result {}", kind, short(rec), short(res)),
                    vec![entry_of(kind, rec.clone(), res.clone())],
                );
            }
        }
    }
    eprintln!("{} entries of {} benches", cases, BENCHES.len());
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    s.chars().take(40).collect()
}

/// Each real entry damaged one field at a time (to a null, a string, a negative, a huge number,
/// an empty list or object), down to the third level of its record and result: upstream's
/// entries here, ours in the next test (two tests, so that they run side by side).
#[test]
fn damaged_fields_of_upstream_entries_are_read_or_refused() {
    damage_entries(|kind| kind.starts_with("iocost-"));
}

#[test]
fn damaged_fields_of_our_entries_are_read_or_refused() {
    damage_entries(|kind| !kind.starts_with("iocost-"));
}

fn damage_entries(which: fn(&str) -> bool) {
    let damage = [
        Value::Null,
        json!("x"),
        json!(-1),
        json!(1e300),
        json!([]),
        json!({}),
    ];
    let mut cases = 0;
    for e in real_entries()
        .into_iter()
        .filter(|e| which(e["spec"]["kind"].as_str().unwrap_or("")))
    {
        let mut paths = Vec::new();
        for top in ["record", "result", "sysinfo", "spec", "period"] {
            collect_paths(&e[top], &format!("/{}", top), 3, &mut paths);
        }
        for p in paths {
            for dmg in &damage {
                let mut hurt = e.clone();
                if let Some(slot) = hurt.pointer_mut(&p) {
                    *slot = dmg.clone();
                }
                cases += 1;
                print_every_way(format!("{} {} = {}", e["spec"]["kind"], p, dmg), vec![hurt]);
            }
        }
    }
    eprintln!("{} damaged entries", cases);
    assert!(cases > 500, "only {} cases", cases);
}

/// JSON pointers of `v`'s members down to `depth` levels (lists: their first and last item;
/// maps of more than eight members: all of them, but only three walked into).
fn collect_paths(v: &Value, at: &str, depth: usize, out: &mut Vec<String>) {
    out.push(at.to_string());
    if depth == 0 {
        return;
    }
    match v {
        Value::Object(m) => {
            // A map of many like members (iocost-tune's series, a histogram's buckets): each
            // member is damaged, but only the first two and the last are walked into.
            let n = m.len();
            for (i, (k, c)) in m.iter().enumerate() {
                let key = k.replace('~', "~0").replace('/', "~1");
                let deeper = if n <= 8 || i < 2 || i + 1 == n {
                    depth - 1
                } else {
                    0
                };
                collect_paths(c, &format!("{}/{}", at, key), deeper, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            collect_paths(&a[0], &format!("{}/0", at), depth - 1, out);
            if a.len() > 1 {
                let last = a.len() - 1;
                collect_paths(&a[last], &format!("{}/{}", at, last), depth - 1, out);
            }
        }
        _ => {}
    }
}

/// Every visible subcommand with stdout and stderr closed, or pipes nobody reads.
#[test]
fn every_subcommand_survives_closed_and_broken_streams() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/INTEL_SSDPEKKA256G7.json.gz");
    let r = fixture.to_str().unwrap();
    let cmd = resctl_bench::commands::parse::command();
    let mut lines: Vec<Vec<String>> = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name().to_string();
        lines.push(vec![name.clone(), "--help".into()]);
        // A real invocation of the ones that only read.
        if matches!(name.as_str(), "summary" | "format" | "doc") {
            lines.push(vec!["-r".into(), r.into(), name.clone()]);
        }
    }
    lines.push(vec![
        "-r".into(),
        "x.json".into(),
        "run".into(),
        "selftest:steps=2,step-time=0".into(),
    ]);
    lines.push(vec!["-r".into(), "missing.json".into(), "summary".into()]);
    for args in &lines {
        for how in ["closed", "broken"] {
            let mut c = Command::new(BIN);
            c.current_dir(d).args(args).stdin(Stdio::null());
            match how {
                // SAFETY: close(2) between fork and exec touches only the child's table.
                "closed" => unsafe {
                    c.pre_exec(|| {
                        libc::close(1);
                        libc::close(2);
                        Ok(())
                    });
                },
                _ => {
                    let (o, e) = (broken_pipe(), broken_pipe());
                    c.stdout(o).stderr(e);
                }
            }
            let st = bounded_status(c);
            assert!(
                matches!(st.code(), Some(0..=2)),
                "{:?} with {} streams: {:?}",
                args,
                how,
                st
            );
        }
    }
}

fn bounded_status(mut c: Command) -> std::process::ExitStatus {
    let mut child = c.spawn().unwrap();
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("{:?}: still running after 20 s", c);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `compare` shows a bench's `KEY_NUMBERS` by default: each must be a field of the bench's
/// headline (a renamed field would leave compare's default table without it, silently). The
/// benches with a real entry here; the others check theirs in their own unit tests.
#[test]
fn key_numbers_are_headline_fields() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/INTEL_SSDPEKKA256G7.json.gz");
    let bytes = resctl_bench::result::read_bytes(&fixture).unwrap().unwrap();
    let mut all = resctl_bench::result::parse_entries(&fixture, &bytes).unwrap();
    let ours = serde_json::to_vec(&Value::Array(vec![storage_entry(), io_entry()])).unwrap();
    all.extend(resctl_bench::result::parse_entries(Path::new("r.json"), &ours).unwrap());
    let mut kinds = Vec::new();
    for e in &all {
        let b = bench::find(&e.spec.kind).unwrap();
        let rows = b.headline(e).unwrap();
        assert!(!rows.is_empty(), "{}: no headline", e.spec.kind);
        for key in b.key_numbers() {
            assert!(
                rows.iter().any(|r| r.iter().any(|(k, _)| k == key)),
                "{}: key number {:?} is no headline field",
                e.spec.kind,
                key
            );
        }
        kinds.push(e.spec.kind.clone());
    }
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "io",
            "iocost-params",
            "iocost-qos",
            "iocost-tune",
            "storage"
        ]
    );
}
