//! A result file survives SIGKILL at any moment of a save: afterwards it is always byte-for-byte
//! either the complete old or the complete new content.
//!
//! The saver is our real save code behind the hidden `__save-test` subcommand: it loads a large
//! real result file once, then forks children that save it over and over, alternating between
//! two distinct orders of the entries, and SIGKILLs each child at a random moment.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");
const KILLS_PER_FORMAT: u64 = 50;

fn fixture() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/results/Samsung_SSD_970_PRO_512GB.json.gz");
    assert!(p.exists(), "fixture {} is missing", p.display());
    p
}

/// Runs `__save-test --loops N` into `path` and returns the bytes it left.
fn saved_after(path: &Path, loops: u64) -> Vec<u8> {
    let out = Command::new(BIN)
        .arg("-r")
        .arg(path)
        .args(["__save-test", "--from"])
        .arg(fixture())
        .args(["--loops", &loops.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(path).unwrap()
}

fn temp_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let prefix = format!(".{}.tmp.", name);
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .collect()
}

fn kill_while_saving(name: &str, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    // The two contents the saver alternates between: one save = reversed, two = file order.
    let new = saved_after(&dir.path().join(format!("b-{}", name)), 1);
    let old = saved_after(&dir.path().join(format!("a-{}", name)), 2);
    assert_ne!(old, new);
    for bytes in [&old, &new] {
        let p = dir.path().join(format!("check-{}", name));
        std::fs::write(&p, bytes).unwrap();
        let entries = resctl_bench::result::load_entries(&p).unwrap();
        assert!(entries.len() >= 3, "fixture has {} entries", entries.len());
        let size = if name.ends_with(".gz") {
            resctl_bench::result::read_bytes(&p).unwrap().unwrap().len()
        } else {
            bytes.len()
        };
        assert!(size > 10_000_000, "content is only {} bytes", size);
    }

    let target = dir.path().join(name);
    std::fs::write(&target, &old).unwrap();
    let mut child = Command::new(BIN)
        .arg("-r")
        .arg(&target)
        .args(["__save-test", "--from"])
        .arg(fixture())
        .args(["--kills", &KILLS_PER_FORMAT.to_string()])
        .args(["--seed", &seed.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");

    let (mut saw_old, mut saw_new, mut mid_write) = (0, 0, 0);
    for k in 0..KILLS_PER_FORMAT {
        let line = lines.next().unwrap().unwrap();
        assert!(line.starts_with(&format!("killed {} ", k)), "{}", line);
        let now = std::fs::read(&target).unwrap();
        if now == old {
            saw_old += 1;
        } else if now == new {
            saw_new += 1;
        } else {
            panic!("{}: torn result file after kill {} ({})", name, k, line);
        }
        let temps = temp_files(dir.path(), name);
        if !temps.is_empty() {
            mid_write += 1;
        }
        for t in temps {
            std::fs::remove_file(t).unwrap();
        }
        writeln!(stdin, "next").unwrap();
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
    eprintln!(
        "{}: {} kills: old content {}, new content {}, killed mid-write {}",
        name, KILLS_PER_FORMAT, saw_old, saw_new, mid_write
    );
    assert!(saw_old > 0 && saw_new > 0);
    assert!(mid_write > 0, "no kill landed during a save");
    // The survivor is a loadable result file.
    assert!(!resctl_bench::result::load_entries(&target)
        .unwrap()
        .is_empty());
}

#[test]
fn sigkill_during_save_leaves_old_or_new_json() {
    kill_while_saving("result.json", 0x5eed_0001);
}

#[test]
fn sigkill_during_save_leaves_old_or_new_json_gz() {
    kill_while_saving("result.json.gz", 0x5eed_0002);
}
