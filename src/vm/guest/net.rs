//! The guest's network for `vm --ssh-port`: its one virtio-net interface up at the address
//! QEMU's user networking gives a guest (10.0.2.15/24), with no route beyond that link: the
//! host reaches the guest's SSH server through QEMU's forward on its 127.0.0.1, nothing else.

use anyhow::{bail, Context, Result};

/// The guest's address on QEMU's user network, where its port forwards deliver.
const ADDR: [u8; 4] = [10, 0, 2, 15];
const MASK: [u8; 4] = [255, 255, 255, 0];

/// The first interface that isn't loopback (the virtio-net one), waited for while udev names
/// it.
fn interface() -> Result<String> {
    super::sys::wait_for(
        "the network interface",
        std::time::Duration::from_secs(10),
        || {
            let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
                .ok()?
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "lo")
                .collect();
            names.sort();
            names.into_iter().next()
        },
    )
}

fn ifreq(name: &str) -> Result<libc::ifreq> {
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= r.ifr_name.len() {
        bail!("interface name {:?} is too long", name);
    }
    for (d, s) in r.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

fn sockaddr(ip: [u8; 4]) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(ip),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size; the kernel reads it as sockaddr_in.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn ioctl(fd: libc::c_int, req: libc::c_ulong, r: &mut libc::ifreq, what: &str) -> Result<()> {
    // SAFETY: `r` is a valid ifreq for these requests.
    if unsafe { libc::ioctl(fd, req, r as *mut libc::ifreq) } != 0 {
        bail!("{}: {}", what, std::io::Error::last_os_error());
    }
    Ok(())
}

/// Brings the interface up at 10.0.2.15/24; returns its name.
pub(super) fn up() -> Result<String> {
    let name = interface()?;
    // SAFETY: a plain socket for the interface ioctls, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("socket for the interface ioctls");
    }
    let res = (|| {
        let mut r = ifreq(&name)?;
        r.ifr_ifru.ifru_addr = sockaddr(ADDR);
        ioctl(fd, libc::SIOCSIFADDR, &mut r, "setting the address")?;
        let mut r = ifreq(&name)?;
        r.ifr_ifru.ifru_netmask = sockaddr(MASK);
        ioctl(fd, libc::SIOCSIFNETMASK, &mut r, "setting the netmask")?;
        let mut r = ifreq(&name)?;
        ioctl(fd, libc::SIOCGIFFLAGS, &mut r, "reading the flags")?;
        // SAFETY: SIOCGIFFLAGS filled the flags member.
        unsafe { r.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        ioctl(fd, libc::SIOCSIFFLAGS, &mut r, "bringing it up")
    })();
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    res.with_context(|| format!("network interface {}", name))?;
    Ok(name)
}
