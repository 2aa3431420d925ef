//! The guest side: this binary as /init (PID 1) of the VM. It loads the kernel modules, mounts
//! the kernel filesystems, cgroup2, the scratch disk and the shared working directory, turns swap
//! on, runs the command with its stdout/stderr on virtio-serial ports, reports the exit status on
//! the control port and powers the VM off.

use super::protocol::{
    Event, GuestConfig, GUEST_CONFIG, HEARTBEAT_EVERY, PORT_CTL, PORT_ERR, PORT_OUT, SHARE_TAG,
};
use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// True when this process is the init of a `resctl-bench vm` guest.
pub fn is_vm_init() -> bool {
    std::process::id() == 1 && Path::new(GUEST_CONFIG).exists()
}

/// Guest init: never returns; always ends by powering the VM off.
pub fn init_main() -> ! {
    run_then_power_off(init)
}

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

pub(super) fn send(ctl: &mut File, ev: &Event) -> Result<()> {
    let mut line = serde_json::to_vec(ev)?;
    line.push(b'\n');
    ctl.write_all(&line)?;
    Ok(())
}

pub(super) fn log(ctl: &mut Option<File>, verbose: u8, msg: String) {
    if verbose > 0 {
        crate::errln!("vm-init: {}", msg);
    }
    if let Some(c) = ctl.as_mut() {
        let _ = send(c, &Event::Log { msg });
    }
}

pub(super) fn cstr(s: impl AsRef<std::ffi::OsStr>) -> Result<CString> {
    CString::new(s.as_ref().as_bytes()).context("path contains a NUL byte")
}

pub(crate) fn mount(src: &str, target: &Path, fstype: &str, data: &str) -> Result<()> {
    std::fs::create_dir_all(target).with_context(|| format!("mkdir {}", target.display()))?;
    let (s, t, f, d) = (cstr(src)?, cstr(target)?, cstr(fstype)?, cstr(data)?);
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            f.as_ptr(),
            0,
            d.as_ptr() as *const libc::c_void,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        bail!(
            "mount -t {} {} {} -o {:?}: {}",
            fstype,
            src,
            target.display(),
            data,
            e
        );
    }
    Ok(())
}

/// `mount --bind src target` (target created when missing).
fn bind_mount(src: &Path, target: &Path) -> Result<()> {
    std::fs::create_dir_all(target).with_context(|| format!("mkdir {}", target.display()))?;
    let (s, t) = (cstr(src)?, cstr(target)?);
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "mount --bind {} {}: {}",
            src.display(),
            target.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn load_module(path: &str, params: &str) -> Result<()> {
    let f = File::open(path).with_context(|| format!("opening {}", path))?;
    let params = std::ffi::CString::new(params).context("module parameters")?;
    let rc = unsafe {
        use std::os::fd::AsRawFd;
        libc::syscall(libc::SYS_finit_module, f.as_raw_fd(), params.as_ptr(), 0)
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            bail!("loading module {}: {}", path, e);
        }
    }
    Ok(())
}

pub(super) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > timeout {
            bail!("timed out waiting for {}", what);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// virtio-serial port name → /dev node, from /sys/class/virtio-ports/*/name.
fn find_port(name: &str) -> Option<PathBuf> {
    for ent in std::fs::read_dir("/sys/class/virtio-ports").ok()?.flatten() {
        let n = std::fs::read_to_string(ent.path().join("name")).unwrap_or_default();
        if n.trim() == name {
            return Some(Path::new("/dev").join(ent.file_name()));
        }
    }
    None
}

pub(super) fn open_port(name: &str) -> Result<File> {
    let dev = wait_for(
        &format!("virtio-serial port {}", name),
        Duration::from_secs(10),
        || find_port(name).filter(|p| p.exists()),
    )?;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&dev)
        .with_context(|| format!("opening {}", dev.display()))
}

/// The scratch disk: the block device whose serial is the one the host gave it.
pub(super) fn find_disk(serial: &str) -> Option<String> {
    for ent in std::fs::read_dir("/sys/block").ok()?.flatten() {
        let s = std::fs::read_to_string(ent.path().join("serial")).unwrap_or_default();
        if s.trim() == serial {
            return Some(ent.file_name().to_string_lossy().into_owned());
        }
    }
    None
}

