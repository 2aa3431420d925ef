//! Faults, races and planted files around the files the tool writes: links planted at every
//! name it creates, the result file replaced or turned into a directory while a run holds it,
//! concurrent and duplicate merges, joined files, names too long for a save, edited job files
//! and damaged histograms. Each case says what the tool did before it was fixed.

#[allow(dead_code)] // each test file uses a part of the shared helpers
mod common;

use assert_cmd::Command;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn bin(cwd: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(cwd).env_remove("RUST_LOG");
    c.timeout(Duration::from_secs(60));
    c
}

/// Runs `args` in `cwd`: exit code, stdout, stderr.
fn run(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = bin(cwd).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts exit 2 with one `error:` line containing `want`.
fn assert_usage(what: &str, (code, _, err): (i32, String, String), want: &str) {
    assert_eq!(code, 2, "{}: {}", what, err);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{}: {}", what, err);
    assert!(
        errors[0].contains(want),
        "{}: want {:?} in {}",
        what,
        want,
        err
    );
}

fn kinds_and_ids(path: &Path) -> Vec<String> {
    let (code, out, err) = run(
        Path::new("."),
        &["-r", path.to_str().unwrap(), "summary", "-o", "json"],
    );
    assert_eq!(code, 0, "{}", err);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}:{}",
                r["kind"].as_str().unwrap(),
                r["id"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A symlink at `link` to `to`, owned by uid 65534 (nobody), as another user would plant it.
/// `false` when not root (the ownership can't be given away).
fn plant_foreign_link(to: &Path, link: &Path) -> bool {
    std::os::unix::fs::symlink(to, link).unwrap();
    if !is_root() {
        eprintln!("not root: the foreign-owner cases are skipped");
        return false;
    }
    std::os::unix::fs::lchown(link, Some(65534), Some(65534)).unwrap();
    true
}

fn victim(dir: &Path) -> PathBuf {
    let v = dir.join("victim");
    std::fs::write(&v, "precious\n").unwrap();
    v
}

fn assert_intact(v: &Path) {
    assert_eq!(std::fs::read_to_string(v).unwrap(), "precious\n");
}

/// Was: `.r.json.lock` was opened with O_CREAT and followed, truncating its target to the
/// holder line; temporary files at the next PIDs were followed too, the result written into
/// their target and `r.json` left a link to it.
#[test]
fn links_and_second_names_planted_at_the_lock_and_temp_names_are_never_written_through() {
    let d = tempfile::tempdir().unwrap();
    let v = victim(d.path());
    let lock = d.path().join(".r.json.lock");
    std::os::unix::fs::symlink(&v, &lock).unwrap();
    assert_usage(
        "a link at the lock",
        run(d.path(), &["-r", "r.json", "run", "selftest:steps=1"]),
        "symbolic link",
    );
    std::fs::remove_file(&lock).unwrap();
    std::fs::hard_link(&v, &lock).unwrap();
    assert_usage(
        "a second name at the lock",
        run(d.path(), &["-r", "r.json", "run", "selftest:steps=1"]),
        "2 names",
    );
    std::fs::remove_file(&lock).unwrap();
    assert_intact(&v);

    // Links at the temporary names the old scheme (`.r.json.tmp.PID`) gave the next PIDs.
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1000);
    for pid in last + 1..last + 200 {
        std::os::unix::fs::symlink(&v, d.path().join(format!(".r.json.tmp.{}", pid))).unwrap();
    }
    let (code, _, err) = run(d.path(), &["-r", "r.json", "run", "selftest:steps=2"]);
    assert_eq!(code, 0, "{}", err);
    assert_intact(&v);
    let meta = std::fs::symlink_metadata(d.path().join("r.json")).unwrap();
    assert!(meta.file_type().is_file(), "r.json is no longer a file");
    assert_eq!(kinds_and_ids(&d.path().join("r.json")), ["selftest:"]);
}

/// Links of another user's at names a user gives (the result file, a CSV file, `--plot`'s
/// directory, `pack`'s tarball, `--generate`'s job file, `--logfile`) are refused: they were
/// followed, so anyone who can write to the directory could have root write any file.
#[test]
fn links_of_other_users_at_named_files_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let v = victim(p);
    let (code, _, err) = run(p, &["-r", "ok.json", "run", "selftest:steps=1"]);
    assert_eq!(code, 0, "{}", err);

    // --generate through a link of one's own writes its target (a link is followed as a
    // result file's is), atomically: the link stays a link.
    std::fs::write(p.join("mine.toml"), "old").unwrap();
    std::os::unix::fs::symlink("mine.toml", p.join("jobs.toml")).unwrap();
    let (code, _, err) = run(p, &["run", "--generate", "jobs.toml", "io:qd=2"]);
    assert_eq!(code, 0, "{}", err);
    assert!(std::fs::symlink_metadata(p.join("jobs.toml"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(p.join("mine.toml"))
        .unwrap()
        .contains("qd = 2"));

    if !plant_foreign_link(&v, &p.join("r.json")) {
        return;
    }
    assert_usage(
        "a foreign link at the result",
        run(p, &["-r", "r.json", "run", "selftest:steps=1"]),
        "neither yours nor root's",
    );
    // (what, the name planted, where its link points, the command that creates the name)
    let elsewhere = p.join("elsewhere");
    let cases: [(&str, &str, &Path, &[&str]); 5] = [
        (
            "CSV",
            "t.csv",
            &v,
            &["-r", "ok.json", "summary", "-o", "csv", "--append", "t.csv"],
        ),
        (
            "plot directory",
            "plots",
            &elsewhere,
            &["-r", "ok.json", "format", "--plot", "plots"],
        ),
        (
            "tarball",
            "ok.tar.gz",
            &v,
            &["-r", "ok.json", "-d", "w", "pack", "--allow-missing"],
        ),
        (
            "job file",
            "gen.toml",
            &v,
            &["run", "--generate", "gen.toml", "io:qd=2"],
        ),
        (
            "log file",
            "log",
            &v,
            &["--logfile", "log", "-r", "ok.json", "summary"],
        ),
    ];
    for (what, name, to, args) in cases {
        plant_foreign_link(to, &p.join(name));
        assert_usage(
            &format!("a foreign link at the {}", what),
            run(p, args),
            "neither yours nor root's",
        );
    }
    assert!(!elsewhere.exists());
    assert_intact(&v);
}

/// Waits until `cond` holds (at most 20 s).
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "timed out: {}", what);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A run of `selftest:id=a` on `d/r.json` slow enough to change the file under it.
fn slow_run(d: &Path) -> std::process::Child {
    spawn(
        d,
        &[
            "-r",
            "r.json",
            "run",
            "selftest:id=a,steps=15,step-time=200ms",
        ],
    )
}

/// The binary started in `d` with `args`, stdout dropped, stderr piped (see [`stderr_of`]).
fn spawn(d: &Path, args: &[&str]) -> std::process::Child {
    std::process::Command::new(BIN)
        .current_dir(d)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn stderr_of(child: std::process::Child) -> (i32, String) {
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `.unsaved-PID` file an error names.
fn kept_path(d: &Path, err: &str) -> PathBuf {
    let at = err
        .find("kept in ")
        .unwrap_or_else(|| panic!("no kept file: {}", err));
    let rest = &err[at + "kept in ".len()..];
    let p = PathBuf::from(rest.split(':').next().unwrap());
    if p.is_absolute() {
        p
    } else {
        d.join(p)
    }
}

/// Was: another result moved into place during `run` was replaced at the next save, exit 0,
/// its entries gone. Now the run stops, the other file stays, and the run's entries (with its
/// checkpoint) are kept beside it, named in the error.
#[test]
fn a_result_file_replaced_during_a_run_is_left_alone_and_the_run_kept_beside_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let (code, _, err) = run(p, &["-r", "other.json", "run", "selftest:id=other,steps=1"]);
    assert_eq!(code, 0, "{}", err);
    let child = slow_run(p);
    wait_for("the first checkpoint", || p.join("r.json").exists());
    std::fs::rename(p.join("other.json"), p.join("r.json")).unwrap();
    let (code, err) = stderr_of(child);
    assert_eq!(code, 1, "{}", err);
    assert!(err.contains("changed since it was read"), "{}", err);
    assert_eq!(kinds_and_ids(&p.join("r.json")), ["selftest:other"]);
    let kept = kept_path(p, &err);
    assert!(kept.starts_with(p), "{}", kept.display());
    assert_eq!(kinds_and_ids(&kept), ["selftest:a"]);
    // The kept file resumes.
    let (code, _, err) = run(
        p,
        &[
            "-r",
            kept.to_str().unwrap(),
            "run",
            "selftest:id=a,steps=15,step-time=1ms",
        ],
    );
    assert_eq!(code, 0, "{}", err);
}

/// Was: a save onto a path turned into a directory failed clearly but deleted the complete
/// temporary file: the finished work was nowhere.
#[test]
fn a_save_that_fails_keeps_the_entries_and_says_where() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let child = slow_run(p);
    wait_for("the first checkpoint", || p.join("r.json").exists());
    std::fs::remove_file(p.join("r.json")).unwrap();
    std::fs::create_dir(p.join("r.json")).unwrap();
    let (code, err) = stderr_of(child);
    assert_eq!(code, 1, "{}", err);
    let kept = kept_path(p, &err);
    assert_eq!(kinds_and_ids(&kept), ["selftest:a"]);
    assert!(p.join("r.json").is_dir());
}

/// Was: the checks before a run passed for a 245–249-character name; the save then failed on
/// the longer temporary name and the finished result was lost.
#[test]
fn a_name_too_long_for_the_save_is_refused_before_the_run() {
    let d = tempfile::tempdir().unwrap();
    let long = format!("{}.json", "r".repeat(240));
    let (code, _, err) = run(d.path(), &["-r", "ok.json", "run", "selftest:steps=1"]);
    assert_eq!(code, 0, "{}", err);
    assert_usage(
        "a 245-byte name",
        run(d.path(), &["-r", &long, "run", "selftest:steps=1"]),
        "file name",
    );
    assert_usage(
        "a 245-byte CSV name",
        run(
            d.path(),
            &["-r", "ok.json", "summary", "-o", "csv", "--append", &long],
        ),
        "file name",
    );
    // The longest name that fits works end to end.
    let fits = format!("{}.json", "r".repeat(230));
    let (code, _, err) = run(d.path(), &["-r", &fits, "run", "selftest:steps=1"]);
    assert_eq!(code, 0, "{}", err);
}

/// Was: `cat a.json.gz b.json.gz` was read as a's entries plus a "torn tail"; the next save
/// dropped b's.
#[test]
fn joined_files_are_read_whole_and_saved_as_one() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    for (name, id) in [("a.json.gz", "a"), ("b.json.gz", "b"), ("c.json", "c")] {
        let spec = format!("selftest:id={},steps=1", id);
        let (code, _, err) = run(p, &["-r", name, "run", &spec]);
        assert_eq!(code, 0, "{}", err);
    }
    let mut joined = std::fs::read(p.join("a.json.gz")).unwrap();
    joined.extend(std::fs::read(p.join("b.json.gz")).unwrap());
    std::fs::write(p.join("j.json.gz"), &joined).unwrap();
    let (code, _, err) = run(p, &["-r", "j.json.gz", "summary"]);
    assert_eq!(code, 0, "{}", err);
    assert!(err.contains("2 JSON arrays one after another"), "{}", err);
    let (code, _, err) = run(p, &["-r", "j.json.gz", "run", "selftest:id=d,steps=1"]);
    assert_eq!(code, 0, "{}", err);
    assert_eq!(
        kinds_and_ids(&p.join("j.json.gz")),
        ["selftest:d", "selftest:a", "selftest:b"]
    );
    // Plain files joined with cat likewise.
    let mut joined = std::fs::read(p.join("c.json")).unwrap();
    joined.extend(std::fs::read(p.join("c.json")).unwrap());
    std::fs::write(p.join("cc.json"), &joined).unwrap();
    assert_eq!(
        kinds_and_ids(&p.join("cc.json")),
        ["selftest:c", "selftest:c"]
    );
}

