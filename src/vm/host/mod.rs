//! The host side of `resctl-bench vm`: validate the options, build the initramfs and the scratch
//! disk in a private work directory, boot QEMU, relay output and events, return the command's
//! exit status, and clean up whatever happens (normal exit, failure, Ctrl-C, SIGTERM).

use super::channel::{self, Relay, Tail};
use super::profiles::DiskLimits;
use super::{initramfs, kmod, qemu, setup, Event, GuestConfig, VmArgs};
use crate::error::UsageError;
use crate::system::DFL_DIR;
use crate::units::parse;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// Validated options.
#[derive(Debug, Clone)]
pub struct Opts {
    pub mem: u64,
    pub cpus: u32,
    pub disk_size: u64,
    pub swap_size: u64,
    pub limits: DiskLimits,
    pub accel: String,
    pub boot_timeout: Duration,
    pub timeout: Option<Duration>,
    /// Longest silence of a running guest (no heartbeat) before it counts as stalled.
    pub stall_timeout: Option<Duration>,
    /// Guest command arguments (with `--dir` added when given to `vm` itself).
    pub args: Vec<String>,
    pub scratch_dir: PathBuf,
    /// Host directory for the guest's `<--dir>/report.d` (with `-r FILE`).
    pub reports_dir: Option<PathBuf>,
}

fn bad(opt: &str, e: String) -> anyhow::Error {
    UsageError::new(format!("--{} {}", opt, e)).into()
}

/// `--disk-latency`: whole milliseconds, 0 for none (nbdkit's delay filter counts in ms).
fn disk_latency_ms(s: &str) -> std::result::Result<u32, String> {
    let secs = parse::parse_duration(s)?;
    let ms = (secs * 1000.0).round();
    if secs == 0.0 || (1.0..=10_000.0).contains(&ms) && (secs * 1000.0 - ms).abs() < 1e-6 {
        Ok(ms as u32)
    } else {
        Err(format!(
            "{:?} is not a per-IO latency (accepted: 0 for none, or 1ms to 10s in whole milliseconds)",
            s
        ))
    }
}

/// The value of the option `-<short>`/`--<long>` in resctl-bench arguments, if any.
fn opt_arg(args: &[String], short: &str, long: &str) -> Option<String> {
    let (short, long) = (format!("-{}", short), format!("--{}", long));
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if *a == short || *a == long {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix(&format!("{}=", long)) {
            return Some(v.to_string());
        }
        if let Some(v) = a
            .strip_prefix(&short)
            .filter(|v| !v.is_empty() && !a.starts_with("--"))
        {
            return Some(v.to_string());
        }
    }
    None
}

/// The `-d/--dir` value in resctl-bench arguments, if any.
pub fn dir_arg(args: &[String]) -> Option<String> {
    opt_arg(args, "d", "dir")
}

/// The `-r/--result` value in resctl-bench arguments, if any.
pub fn result_arg(args: &[String]) -> Option<String> {
    opt_arg(args, "r", "result")
}

