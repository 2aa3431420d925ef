//! QEMU: choosing the accelerator (KVM only when it actually runs a virtual CPU) and the command
//! line of the guest.

use super::profiles::DiskLimits;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `__kvm-probe`: create a VM with one vCPU running a single `hlt` in real mode and check that
/// KVM_RUN comes back with KVM_EXIT_HLT. On hosts where KVM hangs, the parent kills us.
pub fn kvm_probe_child() -> Result<()> {
    const KVM_CREATE_VM: libc::c_ulong = 0xae01;
    const KVM_GET_VCPU_MMAP_SIZE: libc::c_ulong = 0xae04;
    const KVM_CREATE_VCPU: libc::c_ulong = 0xae41;
    const KVM_SET_USER_MEMORY_REGION: libc::c_ulong = 0x4020_ae46;
    const KVM_RUN: libc::c_ulong = 0xae80;
    const KVM_GET_SREGS: libc::c_ulong = 0x8138_ae83;
    const KVM_SET_SREGS: libc::c_ulong = 0x4138_ae84;
    const KVM_SET_REGS: libc::c_ulong = 0x4090_ae82;
    const KVM_EXIT_HLT: u32 = 5;

    #[repr(C)]
    struct MemRegion {
        slot: u32,
        flags: u32,
        guest_phys_addr: u64,
        memory_size: u64,
        userspace_addr: u64,
    }
    let chk = |rc: libc::c_int, what: &str| -> Result<libc::c_int> {
        if rc < 0 {
            bail!("{}: {}", what, std::io::Error::last_os_error());
        }
        Ok(rc)
    };
    unsafe {
        let kvm = chk(
            libc::open(c"/dev/kvm".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC),
            "open /dev/kvm",
        )?;
        let vm = chk(libc::ioctl(kvm, KVM_CREATE_VM, 0), "KVM_CREATE_VM")?;
        let mem = libc::mmap(
            std::ptr::null_mut(),
            0x1000,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if mem == libc::MAP_FAILED {
            bail!("mmap failed");
        }
        *(mem as *mut u8) = 0xf4; // hlt
        let region = MemRegion {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0x1000,
            memory_size: 0x1000,
            userspace_addr: mem as u64,
        };
        chk(
            libc::ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region),
            "KVM_SET_USER_MEMORY_REGION",
        )?;
        let vcpu = chk(libc::ioctl(vm, KVM_CREATE_VCPU, 0), "KVM_CREATE_VCPU")?;
        let run_size = chk(
            libc::ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0),
            "KVM_GET_VCPU_MMAP_SIZE",
        )?;
        let run = libc::mmap(
            std::ptr::null_mut(),
            run_size as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            vcpu,
            0,
        );
        if run == libc::MAP_FAILED {
            bail!("mmap of the vcpu failed");
        }
        // struct kvm_sregs is 312 bytes; cs (base u64, limit u32, selector u16, ...) is first.
        let mut sregs = [0u8; 312];
        chk(
            libc::ioctl(vcpu, KVM_GET_SREGS, sregs.as_mut_ptr()),
            "KVM_GET_SREGS",
        )?;
        sregs[0..8].fill(0);
        sregs[12..14].fill(0);
        chk(
            libc::ioctl(vcpu, KVM_SET_SREGS, sregs.as_ptr()),
            "KVM_SET_SREGS",
        )?;
        // struct kvm_regs: 16 general registers, then rip, rflags.
        let mut regs = [0u64; 18];
        regs[16] = 0x1000;
        regs[17] = 2;
        chk(
            libc::ioctl(vcpu, KVM_SET_REGS, regs.as_ptr()),
            "KVM_SET_REGS",
        )?;
        chk(libc::ioctl(vcpu, KVM_RUN, 0), "KVM_RUN")?;
        let reason = *((run as *const u8).add(8) as *const u32);
        if reason != KVM_EXIT_HLT {
            bail!("KVM_RUN exited with reason {}, not HLT", reason);
        }
    }
    Ok(())
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Whether KVM works here: runs `__kvm-probe` with a deadline; the answer is cached per boot.
pub fn kvm_works() -> bool {
    if std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return false;
    }
    if let Some(ok) = kvm_cached() {
        return ok;
    }
    let ok = probe_once();
    remember_kvm(ok);
    ok
}

