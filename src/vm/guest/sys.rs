//! The guest's system calls and devices: mounts, modules, the virtio-serial ports and the
//! disks found by serial, swap files, the configuration the host put in.

use crate::vm::protocol::{Event, GuestConfig, GUEST_CONFIG};
use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
pub(super) fn bind_mount(src: &Path, target: &Path) -> Result<()> {
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

pub(super) fn load_module(path: &str, params: &str) -> Result<()> {
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
pub(super) fn find_port(name: &str) -> Option<PathBuf> {
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
pub(super) fn write_swap_header(f: &mut File, size: u64) -> Result<()> {
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

pub(super) fn make_swap(path: &Path, size: u64) -> Result<()> {
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

pub(super) fn write(path: &str, val: &str) -> Result<()> {
    std::fs::write(path, val).with_context(|| format!("writing {:?} to {}", val, path))
}

pub(super) fn read_config() -> Result<GuestConfig> {
    serde_json::from_slice(
        &std::fs::read(GUEST_CONFIG).with_context(|| format!("reading {}", GUEST_CONFIG))?,
    )
    .context("parsing the guest configuration")
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
