//! The guest side: this binary as /init (PID 1) of the VM. It loads the kernel modules, mounts
//! the kernel filesystems, cgroup2, the scratch disk and the shared working directory, turns swap
//! on, runs the command with its stdout/stderr on virtio-serial ports, reports the exit status on
//! the control port and powers the VM off.

mod command;
mod net;
mod sys;
pub mod systemd;

use crate::vm::protocol::{GUEST_CONFIG, PORT_CTL};
use anyhow::{bail, Context, Result};
use command::{run_command, run_then_power_off};
use std::fs::File;
use std::path::Path;
use sys::{load_module, log, mount, open_port, read_config, write};

/// True when this process is the init of a `resctl-bench vm` guest.
pub fn is_vm_init() -> bool {
    std::process::id() == 1 && Path::new(GUEST_CONFIG).exists()
}

/// Guest init: never returns; always ends by powering the VM off.
pub fn init_main() -> ! {
    run_then_power_off(init)
}

fn init(ctl_out: &mut Option<File>) -> Result<i32> {
    mount_basics()?;
    let cfg = read_config()?;
    for m in &cfg.modules {
        let params = cfg
            .module_params
            .iter()
            .find(|(p, _)| p == m)
            .map_or("", |(_, v)| v.as_str());
        load_module(m, params)?;
    }
    *ctl_out = Some(open_port(PORT_CTL)?);
    log(
        ctl_out,
        cfg.verbose,
        format!("loaded {} modules", cfg.modules.len()),
    );
    if let Some(serial) = &cfg.systemd_root {
        // Returns only when it failed before handing over to systemd.
        systemd::switch_root(&cfg, serial, ctl_out)?;
    }
    mount_cgroups()?;
    run_command(&cfg, ctl_out, true)
}

/// The kernel's file systems init needs before anything else.
pub(super) fn mount_basics() -> Result<()> {
    for (src, dir, fs) in [
        ("proc", "/proc", "proc"),
        ("sysfs", "/sys", "sysfs"),
        ("devtmpfs", "/dev", "devtmpfs"),
        ("tmpfs", "/tmp", "tmpfs"),
        ("tmpfs", "/run", "tmpfs"),
    ] {
        mount(src, Path::new(dir), fs, "")?;
    }
    let _ = mount("tmpfs", Path::new("/dev/shm"), "tmpfs", "");
    Ok(())
}

/// cgroup2 with every available controller enabled at the root (cpu, io and memory are
/// required), tracefs and debugfs.
fn mount_cgroups() -> Result<()> {
    let cg = Path::new("/sys/fs/cgroup");
    mount("cgroup2", cg, "cgroup2", "memory_recursiveprot")?;
    let ctrls = std::fs::read_to_string(cg.join("cgroup.controllers"))
        .context("reading cgroup.controllers")?;
    let enable: Vec<String> = ctrls
        .split_whitespace()
        .map(|c| format!("+{}", c))
        .collect();
    write("/sys/fs/cgroup/cgroup.subtree_control", &enable.join(" "))?;
    for need in ["cpu", "io", "memory"] {
        if !ctrls.split_whitespace().any(|c| c == need) {
            bail!("the guest kernel has no cgroup2 {} controller", need);
        }
    }
    mount("tracefs", Path::new("/sys/kernel/tracing"), "tracefs", "")?;
    let _ = mount("debugfs", Path::new("/sys/kernel/debug"), "debugfs", "");
    let _ = std::fs::write("/proc/sys/kernel/hostname", "resctl-vm");
    Ok(())
}