/// Whether KVM works, as found earlier in this host boot; `None` if nobody looked yet.
pub fn kvm_cached() -> Option<bool> {
    let id = boot_id();
    let c = super::setup::cache_dir().ok()?.join("kvm-probe");
    let s = std::fs::read_to_string(c).ok()?;
    let (bid, ans) = s.trim().split_once(' ')?;
    (bid == id && !id.is_empty()).then_some(ans == "ok")
}

/// Caches whether KVM works for the rest of this host boot (a guest that hangs or dies under
/// KVM although the vCPU probe passed also counts as "no").
pub fn remember_kvm(ok: bool) {
    let Some(c) = super::setup::cache_dir().ok().map(|d| d.join("kvm-probe")) else {
        return;
    };
    if let Some(d) = c.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let _ = std::fs::write(
        c,
        format!("{} {}\n", boot_id(), if ok { "ok" } else { "no" }),
    );
}

fn probe_once() -> bool {
    let Ok(exe) = std::env::current_exe() else {
        return false;
    };
    let Ok(mut child) = std::process::Command::new(exe)
        .arg("__kvm-probe")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return false;
    };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return st.success(),
            Ok(None) if start.elapsed() < Duration::from_secs(3) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                log::debug!("vm: KVM did not run a vCPU within 3 s; using TCG");
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// Everything the QEMU command line is made of.
pub struct Machine<'a> {
    pub qemu: &'a Path,
    /// Firmware and ROM directories (`-L`) of a QEMU not installed where it was built for.
    pub data_dirs: &'a [PathBuf],
    pub kvm: bool,
    pub mem: u64,
    pub cpus: u32,
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    pub cmdline: String,
    pub disk: &'a Path,
    /// nbdkit's Unix socket serving `disk` (with a per-IO latency); QEMU then connects to it
    /// instead of opening the image.
    pub nbd: Option<&'a Path>,
    pub disk_direct: bool,
    pub limits: &'a DiskLimits,
    pub share: &'a Path,
    /// `--init systemd`: the root file system image, opened copy-on-write.
    pub root: Option<&'a Path>,
    /// `--scsi-disk`: an image shown as a SCSI disk with this model and firmware revision.
    pub scsi: Option<(&'a Path, &'a str, &'a str)>,
    /// `--ssh-port`: the host's 127.0.0.1 port forwarded to the guest's port 22.
    pub ssh_port: Option<u16>,
    /// (chardev id, socket path, virtio-serial port name or None for the serial console)
    pub sockets: Vec<(&'static str, PathBuf, Option<&'static str>)>,
}

fn opt_path(p: &Path) -> Result<String> {
    let s = p
        .to_str()
        .with_context(|| format!("{}: not valid UTF-8", p.display()))?;
    // QEMU's option syntax doubles commas inside values.
    Ok(s.replace(',', ",,"))
}

/// The guest CPU model under TCG: everything TCG emulates but the fast-string features.
const TCG_CPU: &str = "max,-erms,-fsrm";

