//! The host side of `resctl-bench vm`: validate the options, build the initramfs and the scratch
//! disk in a private work directory, boot QEMU, relay output and events, return the command's
//! exit status, and clean up whatever happens (normal exit, failure, Ctrl-C, SIGTERM). `opts`
//! holds the options, `prep` what a boot needs on the host side.

use super::args::VmArgs;
use super::channel::{self, Relay, Tail};
use super::protocol::{Event, GuestConfig, EXIT_STALLED, PORT_CTL, PORT_ERR, PORT_OUT};
use super::{kmod, qemu, setup};
use anyhow::{Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod opts;
mod prep;

pub use opts::*;
use prep::*;

const MIB: u64 = 1 << 20;

/// `resctl-bench vm`: returns the exit status of the guest command.
/// `dir` and `verbose` are `vm`'s own `--dir` and `-v`.
pub fn run(dir: Option<&str>, verbose: u8, a: &VmArgs) -> Result<i32> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let opts = Opts::new(dir, a, &cwd)?;
    let rel = super::release::Release::parse(&a.debian)?;
    if a.setup && set_up(a, rel)? {
        return Ok(0);
    }
    let (cwd_str, extra) = check_args(a, &cwd, opts.ssh.is_some())?;
    let root = root_image(a, rel)?;
    let nbdkit = (opts.limits.latency_ms)
        .map(|_| super::nbd::tool(&opts.limits.name))
        .transpose()?;
    let emu = super::emulator::choose()?;
    let mkfs = setup::tool("mkfs.ext4")?;
    setup::tool("ldd")?;
    let kernel = setup::kernel(a.kernel.as_deref(), a.modules.as_deref(), rel)?;
    let modules = guest_modules(&kernel, &extra, &opts)?;

    let reports_dir = shared_reports_dir(&opts, &cwd)?;

    catch_signals();
    let work = WorkDir::create(a.keep)?;
    let mut cfg = GuestConfig {
        args: opts.args.clone(),
        cwd: cwd_str,
        env: guest_env(&opts.limits.name),
        modules: Vec::new(),
        module_params: Vec::new(),
        programs: Vec::new(),
        program_libs: Vec::new(),
        serial: opts.limits.serial(),
        rotational: opts.limits.rotational,
        scratch_dir: opts.scratch_dir.to_string_lossy().into_owned(),
        reports_dir,
        swap_size: opts.swap_size,
        verbose,
        systemd_root: root
            .as_ref()
            .map(|_| super::protocol::ROOT_SERIAL.to_string()),
        ssh_keys: opts.ssh.as_ref().map(|(_, keys)| keys.clone()),
    };
    let t0 = Instant::now();
    let initrd = work.path.join("initramfs.cpio");
    build_initramfs(&initrd, &mut cfg, &modules, &extra, &a.with_program)?;
    let disk_direct = make_disk(&mkfs, &work.disk(), opts.disk_size)?;
    let scsi_img = scsi_image(&work, &opts)?;
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

    let kvm = choose_accel(&opts, &emu);
    let cmdline = kernel_cmdline(verbose, &opts);
    let mut machine = qemu::Machine {
        qemu: &emu.bin,
        data_dirs: &emu.data_dirs,
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
        root: root.as_deref(),
        scsi: opts
            .scsi_disk
            .as_ref()
            .zip(scsi_img.as_deref())
            .map(|((m, r), img)| (img, m.as_str(), r.as_str())),
        ssh_port: opts.ssh.as_ref().map(|(port, _)| *port),
        sockets: Vec::new(),
    };
    let boot = boot_or_fall_back(&mut machine, &work, &opts, verbose)?;
    exit_of(boot, &opts)
}