fn merge_sources() -> Vec<PathBuf> {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/merge/KINGSTON_SA2000M8250G");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    v.sort();
    v
}

/// The merged file's report without the merge-info entry's time.
fn merged_report(p: &Path, out: &str) -> String {
    let (code, text, err) = run(p, &["-r", out, "format", "iocost-tune"]);
    assert_eq!(code, 0, "{}", err);
    text
}

/// Was: `merge X X` (or X and a copy) counted the same runs twice and changed the solutions;
/// two merges into one file both succeeded (the lock was taken only for the final write); a
/// merge with nothing to merge replaced the output with an empty merge, exit 0.
#[test]
fn merges_count_a_run_once_take_the_output_first_and_never_write_nothing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let src = merge_sources();
    let s: Vec<&str> = src.iter().map(|p| p.to_str().unwrap()).collect();
    let (code, _, err) = run(p, &[&["-r", "once.json", "merge"][..], &s].concat());
    assert_eq!(code, 0, "{}", err);
    std::fs::copy(&src[0], p.join("copy.json.gz")).unwrap();
    let twice = [
        &["-r", "twice.json", "merge"][..],
        &s,
        &[s[0], "copy.json.gz"],
    ]
    .concat();
    let (code, _, err) = run(p, &twice);
    assert_eq!(code, 0, "{}", err);
    assert!(err.contains("counted once"), "{}", err);
    assert_eq!(
        merged_report(p, "once.json"),
        merged_report(p, "twice.json")
    );

    // Nothing to merge: refused, the output as it was.
    let before = std::fs::read(p.join("once.json")).unwrap();
    let (code, _, err) = run(p, &["-r", "st.json", "run", "selftest:steps=1"]);
    assert_eq!(code, 0, "{}", err);
    assert_usage(
        "nothing to merge",
        run(p, &["-r", "once.json", "merge", "st.json"]),
        "nothing to merge",
    );
    assert_eq!(std::fs::read(p.join("once.json")).unwrap(), before);

    // A merge into a file another writer holds stops at once, before reading its sources.
    let holder = spawn(
        p,
        &[
            "-r",
            "held.json",
            "run",
            "selftest:steps=50,step-time=200ms",
        ],
    );
    wait_for("the holder's checkpoint", || p.join("held.json").exists());
    let t = Instant::now();
    assert_usage(
        "a merge into a held file",
        run(p, &[&["-r", "held.json", "merge"][..], &s].concat()),
        "is in use by pid",
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    let mut holder = holder;
    holder.kill().unwrap();
    holder.wait().unwrap();

    // Merges started together: every one that succeeds wrote a whole merge, the others stop
    // with exit 2 naming the holder.
    let kids: Vec<_> = (0..4)
        .map(|_| spawn(p, &[&["-r", "race.json", "merge"][..], &s].concat()))
        .collect();
    for k in kids {
        let (code, err) = stderr_of(k);
        assert!(
            code == 0 || (code == 2 && err.contains("is in use by pid")),
            "{}: {}",
            code,
            err
        );
    }
    assert_eq!(merged_report(p, "once.json"), merged_report(p, "race.json"));
}