impl Machine<'_> {
    /// `--scsi-disk`'s disk and `--ssh-port`'s network.
    fn extra_devices(&self) -> Result<Vec<String>> {
        let mut a: Vec<String> = Vec::new();
        if let Some((img, model, rev)) = self.scsi {
            // After the virtio disks (vda, vdb); the guest sees it as sda.
            let drive = format!(
                "file={},if=none,id=scsi,format=raw,cache=unsafe",
                opt_path(img)?
            );
            let dev = format!(
                "scsi-hd,bus=scsi0.0,drive=scsi,vendor=RESCTL,product={},ver={},serial=resctl-scsi",
                model, rev
            );
            a.extend(["-device".into(), "virtio-scsi-pci,id=scsi0".into()]);
            a.extend(["-drive".into(), drive, "-device".into(), dev]);
        }
        if let Some(port) = self.ssh_port {
            // restrict=on: the guest reaches neither the host nor beyond; the forward from the
            // host's loopback still delivers.
            let netdev = format!(
                "user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{}-:22",
                port
            );
            a.extend(["-netdev".into(), netdev]);
            a.extend(["-device".into(), "virtio-net-pci,netdev=net0".into()]);
        }
        Ok(a)
    }

    pub fn args(&self) -> Result<Vec<String>> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |v: &[&str]| a.extend(v.iter().map(|s| s.to_string()));
        push(&["-nodefaults", "-no-user-config", "-display", "none"]);
        for d in self.data_dirs {
            // A plain path: `-L` takes no QEMU option syntax.
            push(&["-L", &d.to_string_lossy()]);
        }
        push(&["-machine", "q35"]);
        if self.kvm {
            push(&["-accel", "kvm", "-cpu", "host"]);
        } else {
            // Without ERMS/FSRM the guest kernel copies and clears pages with unrolled moves
            // instead of `rep movsb`/`stosb`, which TCG runs one byte per iteration: page-cache
            // reads, faults and the memory hog then take a third less time.
            push(&["-accel", "tcg", "-cpu", TCG_CPU]);
        }
        let mem = format!("{}M", self.mem >> 20);
        let cpus = self.cpus.to_string();
        push(&["-m", &mem, "-smp", &cpus, "-no-reboot"]);
        let kernel = opt_path(self.kernel)?;
        let initrd = opt_path(self.initrd)?;
        push(&["-kernel", &kernel, "-initrd", &initrd]);
        push(&["-append", &self.cmdline]);
        let file = match self.nbd {
            Some(sock) => format!(
                "file.driver=nbd,file.server.type=unix,file.server.path={}",
                opt_path(sock)?
            ),
            None => format!("file={}", opt_path(self.disk)?),
        };
        let mut drive = format!(
            "{},if=none,id=scratch,format=raw,discard=unmap,aio=threads,cache={}",
            file,
            if self.disk_direct {
                "none"
            } else {
                "writeback"
            }
        );
        for t in self.limits.qemu_throttling() {
            drive += ",";
            drive += &t;
        }
        let dev = format!(
            "virtio-blk-pci,drive=scratch,serial={}",
            self.limits.serial()
        );
        push(&["-drive", &drive, "-device", &dev]);
        // After the scratch disk, so that one stays vda.
        if let Some(root) = self.root {
            let drive = format!(
                "file={},if=none,id=root,format=raw,snapshot=on,cache=unsafe",
                opt_path(root)?
            );
            let dev = format!(
                "virtio-blk-pci,drive=root,serial={}",
                super::protocol::ROOT_SERIAL
            );
            push(&["-drive", &drive, "-device", &dev]);
        }
        a.extend(self.extra_devices()?);
        let mut push = |v: &[&str]| a.extend(v.iter().map(|s| s.to_string()));
        let fsdev = format!(
            "local,id=share,path={},security_model=none",
            opt_path(self.share)?
        );
        let share_dev = format!(
            "virtio-9p-pci,fsdev=share,mount_tag={}",
            super::protocol::SHARE_TAG
        );
        push(&["-fsdev", &fsdev, "-device", &share_dev]);
        push(&["-device", "virtio-serial-pci,id=vser"]);
        for (id, path, port) in &self.sockets {
            let chardev = format!("socket,id={},path={}", id, opt_path(path)?);
            push(&["-chardev", &chardev]);
            match port {
                Some(name) => {
                    let dev = format!("virtserialport,bus=vser.0,chardev={},name={}", id, name);
                    push(&["-device", &dev]);
                }
                None => {
                    let serial = format!("chardev:{}", id);
                    push(&["-serial", &serial]);
                }
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine<'a>(limits: &'a DiskLimits, nbd: Option<&'a Path>) -> Machine<'a> {
        Machine {
            qemu: Path::new("/usr/bin/qemu-system-x86_64"),
            data_dirs: &[],
            kvm: false,
            mem: 1 << 30,
            cpus: 2,
            kernel: Path::new("/k"),
            initrd: Path::new("/i"),
            cmdline: "console=ttyS0".into(),
            disk: Path::new("/tmp/a,b/disk.img"),
            nbd,
            disk_direct: true,
            limits,
            share: Path::new("/work"),
            root: None,
            scsi: None,
            ssh_port: None,
            sockets: vec![
                ("con", PathBuf::from("/t/con.sock"), None),
                ("out", PathBuf::from("/t/out.sock"), Some("resctl.out")),
            ],
        }
    }

    #[test]
    fn command_line_has_throttling_serial_and_share() {
        let limits = DiskLimits::resolve(Some("hdd"), None, None, Some(0)).unwrap();
        let m = machine(&limits, None);
        let a = m.args().unwrap().join(" ");
        assert!(a.contains("-accel tcg -cpu max,-erms,-fsrm"));
        assert!(a.contains("-m 1024M -smp 2"));
        assert!(a.contains("file=/tmp/a,,b/disk.img,"));
        assert!(a.contains("cache=none,throttling.iops-total=150,throttling.bps-total="));
        assert!(a.contains("serial=resctl-custom"));
        assert!(a.contains("path=/work,security_model=none"));
        assert!(a.contains("-serial chardev:con"));
        assert!(a.contains("chardev=out,name=resctl.out"));
        assert!(!a.contains("-L "), "no data directories unless given");
        let dirs = [
            PathBuf::from("/c/q,1/usr/share/qemu"),
            PathBuf::from("/c/s"),
        ];
        let m = Machine {
            data_dirs: &dirs,
            ..machine(&limits, None)
        };
        let a = m.args().unwrap();
        let at = a.iter().position(|x| x == "-L").unwrap();
        assert_eq!(a[at..at + 4], ["-L", "/c/q,1/usr/share/qemu", "-L", "/c/s"]);
    }

    #[test]
    fn ssh_forwards_only_from_the_hosts_loopback_to_a_restricted_guest() {
        let limits = DiskLimits::resolve(None, None, None, None).unwrap();
        let mut m = machine(&limits, None);
        assert!(!m.args().unwrap().iter().any(|a| a.contains("netdev")));
        m.ssh_port = Some(2201);
        let a = m.args().unwrap().join(" ");
        assert!(
            a.contains("-netdev user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:2201-:22 -device virtio-net-pci,netdev=net0"),
            "{}",
            a
        );
    }

    #[test]
    fn a_scsi_disk_presents_its_model_and_revision() {
        let limits = DiskLimits::resolve(Some("hdd"), None, None, None).unwrap();
        let mut m = machine(&limits, None);
        m.scsi = Some((Path::new("/t/scsi.img"), "RB Test HDD", "2.5+"));
        let a = m.args().unwrap().join(" ");
        assert!(
            a.contains("-device virtio-scsi-pci,id=scsi0 -drive file=/t/scsi.img,if=none,id=scsi,")
        );
        assert!(
            a.contains("drive=scsi,vendor=RESCTL,product=RB Test HDD,ver=2.5+,serial=resctl-scsi")
        );
    }

    #[test]
    fn latency_drive_reads_nbd_with_the_same_options() {
        let limits = DiskLimits::resolve(Some("hdd"), None, None, None).unwrap();
        let sock = Path::new("/t/x,y/nbd.sock");
        let a = machine(&limits, Some(sock)).args().unwrap();
        let i = a.iter().position(|s| s == "-drive").unwrap();
        assert_eq!(
            a[i + 1],
            "file.driver=nbd,file.server.type=unix,file.server.path=/t/x,,y/nbd.sock,\
             if=none,id=scratch,format=raw,discard=unmap,aio=threads,cache=none,\
             throttling.iops-total=150,throttling.bps-total=167772160"
        );
        assert_eq!(
            a[i + 2..i + 4],
            ["-device", "virtio-blk-pci,drive=scratch,serial=resctl-hdd"]
        );
        assert!(!a.join(" ").contains("disk.img"));
    }
}