/// `p` with `.` and `..` resolved lexically.
fn normalize(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Where the guest's per-second reports go on the host: the result file's default report
/// directory (`<dir of FILE>/<stem>-report.d`, where `study` looks), when the guest command has
/// `-r FILE` and FILE lands on the host (inside the shared directory, not on the scratch disk).
fn host_reports_dir(args: &[String], cwd: &Path, scratch_dir: &Path) -> Option<PathBuf> {
    let result = result_arg(args).filter(|r| !r.is_empty())?;
    let result = normalize(&cwd.join(result));
    let dir = crate::result::pack::default_reports_dir(&result);
    if dir.starts_with(cwd) && !dir.starts_with(scratch_dir) {
        Some(dir)
    } else {
        log::warn!(
            "vm: {} is not in the shared directory {}: it and its per-second reports stay in the guest",
            result.display(),
            cwd.display()
        );
        None
    }
}

impl Opts {
    /// `dir` is the `--dir` given to `vm` itself (passed on to the command).
    pub fn new(dir: Option<&str>, a: &VmArgs, cwd: &Path) -> Result<Self> {
        let mem = parse::parse_size(&a.mem).map_err(|e| bad("mem", e))? / MIB * MIB;
        if mem < 256 * MIB {
            crate::usage_bail!("--mem {:?} is too small (at least 256M)", a.mem);
        }
        let cpus = match &a.cpus {
            Some(s) => match s.trim().parse::<u32>() {
                Ok(n) if (1..=256).contains(&n) => n,
                _ => crate::usage_bail!("--cpus {:?} is not a CPU count (accepted: 1-256)", s),
            },
            None => std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
        };
        let disk_size =
            parse::parse_size(&a.disk_size).map_err(|e| bad("disk-size", e))? / MIB * MIB;
        let swap_size = match &a.swap_size {
            Some(s) => parse::parse_size(s).map_err(|e| bad("swap-size", e))? / MIB * MIB,
            None => mem / 2 / MIB * MIB,
        };
        if swap_size > 0 && swap_size < MIB {
            crate::usage_bail!("--swap-size is too small (0 for none, or at least 1M)");
        }
        if disk_size < swap_size + 256 * MIB {
            crate::usage_bail!(
                "--disk-size {:?} is too small: it must hold the {} MiB swap file plus at least 256M",
                a.disk_size,
                swap_size / MIB
            );
        }
        let iops = a
            .disk_iops
            .as_deref()
            .map(|s| parse::parse_int(s).map_err(|e| bad("disk-iops", e)))
            .transpose()?;
        let bps = a
            .disk_bps
            .as_deref()
            .map(|s| parse::parse_size(s).map_err(|e| bad("disk-bps", e)))
            .transpose()?;
        let latency_ms = a
            .disk_latency
            .as_deref()
            .map(|s| disk_latency_ms(s).map_err(|e| bad("disk-latency", e)))
            .transpose()?;
        let limits = DiskLimits::resolve(a.disk_profile.as_deref(), iops, bps, latency_ms)?;
        if !["auto", "kvm", "tcg"].contains(&a.accel.as_str()) {
            crate::usage_bail!(
                "--accel {:?} is not an accelerator (accepted: auto, kvm, tcg)",
                a.accel
            );
        }
        let dur = |opt: &str, s: &str| -> Result<Duration> {
            let secs = parse::parse_duration(s).map_err(|e| bad(opt, e))?;
            if secs <= 0.0 {
                return Err(bad(opt, format!("{:?} must be longer than 0", s)));
            }
            Ok(Duration::from_secs_f64(secs.min(1e9)))
        };
        let boot_timeout = dur("boot-timeout", &a.boot_timeout)?;
        let timeout = a
            .timeout
            .as_deref()
            .map(|s| dur("timeout", s))
            .transpose()?;
        let stall_timeout = match parse::parse_duration(&a.stall_timeout) {
            Ok(0.0) => None,
            Ok(secs) if secs >= 2.0 * super::HEARTBEAT_EVERY.as_secs_f64() && secs < 1e9 => {
                Some(Duration::from_secs_f64(secs))
            }
            Ok(_) => {
                return Err(bad(
                    "stall-timeout",
                    format!(
                        "{:?} is too short: the guest sends a heartbeat every {}s (accepted: 10s or more, or 0 for off)",
                        a.stall_timeout,
                        super::HEARTBEAT_EVERY.as_secs()
                    ),
                ))
            }
            Err(e) => return Err(bad("stall-timeout", e)),
        };

        // The scratch disk goes where the guest command's --dir points.
        let mut args = a.args.clone();
        let dir = match (dir_arg(&args), dir) {
            (Some(d), _) => d,
            (None, Some(d)) => {
                args.splice(0..0, ["--dir".to_string(), d.to_string()]);
                d.to_string()
            }
            (None, None) => String::new(),
        };
        let scratch_dir = if dir.is_empty() {
            PathBuf::from(DFL_DIR)
        } else {
            cwd.join(dir)
        };
        if scratch_dir == Path::new("/") || scratch_dir == cwd {
            crate::usage_bail!(
                "--dir {}: the scratch disk can't be mounted over / or the shared working directory",
                scratch_dir.display()
            );
        }
        let reports_dir = host_reports_dir(&args, cwd, &scratch_dir);
        Ok(Self {
            mem,
            cpus,
            disk_size,
            swap_size,
            limits,
            accel: a.accel.clone(),
            boot_timeout,
            timeout,
            stall_timeout,
            args,
            scratch_dir,
            reports_dir,
        })
    }
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

fn interrupted() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// The private work directory: initramfs, disk image, sockets. Removed on drop, except the disk
/// image with `--keep`.
struct WorkDir {
    path: PathBuf,
    keep_disk: bool,
}

impl WorkDir {
    fn create(keep_disk: bool) -> Result<Self> {
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

    fn disk(&self) -> PathBuf {
        self.path.join("disk.img")
    }

    fn file(&self, name: &str) -> PathBuf {
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
            eprintln!("vm: kept the scratch disk image {}", self.disk().display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// QEMU, killed when dropped.
struct Qemu(Child);

impl Drop for Qemu {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn build_initramfs(
    path: &Path,
    cfg: &mut GuestConfig,
    modules: &[(String, PathBuf)],
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
    }
    let json = serde_json::to_vec_pretty(cfg)?;
    b.data(super::GUEST_CONFIG, 0o644, &json)?;
    b.finish()
}

fn make_disk(mkfs: &Path, path: &Path, size: u64) -> Result<bool> {
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

fn guest_env(profile: &str) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
        ),
        ("HOME".into(), "/root".into()),
        ("RESCTL_BENCH_VM".into(), profile.to_string()),
    ];
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

/// `resctl-bench vm`: returns the exit status of the guest command.
/// `dir` and `verbose` are `vm`'s own `--dir` and `-v`.
pub fn run(dir: Option<&str>, verbose: u8, a: &VmArgs) -> Result<i32> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let opts = Opts::new(dir, a, &cwd)?;
    if a.setup {
        setup::run()?;
        if a.args.is_empty() {
            return Ok(0);
        }
    }
    if a.args.is_empty() {
        crate::usage_bail!(
            "vm: give the resctl-bench arguments to run after `--`, e.g. `resctl-bench vm -- --version`"
        );
    }
    if cwd == Path::new("/") {
        crate::usage_bail!("vm: run it from a directory other than / (the working directory is shared with the guest)");
    }
    let cwd_str = cwd
        .to_str()
        .context("the current directory is not valid UTF-8")?
        .to_string();
    let nbdkit = match opts.limits.latency_ms {
        Some(_) => Some(super::nbd::tool(&opts.limits.name)?),
        None => None,
    };
    let qemu_bin = setup::tool("qemu-system-x86_64")?;
    let mkfs = setup::tool("mkfs.ext4")?;
    setup::tool("ldd")?;
    let kernel = setup::kernel(a.kernel.as_deref(), a.modules.as_deref())?;
    let modules = kmod::Tree::scan(&kernel.modules)
        .and_then(|t| t.load_order(kmod::NEEDED))
        .with_context(|| {
            format!(
                "kernel modules in {} (use --kernel/--modules with an uncompressed-module kernel, e.g. the one {} caches)",
                kernel.modules.display(),
                setup::FIX
            )
        })?;

    // Reports land on the host next to the result (the guest bind-mounts this directory at
    // `<--dir>/report.d`); a symlink leading out of the shared directory would not resolve there.
    let reports_dir = match &opts.reports_dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .with_context(|| format!("creating the report directory {}", d.display()))?;
            let real = d.canonicalize()?;
            if real.starts_with(&cwd) {
                Some(real.to_string_lossy().into_owned())
            } else {
                log::warn!(
                    "vm: {} leads out of the shared directory; per-second reports stay in the guest",
                    d.display()
                );
                None
            }
        }
        None => None,
    };

    catch_signals();
    let work = WorkDir::create(a.keep)?;
    let mut cfg = GuestConfig {
        args: opts.args.clone(),
        cwd: cwd_str,
        env: guest_env(&opts.limits.name),
        modules: Vec::new(),
        serial: opts.limits.serial(),
        rotational: opts.limits.rotational,
        scratch_dir: opts.scratch_dir.to_string_lossy().into_owned(),
        reports_dir,
        swap_size: opts.swap_size,
        verbose,
    };
    let t0 = Instant::now();
    let initrd = work.path.join("initramfs.cpio");
    build_initramfs(&initrd, &mut cfg, &modules)?;
    let disk_direct = make_disk(&mkfs, &work.disk(), opts.disk_size)?;
    log::debug!(
        "vm: initramfs and {} MiB disk ready in {:.2}s",
        opts.disk_size / MIB,
        t0.elapsed().as_secs_f64()
    );
    // Declared after `work`, so dropped (stopped, socket removed) before it on every return.
    let _nbd_server;
    let nbd_sock = work.file("nbd.sock");
    let nbd = match (&nbdkit, opts.limits.latency_ms) {
        (Some(bin), Some(latency_ms)) => {
            _nbd_server = super::nbd::Server {
                image: &work.disk(),
                socket: &nbd_sock,
                pidfile: &work.file("nbdkit.pid"),
                latency_ms,
                direct: disk_direct,
            }
            .start(bin, &work.file("nbdkit.log"))?;
            Some(nbd_sock.as_path())
        }
        _ => None,
    };
    if let Some(sig) = interrupted() {
        return Ok(128 + sig);
    }

    let kvm_known = qemu::kvm_cached().is_some();
    let kvm = match opts.accel.as_str() {
        "kvm" => true,
        "tcg" => false,
        _ => qemu::kvm_works(),
    };
    if kvm && opts.accel == "auto" && !kvm_known {
        log::info!(
            "vm: first VM since the host booted: trying KVM (if the guest makes no progress in {}s, TCG is used and remembered until the host reboots)",
            KVM_TRIAL.as_secs()
        );
    }
    let mut cmdline = "console=ttyS0 panic=-1 psi=1 mitigations=off rdinit=/init".to_string();
    if verbose < 2 {
        cmdline += " quiet";
    }
    let mut machine = qemu::Machine {
        qemu: &qemu_bin,
        kvm,
        mem: opts.mem,
        cpus: opts.cpus,
        kernel: &kernel.image,
        initrd: &initrd,
        cmdline,
        disk: &work.disk(),
        nbd,
        disk_direct,
        limits: &opts.limits,
        share: &cwd,
        sockets: Vec::new(),
    };
    let mut boot = boot(
        &mut machine,
        &work,
        &opts,
        verbose,
        kvm && opts.accel == "auto",
    )?;
    if matches!(boot.outcome, Outcome::KvmFailed) {
        log::info!(
            "vm: the guest made no progress under KVM in {}s; using TCG (remembered until the host reboots)",
            KVM_TRIAL.as_secs()
        );
        qemu::remember_kvm(false);
        machine.kvm = false;
        boot = boot_tcg(&mut machine, &work, &opts, verbose)?;
    }
    let Boot {
        outcome,
        console,
        qemu_err,
    } = boot;
    let fail = |what: String| -> anyhow::Error {
        let mut msg = what;
        let qe = qemu_err.lines(5);
        if !qe.is_empty() {
            msg += &format!("\nqemu: {}", qe.join("\nqemu: "));
        }
        let con = console.lines(15);
        if !con.is_empty() {
            msg += &format!("\nlast guest console lines:\n  {}", con.join("\n  "));
        }
        anyhow::anyhow!(msg)
    };
    match outcome {
        Outcome::Exit(code) => Ok(code),
        Outcome::Signal(sig) => {
            eprintln!("vm: stopped by signal {}", sig);
            Ok(128 + sig)
        }
        Outcome::GuestError(msg) => Err(fail(format!("vm: guest setup failed: {}", msg))),
        Outcome::NoStatus(st) => Err(fail(format!(
            "vm: the VM ended without reporting the command's exit status (qemu {}; guest crash or kernel panic?)",
            st
        ))),
        Outcome::BootTimeout => Err(fail(format!(
            "vm: the command did not start within --boot-timeout {:.0}s; VM stopped",
            opts.boot_timeout.as_secs_f64()
        ))),
        Outcome::KvmFailed => Err(fail("vm: QEMU failed under KVM; try --accel tcg".into())),
        Outcome::Timeout => Err(fail(format!(
            "vm: the command ran longer than --timeout {:.0}s; VM stopped",
            opts.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0)
        ))),
        Outcome::Stalled(silent) => {
            let msg = format!(
                "vm: the guest sent no heartbeat for {:.0}s (its kernel stalled?); VM stopped (--stall-timeout)",
                silent.as_secs_f64()
            );
            let msg = format!("{:#}", fail(msg));
            crate::logging::log_final_error(&msg);
            eprintln!("error: {}", msg);
            Ok(super::EXIT_STALLED)
        }
    }
}

struct Boot {
    outcome: Outcome,
    console: Tail,
    qemu_err: Tail,
}

fn boot_tcg(m: &mut qemu::Machine, work: &WorkDir, opts: &Opts, verbose: u8) -> Result<Boot> {
    boot(m, work, opts, verbose, false)
}

/// One QEMU run: sockets and relays, QEMU itself, supervision, draining. With `kvm_trial`, a
/// guest that reports nothing within [`KVM_TRIAL`] (or QEMU dying first) is `KvmFailed`.
fn boot(
    m: &mut qemu::Machine,
    work: &WorkDir,
    opts: &Opts,
    verbose: u8,
    kvm_trial: bool,
) -> Result<Boot> {
    let console = Tail::default();
    let qemu_err = Tail::default();
    let (tx, rx) = mpsc::channel();
    let sock = |n: &str| work.path.join(format!("{}.sock", n));
    for n in ["con", "out", "err", "ctl"] {
        let _ = std::fs::remove_file(sock(n));
    }
    let relays = vec![
        Relay::start(&sock("con"), console.sink(verbose > 0))?,
        Relay::start(&sock("out"), channel::to_stdio(false))?,
        Relay::start(&sock("err"), channel::to_stdio(true))?,
        Relay::start(&sock("ctl"), channel::events(tx))?,
    ];
    m.sockets = vec![
        ("con", sock("con"), None),
        ("out", sock("out"), Some(super::PORT_OUT)),
        ("err", sock("err"), Some(super::PORT_ERR)),
        ("ctl", sock("ctl"), Some(super::PORT_CTL)),
    ];
    let qargs = m.args()?;
    log::debug!(
        "vm: {} {} ({})",
        m.qemu.display(),
        qargs.join(" "),
        if m.kvm { "KVM" } else { "TCG" }
    );
    let mut cmd = Command::new(m.qemu);
    cmd.args(&qargs)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Our own process group (Ctrl-C reaches only us; we stop QEMU), and QEMU dies with us.
    crate::util::proc::die_with_parent(&mut cmd, true);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", m.qemu.display()))?;
    let qemu_stderr = child.stderr.take();
    let mut qemu = Qemu(child);
    let err_thread = qemu_stderr.map(|mut s| {
        let mut sink = qemu_err.sink(verbose > 0);
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink(&buf[..n]);
            }
        })
    });
    let outcome = supervise(&mut qemu, &rx, opts, started, kvm_trial);
    // QEMU is gone (or is killed now); drain the relays.
    drop(qemu);
    for r in relays {
        r.finish();
    }
    if let Some(t) = err_thread {
        let _ = t.join();
    }
    while let Ok(ev) = rx.try_recv() {
        if let Event::Log { msg } = ev {
            log::debug!("vm guest: {}", msg);
        }
    }
    Ok(Boot {
        outcome,
        console,
        qemu_err,
    })
}

