//! The result file as users hand it to us: one writer at a time, saves through symlinks, and
//! paths or files that aren't result files (directories, FIFOs, huge or torn files) refused
//! with one line and exit 2, never a hang or an abort. Runs the hidden `selftest` bench.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

fn cmd(result: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("-r").arg(result).timeout(Duration::from_secs(30));
    c
}

/// Runs `args` and returns (exit code, stdout, stderr).
fn output(c: &mut Command, args: &[&str]) -> (i32, String, String) {
    let out = c.args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn kinds_and_ids(path: &Path) -> Vec<String> {
    resctl_bench::result::load_entries(path)
        .unwrap()
        .iter()
        .map(|e| format!("{}:{}", e.spec.kind, e.spec.id.as_deref().unwrap_or("-")))
        .collect()
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {}", what);
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two `run`s on one result file used to both report success while the file kept only one of
/// the two jobs. The second now fails at once naming the holder; readers keep working; a
/// SIGKILLed holder leaves no stale lock.
#[test]
fn a_second_writer_fails_at_once_and_a_killed_holder_leaves_no_stale_lock() {
    let dir = tempfile::tempdir().unwrap();
    let res = dir.path().join("r.json");
    let mut holder = std::process::Command::new(BIN)
        .arg("-r")
        .arg(&res)
        .args(["run", "selftest:id=a,steps=50,step-time=200ms"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The first checkpoint is on disk: the holder is well into its run.
    wait_for("the first checkpoint", || res.exists());

    let started = Instant::now();
    let (code, _, stderr) = output(&mut cmd(&res), &["run", "selftest:id=b,steps=1"]);
    assert_eq!(code, 2, "{}", stderr);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "didn't fail at once"
    );
    assert_eq!(stderr.lines().count(), 1, "{}", stderr);
    let want = format!("is in use by pid {} (", holder.id());
    assert!(stderr.contains(&want), "{}", stderr);
    assert!(
        stderr.contains("run selftest:id=a,steps=50"),
        "names the command: {}",
        stderr
    );
    for args in [
        &["study", "selftest:id=a"][..],
        &["solve", "selftest:id=a"],
        &["pack"],
    ] {
        let mode = args[0];
        let (code, _, stderr) = output(cmd(&res).current_dir(dir.path()), args);
        assert_eq!(code, 2, "{}: {}", mode, stderr);
        assert!(stderr.contains("is in use by pid"), "{}: {}", mode, stderr);
    }
    // Readers don't need the lock.
    let (code, _, stderr) = output(&mut cmd(&res), &["format"]);
    assert_eq!(code, 0, "{}", stderr);

    holder.kill().unwrap(); // SIGKILL: no chance to clean up
    holder.wait().unwrap();
    let (code, _, stderr) = output(&mut cmd(&res), &["run", "selftest:id=b,steps=1"]);
    assert_eq!(code, 0, "{}", stderr);
    assert_eq!(kinds_and_ids(&res), ["selftest:b", "selftest:a"]);
    assert!(
        !dir.path().join(".r.json.lock").exists(),
        "a finished run removes its lock file"
    );
}

/// A symlinked result file used to be replaced by a regular file, the target keeping the old
/// content.
#[test]
fn saves_through_a_symlink_replace_its_target_and_keep_the_link() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    let target = dir.path().join("store/real.json");
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink("store/real.json", &link).unwrap();

    // A dangling link: the first save creates its target.
    let (code, _, stderr) = output(&mut cmd(&link), &["run", "selftest:id=a,steps=1"]);
    assert_eq!(code, 0, "{}", stderr);
    let (code, _, stderr) = output(&mut cmd(&link), &["run", "selftest:id=b,steps=1"]);
    assert_eq!(code, 0, "{}", stderr);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(kinds_and_ids(&target), ["selftest:b", "selftest:a"]);
    let leftovers: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p != &link && !p.ends_with("store"))
        .collect();
    assert!(leftovers.is_empty(), "{:?}", leftovers);
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: plain syscall with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Asserts one error line containing `want` and exit 2.
fn assert_usage(what: &str, (code, _, stderr): (i32, String, String), want: &str) {
    assert_eq!(code, 2, "{}: {}", what, stderr);
    assert_eq!(stderr.lines().count(), 1, "{}: {}", what, stderr);
    assert!(
        stderr.contains(want),
        "{}: want {:?} in {}",
        what,
        want,
        stderr
    );
}

/// FIFOs waited forever, a 3 GB sparse file aborted (the reader reserved eight times its
/// size), directories and symlink loops exited 1, `pack` called a directory or FIFO missing, a
/// directory named `x.json.gz` was "not a valid gzip file", and a result or args path in a
/// missing directory was only found after the job had run.
#[test]
fn bad_paths_and_non_regular_files_get_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("fifo.json");
    mkfifo(&fifo);
    let sparse = d.join("sparse.json");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let gzdir = d.join("x.json.gz");
    std::fs::create_dir(&gzdir).unwrap();
    let loop_a = d.join("loop-a.json");
    std::os::unix::fs::symlink("loop-b.json", &loop_a).unwrap();
    std::os::unix::fs::symlink("loop-a.json", d.join("loop-b.json")).unwrap();
    let missing_dir = d.join("no/such/dir/r.json");
    let run = ["run", "selftest:steps=1"];

    for (path, args, want) in [
        (
            &fifo,
            &["summary"][..],
            "is a FIFO; the result file must be a regular file",
        ),
        (
            &fifo,
            &run[..],
            "is a FIFO; the result file must be a regular file",
        ),
        (
            &fifo,
            &["pack"][..],
            "is a FIFO; the result file must be a regular file",
        ),
        (&sparse, &["summary"][..], "too large to be a result file"),
        (&sparse, &run[..], "too large to be a result file"),
        (
            &d.to_path_buf(),
            &["summary"][..],
            "is a directory; the result file must be a regular file",
        ),
        (
            &d.to_path_buf(),
            &run[..],
            "is a directory; the result file must be a regular file",
        ),
        (
            &d.to_path_buf(),
            &["pack"][..],
            "is a directory; the result file must be a regular file",
        ),
        (
            &gzdir,
            &["format"][..],
            "is a directory; the result file must be a regular file",
        ),
        (
            &loop_a,
            &["summary"][..],
            "too many levels of symbolic links",
        ),
        (&loop_a, &run[..], "too many levels of symbolic links"),
        (&missing_dir, &run[..], "no/such/dir doesn't exist"),
    ] {
        let what = format!("-r {} {:?}", path.display(), args);
        let started = Instant::now();
        assert_usage(&what, output(cmd(path).current_dir(d), args), want);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{}: slow",
            what
        );
    }
    assert!(!d.join("no").exists());

    // A `-f` spec file that is a FIFO.
    assert_usage(
        "-f FIFO",
        output(
            &mut cmd(&d.join("r.json")),
            &["run", "-f", fifo.to_str().unwrap()],
        ),
        "is a FIFO; the spec file must be a regular file",
    );

    // Args files: a FIFO, and one in a missing directory (found before the job runs).
    let res = d.join("r.json");
    for (args_path, want) in [
        (&fifo, "is a FIFO; the args file must be a regular file"),
        (&missing_dir, "no/such/dir doesn't exist"),
    ] {
        let mut c = cmd(&res);
        c.arg("-a").arg(args_path);
        assert_usage("-a", output(&mut c, &run), want);
    }
    assert!(!res.exists(), "no job ran");
}

