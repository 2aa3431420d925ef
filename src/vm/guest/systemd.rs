//! The guest side of `vm --init systemd`: init (still this binary, PID 1 of the initramfs)
//! mounts the Debian root file system, puts this binary, the guest configuration and a unit
//! that runs it there, frees the initramfs and hands PID 1 over to systemd. systemd boots the
//! host as a real one boots, then starts that unit: this binary again, in agent mode, which runs
//! the command as builtin init does (scratch disk, shared directory, swap, heartbeat) and powers
//! the VM off.

use super::command::{run_command, run_then_power_off};
use super::sys::{self, cstr, mount};
use crate::vm::protocol::{GuestConfig, AGENT_ENV, AGENT_UNIT, GUEST_CONFIG};
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::path::Path;
use std::time::Duration;

const NEW_ROOT: &str = "/newroot";
/// Where the binary goes in the root file system.
const BIN: &str = "usr/local/bin/resctl-bench";

/// True in the agent unit of a `vm --init systemd` guest.
pub fn is_vm_agent() -> bool {
    std::env::var_os(AGENT_ENV).is_some_and(|v| v == "1") && Path::new(GUEST_CONFIG).exists()
}

/// The agent: never returns; powers the VM off when the command is done.
pub fn agent_main() -> ! {
    run_then_power_off(agent)
}

fn agent(ctl_out: &mut Option<File>) -> Result<i32> {
    let cfg = sys::read_config()?;
    *ctl_out = Some(sys::open_port(crate::vm::protocol::PORT_CTL)?);
    sys::log(
        ctl_out,
        cfg.verbose,
        "systemd is up; running the command".into(),
    );
    if cfg.ssh_keys.is_some() {
        let name = super::net::up()?;
        sys::log(
            ctl_out,
            cfg.verbose,
            format!("{} up at 10.0.2.15 for the SSH forward", name),
        );
    }
    run_command(&cfg, ctl_out, false)
}

/// The unit systemd starts once it is up (after dbus and systemd-oomd, so the command meets the
/// host as a user would).
fn unit_text() -> String {
    format!(
        "[Unit]\n\
         Description=resctl-bench vm: the command\n\
         Wants=dbus.service\n\
         After=dbus.service systemd-oomd.service systemd-udevd.service\n\
         \n\
         [Service]\n\
         Type=exec\n\
         Environment={}=1\n\
         ExecStart=/{}\n\
         StandardOutput=journal+console\n\
         StandardError=journal+console\n\
         OOMScoreAdjust=-1000\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        AGENT_ENV, BIN
    )
}

/// Prepares the root file system on the disk with `serial` and execs systemd in it. Returns
/// only with the error that kept it from doing so.
pub(super) fn switch_root(
    cfg: &GuestConfig,
    serial: &str,
    ctl_out: &mut Option<File>,
) -> Result<()> {
    let disk = sys::wait_for("the root file system disk", Duration::from_secs(10), || {
        sys::find_disk(serial)
    })?;
    let dev = format!("/dev/{}", disk);
    let new = Path::new(NEW_ROOT);
    mount(&dev, new, "ext4", "")?;
    install_agent(cfg, new)?;
    sys::log(
        ctl_out,
        cfg.verbose,
        format!("root file system on /dev/{}; starting systemd", disk),
    );
    // The control port is opened again by the agent; this descriptor closes on exec.
    free_initramfs();
    for m in ["/dev", "/proc", "/sys", "/run"] {
        move_mount(Path::new(m), &new.join(m.trim_start_matches('/')))?;
    }
    if let Ok(t) = cstr("/tmp") {
        unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) };
    }
    std::env::set_current_dir(new).context("chdir to the new root")?;
    move_mount(new, Path::new("/"))?;
    let dot = cstr(".")?;
    if unsafe { libc::chroot(dot.as_ptr()) } != 0 {
        bail!("chroot: {}", std::io::Error::last_os_error());
    }
    std::env::set_current_dir("/").context("chdir /")?;
    let init = cstr("/sbin/init")?;
    let argv = [init.as_ptr(), std::ptr::null()];
    unsafe { libc::execv(init.as_ptr(), argv.as_ptr()) };
    bail!("exec /sbin/init: {}", std::io::Error::last_os_error())
}

