//! The root file system of a `vm --init systemd` guest: a minimal Debian (debootstrap's
//! `minbase` with systemd as init, dbus, udev and systemd-oomd, enabled as the package
//! installs it) in an ext4 image, built once by `vm --setup` and cached in
//! `~/.cache/resctl-bench/rootfs/`. Guests open it copy-on-write (QEMU's `snapshot=on`), so the
//! cached image never changes and several guests can share it.

use super::setup::{cache_dir, root_cmd, run_quiet, which, FIX};
use crate::error::UsageError;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The Debian release the image is built from (the kernel `vm --setup` fetches is this
/// release's).
pub const SUITE: &str = "bookworm";
/// Where debootstrap fetches the packages; `RESCTL_BENCH_DEBIAN_MIRROR` overrides it.
const MIRROR: &str = "http://deb.debian.org/debian";
/// Packages on top of `minbase`: systemd as PID 1 and what a real test host runs beside it.
const PACKAGES: &str = "systemd,systemd-sysv,dbus,udev,systemd-oomd";
/// The image's size (sparse; the tree takes ~270 MiB).
const IMAGE_SIZE: &str = "1G";

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

fn image_path() -> Result<PathBuf> {
    Ok(dir()?.join(format!("{}-systemd.img", SUITE)))
}

/// The cached image, once completely built.
pub fn cached() -> Option<PathBuf> {
    let img = image_path().ok()?;
    let done = img.with_extension("complete");
    (img.is_file() && done.is_file()).then_some(img)
}

/// The image a `vm --init systemd` boot uses, or a usage error naming the fix.
pub fn image() -> Result<PathBuf> {
    cached().ok_or_else(|| {
        UsageError::new(format!(
            "vm: --init systemd needs the Debian root file system image, which is not built; \
             run {}",
            FIX
        ))
        .into()
    })
}

/// `vm --setup`'s part: builds the image unless it is cached.
pub fn ensure() -> Result<PathBuf> {
    if let Some(img) = cached() {
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
    let img = image_path()?;
    let parent = img.parent().context("the image has a directory")?;
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tree = parent.join(format!(".tmp-{}", std::process::id()));
    let res = build(&tree, &img);
    let _ = run_quiet(root_cmd("rm")?.arg("-rf").arg(&tree));
    res?;
    std::fs::write(img.with_extension("complete"), SUITE)?;
    crate::errln!(
        "vm setup: systemd root file system built at {}",
        img.display()
    );
    Ok(img)
}

fn build(tree: &Path, img: &Path) -> Result<()> {
    let mirror = std::env::var("RESCTL_BENCH_DEBIAN_MIRROR")
        .ok()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| MIRROR.to_string());
    crate::errln!(
        "vm setup: building a Debian {} root file system with systemd (debootstrap, about a minute)",
        SUITE
    );
    let t = std::time::Instant::now();
    let ok = run_quiet(
        root_cmd("debootstrap")?
            .args(["--variant=minbase", "--include", PACKAGES, SUITE])
            .arg(tree)
            .arg(&mirror)
            .stdout(std::process::Stdio::null()),
    )?;
    if !ok {
        bail!(
            "debootstrap {} from {} failed (set RESCTL_BENCH_DEBIAN_MIRROR to another mirror)",
            SUITE,
            mirror
        );
    }
    customize(tree)?;
    let _ = std::fs::remove_file(img);
    let ok = run_quiet(
        root_cmd("mkfs.ext4")?
            .args(["-q", "-F", "-L", "resctl-root", "-d"])
            .arg(tree)
            .arg(img)
            .arg(IMAGE_SIZE)
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Idempotent: a second pass over the same tree works.
        customize(d.path()).unwrap();
    }
}
