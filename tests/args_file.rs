//! The persistent argument file (`-a/--args`) through the binary, with the hidden `selftest`
//! bench: creation with the effective values, re-running the stored specs, command-line
//! overrides saved back, subcommand switches, upstream's object form, malformed files.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");
const SPEC: &str = "selftest:steps=2,step-time=10ms";
/// `SPEC` in canonical form (sorted keys), as the args file stores it.
const SPEC_CANON: &str = "selftest:step-time=10ms,steps=2";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], top: &Path) -> Out {
    let out = Command::new(BIN)
        .current_dir(top)
        .args(args)
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(args: &[&str], top: &Path) -> Out {
    let o = run(args, top);
    assert_eq!(
        o.code, 0,
        "{:?}\nstdout: {}\nstderr: {}",
        args, o.stdout, o.stderr
    );
    o
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {}", path.display(), e))
}

fn steps_in(result: &Path) -> usize {
    let v = json(result);
    v[0]["record"]["steps"].as_array().map_or(0, |a| a.len())
}

#[test]
fn rerun_with_only_the_args_file_runs_the_stored_spec() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    let dir = top.to_str().unwrap();
    let o = ok(
        &["-r", "r.json", "-d", dir, "-a", "args.json", "run", SPEC],
        top,
    );
    assert!(o.stderr.contains("args.json: created"), "{}", o.stderr);

    let args = json(&top.join("args.json"));
    assert_eq!(args["mode"], "run");
    assert_eq!(args["job_specs"], serde_json::json!([SPEC_CANON]));
    assert_eq!(args["dir"], dir);
    // Effective values, including defaults nobody gave.
    assert_eq!(args["rep_retention"], 604800);
    assert_eq!(args["mem_profile"], 16);
    assert_eq!(args["mem_margin"], 0.25);
    assert_eq!(args["swappiness"], Value::Null);
    // Per-invocation switches are never stored.
    let keys: Vec<&str> = args
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    let mut want = vec![
        "dir",
        "dev",
        "rep_retention",
        "mem_profile",
        "mem_avail",
        "mem_margin",
        "iocost_qos",
        "swappiness",
        "hashd_size",
        "hashd_cpu_load",
        "mode",
        "job_specs",
    ];
    want.sort_unstable();
    assert_eq!(keys, want);
    let before = std::fs::read(top.join("args.json")).unwrap();

    // Only -a and the subcommand, into a fresh result file: the stored spec runs again.
    let o = ok(&["-r", "r2.json", "-a", "args.json", "run"], top);
    assert!(
        o.stderr.contains("using the job specs stored by `run`"),
        "{}",
        o.stderr
    );
    assert!(o.stderr.contains("step 2/2 done"), "{}", o.stderr);
    assert!(o.stdout.contains("Selftest: 2 steps"), "{}", o.stdout);
    assert_eq!(steps_in(&top.join("r2.json")), 2);
    // The stored dir was used (nothing else says where report.d would be), and nothing changed,
    // so the file wasn't rewritten.
    assert_eq!(
        json(&top.join("r2.json"))[0]["sysinfo"]["bench_args"]["dir"],
        dir
    );
    assert!(!o.stderr.contains("args.json: updated"), "{}", o.stderr);
    assert_eq!(std::fs::read(top.join("args.json")).unwrap(), before);

    // And against the first result file: the complete entry is reused.
    let o = ok(&["-r", "r.json", "-a", "args.json", "run"], top);
    assert!(o.stderr.contains("already complete"), "{}", o.stderr);
    assert!(!o.stderr.contains("step 1/2 done"), "{}", o.stderr);
}

