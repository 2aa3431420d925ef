//! Host access: cgroupfs, iocost knobs, sysinfo, system requirements with the restore journal,
//! block-device detection, memory profile and balloon.
//!
//! Everything takes its filesystem roots from a [`HostPaths`], so unit tests run the same code
//! against temp-dir trees that imitate /sys, /proc and /sys/fs/cgroup.

/// The default top-level work directory (`--dir`), as upstream has it.
pub const DFL_DIR: &str = "/var/lib/resctl-demo";

pub mod bench_json;
pub mod blockdev;
pub mod cgroup;
pub mod change_journal;
pub mod deps;
pub mod iocost;
pub mod mem;
pub mod restore;
pub mod session;
pub mod sysinfo;
pub mod sysreqs;

use std::path::{Path, PathBuf};

/// Where the kernel interfaces live. `HostPaths::real()` is the running system; tests point
/// `root` at a temp dir holding `sys/`, `proc/`, `sys/fs/cgroup/`, `dev/`, `etc/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPaths {
    pub root: PathBuf,
}

impl HostPaths {
    pub fn real() -> Self {
        Self {
            root: PathBuf::from("/"),
        }
    }

    pub fn under(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `rel` below the root, e.g. `path("proc/meminfo")`.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root
            .join(rel.as_ref().strip_prefix("/").unwrap_or(rel.as_ref()))
    }

    pub fn cgroup(&self) -> PathBuf {
        self.path("sys/fs/cgroup")
    }

    pub fn sys(&self) -> PathBuf {
        self.path("sys")
    }

    pub fn proc(&self) -> PathBuf {
        self.path("proc")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_below_the_root() {
        let h = HostPaths::under("/tmp/x");
        assert_eq!(
            h.path("/proc/meminfo"),
            PathBuf::from("/tmp/x/proc/meminfo")
        );
        assert_eq!(h.cgroup(), PathBuf::from("/tmp/x/sys/fs/cgroup"));
        assert_eq!(HostPaths::real().proc(), PathBuf::from("/proc"));
    }
}
