//! What the VM needs on the host, where it is, and `vm --setup` which installs what is missing
//! (Debian packages) and fetches the Debian kernel into `~/.cache/resctl-bench/kernel/`.

use super::release::{mirror, Release};
use crate::error::UsageError;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The command that fixes a missing piece.
pub const FIX: &str = "resctl-bench vm --setup (or scripts/setup-vm in the source tree)";

/// The Debian package holding `nbdkit` and its delay filter (`nbd` runs it).
pub const NBDKIT: &str = "nbdkit";

/// Host programs the VM needs and the Debian package holding each.
pub const TOOLS: &[(&str, &str)] = &[
    ("qemu-system-x86_64", "qemu-system-x86"),
    ("mkfs.ext4", "e2fsprogs"),
    ("ldd", "libc-bin"),
    // Only disk profiles with a per-IO latency (hdd) use it.
    (NBDKIT, NBDKIT),
];

pub use crate::util::proc::which;

/// A host program the VM needs, or a usage error naming the fix.
pub fn tool(cmd: &str) -> Result<PathBuf> {
    which(cmd)
        .ok_or_else(|| UsageError::new(format!("vm: {} is not installed; run {}", cmd, FIX)).into())
}

pub fn cache_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("resctl-bench"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| UsageError::new("vm: neither XDG_CACHE_HOME nor HOME is set"))?;
    Ok(PathBuf::from(home).join(".cache/resctl-bench"))
}

/// A kernel image with its modules tree.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub image: PathBuf,
    pub modules: PathBuf,
}

fn uname_release() -> Option<String> {
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let rel = unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) };
    Some(rel.to_string_lossy().into_owned())
}

/// The running kernel's image and modules, when the host has both.
pub fn host_kernel() -> Option<Kernel> {
    let rel = uname_release()?;
    let k = Kernel {
        image: PathBuf::from(format!("/boot/vmlinuz-{}", rel)),
        modules: PathBuf::from(format!("/lib/modules/{}", rel)),
    };
    (std::fs::File::open(&k.image).is_ok() && k.modules.is_dir()).then_some(k)
}

/// The unpacked Debian kernel package under `root` (`boot/vmlinuz-V`, `[usr/]lib/modules/V`).
fn unpacked_kernel(root: &Path) -> Option<Kernel> {
    let image = std::fs::read_dir(root.join("boot"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-"))
        })?;
    let ver = image.file_name()?.to_string_lossy()["vmlinuz-".len()..].to_string();
    let modules = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|m| root.join(m).join(&ver))
        .find(|m| m.is_dir())?;
    Some(Kernel { image, modules })
}

/// Where the kernels of `rel` are cached: `kernel/<suite>/<version>/`.
fn kernel_cache(rel: Release) -> Result<PathBuf> {
    Ok(cache_dir()?.join("kernel").join(rel.suite()))
}

/// The newest completely unpacked kernel of `rel` in the cache.
pub fn cached_kernel(rel: Release) -> Option<Kernel> {
    let vers = complete_versions(&kernel_cache(rel).ok()?);
    vers.iter().rev().find_map(|v| unpacked_kernel(v))
}

/// The folders in `dir` named for a version whose unpacking finished (they hold `.complete`),
/// oldest first. Runs of digits compare as numbers: "6.12.117" comes after "6.12.57" and
/// "10.0.2" after "9.2.1", which a plain sort of the names gets wrong.
pub(super) fn complete_versions(dir: &Path) -> Vec<PathBuf> {
    let mut vers: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(".complete").is_file())
        .collect();
    vers.sort_by_cached_key(|p| version_key(&p.file_name().unwrap_or_default().to_string_lossy()));
    vers
}

/// A part of a version name: a run of digits, as a number, or a run of other characters (a
/// number sorts before text in the same place).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum VersionPart {
    Num(u64),
    Text(String),
}

fn version_key(name: &str) -> Vec<VersionPart> {
    let mut key = Vec::new();
    let mut chars = name.chars().peekable();
    while let Some(&c) = chars.peek() {
        let digit = c.is_ascii_digit();
        let mut run = String::new();
        while let Some(c) = chars.next_if(|c| c.is_ascii_digit() == digit) {
            run.push(c);
        }
        key.push(match digit {
            true => VersionPart::Num(run.parse().unwrap_or(u64::MAX)),
            false => VersionPart::Text(run),
        });
    }
    key
}

