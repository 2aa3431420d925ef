//! Host access: cgroupfs, iocost knobs, sysinfo, system requirements with the restore journal,
//! block-device detection, memory profile and balloon.
//!
//! Everything takes its filesystem roots from a [`HostPaths`], so unit tests run the same code
//! against temp-dir trees that imitate /sys, /proc and /sys/fs/cgroup.

/// The default top-level work directory (`--dir`), as upstream has it.
pub const DFL_DIR: &str = "/var/lib/resctl-demo";

pub mod apply;
pub mod bench_json;
pub mod blockdev;
pub mod cgroup;
pub mod change_journal;
pub mod deps;
pub mod hwdb;
pub mod iocost;
pub mod mem;
pub mod restore;
pub mod session;
pub mod sysinfo;
pub mod sysreqs;
pub mod systemd;

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the kernel interfaces live. `HostPaths::real()` is the running system; tests point
/// `root` at a temp dir holding `sys/`, `proc/`, `sys/fs/cgroup/`, `dev/`, `etc/`.
/// On a systemd host it also carries systemd ([`HostPaths::with_systemd`]): the cgroups of our
/// layout are then its units.
#[derive(Debug, Clone)]
pub struct HostPaths {
    pub root: PathBuf,
    systemd: Option<Arc<dyn systemd::Manager>>,
}

impl PartialEq for HostPaths {
    fn eq(&self, o: &Self) -> bool {
        self.root == o.root && self.systemd.is_some() == o.systemd.is_some()
    }
}

impl Eq for HostPaths {}

impl HostPaths {
    pub fn real() -> Self {
        Self::under("/")
    }

    pub fn under(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            systemd: None,
        }
    }

    /// The same paths on a host whose cgroups systemd manages through `m`.
    pub fn with_systemd(mut self, m: Arc<dyn systemd::Manager>) -> Self {
        self.systemd = Some(m);
        self
    }

    /// systemd, when it manages this host's cgroups.
    pub fn systemd(&self) -> Option<&Arc<dyn systemd::Manager>> {
        self.systemd.as_ref()
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
