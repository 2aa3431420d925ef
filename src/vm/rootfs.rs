//! The root file system of a `vm --init systemd` guest: a minimal Debian (debootstrap's
//! `minbase` with systemd as init, dbus, udev and systemd-oomd, enabled as the package
//! installs it) in an ext4 image, built once by `vm --setup` and cached in
//! `~/.cache/resctl-bench/rootfs/`. Guests open it copy-on-write (QEMU's `snapshot=on`), so the
//! cached image never changes and several guests can share it. `vm --guest-packages` asks
//! for a variant with more in it (Debian packages by name, `.deb` files unpacked as they are),
//! built on first use and cached beside the plain one under a name made from that list.

use super::release::{mirror, Release};
use super::setup::{cache_dir, root_cmd, run_quiet, which, FIX};
use crate::error::UsageError;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Packages on top of `minbase`: systemd as PID 1 and what a real test host runs beside it,
/// an SSH server (started only for `vm --ssh-port`) and Python (what Ansible runs on a host it
/// manages).
const PACKAGES: &str = "systemd,systemd-sysv,dbus,udev,systemd-oomd,openssh-server,python3";
/// Changes with what `customize` does to the tree, so that an image made before a change is
/// built again (it is part of every image's name, with the packages).
const LAYOUT: &str = "2: ssh.service not started at boot";
/// The image's size (sparse; the tree takes ~270 MiB); a variant with more packages gets more.
const IMAGE_SIZE: &str = "1G";
const VARIANT_SIZE: &str = "6G";

/// Units a disposable guest has no use for: logins on the consoles (the serial console is the
/// host's log) and periodic maintenance that would only add IO to the measurements.
const MASKED: &[&str] = &[
    "serial-getty@ttyS0.service",
    "getty@tty1.service",
    "console-getty.service",
    "e2scrub_reap.service",
    "e2scrub_all.timer",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "fstrim.timer",
    "systemd-tmpfiles-clean.timer",
];

fn dir() -> Result<PathBuf> {
    Ok(cache_dir()?.join("rootfs"))
}

/// More than the plain image holds: `vm --guest-packages`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra {
    /// Debian packages, installed with their dependencies.
    pub packages: Vec<String>,
    /// `.deb` files, unpacked into the tree (no maintainer scripts: e.g. kernel headers for
    /// the guest's kernel, fetched on the host with `apt-get download`).
    pub debs: Vec<PathBuf>,
}

impl Extra {
    /// `--guest-packages`' comma-separated list: a word with a `/` or ending in `.deb` is a
    /// file, anything else a package name.
    pub fn parse(list: &[String]) -> Result<Self> {
        let mut x = Self::default();
        for w in list.iter().flat_map(|l| l.split(',')).map(str::trim) {
            if w.is_empty() {
                continue;
            }
            if w.contains('/') || w.ends_with(".deb") {
                let p = PathBuf::from(w);
                if !p.is_file() {
                    return Err(UsageError::new(format!(
                        "vm: --guest-packages {}: not a .deb file (give package names or .deb files)",
                        w
                    ))
                    .into());
                }
                x.debs.push(p);
            } else if w
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            {
                x.packages.push(w.to_string());
            } else {
                return Err(UsageError::new(format!(
                    "vm: --guest-packages {:?}: not a Debian package name (letters, digits, + - .) or a .deb file",
                    w
                ))
                .into());
            }
        }
        x.packages.sort();
        x.packages.dedup();
        Ok(x)
    }

    fn is_empty(&self) -> bool {
        self.packages.is_empty() && self.debs.is_empty()
    }

