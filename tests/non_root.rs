//! What a user without root is told: benches that change the host need root, and a kernel for
//! the VM that is there but unreadable is named as such, not reported missing. Run as root (CI),
//! the commands drop to `nobody`; run as a user, they run as that user.

use assert_cmd::Command;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

const NOBODY: u32 = 65534;

/// The binary, as a user without root.
fn unprivileged(cwd: &Path) -> Command {
    let mut std_cmd = std::process::Command::new(env!("CARGO_BIN_EXE_resctl-bench"));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std_cmd.uid(NOBODY).gid(NOBODY);
    }
    std_cmd.current_dir(cwd).env_remove("RUST_LOG");
    let mut c = Command::from_std(std_cmd);
    c.timeout(std::time::Duration::from_secs(30));
    c
}

/// A directory `nobody` may write in.
fn open_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

fn stderr_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).into_owned()
}

#[test]
fn benches_that_change_the_host_say_they_need_root() {
    let d = open_dir();
    let out = unprivileged(d.path())
        .args([
            "-r",
            "r.json",
            "-d",
            "work",
            "run",
            "storage",
            "hashd-params",
        ])
        .assert()
        .code(2);
    let err = stderr_of(&out);
    assert!(
        err.contains(
            "error: storage, hashd-params need root: they change cgroups, swap and kernel \
             settings of this host (and restores them); run resctl-bench as root (e.g. with \
             sudo), or try it in a throwaway VM: resctl-bench vm"
        ),
        "{}",
        err
    );
    assert!(
        !d.path().join("work").exists(),
        "nothing is set up before the refusal"
    );
    // A bench that doesn't touch the host runs as anyone.
    unprivileged(d.path())
        .args(["-r", "r.json", "run", "selftest:steps=1,step-time=0"])
        .assert()
        .code(0);
}

/// `run iocost-tune` with no iocost-qos run to work on puts upstream's iocost-qos job first,
/// which is a bench that changes the host.
#[test]
fn iocost_tune_without_iocost_qos_runs_it_first_which_needs_root() {
    let d = open_dir();
    let out = unprivileged(d.path())
        .args(["-r", "r.json", "-d", "work", "run", "iocost-tune"])
        .assert()
        .code(2);
    let err = stderr_of(&out);
    assert!(
        err.contains(
            "job[iocost-tune:-]: no finished iocost-qos run in the result file or before it on the \
             command line; running `iocost-qos:dither,vrate-max=125,vrate-intvs=25` first, as \
             its own job"
        ),
        "{}",
        err
    );
    assert!(
        err.contains("error: iocost-qos needs root: it changes cgroups"),
        "{}",
        err
    );
}

#[test]
fn an_unreadable_kernel_cache_is_named() {
    let host_kernel = os_release().map(|r| format!("/boot/vmlinuz-{}", r));
    if host_kernel.is_some_and(|k| Path::new(&k).exists()) {
        // The VM would take the host's kernel (or say it can't read it); nothing to show here.
        eprintln!("skipped: the host has its own kernel image");
        return;
    }
    let d = open_dir();
    let kernel = d.path().join("cache/resctl-bench/kernel");
    std::fs::create_dir_all(kernel.join("6.1.0-1-amd64/boot")).unwrap();
    std::fs::set_permissions(
        d.path().join("cache"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(
        d.path().join("cache/resctl-bench"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(&kernel, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = unprivileged(d.path())
        .env("XDG_CACHE_HOME", d.path().join("cache"))
        .args(["vm", "--", "doc"])
        .assert()
        .code(2);
    let err = stderr_of(&out);
    // Without qemu the tool check comes first; that message is tested elsewhere.
    if err.contains("is not installed") {
        eprintln!("skipped: {}", err.trim());
        return;
    }
    assert!(
        err.contains(&format!(
            "vm: the cached kernel in {} can't be read (Permission denied",
            kernel.display()
        )) && err.contains("run vm as that user (e.g. root)"),
        "{}",
        err
    );
    std::fs::set_permissions(&kernel, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn os_release() -> Option<String> {
    let text = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    Some(text.trim().to_string())
}
