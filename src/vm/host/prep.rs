//! What a boot needs on the host side: the work directory, the initramfs with this binary,
//! the scratch disk image, the guest environment, and the signals that stop the VM.

use crate::vm::initramfs;
use crate::vm::protocol::GuestConfig;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

pub(super) static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

pub(super) fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

pub(super) fn interrupted() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The private work directory: initramfs, disk image, sockets. Removed on drop, except the disk
/// image with `--keep`.
pub(super) struct WorkDir {
    pub(super) path: PathBuf,
    pub(super) keep_disk: bool,
}

impl WorkDir {
    pub(super) fn create(keep_disk: bool) -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::var_os("TMPDIR")
            .filter(|t| !t.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/var/tmp"));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = base.join(format!(
            "resctl-bench-vm.{}.{:08x}",
            std::process::id(),
            nanos
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(Self { path, keep_disk })
    }

    pub(super) fn disk(&self) -> PathBuf {
        self.path.join("disk.img")
    }

    pub(super) fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.keep_disk && self.disk().exists() {
            if let Ok(rd) = std::fs::read_dir(&self.path) {
                for e in rd.flatten() {
                    if e.path() != self.disk() {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
            crate::errln!("vm: kept the scratch disk image {}", self.disk().display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// QEMU, killed when dropped.
pub(super) struct Qemu(pub(super) Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

pub(super) fn build_initramfs(
    path: &Path,
    cfg: &mut GuestConfig,
    modules: &[(String, PathBuf)],
    module_params: &[(String, String)],
    programs: &[PathBuf],
) -> Result<()> {
    let exe = std::env::current_exe().context("locating our own binary")?;
    let mut b = initramfs::Builder::create(path)?;
    for d in ["proc", "sys", "dev", "tmp", "run", "root", "mnt", "etc"] {
        b.dir(d)?;
    }
    b.chardev("dev/console", 5, 1)?;
    b.chardev("dev/null", 1, 3)?;
    b.program(&exe, "init")?;
    b.symlink("bin/resctl-bench", "/init")?;
    b.data("etc/passwd", 0o644, b"root:x:0:0:root:/root:/bin/sh\n")?;
    b.data("etc/group", 0o644, b"root:x:0:\n")?;
    if let Ok(tz) = std::fs::read("/etc/localtime") {
        b.data("etc/localtime", 0o644, &tz)?;
    }
    if let Ok(tz) = std::env::var("TZ") {
        let name = tz.trim_start_matches(':');
        let src = Path::new("/usr/share/zoneinfo").join(name);
        if !name.is_empty() && !name.contains("..") && src.is_file() {
            b.host_file(&src, &format!("usr/share/zoneinfo/{}", name), 0o644)?;
        }
    }
    for (i, (name, file)) in modules.iter().enumerate() {
        let dst = format!("lib/resctl-vm/{:02}-{}.ko", i, name);
        b.host_file(file, &dst, 0o644)?;
        cfg.modules.push(format!("/{}", dst));
        let norm = |n: &str| n.replace('-', "_");
        if let Some((_, p)) = module_params
            .iter()
            .find(|(n, p)| !p.is_empty() && norm(n) == norm(name))
        {
            cfg.module_params.push((format!("/{}", dst), p.clone()));
        }
    }
    for p in programs {
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .context("a program's file name")?;
        let dst = format!("usr/bin/{}", name);
        let libs = b.program(p, &dst)?;
        cfg.programs.push(format!("/{}", dst));
        for l in libs {
            let l = format!("/{}", l.trim_start_matches('/'));
            if !cfg.program_libs.contains(&l) {
                cfg.program_libs.push(l);
            }
        }
    }
    let json = serde_json::to_vec_pretty(cfg)?;
    b.data(crate::vm::protocol::GUEST_CONFIG, 0o644, &json)?;
    b.finish()
}

pub(super) fn make_disk(mkfs: &Path, path: &Path, size: u64) -> Result<bool> {
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.set_len(size)
        .with_context(|| format!("sizing {}", path.display()))?;
    drop(f);
    let out = Command::new(mkfs)
        .args(["-F", "-q", "-L", "resctl-scratch", "-m", "0"])
        .args(["-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", mkfs.display()))?;
    if !out.status.success() {
        bail!(
            "{} {} failed: {}",
            mkfs.display(),
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // O_DIRECT on the image (cache=none) keeps the host page cache out of the measurements;
    // filesystems such as tmpfs don't support it.
    use std::os::unix::fs::OpenOptionsExt;
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .is_ok())
}

pub(super) fn guest_env(profile: &str) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("HOME".into(), "/root".into()),
        ("RESCTL_BENCH_VM".into(), profile.to_string()),
    ];
    // The guest's stderr reaches ours byte for byte: on a terminal, its progress display is
    // the redrawn line a run on this host would show.
    if let Some(cols) = stderr_cols() {
        env.push((
            crate::logging::progress::TERM_COLS_ENV.to_string(),
            cols.to_string(),
        ));
    }
    for k in [
        "TZ",
        "RUST_LOG",
        "RUST_BACKTRACE",
        "LANG",
        "LC_ALL",
        "NO_COLOR",
        "COLUMNS",
    ] {
        if let Ok(v) = std::env::var(k) {
            env.push((k.to_string(), v));
        }
    }
    env
}

/// The width of the terminal on our stderr; `None` when stderr isn't a terminal.
fn stderr_cols() -> Option<u16> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ fills the winsize we pass; fd 2 stays open for the call.
    let rc = unsafe { libc::ioctl(2, libc::TIOCGWINSZ, &mut ws) };
    // A terminal that reports no size (some serial consoles) is taken as 80 columns.
    Some(if rc == 0 && ws.ws_col > 0 {
        ws.ws_col
    } else {
        80
    })
}