    /// The image's name, keyed by the base packages and layout and by the extra packages and
    /// the files' names and contents, so that a change to any builds a new image.
    fn image_name(&self, rel: Release) -> Result<String> {
        use sha1::Digest;
        let mut h = sha1::Sha1::new();
        h.update(PACKAGES.as_bytes());
        h.update(LAYOUT.as_bytes());
        let kind = if self.is_empty() { "base" } else { "extra" };
        for p in &self.packages {
            h.update(p.as_bytes());
            h.update(b"\n");
        }
        for d in &self.debs {
            let data = std::fs::read(d).with_context(|| format!("reading {}", d.display()))?;
            h.update(
                d.file_name()
                    .map(|n| n.as_encoded_bytes())
                    .unwrap_or_default(),
            );
            h.update(sha1::Sha1::digest(&data));
        }
        let hex: String = h.finalize()[..4]
            .iter()
            .map(|b| format!("{:02x}", b))
            .collect();
        Ok(format!("{}-systemd-{}-{}.img", rel.suite(), kind, hex))
    }
}

fn image_path(extra: &Extra, rel: Release) -> Result<PathBuf> {
    Ok(dir()?.join(extra.image_name(rel)?))
}

/// The cached image of `rel`, once completely built.
pub fn cached(rel: Release) -> Option<PathBuf> {
    cached_of(&Extra::default(), rel)
}

fn cached_of(extra: &Extra, rel: Release) -> Option<PathBuf> {
    let img = image_path(extra, rel).ok()?;
    let done = img.with_extension("complete");
    (img.is_file() && done.is_file()).then_some(img)
}

/// The image of a `vm --init systemd --guest-packages …` boot: built now when it is not cached
/// (a variant needs the plain image's set-up first).
pub fn image_with(extra: &Extra, rel: Release) -> Result<PathBuf> {
    if extra.is_empty() {
        return image(rel);
    }
    image(rel)?;
    ensure_of(extra, rel)
}

/// The image a `vm --init systemd` boot uses, or a usage error naming the fix.
pub fn image(rel: Release) -> Result<PathBuf> {
    cached(rel).ok_or_else(|| {
        UsageError::new(format!(
            "vm: --init systemd needs the Debian {} root file system image, which is not built; \
             run {} (with the same --debian)",
            rel.number(),
            FIX
        ))
        .into()
    })
}

/// `vm --setup`'s part: builds the image of `rel` unless it is cached.
pub fn ensure(rel: Release) -> Result<PathBuf> {
    ensure_of(&Extra::default(), rel)
}

fn ensure_of(extra: &Extra, rel: Release) -> Result<PathBuf> {
    if let Some(img) = cached_of(extra, rel) {
        crate::errln!(
            "vm setup: systemd root file system cached at {}",
            img.display()
        );
        return Ok(img);
    }
    if which("debootstrap").is_none() {
        crate::errln!("vm setup: installing debootstrap");
        super::setup::install(&["debootstrap"])?;
    }
    let img = image_path(extra, rel)?;
    let parent = img.parent().context("the image has a directory")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tree = parent.join(format!(".tmp-{}", std::process::id()));
    let res = build(&tree, &img, extra, rel);
    let _ = run_quiet(root_cmd("rm")?.arg("-rf").arg(&tree));
    res?;
    std::fs::write(img.with_extension("complete"), rel.suite())?;
    crate::errln!(
        "vm setup: systemd root file system built at {}",
        img.display()
    );
    Ok(img)
}