/// Was: the same command on an edited io job file reused the complete entry and its old
/// numbers.
#[test]
fn an_edited_io_job_file_makes_a_new_entry() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let job = |dur: &str| {
        let mut f = std::fs::File::create(p.join("jobs.toml")).unwrap();
        writeln!(
            f,
            "[global]\nfile-size = \"8M\"\n[[job]]\nname = \"r\"\ndur = \"{}\"",
            dur
        )
        .unwrap();
    };
    let go = || run(p, &["-r", "r.json", "-d", "w", "run", "io:jobs=jobs.toml"]);
    job("1s");
    let (code, _, err) = go();
    assert_eq!(code, 0, "{}", err);
    let (code, _, err) = go();
    assert_eq!(code, 0, "{}", err);
    assert!(err.contains("reusing"), "unchanged: reused: {}", err);
    assert_eq!(kinds_and_ids(&p.join("r.json")).len(), 1);
    job("2s");
    let (code, _, err) = go();
    assert_eq!(code, 0, "{}", err);
    assert!(!err.contains("reusing"), "edited: run again: {}", err);
    assert_eq!(kinds_and_ids(&p.join("r.json")).len(), 2);
}

/// Was: a histogram whose `min_ns` is above its `max_ns` panicked `summary -o csv|json|yaml`
/// and `compare` (exit 101).
#[test]
fn a_damaged_histogram_is_refused_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let (code, _, err) = run(
        p,
        &[
            "-r",
            "r.json",
            "-d",
            "w",
            "run",
            "io:rw=randrw,dur=1s,file-size=8M",
        ],
    );
    assert_eq!(code, 0, "{}", err);
    let mut v: Value = serde_json::from_slice(&std::fs::read(p.join("r.json")).unwrap()).unwrap();
    for dir in ["read", "write"] {
        for h in ["clat", "lat", "slat"] {
            let x = &mut v[0]["result"]["io"][dir][h];
            x["min_ns"] = Value::from(1u64 << 40);
            x["max_ns"] = Value::from(1u64);
        }
    }
    std::fs::write(p.join("bad.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    for args in [
        &["-r", "bad.json", "summary", "-o", "csv"][..],
        &["-r", "bad.json", "summary", "-o", "json"],
        &["-r", "bad.json", "summary", "-o", "yaml"],
        &["-r", "bad.json", "summary"],
        &["-r", "bad.json", "format"],
        &["compare", "bad.json", "r.json"],
    ] {
        let (code, _, err) = run(p, args);
        assert!(
            code == 0 || code == 1 || code == 2,
            "{:?}: {} {}",
            args,
            code,
            err
        );
        assert!(!err.contains("panicked"), "{:?}: {}", args, err);
    }
}