/// A result file gzip'ed in several members was read up to the first member only; bytes after
/// the JSON array or after the gzip data (torn tails of upstream's in-place saves) are now
/// ignored with one warning naming the offset.
#[test]
fn multi_member_gzip_is_read_whole_and_torn_tails_are_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("r.json");
    for id in ["a", "b"] {
        let spec = format!("selftest:id={},steps=1", id);
        let (code, _, stderr) = output(&mut cmd(&plain), &["run", &spec]);
        assert_eq!(code, 0, "{}", stderr);
    }
    let (_, want, _) = output(&mut cmd(&plain), &["summary"]);
    assert!(want.contains("selftest") && want.matches("[selftest ").count() == 2);
    let text = std::fs::read(&plain).unwrap();
    let gz = |data: &[u8]| {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    };

    let multi = dir.path().join("multi.json.gz");
    let half = text.len() / 2;
    let mut bytes = gz(&text[..half]);
    bytes.extend(gz(&text[half..]));
    std::fs::write(&multi, &bytes).unwrap();
    let (code, got, stderr) = output(&mut cmd(&multi), &["summary"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(got, want);

    let torn_gz = dir.path().join("torn.json.gz");
    let mut bytes = gz(&text);
    let end = bytes.len();
    bytes.extend(b"old tail of a longer file");
    std::fs::write(&torn_gz, &bytes).unwrap();
    let (code, got, stderr) = output(&mut cmd(&torn_gz), &["summary"]);
    assert_eq!(code, 0, "{}", stderr);
    assert_eq!(got, want);
    assert_eq!(stderr.lines().count(), 1, "{}", stderr);
    assert!(
        stderr.contains(&format!(
            "ignoring 25 bytes after the gzip data at offset {}",
            end
        )),
        "{}",
        stderr
    );

    let torn = dir.path().join("torn.json");
    let mut bytes = text.clone();
    let end = text.len();
    bytes.extend(b"\n  }\n]\n");
    std::fs::write(&torn, &bytes).unwrap();
    let (code, got, stderr) = output(&mut cmd(&torn), &["summary"]);
    assert_eq!(code, 0, "{}", stderr);
    assert_eq!(got, want);
    assert!(
        stderr.contains(&format!(
            "ignoring 7 bytes after the JSON array at offset {}",
            end
        )),
        "{}",
        stderr
    );
}
