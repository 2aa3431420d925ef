//! Running the guest command: the scratch disk, the shared directory and swap around it, the
//! heartbeat while it runs, the exit status to the host and the power-off after it; shared by
//! the builtin init and the agent of a systemd guest.

use super::sys::{
    bind_mount, cstr, find_disk, log, make_swap, mount, open_port, send, wait_for, write,
};
use crate::vm::protocol::{Event, GuestConfig, HEARTBEAT_EVERY, PORT_ERR, PORT_OUT, SHARE_TAG};
use anyhow::{Context, Result};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs `body` (which may open the control port), tells the host how it ended and powers the
/// VM off: PID 1 of a builtin guest, the agent unit of a systemd one.
pub(super) fn run_then_power_off(body: fn(&mut Option<File>) -> Result<i32>) -> ! {
    let mut ctl: Option<File> = None;
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut ctl)));
    let ev = match res {
        Ok(Ok(code)) => Event::Exit { code },
        Ok(Err(e)) => Event::Error {
            msg: format!("{:#}", e),
        },
        Err(_) => Event::Error {
            msg: "vm-init panicked".into(),
        },
    };
    if let Event::Error { msg } = &ev {
        crate::errln!("vm-init: error: {}", msg);
    }
    if let Some(ctl) = ctl.as_mut() {
        let _ = send(ctl, &ev);
    }
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    // reboot() only returns on failure; PID 1 must not exit.
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Mounts the scratch disk and the shared directory, turns swap on, runs the command and takes
/// it all down again; `pid1` when this process is the guest's init (which reaps and kills
/// whatever is left), not a systemd unit.
pub(super) fn run_command(
    cfg: &GuestConfig,
    ctl_out: &mut Option<File>,
    pid1: bool,
) -> Result<i32> {
    let v = cfg.verbose;
    let out = open_port(PORT_OUT)?;
    let err = open_port(PORT_ERR)?;
    let (disk, dev) = scratch_disk(cfg)?;

    // Mount the scratch fs and the shared cwd, shallower first so nesting works either way.
    let scratch = PathBuf::from(&cfg.scratch_dir);
    let cwd = PathBuf::from(&cfg.cwd);
    let mut mounts = [(scratch.clone(), true), (cwd.clone(), false)];
    mounts.sort_by_key(|(p, _)| p.components().count());
    for (target, is_scratch) in &mounts {
        if *is_scratch {
            mount(&dev, target, "ext4", "noinit_itable")?;
        } else {
            mount(
                SHARE_TAG,
                target,
                "9p",
                "trans=virtio,version=9p2000.L,msize=262144,access=any",
            )?;
        }
    }
    // The per-second reports go to the host directory next to the `-r` result (over 9p, which
    // also keeps their IO off the scratch disk being measured).
    let reports_bind = match &cfg.reports_dir {
        Some(src) => {
            let target = crate::report::reports_dir(&scratch);
            bind_mount(Path::new(src), &target)?;
            log(
                ctl_out,
                v,
                format!("reports: {} bound at {}", src, target.display()),
            );
            Some(target)
        }
        None => None,
    };
    let swapfile = scratch.join("swapfile");
    if cfg.swap_size > 0 {
        make_swap(&swapfile, cfg.swap_size)?;
    }
    log(
        ctl_out,
        v,
        format!(
            "scratch disk /dev/{} ({}) at {}, swap {} bytes",
            disk,
            cfg.serial,
            scratch.display(),
            cfg.swap_size
        ),
    );

    // No command (`vm --ssh-port` alone): the guest serves SSH until it is powered off, which
    // stops this unit with SIGTERM, taken here as the end of a command that went well. Blocked
    // before the heartbeat thread starts, so that thread doesn't take it either.
    let serve = cfg.args.is_empty();
    if serve {
        block_stop_signals();
    }
    announce_ready(ctl_out)?;
    let code = if serve {
        log(
            ctl_out,
            v,
            "no command: serving SSH until the guest is powered off".into(),
        );
        wait_stop_signal();
        0
    } else {
        spawn_command(cfg, &cwd, out, err)?
    };
    let swap = (cfg.swap_size > 0).then_some(swapfile.as_path());
    let unmount: Vec<&Path> = reports_bind
        .iter()
        .map(PathBuf::as_path)
        .chain(mounts.iter().rev().map(|(t, _)| t.as_path()))
        .collect();
    tear_down(swap, &unmount, pid1);
    Ok(code)
}

