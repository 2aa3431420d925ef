//! Which QEMU runs the guest. Under TCG with more than one vCPU, QEMU 7.2 (Debian 12's) runs a
//! stale translation of guest code that another vCPU has just patched: a guest kernel that
//! flips a static key or a tracepoint while the other vCPU passes the site dies of a stray
//! `int3` ("Oops: int3", "Fatal exception in interrupt") or locks up. Kernels flip such keys
//! whenever io.cost, wbt, a cgroup controller or a trace event is switched on or off. QEMU 10
//! doesn't (`doc vm`). On a Debian 12 host `vm --setup` fetches bookworm-backports' QEMU into
//! `~/.cache/resctl-bench/qemu/` (unpacked there, the host's packages left alone) and `vm` runs
//! it; the host's own QEMU is used when it is new enough or nothing else is there.

use super::setup::{self, cache_dir, run_quiet};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The first QEMU major version measured not to run stale code after cross-vCPU patching.
pub const GOOD_MAJOR: u32 = 10;

/// The packages of a private QEMU: the emulator, its firmware and ROMs, the BIOS it was built
/// with. Their libraries are those the host's qemu-system-x86 already pulled in.
const PACKAGES: &[&str] = &["qemu-system-x86", "qemu-system-data", "seabios"];

/// Where a private QEMU's suite comes from: the host's release's backports.
const BACKPORTS: &str = "bookworm-backports";

/// The emulator `vm` runs: its binary and the firmware directories passed with `-L`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emulator {
    pub bin: PathBuf,
    pub data_dirs: Vec<PathBuf>,
    pub version: String,
}

/// "QEMU emulator version 7.2.22 (Debian …)" → "7.2.22".
pub fn parse_version(out: &str) -> Option<String> {
    let rest = out.lines().next()?.split("version ").nth(1)?;
    let v = rest.split_whitespace().next()?;
    v.split('.').next()?.parse::<u32>().ok()?;
    Some(v.to_string())
}

