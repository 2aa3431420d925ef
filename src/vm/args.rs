//! `resctl-bench vm`'s own options.

use super::profiles;
use clap::Args;
use std::path::PathBuf;

/// Run resctl-bench inside a disposable QEMU VM test host (see `doc vm`)
#[derive(Debug, Clone, Args)]
#[command(after_help = vm_after_help())]
pub struct VmArgs {
    /// Guest memory (size)
    #[arg(long = "mem", value_name = "SIZE", default_value = "4G")]
    pub mem: String,

    /// Guest CPUs [default: the host's CPU count]
    #[arg(long = "cpus", value_name = "N")]
    pub cpus: Option<String>,

    /// Size of the sparse scratch disk image
    #[arg(long = "disk-size", value_name = "SIZE", default_value = "16G")]
    pub disk_size: String,

    /// Swap file on the scratch disk (size; 0 for none) [default: half of --mem]
    #[arg(long = "swap-size", value_name = "SIZE")]
    pub swap_size: Option<String>,

    /// Emulated device class of the scratch disk (see below)
    #[arg(long = "disk-profile", value_name = "NAME")]
    pub disk_profile: Option<String>,

    /// Custom IOPS limit of the scratch disk (read+write; 0 = none), overrides the profile's
    #[arg(long = "disk-iops", value_name = "N")]
    pub disk_iops: Option<String>,

    /// Custom bandwidth limit of the scratch disk (size per second; 0 = none)
    #[arg(long = "disk-bps", value_name = "SIZE")]
    pub disk_bps: Option<String>,

    /// Custom per-IO latency of the scratch disk (duration, whole ms; 0 = none), added by nbdkit
    #[arg(long = "disk-latency", value_name = "DUR")]
    pub disk_latency: Option<String>,

    /// Also attach a 1 GiB SCSI disk presenting this model (at most 16 characters) and
    /// firmware revision (at most 4), as a real disk presents them to udev, e.g. "RB Test
    /// HDD:2.5+" (the guest's sda; not the scratch disk)
    #[arg(long = "scsi-disk", value_name = "MODEL[:REV]")]
    pub scsi_disk: Option<String>,

    /// Kernel image [default: /boot/vmlinuz-$(uname -r), else the cached Debian kernel]
    #[arg(long = "kernel", value_name = "FILE")]
    pub kernel: Option<PathBuf>,

    /// Modules tree of that kernel [default: /lib/modules/$(uname -r), else the cached one]
    #[arg(long = "modules", value_name = "DIR")]
    pub modules: Option<PathBuf>,

    /// Also put host program PATH (and the libraries `ldd` lists for it) into the guest, at
    /// /usr/bin/NAME (/usr/local/bin/NAME with `--init systemd`; repeatable; for side-by-side
    /// measurements, e.g. fio)
    #[arg(long = "with-program", value_name = "PATH")]
    pub with_program: Vec<PathBuf>,

    /// Also load kernel module NAME (with its dependencies) in the guest, PARAMS
    /// comma-separated, e.g. brd:rd_nr=1,rd_size=1048576 (repeatable)
    #[arg(long = "with-module", value_name = "NAME[:PARAMS]")]
    pub with_module: Vec<String>,

    /// Accelerator: auto uses KVM only when it can run a vCPU, else TCG
    #[arg(long = "accel", value_name = "auto|kvm|tcg", default_value = "auto")]
    pub accel: String,

    /// Give up when the command has not started this long after QEMU did (duration)
    #[arg(long = "boot-timeout", value_name = "DUR", default_value = "2min")]
    pub boot_timeout: String,

    /// Stop the VM when the command runs longer than this (duration) [default: no limit]
    #[arg(long = "timeout", value_name = "DUR")]
    pub timeout: Option<String>,

    /// Stop the VM when the guest sends no heartbeat for this long (a stalled guest kernel);
    /// `vm` then exits with status 124 (duration; 0 turns it off)
    #[arg(long = "stall-timeout", value_name = "DUR", default_value = "120s")]
    pub stall_timeout: String,

    /// The guest's PID 1: `builtin` (resctl-bench's own init, no service manager) or `systemd`
    /// (a Debian root file system with systemd and systemd-oomd, as on a real test host; built
    /// by --setup)
    #[arg(
        long = "init",
        value_name = "builtin|systemd",
        default_value = "builtin"
    )]
    pub init: String,

    /// With --init systemd: also these Debian packages (names, with their dependencies) or .deb
    /// files (unpacked as they are) in the guest's root file system, comma-separated
    /// (repeatable); the image is built on first use and cached
    #[arg(long = "guest-packages", value_name = "LIST")]
    pub guest_packages: Vec<String>,

    /// The guest's Debian release: its kernel (unless the host's is used) and, with --init
    /// systemd, its root file system; 13 (trixie: kernel 6.12, systemd 257) or 12 (bookworm:
    /// kernel 6.1, systemd 252). --setup fetches the one named
    #[arg(long = "debian", value_name = "13|12", default_value = "13")]
    pub debian: String,

    /// With --init systemd: the guest's SSH server started, reachable as root on the host's 127.0.0.1:PORT only (QEMU forwards it; the guest can
    /// reach nothing else). Without ARGS the guest then stays up until it is powered off
    /// (`ssh … poweroff`) or --timeout
    #[arg(long = "ssh-port", value_name = "PORT")]
    pub ssh_port: Option<String>,

    /// The public key(s) root's SSH logins take (an OpenSSH .pub or authorized_keys file);
    /// needed with --ssh-port
    #[arg(long = "ssh-key", value_name = "FILE")]
    pub ssh_key: Option<PathBuf>,

    /// Keep the scratch disk image (its path is printed)
    #[arg(long = "keep")]
    pub keep: bool,

    /// Install what the VM needs (Debian packages, kernel; QEMU 10 where the host's is older) and
    /// exit unless ARGS are given
    #[arg(long = "setup")]
    pub setup: bool,

    /// resctl-bench arguments to run inside the VM (after `--`)
    #[arg(last = true, id = "guest_args", value_name = "ARGS")]
    pub args: Vec<String>,
}

fn vm_after_help() -> String {
    format!(
        "Disk profiles (--disk-profile; limits are QEMU block throttling, latency is added\n\
         per IO on the host by nbdkit's delay filter):\n{}\n\
         The current directory is shared with the guest at the same path. With -r FILE in ARGS\n\
         (FILE in that directory), the per-second reports are written to FILE's\n\
         <stem>-report.d on the host, where `resctl-bench -r FILE study` looks for them;\n\
         the rest of --dir is on the disposable scratch disk.\n\n\
         Example: resctl-bench vm --disk-profile sata-ssd -- -r result.json run storage",
        profiles::table()
    )
}