/// Why no kernel was found: one that is there but unreadable (root-only kernel images, a cache
/// set up by another user) says so, as that needs another fix than `vm --setup`.
fn no_kernel_error() -> UsageError {
    use std::io::ErrorKind::PermissionDenied;
    if let Some(rel) = uname_release() {
        let image = format!("/boot/vmlinuz-{}", rel);
        if let Err(e) = std::fs::File::open(&image) {
            if e.kind() == PermissionDenied {
                return UsageError::new(format!(
                    "vm: the host kernel {} can't be read ({}): run resctl-bench vm as root \
                     (e.g. with sudo), or run {} as yourself to cache a kernel you can read",
                    image, e, FIX
                ));
            }
        }
    }
    if let Ok(cache) = cache_dir() {
        let dir = cache.join("kernel");
        let unreadable = match std::fs::read_dir(&dir) {
            Err(e) if e.kind() == PermissionDenied => Some((dir.clone(), e)),
            Err(_) => None,
            Ok(vers) => vers.flatten().find_map(|v| {
                let boot = v.path().join("boot");
                match std::fs::read_dir(&boot) {
                    Err(e) if e.kind() == PermissionDenied => Some((boot, e)),
                    _ => None,
                }
            }),
        };
        if let Some((path, e)) = unreadable {
            return UsageError::new(format!(
                "vm: the cached kernel in {} can't be read ({}): the cache belongs to the user \
                 who ran `vm --setup`; run vm as that user (e.g. root), or point XDG_CACHE_HOME \
                 at a cache of your own and run {}",
                path.display(),
                e,
                FIX
            ));
        }
    }
    UsageError::new(format!(
        "vm: no kernel for the VM (the host has no /boot/vmlinuz-$(uname -r) and none is cached \
         for the guest's Debian release); run {} (with the same --debian)",
        FIX
    ))
}

/// The kernel a VM boots: the options, else the host's, else the cached one of `rel`.
pub fn kernel(image: Option<&Path>, modules: Option<&Path>, rel: Release) -> Result<Kernel> {
    let dfl = host_kernel().or_else(|| cached_kernel(rel));
    let pick = |opt: Option<&Path>, from_dfl: fn(&Kernel) -> &PathBuf| -> Result<PathBuf> {
        match (opt, &dfl) {
            (Some(p), _) => Ok(p.to_path_buf()),
            (None, Some(k)) => Ok(from_dfl(k).clone()),
            (None, None) => Err(no_kernel_error().into()),
        }
    };
    let k = Kernel {
        image: pick(image, |k| &k.image)?,
        modules: pick(modules, |k| &k.modules)?,
    };
    if let Err(e) = std::fs::File::open(&k.image) {
        let given = if image.is_some() {
            "--kernel "
        } else {
            "vm: the kernel "
        };
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            crate::usage_bail!(
                "{}{} can't be read ({}): run resctl-bench vm as root (e.g. with sudo) or as \
                 the user who cached it",
                given,
                k.image.display(),
                e
            );
        }
        crate::usage_bail!(
            "{}{}: cannot read the file ({})",
            given,
            k.image.display(),
            e
        );
    }
    if !k.modules.is_dir() {
        crate::usage_bail!("--modules {}: not a directory", k.modules.display());
    }
    Ok(k)
}

pub(super) fn run_quiet(cmd: &mut Command) -> Result<bool> {
    log::debug!("running {:?}", cmd);
    Ok(cmd
        .status()
        .with_context(|| format!("running {:?}", cmd))?
        .success())
}

pub(super) fn root_cmd(prog: &str) -> Result<Command> {
    if unsafe { libc::geteuid() } == 0 {
        return Ok(Command::new(prog));
    }
    if which("sudo").is_none() {
        bail!(
            "installing packages needs root (or sudo): run {} as root",
            FIX
        );
    }
    let mut c = Command::new("sudo");
    c.arg(prog);
    Ok(c)
}

