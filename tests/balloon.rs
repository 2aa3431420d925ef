//! The balloon process on this host (no cgroup needed): it takes and touches the memory it is
//! asked for, gives it back when shrunk, and is gone once the handle is dropped.

use resctl_bench::system::mem::Balloon;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");
const MIB: u64 = 1 << 20;

fn rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid)).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

fn alive(pid: u32) -> bool {
    // A reaped child's /proc entry is gone; a zombie would show state Z.
    std::fs::read_to_string(format!("/proc/{}/status", pid))
        .map(|s| {
            !s.lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn balloon_holds_resizes_and_dies_with_its_handle() {
    let mut b = Balloon::start_exe(Path::new(BIN), None, 96 * MIB).unwrap();
    let pid = b.pid();
    assert_eq!(b.size(), 96 * MIB);
    let r = rss(pid).unwrap();
    assert!(r >= 96 * MIB, "rss {} after growing to 96M", r);
    b.resize(16 * MIB + 123).unwrap();
    assert_eq!(b.size(), 16 * MIB);
    let r = rss(pid).unwrap();
    assert!(r < 48 * MIB, "rss {} after shrinking to 16M", r);
    drop(b);
    assert!(!alive(pid), "balloon {} still running after drop", pid);

    let b = Balloon::start_exe(Path::new(BIN), None, 4 * MIB).unwrap();
    let pid = b.pid();
    b.stop().unwrap();
    assert!(!alive(pid));
}