/// Was: a write-only job's log line said `clat p99 0 µs` (the empty read side's) while its
/// report gave the writes' p99.
#[test]
fn a_write_only_job_logs_the_writes_p99() {
    let d = tempfile::tempdir().unwrap();
    let (code, _, err) = run(
        d.path(),
        &[
            "-r",
            "r.json",
            "-d",
            "w",
            "run",
            "io:rw=randwrite,dur=1s,file-size=8M",
        ],
    );
    assert_eq!(code, 0, "{}", err);
    let line = err
        .lines()
        .find(|l| l.contains("clat p99"))
        .unwrap_or_else(|| panic!("no clat line: {}", err));
    let us: u64 = line
        .split("clat p99 ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", line));
    assert!(us > 0, "{}", line);
}

/// Was: `pack` of an io result demanded per-second reports, which io runs never write.
#[test]
fn pack_of_an_io_result_needs_no_reports() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let (code, _, err) = run(
        p,
        &["-r", "r.json", "-d", "w", "run", "io:dur=1s,file-size=8M"],
    );
    assert_eq!(code, 0, "{}", err);
    let (code, _, err) = run(p, &["-r", "r.json", "-d", "w", "pack"]);
    assert_eq!(code, 0, "{}", err);
    assert!(p.join("r.tar.gz").is_file());
}