/// Writes a swap header ("SWAPSPACE2", version 1) to the first page of `f`, which is `size`
/// bytes long.
pub(crate) fn write_swap_header(f: &mut File, size: u64) -> Result<()> {
    use std::io::{Seek, SeekFrom};
    let page = 4096usize;
    let pages = size / page as u64;
    if pages < 10 {
        bail!("swap size {} is too small", size);
    }
    let mut hdr = vec![0u8; page];
    hdr[1024..1028].copy_from_slice(&1u32.to_le_bytes());
    hdr[1028..1032].copy_from_slice(&((pages - 1) as u32).to_le_bytes());
    // nr_badpages = 0; uuid: something unique enough for a disposable disk.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    hdr[1036..1052].copy_from_slice(&t.to_le_bytes());
    hdr[1052..1062].copy_from_slice(b"resctl-vm\0");
    hdr[page - 10..].copy_from_slice(b"SWAPSPACE2");
    f.seek(SeekFrom::Start(0))?;
    f.write_all(&hdr)?;
    Ok(())
}

fn make_swap(path: &Path, size: u64) -> Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, size as libc::off_t) };
    if rc != 0 {
        bail!(
            "fallocate {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    write_swap_header(&mut f, size)?;
    f.sync_all()?;
    drop(f);
    let p = cstr(path)?;
    if unsafe { libc::swapon(p.as_ptr(), 0) } != 0 {
        bail!(
            "swapon {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn write(path: &str, val: &str) -> Result<()> {
    std::fs::write(path, val).with_context(|| format!("writing {:?} to {}", val, path))
}

pub(super) fn read_config() -> Result<GuestConfig> {
    serde_json::from_slice(
        &std::fs::read(GUEST_CONFIG).with_context(|| format!("reading {}", GUEST_CONFIG))?,
    )
    .context("parsing the guest configuration")
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
        super::guest_systemd::switch_root(&cfg, serial, ctl_out)?;
    }
    mount_cgroups()?;
    run_command(&cfg, ctl_out, true)
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

    announce_ready(ctl_out)?;
    let child = std::process::Command::new("/proc/self/exe")
        .arg0("resctl-bench")
        .args(&cfg.args)
        .current_dir(&cwd)
        .env_clear()
        .envs(cfg.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .context("starting the command")?;
    let code = reap_until(child.id() as libc::pid_t);
    let swap = (cfg.swap_size > 0).then_some(swapfile.as_path());
    let unmount: Vec<&Path> = reports_bind
        .iter()
        .map(PathBuf::as_path)
        .chain(mounts.iter().rev().map(|(t, _)| t.as_path()))
        .collect();
    tear_down(swap, &unmount, pid1);
    Ok(code)
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

/// The scratch disk (found by its serial), marked rotational or not as configured: its block
/// device name and device node.
fn scratch_disk(cfg: &GuestConfig) -> Result<(String, String)> {
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
fn announce_ready(ctl_out: &mut Option<File>) -> Result<()> {
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
fn tear_down(swapfile: Option<&Path>, mounts: &[&Path], pid1: bool) {
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
fn reap_until(pid: libc::pid_t) -> i32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_header_has_signature_and_last_page() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swap");
        let mut f = File::create(&path).unwrap();
        f.set_len(1 << 20).unwrap();
        write_swap_header(&mut f, 1 << 20).unwrap();
        drop(f);
        let data = std::fs::read(&path).unwrap();
        assert_eq!(&data[4086..4096], b"SWAPSPACE2");
        assert_eq!(u32::from_le_bytes(data[1024..1028].try_into().unwrap()), 1);
        assert_eq!(
            u32::from_le_bytes(data[1028..1032].try_into().unwrap()),
            255
        );
        let mut small = File::create(dir.path().join("s")).unwrap();
        assert!(write_swap_header(&mut small, 8192).is_err());
    }
}