/// The guest kernel's command line.
fn kernel_cmdline(verbose: u8, opts: &Opts) -> String {
    let mut cmdline = "console=ttyS0 panic=-1 psi=1 mitigations=off rdinit=/init".to_string();
    if verbose < 2 {
        cmdline += " quiet";
    }
    if opts.ssh.is_some() {
        // The image's SSH server isn't started at boot unless asked for.
        cmdline += " systemd.wants=ssh.service";
    }
    cmdline
}

/// `--init`: the root file system image systemd boots from, none for the builtin init.
fn root_image(a: &VmArgs, rel: super::release::Release) -> Result<Option<std::path::PathBuf>> {
    match a.init.as_str() {
        "builtin" if !a.guest_packages.is_empty() => crate::usage_bail!(
            "vm: --guest-packages needs --init systemd (the builtin init has no package system)"
        ),
        "builtin" => Ok(None),
        "systemd" => {
            let extra = super::rootfs::Extra::parse(&a.guest_packages)?;
            Ok(Some(super::rootfs::image_with(&extra, rel)?))
        }
        other => crate::usage_bail!("vm: --init {:?}: accepted are builtin and systemd", other),
    }
}

/// The guest command and the options that name things on the host, checked before anything
/// starts: the working directory (shared with the guest, as a string) and the extra modules
/// (`NAME[:PARAMS]`).
fn check_args(a: &VmArgs, cwd: &Path, ssh: bool) -> Result<(String, Vec<(String, String)>)> {
    if a.args.is_empty() && !ssh {
        crate::usage_bail!(
            "vm: give the resctl-bench arguments to run after `--`, e.g. `resctl-bench vm -- --version` \
             (only with --ssh-port may they be left out)"
        );
    }
    if cwd == Path::new("/") {
        crate::usage_bail!("vm: run it from a directory other than / (the working directory is shared with the guest)");
    }
    let cwd_str = cwd
        .to_str()
        .context("the current directory is not valid UTF-8")?
        .to_string();
    let extra: Vec<(String, String)> = a
        .with_module
        .iter()
        .map(|m| match m.split_once(':') {
            Some((n, p)) => (n.to_string(), p.replace(',', " ")),
            None => (m.to_string(), String::new()),
        })
        .collect();
    if let Some((n, _)) = extra.iter().find(|(n, _)| n.is_empty()) {
        crate::usage_bail!(
            "vm: --with-module {:?}: a module name is needed (NAME[:PARAMS])",
            n
        );
    }
    for p in &a.with_program {
        if !p.is_file() {
            crate::usage_bail!("vm: --with-program {}: not a file", p.display());
        }
    }
    Ok((cwd_str, extra))
}

/// The kernel modules the guest loads, dependencies first: what the stack needs and the
/// `--with-module` ones.
/// `--setup`: installs what is missing for `rel`; true when that was all there was to do.
fn set_up(a: &VmArgs, rel: super::release::Release) -> Result<bool> {
    setup::run(rel)?;
    super::emulator::ensure()?;
    super::rootfs::ensure(rel)?;
    Ok(a.args.is_empty())
}

/// `--scsi-disk`'s image: 1 GiB, sparse, blank.
fn scsi_image(work: &WorkDir, opts: &Opts) -> Result<Option<std::path::PathBuf>> {
    if opts.scsi_disk.is_none() {
        return Ok(None);
    }
    let img = work.file("scsi.img");
    std::fs::File::create(&img)
        .and_then(|f| f.set_len(1 << 30))
        .with_context(|| format!("creating {}", img.display()))?;
    Ok(Some(img))
}

fn guest_modules(
    kernel: &setup::Kernel,
    extra: &[(String, String)],
    opts: &Opts,
) -> Result<Vec<(String, std::path::PathBuf)>> {
    let mut wanted: Vec<&str> = kmod::NEEDED.to_vec();
    if opts.scsi_disk.is_some() {
        wanted.extend(["virtio_scsi", "sd_mod"]);
    }
    if opts.ssh.is_some() {
        wanted.push("virtio_net");
    }
    wanted.extend(extra.iter().map(|(n, _)| n.as_str()));
    kmod::Tree::scan(&kernel.modules)
        .and_then(|t| t.load_order(&wanted))
        .with_context(|| {
            format!(
                "kernel modules in {} (use --kernel/--modules with an uncompressed-module kernel, e.g. the one {} caches)",
                kernel.modules.display(),
                setup::FIX
            )
        })
}

