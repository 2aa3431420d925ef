//! Helpers shared by the test files (`mod common;`).

use serde_json::Value;
use std::process::{Command, Output};

#[allow(dead_code)]
pub const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

/// Whether VM tests run (RESCTL_BENCH_VM_TESTS=1); says why not otherwise.
pub fn enabled() -> bool {
    if std::env::var("RESCTL_BENCH_VM_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: set RESCTL_BENCH_VM_TESTS=1 to boot VM guests");
    false
}

/// Asserts that the command exited 0 and returns its stdout parsed as JSON.
#[allow(dead_code)]
pub fn ok_json(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({}):\n{}\nstderr:\n{}",
            e,
            String::from_utf8_lossy(&out.stdout),
            stderr
        )
    })
}

/// `resctl-bench vm --mem MEM --disk-size 4G --timeout TIMEOUT` run in `cwd`; the caller adds
/// its own vm options, `--` and the command.
#[allow(dead_code)]
pub fn vm_command(cwd: &std::path::Path, mem: &str, timeout: &str) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(cwd).args([
        "vm",
        "--mem",
        mem,
        "--disk-size",
        "4G",
        "--timeout",
        timeout,
    ]);
    c
}

/// What `resctl-bench vm` says when the VM itself, not the command in it, failed: a guest that
/// froze (under TCG a guest kernel has stalled for good once in a few hundred boots, its
/// timers no longer firing), crashed or never got going.
const VM_FAILURES: [&str; 4] = [
    "vm: the guest sent no heartbeat for",
    "vm: the command ran longer than --timeout",
    "vm: the VM ended without reporting the command's exit status",
    "vm: the command did not start within --boot-timeout",
];

/// Runs the `vm` command `make` builds; when the VM itself failed, says so with its stderr
/// and runs it once more, from the files its working directory held before the first try
/// (what the failed guest wrote there — a finished result, reports — is removed, or the
/// second try would resume or reuse it). A command that fails in a working VM, or a VM that
/// fails twice, still fails the test.
#[allow(dead_code)]
pub fn vm_output(mut make: impl FnMut() -> Command) -> Output {
    let mut first = make();
    let before = first
        .get_current_dir()
        .map(|d| (d.to_path_buf(), entries(d)));
    let out = first.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(0) || !VM_FAILURES.iter().any(|m| stderr.contains(m)) {
        return out;
    }
    eprintln!(
        "warning: the VM failed, running the command once more; its stderr:\n{}",
        stderr
    );
    keep_failed_try(&format!("{:?}", first), &stderr);
    if let Some((dir, old)) = before {
        for new in entries(&dir).difference(&old) {
            let p = dir.join(new);
            eprintln!("removing {} (written by the failed try)", p.display());
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
    }
    make().output().unwrap()
}

/// Appends a failed VM try's evidence (`what` it was, its output) to target/vm-failed-tries.log:
/// a test that passes on its retry drops its captured output, and a flaky guest should still
/// leave its evidence beside the other VM logs.
#[allow(dead_code)]
pub fn keep_failed_try(what: &str, text: &str) {
    let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vm-failed-tries.log");
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
    {
        use std::io::Write;
        let _ = writeln!(f, "=== {}\n{}", what, text);
    }
}

/// The names in `dir` (none when it can't be read).
fn entries(dir: &std::path::Path) -> std::collections::BTreeSet<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// `scripts/build-deb --bin BIN --out OUT`: the package's path.
#[allow(dead_code)]
pub fn build_deb(bin: &std::path::Path, out: &std::path::Path) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(root.join("scripts/build-deb"))
        .arg("--bin")
        .arg(bin)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

/// The release binary the measuring VM tests run (a debug hashd under TCG is too slow).
#[allow(dead_code)]
pub fn release_bin() -> std::path::PathBuf {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/resctl-bench");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release --features testaid` first (scripts/test does, through scripts/setup-vm)",
        p.display()
    );
    p
}

/// Asserts that `text` (what `what` names: a summary, a log…) contains every string of `wants`.
#[allow(dead_code)]
pub fn assert_has_all(text: &str, wants: &[&str], what: &str) {
    for w in wants {
        assert!(text.contains(w), "{} lacks {:?}:\n{}", what, w, text);
    }
}

/// With RESCTL_BENCH_VM_KEEP=1, copies a VM test's result file `result` and its per-second
/// reports (`<stem>-report.d` beside it) to `target/vm-results/NAME.json` and
/// `NAME-report.d`, for `scripts/report-compare`; without it, does nothing.
#[allow(dead_code)]
pub fn keep_result(result: &std::path::Path, name: &str) {
    if std::env::var("RESCTL_BENCH_VM_KEEP").as_deref() != Ok("1") || !result.is_file() {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/vm-results");
    let reports = dir.join(format!("{}-report.d", name));
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::copy(result, dir.join(format!("{}.json", name))).unwrap();
    let stem = result.file_stem().unwrap().to_string_lossy().into_owned();
    let src = result.with_file_name(format!("{}-report.d", stem));
    for e in std::fs::read_dir(&src).into_iter().flatten().flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), reports.join(e.file_name())).unwrap();
        }
    }
    eprintln!("kept {} as {}", result.display(), dir.join(name).display());
}

/// Whether VM tests keep their result files (RESCTL_BENCH_VM_KEEP=1, see [`keep_result`]).
#[allow(dead_code)]
pub fn keeping() -> bool {
    std::env::var("RESCTL_BENCH_VM_KEEP").as_deref() == Ok("1")
}

/// The write end of a pipe whose read end is closed (a stdout or stderr nobody reads).
#[allow(dead_code)]
pub fn broken_pipe() -> std::fs::File {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) into a two-element array; the read end is ours to close, the write end
    // becomes the File.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::close(fds[0]);
        <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[1])
    }
}

/// Runs the binary in `cwd` with `args`, stdin empty, stdout dropped: its exit code and
/// stderr. Killed after `limit`, failing the test (a hang).
#[allow(dead_code)]
pub fn run_bounded(
    cwd: &std::path::Path,
    args: &[String],
    limit: std::time::Duration,
) -> (Option<i32>, String) {
    use std::process::Stdio;
    let mut child = Command::new(BIN)
        .current_dir(cwd)
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{:?}: still running after {:?}", args, limit);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    (status.code(), reader.join().unwrap())
}

/// The entries of a gzipped result file in tests/fixtures/results (`NAME.json.gz`).
#[allow(dead_code)]
pub fn fixture_entries(name: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results")
        .join(format!("{}.json.gz", name));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    serde_json::from_reader(flate2::read::GzDecoder::new(file)).unwrap()
}

/// The log of the `seq` command running `cmd`, from `stderr` (`seq` marks where each begins).
#[allow(dead_code)]
pub fn log_of<'a>(stderr: &'a str, cmd: &str) -> &'a str {
    let mark = format!("seq: running {}\n", cmd);
    let from = stderr
        .find(&mark)
        .unwrap_or_else(|| panic!("no {:?} in the log:\n{}", mark, stderr));
    let rest = &stderr[from + mark.len()..];
    &rest[..rest.find("seq: running ").unwrap_or(rest.len())]
}