fn apt_update() -> Result<()> {
    if !run_quiet(root_cmd("apt-get")?.args(["update", "-q"]))? {
        bail!("apt-get update failed");
    }
    Ok(())
}

pub(super) fn install(pkgs: &[&str]) -> Result<()> {
    let attempt = || -> Result<bool> {
        run_quiet(
            root_cmd("apt-get")?
                .args(["install", "-y", "-q", "--no-install-recommends"])
                .args(pkgs)
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
    };
    if attempt()? {
        return Ok(());
    }
    apt_update()?;
    if !attempt()? {
        bail!("apt-get install {} failed", pkgs.join(" "));
    }
    Ok(())
}

/// apt's options that make it read `rel`'s own archive instead of the host's sources: a
/// sources list, package lists and a cache of its own under ours.
fn apt_opts(rel: Release) -> Result<Vec<String>> {
    apt_opts_suite(rel.suite())
}

/// [`apt_opts`] for any suite of the archive, e.g. `bookworm-backports`.
pub(super) fn apt_opts_suite(suite: &str) -> Result<Vec<String>> {
    let d = cache_dir()?.join("apt").join(suite);
    for sub in ["lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(d.join(sub))
            .with_context(|| format!("creating {}", d.join(sub).display()))?;
    }
    let list = d.join("sources.list");
    std::fs::write(&list, format!("deb {} {} main\n", mirror(), suite))
        .with_context(|| format!("writing {}", list.display()))?;
    let mut o = vec![
        format!("Dir::Etc::sourcelist={}", list.display()),
        "Dir::Etc::sourceparts=/dev/null".to_string(),
        format!("Dir::State::Lists={}", d.join("lists").display()),
        format!("Dir::Cache={}", d.join("cache").display()),
    ];
    if unsafe { libc::geteuid() } == 0 {
        // Root downloads into directories the _apt sandbox user can't write; say so.
        o.push("APT::Sandbox::User=root".to_string());
    }
    Ok(o.into_iter().flat_map(|v| ["-o".to_string(), v]).collect())
}

/// The versioned package `rel`'s `linux-image-amd64` depends on, e.g.
/// `linux-image-6.12.57+deb13-amd64`, from the release's archive (its index fetched first).
fn kernel_package(rel: Release, apt: &[String]) -> Result<String> {
    apt_update_private(rel.suite(), apt)?;
    let out = Command::new("apt-cache")
        .args(apt)
        .args(["depends", "linux-image-amd64"])
        .output()
        .context("running apt-cache depends linux-image-amd64")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends:"))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && !p.starts_with('<'))
        .map(str::to_string)
        .with_context(|| format!("Debian {}'s archive has no linux-image-amd64", rel.suite()))
}

/// Fetches the index of `suite` into the private lists of `apt` ([`apt_opts_suite`]).
pub(super) fn apt_update_private(suite: &str, apt: &[String]) -> Result<()> {
    if !run_quiet(Command::new("apt-get").args(apt).args(["update", "-q"]))? {
        bail!(
            "apt-get update of Debian's {} archive at {} failed (set RESCTL_BENCH_DEBIAN_MIRROR \
             to another mirror)",
            suite,
            mirror()
        );
    }
    Ok(())
}

/// Uncompresses the `.ko.xz` modules of a tree in place (the guest's init loads plain ELF
/// modules; Debian 13 ships them xz-compressed).
fn uncompress_modules(root: &Path) -> Result<()> {
    let ok = run_quiet(
        Command::new("find")
            .arg(root)
            .args(["-name", "*.ko.xz", "-exec", "xz", "-d", "{}", "+"]),
    )?;
    if !ok {
        bail!(
            "uncompressing the kernel modules under {} with xz failed",
            root.display()
        );
    }
    Ok(())
}

fn fetch_kernel(rel: Release) -> Result<Kernel> {
    let apt = apt_opts(rel)?;
    let pkg = kernel_package(rel, &apt)?;
    let kdir = kernel_cache(rel)?;
    let tmp = kdir.join(format!(".tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let res = (|| -> Result<Kernel> {
        crate::errln!("vm setup: downloading {} (Debian {})", pkg, rel.suite());
        if !run_quiet(
            Command::new("apt-get")
                .args(&apt)
                .args(["download", "-q", &pkg])
                .current_dir(&tmp),
        )? {
            bail!("apt-get download {} failed", pkg);
        }
        let deb = std::fs::read_dir(&tmp)?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "deb"))
            .context("apt-get download left no .deb")?;
        let root = tmp.join("root");
        if !run_quiet(Command::new("dpkg").arg("-x").arg(&deb).arg(&root))? {
            bail!("dpkg -x {} failed", deb.display());
        }
        uncompress_modules(&root)?;
        unpacked_kernel(&root).context("the package holds no boot/vmlinuz-* with its modules")?;
        let dest = kdir.join(pkg.trim_start_matches("linux-image-"));
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&root, &dest)?;
        std::fs::write(dest.join(".complete"), &pkg)?;
        unpacked_kernel(&dest).context("unpacked kernel vanished")
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    res
}