/// Boots the machine; when KVM was only being tried (`--accel auto`) and the guest made no
/// progress under it, boots it again under TCG and remembers that until the host reboots.
fn boot_or_fall_back(
    machine: &mut qemu::Machine,
    work: &WorkDir,
    opts: &Opts,
    verbose: u8,
) -> Result<Boot> {
    let trial = machine.kvm && opts.accel == "auto";
    let b = boot(machine, work, opts, verbose, trial)?;
    if !matches!(b.outcome, Outcome::KvmFailed) {
        return Ok(b);
    }
    log::info!(
        "vm: the guest made no progress under KVM in {}s; using TCG (remembered until the host reboots)",
        KVM_TRIAL.as_secs()
    );
    qemu::remember_kvm(false);
    machine.kvm = false;
    boot_tcg(machine, work, opts, verbose)
}

/// Where the guest's per-second reports land on the host: next to the result (the guest
/// bind-mounts this directory at `<--dir>/report.d`). A symlink leading out of the shared
/// directory would not resolve in the guest: then they stay there.
fn shared_reports_dir(opts: &Opts, cwd: &Path) -> Result<Option<String>> {
    Ok(match &opts.reports_dir {
        Some(d) => {
            // Not through another user's link (`util::create`).
            let real = crate::util::create::ensure_dir(d, "report directory")?.canonicalize()?;
            if real.starts_with(cwd) {
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
    })
}

/// Whether to boot under KVM (`--accel`, or `auto`: whether KVM works here), said in the log
/// with a warning when `emu` is too old for the TCG guest.
fn choose_accel(opts: &Opts, emu: &super::emulator::Emulator) -> bool {
    let kvm_known = qemu::kvm_cached().is_some();
    let kvm = match opts.accel.as_str() {
        "kvm" => true,
        "tcg" => false,
        _ => qemu::kvm_works(),
    };
    if !kvm {
        log::info!(
            "vm: running under TCG ({}): the guest's CPUs are about 15 times slower than the host's",
            if opts.accel == "tcg" {
                "--accel tcg"
            } else {
                "KVM isn't usable here"
            }
        );
    } else if opts.accel == "kvm" || kvm_known {
        log::info!("vm: running under KVM");
    }
    if kvm && opts.accel == "auto" && !kvm_known {
        log::info!(
            "vm: first VM since the host booted: trying KVM (if the guest makes no progress in {}s, TCG is used and remembered until the host reboots)",
            KVM_TRIAL.as_secs()
        );
    }
    emu.warn_if_unsafe(kvm, opts.cpus);
    kvm
}

/// The exit status of the command in the guest, or what went wrong with the VM, with the
/// last lines QEMU and the guest console printed.
fn exit_of(boot: Boot, opts: &Opts) -> Result<i32> {
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
        // A kernel oops runs 40–60 lines: its first (what failed, and where) must be kept.
        let con = console.lines(60);
        if !con.is_empty() {
            msg += &format!("\nlast guest console lines:\n  {}", con.join("\n  "));
        }
        anyhow::anyhow!(msg)
    };
    match outcome {
        Outcome::Exit(code) => Ok(code),
        Outcome::Signal(sig) => {
            crate::errln!("vm: stopped by signal {}", sig);
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
            crate::errln!("error: {}", msg);
            Ok(EXIT_STALLED)
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
        ("out", sock("out"), Some(PORT_OUT)),
        ("err", sock("err"), Some(PORT_ERR)),
        ("ctl", sock("ctl"), Some(PORT_CTL)),
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