/// Was: `io:qd=4096,workers=64,bs=1M` — each value accepted, together 256 GiB of buffers — was
/// killed by the OOM killer.
#[test]
fn io_buffers_beyond_the_hosts_memory_are_refused_before_any_io() {
    let d = tempfile::tempdir().unwrap();
    assert_usage(
        "256 GiB of buffers",
        run(
            d.path(),
            &[
                "-r",
                "r.json",
                "-d",
                "w",
                "run",
                "io:qd=4096,workers=64,bs=1M,file-size=8M",
            ],
        ),
        "the IO buffers (qd x workers x bs) take 256G",
    );
    assert!(!d.path().join("w/scratch").exists(), "no test file written");
}

/// A small tmpfs mounted for a test, unmounted when dropped.
struct SmallFs(PathBuf);

impl SmallFs {
    /// `None` where mounting isn't allowed (not root, no mount permission).
    fn mount(at: &Path, size: &str) -> Option<SmallFs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={}", size), "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallFs(at.to_path_buf()))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Was: a save that hit a full disk failed clearly and left the old file, but deleted the
/// complete entries with its temporary file. Now they are kept where there is room (the
/// temporary directory) and the error says where.
#[test]
fn a_save_on_a_full_disk_keeps_the_entries_elsewhere() {
    let d = tempfile::tempdir().unwrap();
    let full = d.path().join("full");
    let Some(_fs) = SmallFs::mount(&full, "1m") else {
        eprintln!("can't mount a tmpfs here: skipped");
        return;
    };
    let child = slow_run(&full);
    wait_for("the first checkpoint", || full.join("r.json").exists());
    // Fill what is left.
    let mut f = std::fs::File::create(full.join("filler")).unwrap();
    let block = vec![7u8; 4096];
    while f.write_all(&block).is_ok() {}
    drop(f);
    let (code, err) = stderr_of(child);
    assert_eq!(code, 1, "{}", err);
    assert!(err.contains("No space left"), "{}", err);
    let kept = kept_path(&full, &err);
    assert!(
        !kept.starts_with(&full),
        "kept on the full disk? {}",
        kept.display()
    );
    assert_eq!(kinds_and_ids(&kept), ["selftest:a"]);
    std::fs::remove_file(&kept).unwrap();
    // The file on the full disk is the last complete save.
    assert_eq!(kinds_and_ids(&full.join("r.json")), ["selftest:a"]);
}

