//! `resctl-bench vm`: a disposable QEMU guest with cgroup2 cpu/io/memory, io.cost, swap on the
//! scratch disk and tracefs, running `resctl-bench ARGS` in the host's working directory (shared
//! over virtio-9p at the same path).
//!
//! Host side: [`host`] builds the initramfs ([`initramfs`], [`kmod`]), the scratch disk and the
//! QEMU command line ([`qemu`], [`profiles`]; [`nbd`] for a disk with latency), then relays the guest's output ([`channel`]).
//! Guest side: [`guest`] is PID 1. The guest-side helpers the VM tests run (`__probe`, `__vm-scenario`) are in `crate::testaid`.

mod args;
pub mod channel;
pub mod emulator;
pub mod guest;
pub mod host;
pub mod initramfs;
pub mod kmod;
pub mod nbd;
pub mod profiles;
pub mod protocol;
pub mod qemu;
pub mod release;
pub mod rootfs;
pub mod setup;

pub use args::VmArgs;
pub use host::run;