/// How long a KVM guest may stay silent before we fall back to TCG.
const KVM_TRIAL: Duration = Duration::from_secs(15);

enum Outcome {
    KvmFailed,
    Exit(i32),
    Signal(i32),
    GuestError(String),
    NoStatus(String),
    BootTimeout,
    Timeout,
    /// Nothing heard from the running guest for this long.
    Stalled(Duration),
}

/// Waits for the guest's exit status, a signal, a timeout or QEMU's death.
fn supervise(
    qemu: &mut Qemu,
    rx: &mpsc::Receiver<Event>,
    opts: &Opts,
    started: Instant,
    kvm_trial: bool,
) -> Outcome {
    let mut ready: Option<Instant> = None;
    let mut heard = false;
    let mut last_heard = Instant::now();
    let mut result: Option<Outcome> = None;
    let mut result_at = Instant::now();
    loop {
        if let Some(sig) = interrupted() {
            return Outcome::Signal(sig);
        }
        while let Ok(ev) = rx.try_recv() {
            heard = true;
            last_heard = Instant::now();
            match ev {
                Event::Heartbeat => {}
                Event::Log { msg } => log::debug!("vm guest: {}", msg),
                Event::Ready { uptime } => {
                    ready = Some(Instant::now());
                    log::debug!(
                        "vm: boot to command {:.2}s (guest uptime {:.2}s)",
                        started.elapsed().as_secs_f64(),
                        uptime
                    );
                }
                Event::Exit { code } => {
                    result = Some(Outcome::Exit(code));
                    result_at = Instant::now();
                }
                Event::Error { msg } => {
                    result = Some(Outcome::GuestError(msg));
                    result_at = Instant::now();
                }
            }
        }
        match qemu.0.try_wait() {
            Ok(Some(st)) => {
                // Events sent just before power-off may still be in flight.
                std::thread::sleep(Duration::from_millis(50));
                while let Ok(ev) = rx.try_recv() {
                    match ev {
                        Event::Exit { code } => result = Some(Outcome::Exit(code)),
                        Event::Error { msg } => result = Some(Outcome::GuestError(msg)),
                        _ => {}
                    }
                }
                if kvm_trial && !heard && result.is_none() {
                    return Outcome::KvmFailed;
                }
                return result.unwrap_or_else(|| Outcome::NoStatus(st.to_string()));
            }
            Ok(None) => {}
            Err(e) => return Outcome::NoStatus(format!("wait failed: {}", e)),
        }
        if result.is_some() && result_at.elapsed() > Duration::from_secs(20) {
            // The guest reported but didn't power off: stop it ourselves.
            return result.unwrap_or(Outcome::Timeout);
        }
        if kvm_trial && !heard && started.elapsed() > KVM_TRIAL {
            return Outcome::KvmFailed;
        }
        match ready {
            None if started.elapsed() > opts.boot_timeout && result.is_none() => {
                return Outcome::BootTimeout
            }
            Some(t) if opts.timeout.is_some_and(|to| t.elapsed() > to) && result.is_none() => {
                return Outcome::Timeout
            }
            Some(_)
                if result.is_none()
                    && opts
                        .stall_timeout
                        .is_some_and(|st| last_heard.elapsed() > st) =>
            {
                return Outcome::Stalled(last_heard.elapsed())
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests;