/// Was: a latency target missed at a curve's lowest point but met higher up (a curve that
/// isn't monotonic) was reported as "missed even at the lowest point".
#[test]
fn a_target_met_above_a_missed_lowest_point_is_said_so() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let spec = "curve:mode=qd,qd=4,points=1/2/4,dur=1s,file-size=8M,lat-target=p99/10s";
    let (code, _, err) = run(p, &["-r", "r.json", "-d", "w", "run", spec]);
    assert_eq!(code, 0, "{}", err);
    // Noise, as it may come: the lowest point's p99 far above the target, the others well in.
    let path = p.join("r.json");
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for run in v[0]["record"]["runs"].as_array_mut().unwrap() {
        for pt in run["points"].as_array_mut().unwrap() {
            let ns = if pt["qd"] == 1 {
                20_000_000_000u64
            } else {
                1_000
            };
            for x in pt["lat_pcts"].as_array_mut().unwrap() {
                x[1] = Value::from(ns);
            }
        }
    }
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    let (code, _, err) = run(p, &["-r", "r.json", "study", "curve"]);
    assert_eq!(code, 0, "{}", err);
    let (code, out, err) = run(p, &["-r", "r.json", "format", "curve"]);
    assert_eq!(code, 0, "{}", err);
    assert!(out.contains("though met at qd=2"), "{}", out);
    assert!(!out.contains("missed even at"), "{}", out);
}

/// Was: a small gzip bomb took gigabytes of memory before it was refused. Under a 512 MiB
/// address-space limit a 1.25 GiB bomb (20 members of 64 MiB of zeros, 1.3 MB in all) must be
/// refused in one line, not abort for want of memory.
#[test]
fn a_gzip_bomb_is_refused_within_little_memory() {
    use std::os::unix::process::CommandExt;
    let d = tempfile::tempdir().unwrap();
    let member = {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&vec![0u8; 64 << 20]).unwrap();
        e.finish().unwrap()
    };
    let bomb: Vec<u8> = member.repeat(20);
    std::fs::write(d.path().join("bomb.json.gz"), &bomb).unwrap();
    let mut c = std::process::Command::new(BIN);
    c.current_dir(d.path())
        .args(["-r", "bomb.json.gz", "summary"])
        .stdout(std::process::Stdio::null());
    // SAFETY: setrlimit between fork and exec touches only the child.
    unsafe {
        c.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 512 << 20,
                rlim_max: 512 << 20,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{:?}: {}", out.status, err);
    assert!(err.contains("too large"), "{}", err);
    assert_eq!(err.lines().count(), 1, "{}", err);
}