/// Runs the command to its end: its exit code.
fn spawn_command(cfg: &GuestConfig, cwd: &Path, out: File, err: File) -> Result<i32> {
    let child = std::process::Command::new("/proc/self/exe")
        .arg0("resctl-bench")
        .args(&cfg.args)
        .current_dir(cwd)
        .env_clear()
        .envs(cfg.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .context("starting the command")?;
    Ok(reap_until(child.id() as libc::pid_t))
}

fn stop_signals() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is initialized by sigemptyset before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
    }
    set
}

fn block_stop_signals() {
    let set = stop_signals();
    // SAFETY: a valid set; the old mask isn't wanted.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Waits for SIGTERM or SIGINT (blocked by [`block_stop_signals`]).
fn wait_stop_signal() {
    let set = stop_signals();
    let mut sig = 0;
    // SAFETY: a valid set and out-parameter; sigwait only fails for an invalid set.
    while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
}

/// The scratch disk (found by its serial), marked rotational or not as configured: its block
/// device name and device node.
pub(super) fn scratch_disk(cfg: &GuestConfig) -> Result<(String, String)> {
    let disk = wait_for("the scratch disk", Duration::from_secs(10), || {
        find_disk(&cfg.serial)
    })?;
    write(
        &format!("/sys/block/{}/queue/rotational", disk),
        if cfg.rotational { "1" } else { "0" },
    )?;
    let dev = format!("/dev/{}", disk);
    wait_for(&dev, Duration::from_secs(5), || {
        Path::new(&dev).exists().then_some(())
    })?;
    Ok((disk, dev))
}

/// Tells the host the guest is up; from then on init stays in memory (so a guest thrashing
/// under a memory hog still answers; not inherited by the command) and tells the host every
/// few seconds that the guest kernel is alive.
pub(super) fn announce_ready(ctl_out: &mut Option<File>) -> Result<()> {
    let uptime = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0);
    let Some(c) = ctl_out.as_mut() else {
        return Ok(());
    };
    send(c, &Event::Ready { uptime })?;
    unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if let Ok(mut hb) = c.try_clone() {
        std::thread::spawn(move || loop {
            std::thread::sleep(HEARTBEAT_EVERY);
            if send(&mut hb, &Event::Heartbeat).is_err() {
                return;
            }
        });
    }
    Ok(())
}

/// After the command: stops leftovers (as init), then takes swap and the mounts (deepest first) down
/// cleanly (matters with --keep).
pub(super) fn tear_down(swapfile: Option<&Path>, mounts: &[&Path], pid1: bool) {
    if pid1 {
        unsafe {
            libc::kill(-1, libc::SIGKILL);
        }
    }
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
    if let Some(p) = swapfile.and_then(|p| cstr(p).ok()) {
        unsafe { libc::swapoff(p.as_ptr()) };
    }
    unsafe { libc::sync() };
    for target in mounts {
        if let Ok(t) = cstr(target) {
            unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// As PID 1, reaps every child until `pid` ends; returns its exit code (128 + signal when
/// killed by a signal, as shells report it).
pub(super) fn reap_until(pid: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return 1;
        }
        if r == pid {
            if libc::WIFEXITED(status) {
                return libc::WEXITSTATUS(status);
            }
            if libc::WIFSIGNALED(status) {
                return 128 + libc::WTERMSIG(status);
            }
        }
    }
}