#[test]
fn command_line_options_override_and_are_saved_back() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    let dir = top.to_str().unwrap();
    ok(
        &["-r", "r.json", "-d", dir, "-a", "args.json", "run", SPEC],
        top,
    );

    let o = ok(
        &[
            "-r",
            "r2.json",
            "-a",
            "args.json",
            "--swappiness",
            "30",
            "--mem-margin",
            "10%",
            "--force",
            "run",
        ],
        top,
    );
    assert!(o.stderr.contains("args.json: updated"), "{}", o.stderr);
    let args = json(&top.join("args.json"));
    assert_eq!(args["swappiness"], 30);
    assert_eq!(args["mem_margin"], 0.1);
    assert_eq!(args["job_specs"], serde_json::json!([SPEC_CANON]));
    assert!(args.get("force").is_none() && args.get("result").is_none());
    let bench_args = &json(&top.join("r2.json"))[0]["sysinfo"]["bench_args"];
    assert_eq!(bench_args["swappiness"], 30);

    // The saved values apply from now on without repeating them...
    ok(&["-r", "r3.json", "-a", "args.json", "run"], top);
    let bench_args = &json(&top.join("r3.json"))[0]["sysinfo"]["bench_args"];
    assert_eq!(
        (&bench_args["swappiness"], &bench_args["mem_margin"]),
        (&Value::from(30), &Value::from(0.1))
    );
    assert_eq!(bench_args["force"], false);

    // ...and new specs on the command line replace the stored ones.
    ok(
        &[
            "-r",
            "r4.json",
            "-a",
            "args.json",
            "run",
            "selftest:steps=1,step-time=10ms",
        ],
        top,
    );
    assert_eq!(
        json(&top.join("args.json"))["job_specs"],
        serde_json::json!(["selftest:step-time=10ms,steps=1"])
    );
}

#[test]
fn switching_subcommand_clears_the_stored_specs() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    let dir = top.to_str().unwrap();
    ok(
        &["-r", "r.json", "-d", dir, "-a", "args.json", "run", SPEC],
        top,
    );

    // The specs stored by `run` aren't `solve`'s; a failed command saves nothing.
    let o = run(&["-r", "r.json", "-a", "args.json", "solve"], top);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("holds none for this subcommand"),
        "{}",
        o.stderr
    );
    assert_eq!(json(&top.join("args.json"))["mode"], "run");

    ok(&["-r", "r.json", "-a", "args.json", "solve", SPEC], top);
    assert_eq!(json(&top.join("args.json"))["mode"], "solve");
    // Now `run` finds nothing stored for it.
    let o = run(&["-r", "r.json", "-a", "args.json", "run"], top);
    assert_eq!(o.code, 2, "{}", o.stderr);
    // `solve` alone reuses its own.
    ok(&["-r", "r.json", "-a", "args.json", "solve"], top);
}

#[test]
fn upstream_object_form_is_read_and_left_alone_when_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    let text = serde_json::json!({
        "dir": top.to_str().unwrap(),
        "rep_retention": 604800,
        "mem_profile": 16,
        "mem_avail": 0,
        "mode": "Run",
        "iocost_qos_ovr": {"off": false, "rpct": null, "rlat": null, "wpct": null,
                           "wlat": null, "min": null, "max": null},
        "swappiness_ovr": null,
        "job_specs": [{"kind": "selftest", "id": null, "passive": null,
                       "props": [{"steps": "2", "step-time": "10ms"}]}],
    })
    .to_string();
    std::fs::write(top.join("args.json"), &text).unwrap();
    let o = ok(&["-r", "r.json", "-a", "args.json", "run"], top);
    assert!(o.stderr.contains(SPEC_CANON), "{}", o.stderr);
    assert_eq!(steps_in(&top.join("r.json")), 2);
    assert_eq!(
        std::fs::read_to_string(top.join("args.json")).unwrap(),
        text
    );
}

#[test]
fn malformed_args_file_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path();
    for (text, want) in [
        ("{\"dir\": ", "not valid JSON"),
        ("{\"swapiness\": 10}", "unknown key \"swapiness\""),
        ("{\"swappiness\": 300}", "is not an integer from 0 to 200"),
        (
            "{\"job_specs\": [\"selftest:steps=x\"], \"mode\": \"run\"}",
            "steps",
        ),
    ] {
        std::fs::write(top.join("args.json"), text).unwrap();
        let o = run(&["-r", "r.json", "-a", "args.json", "run"], top);
        assert_eq!(o.code, 2, "{}: {}", text, o.stderr);
        let errors: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| l.starts_with("error:"))
            .collect();
        assert_eq!(errors.len(), 1, "{}: {}", text, o.stderr);
        assert!(errors[0].contains("args file args.json"), "{}", errors[0]);
        assert!(errors[0].contains(want), "{}: {}", text, errors[0]);
        // Nothing ran and the file is as it was.
        assert!(!top.join("r.json").exists());
        assert_eq!(
            std::fs::read_to_string(top.join("args.json")).unwrap(),
            text
        );
    }
}
