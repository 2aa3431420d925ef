//! Child processes we start must never outlive us.

use std::process::Command;

/// Makes the child of `cmd` die with us: SIGKILL on our death (`PR_SET_PDEATHSIG`), and an
/// immediate exit when we died before it got to exec. With `own_group` it also leads a process
/// group of its own (a terminal's Ctrl-C then reaches only us, and we stop it).
pub fn die_with_parent(cmd: &mut Command, own_group: bool) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: setpgid/prctl/getppid/_exit are async-signal-safe; nothing else runs in the child
    // before exec.
    unsafe {
        cmd.pre_exec(move || {
            if own_group {
                libc::setpgid(0, 0);
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// The executable `cmd` on `PATH` (then /usr/sbin and /sbin, where root's programs are).
pub fn which(cmd: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].iter().map(std::path::PathBuf::from))
        .map(|d| d.join(cmd))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// For a child of ours started held (`--held`, stdin a pipe): returns once the parent closes
/// that pipe, which it does when the child is in its cgroup. The kernel charges memory to the
/// cgroup a process is in when it touches the memory and leaves the charge there when the
/// process moves: a child working before its move (a move under systemd is a D-Bus round
/// trip) would leave its page cache or anon memory charged to our own, protected, cgroup.
pub fn wait_released() -> std::io::Result<()> {
    use std::io::Read;
    let mut rest = Vec::new();
    std::io::stdin().lock().read_to_end(&mut rest)?;
    Ok(())
}

/// For a forked child running our own code: SIGKILL when the parent dies.
pub fn die_with_parent_now() {
    // SAFETY: plain syscall on this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
}

/// CPU time the calling thread has used, seconds (0 if the clock can't be read).
pub fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// Why a process we started and did not stop ended, for the error that fails the run: a
/// signal with the kernel's OOM kills counted in its cgroup (`oom_kills`) is the kernel's OOM
/// killer, any other signal came from outside (another OOM killer, an operator), an exit
/// status is its own.
pub fn end_reason(what: &str, status: std::process::ExitStatus, oom_kills: u64) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(_) if oom_kills > 0 => format!(
            "{} was killed by the kernel's OOM killer ({} OOM kill(s) in its cgroup)",
            what, oom_kills
        ),
        Some(sig) => format!("{} was killed by signal {} from outside", what, sig),
        None => format!("{} exited ({})", what, status),
    }
}

#[cfg(test)]
mod end_tests {
    use super::end_reason;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    #[test]
    fn signals_are_told_apart_from_oom_kills_and_exits() {
        let killed = ExitStatus::from_raw(9);
        assert_eq!(
            end_reason("hashd", killed, 0),
            "hashd was killed by signal 9 from outside"
        );
        assert!(end_reason("the memory hog", killed, 2).contains("kernel's OOM killer (2 OOM"));
        assert_eq!(
            end_reason("hashd", ExitStatus::from_raw(1 << 8), 0),
            "hashd exited (exit status: 1)"
        );
    }
}