/// `vm --setup`: install missing packages and make sure a kernel for `rel` is available.
/// Idempotent; a second run only checks.
pub fn run(rel: Release) -> Result<()> {
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(cmd, _)| which(cmd).is_none())
        .map(|(_, pkg)| *pkg)
        .collect();
    if missing.is_empty() {
        crate::errln!("vm setup: qemu, mkfs.ext4, ldd and nbdkit are installed");
    } else {
        crate::errln!("vm setup: installing {}", missing.join(" "));
        install(&missing)?;
    }
    if let Some(k) = host_kernel() {
        crate::errln!("vm setup: using the host's kernel {}", k.image.display());
    } else if let Some(k) = cached_kernel(rel) {
        crate::errln!("vm setup: kernel cached at {}", k.image.display());
    } else {
        for (cmd, pkg) in [("apt-get", "apt"), ("dpkg", "dpkg")] {
            if which(cmd).is_none() {
                bail!("{} ({}) is needed to fetch the Debian kernel", cmd, pkg);
            }
        }
        // Debian 13's modules come xz-compressed; xz-utils is only "standard" priority.
        if which("xz").is_none() {
            crate::errln!("vm setup: installing xz-utils");
            install(&["xz-utils"])?;
        }
        let k = fetch_kernel(rel)?;
        crate::errln!("vm setup: kernel unpacked at {}", k.image.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacked_kernel_is_found_in_both_layouts() {
        for modroot in ["lib/modules", "usr/lib/modules"] {
            let d = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(d.path().join("boot")).unwrap();
            std::fs::write(d.path().join("boot/vmlinuz-6.1.0-9-amd64"), b"k").unwrap();
            std::fs::write(d.path().join("boot/config-6.1.0-9-amd64"), b"c").unwrap();
            std::fs::create_dir_all(d.path().join(modroot).join("6.1.0-9-amd64/kernel")).unwrap();
            let k = unpacked_kernel(d.path()).unwrap();
            assert!(k.image.ends_with("boot/vmlinuz-6.1.0-9-amd64"));
            assert!(k.modules.ends_with(format!("{}/6.1.0-9-amd64", modroot)));
        }
        let empty = tempfile::tempdir().unwrap();
        assert!(unpacked_kernel(empty.path()).is_none());
    }

    #[test]
    fn cached_versions_are_ordered_by_their_numbers_and_only_complete_ones_count() {
        let d = tempfile::tempdir().unwrap();
        let names = [
            "6.12.117+deb13-amd64",
            "6.12.57+deb13-amd64",
            "6.1.0-9-amd64",
            "6.1.0-50-amd64",
            "10.0.2",
            "9.2.1",
        ];
        for n in names {
            std::fs::create_dir(d.path().join(n)).unwrap();
            std::fs::write(d.path().join(n).join(".complete"), "").unwrap();
        }
        std::fs::create_dir(d.path().join("6.12.200+deb13-amd64")).unwrap();
        let got: Vec<String> = complete_versions(d.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            got,
            [
                "6.1.0-9-amd64",
                "6.1.0-50-amd64",
                "6.12.57+deb13-amd64",
                "6.12.117+deb13-amd64",
                "9.2.1",
                "10.0.2"
            ]
        );
        assert!(complete_versions(&d.path().join("missing")).is_empty());
    }
}