fn major(version: &str) -> u32 {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// The version a QEMU binary says it is.
fn version_of(bin: &Path, data_dirs: &[PathBuf]) -> Option<String> {
    let mut c = Command::new(bin);
    for d in data_dirs {
        c.arg("-L").arg(d);
    }
    let out = c.arg("--version").output().ok()?;
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

fn host() -> Result<Emulator> {
    let bin = setup::tool("qemu-system-x86_64")?;
    let version = version_of(&bin, &[]).unwrap_or_else(|| "unknown".into());
    Ok(Emulator {
        bin,
        data_dirs: Vec::new(),
        version,
    })
}

fn private_root() -> Result<PathBuf> {
    Ok(cache_dir()?.join("qemu"))
}

/// An unpacked private QEMU under `root` (the newest complete one), if it runs.
fn private_in(root: &Path) -> Option<Emulator> {
    let d = setup::complete_versions(root).pop()?;
    let data_dirs = vec![d.join("usr/share/qemu"), d.join("usr/share/seabios")];
    let bin = d.join("usr/bin/qemu-system-x86_64");
    let version = version_of(&bin, &data_dirs)?;
    Some(Emulator {
        bin,
        data_dirs,
        version,
    })
}

/// The emulator for `vm`: the host's when it is new enough, else a private one `vm --setup`
/// fetched, else the host's ([`Emulator::warn_if_unsafe`] says so when it matters).
pub fn choose() -> Result<Emulator> {
    let h = host()?;
    if major(&h.version) >= GOOD_MAJOR {
        return Ok(h);
    }
    if let Some(p) = private_root().ok().and_then(|r| private_in(&r)) {
        log::debug!(
            "vm: QEMU {} from {} (the host's is {})",
            p.version,
            p.bin.display(),
            h.version
        );
        return Ok(p);
    }
    Ok(h)
}

impl Emulator {
    /// Warns when this QEMU is too old for the guest about to run: only TCG with more than one
    /// vCPU runs stale code (KVM runs the guest's code natively).
    pub fn warn_if_unsafe(&self, kvm: bool, cpus: u32) {
        if self.unsafe_for(kvm, cpus) {
            log::warn!(
                "vm: QEMU {} can crash TCG guests with more than one vCPU when their kernel \
                 patches its code (`doc vm`); QEMU {} or newer doesn't (on Debian 12 `vm --setup` \
                 fetches it), nor does --cpus 1",
                self.version,
                GOOD_MAJOR
            );
        }
    }

    fn unsafe_for(&self, kvm: bool, cpus: u32) -> bool {
        !kvm && cpus > 1 && major(&self.version) < GOOD_MAJOR
    }
}

/// Whether the host runs Debian 12, whose backports hold a QEMU to fetch.
fn host_is_bookworm() -> bool {
    std::fs::read_to_string("/etc/os-release")
        .map(|s| s.lines().any(|l| l.trim() == "VERSION_CODENAME=bookworm"))
        .unwrap_or(false)
}

/// `vm --setup`'s part: a private QEMU when the host's is too old and Debian 12's backports
/// have a newer one. Idempotent.
pub fn ensure() -> Result<()> {
    let h = host()?;
    if major(&h.version) >= GOOD_MAJOR {
        crate::errln!("vm setup: the host's QEMU {} is used", h.version);
        return Ok(());
    }
    let root = private_root()?;
    if let Some(p) = private_in(&root) {
        crate::errln!(
            "vm setup: QEMU {} cached at {} (the host's {} is older than {})",
            p.version,
            p.bin.display(),
            h.version,
            GOOD_MAJOR
        );
        return Ok(());
    }
    if !host_is_bookworm() {
        crate::errln!(
            "vm setup: the host's QEMU {} can crash TCG guests with more than one vCPU (`doc vm`); \
             install QEMU {} or newer, or run guests with --cpus 1",
            h.version,
            GOOD_MAJOR
        );
        return Ok(());
    }
    let p = fetch(&root)?;
    crate::errln!(
        "vm setup: QEMU {} unpacked at {} (the host's {} is older than {})",
        p.version,
        p.bin.display(),
        h.version,
        GOOD_MAJOR
    );
    Ok(())
}

/// Downloads and unpacks [`PACKAGES`] from [`BACKPORTS`] into `root/<version>`.
fn fetch(root: &Path) -> Result<Emulator> {
    let apt = setup::apt_opts_suite(BACKPORTS)?;
    setup::apt_update_private(BACKPORTS, &apt)?;
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let tmp = root.join(format!(".tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let res = (|| -> Result<Emulator> {
        let wanted: Vec<String> = PACKAGES
            .iter()
            .map(|p| format!("{}/{}", p, BACKPORTS))
            .collect();
        crate::errln!("vm setup: downloading {}", wanted.join(" "));
        let mut dl = Command::new("apt-get");
        dl.args(&apt).args(["download", "-q"]).args(&wanted);
        if !run_quiet(dl.current_dir(&tmp))? {
            bail!("apt-get download {} failed", wanted.join(" "));
        }
        let unpacked = tmp.join("root");
        for deb in std::fs::read_dir(&tmp)?.flatten().map(|e| e.path()) {
            if deb.extension().is_some_and(|e| e == "deb")
                && !run_quiet(Command::new("dpkg").arg("-x").arg(&deb).arg(&unpacked))?
            {
                bail!("dpkg -x {} failed", deb.display());
            }
        }
        std::fs::write(unpacked.join(".complete"), wanted.join("\n"))?;
        let p = private_in(&tmp).context("the unpacked QEMU doesn't run (`--version`)")?;
        let dest = root.join(&p.version);
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&unpacked, &dest)
            .with_context(|| format!("moving the unpacked QEMU to {}", dest.display()))?;
        private_in(root).context("unpacked QEMU vanished")
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_the_first_line() {
        let out = "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b2)\nCopyright";
        assert_eq!(parse_version(out).as_deref(), Some("7.2.22"));
        assert_eq!(
            parse_version("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2)").as_deref(),
            Some("10.0.2")
        );
        assert_eq!(parse_version("qemu: unknown option"), None);
        assert_eq!(parse_version(""), None);
        assert_eq!(major("7.2.22"), 7);
        assert!(major("10.0.2") >= GOOD_MAJOR);
    }

    #[test]
    fn only_an_old_qemu_under_tcg_with_two_vcpus_is_unsafe() {
        let emu = |version: &str| Emulator {
            bin: PathBuf::from("/usr/bin/qemu-system-x86_64"),
            data_dirs: Vec::new(),
            version: version.into(),
        };
        assert!(emu("7.2.22").unsafe_for(false, 2));
        assert!(!emu("7.2.22").unsafe_for(false, 1));
        assert!(!emu("7.2.22").unsafe_for(true, 2));
        assert!(!emu("10.0.2").unsafe_for(false, 2));
        assert!(emu("unknown").unsafe_for(false, 4));
    }

    #[test]
    fn a_private_qemu_is_found_only_when_complete_and_running() {
        let d = tempfile::tempdir().unwrap();
        let v = d.path().join("10.0.2");
        std::fs::create_dir_all(v.join("usr/bin")).unwrap();
        let bin = v.join("usr/bin/qemu-system-x86_64");
        std::fs::write(
            &bin,
            "#!/bin/sh\necho \"QEMU emulator version 10.0.2 (args: $*)\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(private_in(d.path()), None, "not complete");
        std::fs::write(v.join(".complete"), "x").unwrap();
        let p = private_in(d.path()).unwrap();
        assert_eq!(p.version, "10.0.2");
        assert_eq!(p.bin, bin);
        assert_eq!(
            p.data_dirs,
            vec![v.join("usr/share/qemu"), v.join("usr/share/seabios")]
        );
        // A complete older one beside it is not taken ("9.2.1" sorts after "10.0.2" as text).
        let old = d.path().join("9.2.1");
        std::fs::create_dir_all(old.join("usr/bin")).unwrap();
        std::fs::copy(&bin, old.join("usr/bin/qemu-system-x86_64")).unwrap();
        std::fs::write(old.join(".complete"), "x").unwrap();
        assert_eq!(private_in(d.path()).unwrap().bin, bin);
        std::fs::write(&bin, "#!/bin/sh\nexit 1\n").unwrap();
        assert_eq!(private_in(d.path()), None, "doesn't run");
    }
}