fn build(tree: &Path, img: &Path, extra: &Extra, rel: Release) -> Result<()> {
    let mirror = mirror();
    crate::errln!(
        "vm setup: building a Debian {} root file system with systemd (debootstrap, about a minute)",
        rel.suite()
    );
    let t = std::time::Instant::now();
    let mut include = PACKAGES.to_string();
    for p in &extra.packages {
        include += ",";
        include += p;
    }
    let ok = run_quiet(
        root_cmd("debootstrap")?
            .args(["--variant=minbase", "--include", &include, rel.suite()])
            .arg(tree)
            .arg(&mirror)
            .stdout(std::process::Stdio::null()),
    )?;
    if !ok {
        bail!(
            "debootstrap {} from {} failed (set RESCTL_BENCH_DEBIAN_MIRROR to another mirror)",
            rel.suite(),
            mirror
        );
    }
    for deb in &extra.debs {
        // Through tar keeping the tree's directory symlinks (/lib is usr/lib): `dpkg-deb -x`
        // would put a directory in their place.
        let ok = run_quiet(
            root_cmd("sh")?
                .args([
                    "-c",
                    "dpkg-deb --fsys-tarfile \"$1\" | tar -x --keep-directory-symlink -C \"$2\"",
                    "sh",
                ])
                .arg(deb)
                .arg(tree),
        )?;
        if !ok {
            bail!(
                "unpacking {} into the root file system failed",
                deb.display()
            );
        }
    }
    customize(tree)?;
    let _ = std::fs::remove_file(img);
    let ok = run_quiet(
        root_cmd("mkfs.ext4")?
            .args(["-q", "-F", "-L", "resctl-root", "-d"])
            .arg(tree)
            .arg(img)
            .arg(if extra.is_empty() {
                IMAGE_SIZE
            } else {
                VARIANT_SIZE
            })
            .stdout(std::process::Stdio::null()),
    )?;
    if !ok {
        bail!("mkfs.ext4 -d {} {} failed", tree.display(), img.display());
    }
    log::debug!("rootfs built in {:.0}s", t.elapsed().as_secs_f64());
    Ok(())
}

/// What makes the tree a quiet disposable host: a hostname, no fstab entries (init mounts the
/// root), a volatile journal, the masked units above.
fn customize(tree: &Path) -> Result<()> {
    let w = |rel: &str, text: &str| -> Result<()> {
        let p = tree.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    };
    w("etc/hostname", "resctl-vm\n")?;
    w(
        "etc/fstab",
        "# the root file system is mounted by resctl-bench's vm init\n",
    )?;
    w(
        "etc/systemd/journald.conf.d/resctl-vm.conf",
        "[Journal]\nStorage=volatile\n",
    )?;
    // An empty machine-id: systemd makes one at every boot of the copy-on-write image.
    w("etc/machine-id", "")?;
    let sysd = tree.join("etc/systemd/system");
    std::fs::create_dir_all(&sysd)?;
    for unit in MASKED {
        let link = sysd.join(unit);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/null", &link)
            .with_context(|| format!("masking {}", unit))?;
    }
    // The SSH server only where `vm --ssh-port` starts it (`systemd.wants=` on the kernel
    // command line), not in the guests that measure.
    let _ = std::fs::remove_file(sysd.join("multi-user.target.wants/ssh.service"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_packages_are_names_or_deb_files() {
        let x = Extra::parse(&["fio,python3-bpfcc".into(), "fio".into()]).unwrap();
        assert_eq!(x.packages, ["fio", "python3-bpfcc"]);
        let rel = Release::Bookworm;
        assert!(x
            .image_name(rel)
            .unwrap()
            .starts_with("bookworm-systemd-extra-"));
        let base = Extra::parse(&[])
            .unwrap()
            .image_name(Release::DEFAULT)
            .unwrap();
        assert!(base.starts_with("trixie-systemd-base-"), "{}", base);
        assert_ne!(base, x.image_name(Release::DEFAULT).unwrap());
        assert!(Extra::parse(&["fio;rm".into()]).is_err());
        assert!(Extra::parse(&["/nonexistent/x.deb".into()]).is_err());
    }

    #[test]
    fn customize_masks_and_writes() {
        let d = tempfile::tempdir().unwrap();
        customize(d.path()).unwrap();
        let l = std::fs::read_link(
            d.path()
                .join("etc/systemd/system/serial-getty@ttyS0.service"),
        )
        .unwrap();
        assert_eq!(l, Path::new("/dev/null"));
        assert_eq!(
            std::fs::read_to_string(d.path().join("etc/hostname")).unwrap(),
            "resctl-vm\n"
        );
        // Idempotent: a second pass over the same tree works; the SSH server isn't enabled.
        let wants = d.path().join("etc/systemd/system/multi-user.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        std::os::unix::fs::symlink(
            "/usr/lib/systemd/system/ssh.service",
            wants.join("ssh.service"),
        )
        .unwrap();
        customize(d.path()).unwrap();
        assert!(std::fs::symlink_metadata(wants.join("ssh.service")).is_err());
    }
}