/// This binary, the configuration and the agent unit (enabled) in the new root.
fn install_agent(cfg: &GuestConfig, new: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let bin = new.join(BIN);
    if let Some(d) = bin.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::copy("/proc/self/exe", &bin)
        .with_context(|| format!("copying to {}", bin.display()))?;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))?;
    let mut cfg = cfg.clone();
    cfg.modules.clear();
    cfg.module_params.clear();
    std::fs::write(
        new.join(GUEST_CONFIG.trim_start_matches('/')),
        serde_json::to_vec_pretty(&cfg)?,
    )?;
    install_programs(&cfg, new)?;
    if let Some(keys) = &cfg.ssh_keys {
        install_ssh_keys(keys, new)?;
    }
    let units = new.join("etc/systemd/system");
    std::fs::write(units.join(AGENT_UNIT), unit_text())?;
    let wants = units.join("multi-user.target.wants");
    std::fs::create_dir_all(&wants)?;
    let link = wants.join(AGENT_UNIT);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("/etc/systemd/system/{}", AGENT_UNIT), &link)
        .context("enabling the agent unit")?;
    Ok(())
}

/// `--ssh-port`'s keys as root's authorized_keys (the image's sshd takes root logins by key).
fn install_ssh_keys(keys: &str, new: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = new.join("root/.ssh");
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    let file = dir.join("authorized_keys");
    std::fs::write(&file, keys).with_context(|| format!("writing {}", file.display()))?;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

/// The `--with-program` files, from the initramfs into the root file system: each program at
/// `/usr/local/bin/NAME` (ahead of the system's own in PATH), each library only where the
/// system has none (its own libc stays; the host's were built against the same release).
fn install_programs(cfg: &GuestConfig, new: &Path) -> Result<()> {
    for p in &cfg.programs {
        let name = Path::new(p).file_name().context("a program's name")?;
        let dst = new.join("usr/local/bin").join(name);
        std::fs::copy(p, &dst).with_context(|| format!("copying {} to {}", p, dst.display()))?;
    }
    for l in &cfg.program_libs {
        let dst = new.join(l.trim_start_matches('/'));
        if dst.exists() {
            continue;
        }
        if let Some(d) = dst.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::copy(l, &dst).with_context(|| format!("copying {} to {}", l, dst.display()))?;
    }
    Ok(())
}

fn move_mount(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).ok();
    let (f, t) = (cstr(from)?, cstr(to)?);
    let rc = unsafe {
        libc::mount(
            f.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_MOVE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "moving mount {} to {}: {}",
            from.display(),
            to.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// Removes the initramfs's files (this binary, the modules: tens of MiB of guest memory the
/// memory profile would otherwise count), staying on its file system: mount points are left.
fn free_initramfs() {
    use std::os::unix::fs::MetadataExt;
    let Ok(root_dev) = std::fs::symlink_metadata("/").map(|m| m.dev()) else {
        return;
    };
    fn rm(dir: &Path, dev: u64) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.dev() != dev {
                continue;
            }
            if m.is_dir() {
                rm(&p, dev);
                let _ = std::fs::remove_dir(&p);
            } else {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    rm(Path::new("/"), root_dev);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_runs_the_binary_in_agent_mode_after_dbus() {
        let u = unit_text();
        assert!(u.contains("Environment=RESCTL_BENCH_VM_AGENT=1\n"));
        assert!(u.contains("ExecStart=/usr/local/bin/resctl-bench\n"));
        assert!(u.contains("WantedBy=multi-user.target"));
        assert!(u.contains("After=dbus.service"));
    }
}
