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
