//! The restore journal: every change we make to the host is first written, with the value that
//! undoes it, to `<dir>/restore.json`, and only then made. The journal undoes the changes in
//! reverse order when it is dropped or [`Journal::restore_all`] is called, when the process gets
//! SIGINT/SIGTERM/SIGHUP (after [`Journal::install_signal_handlers`]), and — if the process died
//! without doing either — at the next [`Journal::open`] of the same directory.
//!
//! Entries come in these kinds: a file write (sysctl, sysfs, cgroup knob) undone by writing the
//! old text back; a directory we created, undone by removing it; a remount, undone by
//! remounting with the old filesystem options; and on a systemd host (`units.rs`) a unit
//! property set at runtime, a transient unit we started and a unit we stopped, each undone
//! through systemd. The first record of a path wins, so restoring
//! always goes back to the state before our first change. `io.cost.model`/`io.cost.qos` are keyed
//! by the `MAJ:MIN` their records start with, and `cgroup.subtree_control` is restored by
//! enabling and disabling the controllers that differ from the recorded list.
//!
//! A lock on `<dir>/restore.lock` keeps two processes from journaling (and restoring) in the same
//! directory at once.

use crate::system::change_journal::ChangeJournal;
use crate::system::systemd::{Manager, Systemctl};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use change::is_keyed;
pub use change::{Change, Remount};

pub const JOURNAL_FILE: &str = "restore.json";
pub const LOCK_FILE: &str = "restore.lock";

/// What restore.json holds.
#[derive(Debug, Default, Serialize, Deserialize)]
struct JournalFile {
    /// The process that made the changes (informational).
    #[serde(default)]
    pid: u32,
    changes: Vec<Change>,
}

/// How a remount is carried out (the real one calls mount(2); tests pass a fake).
pub type RemountFn = fn(&Remount, &str) -> Result<()>;

struct Inner {
    file: PathBuf,
    changes: Vec<Change>,
    remount: RemountFn,
    /// systemd, for the unit records (the real one unless a test gave a fake).
    systemd: Arc<dyn Manager>,
    /// Set once a signal restored everything: no further changes may be made.
    closed: bool,
}

/// The restore journal of one work directory. See the module docs.
pub struct Journal {
    inner: Arc<Mutex<Inner>>,
    _lock: File,
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic while holding the lock must not stop the restore.
    inner.lock().unwrap_or_else(|e| e.into_inner())
}

impl Journal {
    /// Opens the journal of `dir` (created if missing). If a previous run left changes in
    /// `restore.json`, they are restored (each value logged) and the file is cleared first.
    pub fn open(dir: &Path) -> Result<Self> {
        Self::open_with(dir, remount_sys)
    }

    /// [`Journal::open`] for a host whose unit changes go through its systemd (the real one
    /// when `hp` carries none).
    pub fn open_on(dir: &Path, hp: &crate::system::HostPaths) -> Result<Self> {
        match hp.systemd() {
            Some(sd) => Self::open_with_systemd(dir, remount_sys, sd.clone()),
            None => Self::open(dir),
        }
    }

    /// [`Journal::open`] with a custom remount implementation.
    pub fn open_with(dir: &Path, remount: RemountFn) -> Result<Self> {
        Self::open_with_systemd(dir, remount, Arc::new(Systemctl::new(Path::new("/"))))
    }

    /// [`Journal::open`] with custom remount and systemd implementations.
    pub fn open_with_systemd(
        dir: &Path,
        remount: RemountFn,
        systemd: Arc<dyn Manager>,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating work directory {}", dir.display()))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock_file = crate::util::create::open_lock(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        if unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::WouldBlock {
                bail!(
                    "{} is in use by another resctl-bench process ({} is locked)",
                    dir.display(),
                    lock_path.display()
                );
            }
            return Err(err).with_context(|| format!("locking {}", lock_path.display()));
        }
        let file = dir.join(JOURNAL_FILE);
        let journal = Journal {
            inner: Arc::new(Mutex::new(Inner {
                file: file.clone(),
                changes: Vec::new(),
                remount,
                systemd,
                closed: false,
            })),
            _lock: lock_file,
        };
        let leftover = read_journal_file(&file)?;
        if !leftover.changes.is_empty() {
            log::warn!(
                "{}: a previous run (pid {}) did not restore {} host change(s); restoring them now",
                file.display(),
                leftover.pid,
                leftover.changes.len()
            );
            let mut inner = lock(&journal.inner);
            inner.changes = leftover.changes;
            restore_locked(&mut inner, true)
                .with_context(|| format!("restoring the changes left in {}", file.display()))?;
        } else if file.exists() {
            remove_journal_file(&file)?;
        }
        Ok(journal)
    }

    /// Path of restore.json.
    pub fn file(&self) -> PathBuf {
        lock(&self.inner).file.clone()
    }

    /// The changes recorded and not yet restored, oldest first.
    pub fn changes(&self) -> Vec<Change> {
        lock(&self.inner).changes.clone()
    }

    /// Records `change` (unless something about the same path is already recorded) and saves the
    /// journal durably. Returns whether it was added.
    fn push(inner: &mut Inner, change: Change) -> Result<bool> {
        if inner.closed {
            bail!("the host state was restored after a signal; no more changes are allowed");
        }
        let key = change.key();
        if inner.changes.iter().any(|c| c.key() == key) {
            return Ok(false);
        }
        inner.changes.push(change);
        if let Err(e) = save(inner) {
            inner.changes.pop();
            return Err(e);
        }
        Ok(true)
    }

    /// Drops the record `push` just added because the change it announced failed.
    fn unpush(inner: &mut Inner, added: bool) {
        if added {
            inner.changes.pop();
            if let Err(e) = save(inner) {
                log::warn!("{:#}", e);
            }
        }
    }

    /// Records that writing `old` to `path` undoes a change about to be made.
    pub fn record_old(&self, path: &Path, old: &str) -> Result<()> {
        let mut inner = lock(&self.inner);
        Self::push(
            &mut inner,
            Change::Write {
                path: path.to_path_buf(),
                old: old.to_string(),
            },
        )
        .map(|_| ())
    }

    /// Records a directory we just created (removed at restore).
    pub fn record_created_dir(&self, path: &Path) -> Result<()> {
        let mut inner = lock(&self.inner);
        Self::push(
            &mut inner,
            Change::CreatedDir {
                path: path.to_path_buf(),
            },
        )
        .map(|_| ())
    }

    /// Writes `new` to `path` after recording the current value (for `queue/scheduler` the
    /// bracketed entry; for per-device files the line of the device `new` starts with).
    /// Returns the old value.
    pub fn set(&self, path: &Path, new: &str) -> Result<String> {
        let mut inner = lock(&self.inner);
        let cur =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let old = undo_value(path, &cur, new);
        let added = Self::push(
            &mut inner,
            Change::Write {
                path: path.to_path_buf(),
                old: old.clone(),
            },
        )?;
        if let Err(e) = write_file(path, new) {
            Self::unpush(&mut inner, added);
            return Err(e);
        }
        log::debug!("set {} to {:?} (was {:?})", path.display(), new, old);
        Ok(old)
    }

    /// Remounts `r.target` with filesystem options `new` after recording `r.old`.
    pub fn remount(&self, r: &Remount, new: &str) -> Result<()> {
        let mut inner = lock(&self.inner);
        let added = Self::push(&mut inner, Change::Remount(r.clone()))?;
        if let Err(e) = (inner.remount)(r, new) {
            Self::unpush(&mut inner, added);
            return Err(e);
        }
        log::debug!(
            "remounted {} with {:?} (was {:?})",
            r.target.display(),
            new,
            r.old
        );
        Ok(())
    }

    /// Undoes every recorded change, newest first, and clears restore.json. Changes that fail
    /// to restore stay in the journal (and the error names them); a path that no longer exists
    /// is dropped with a warning.
    pub fn restore_all(&self) -> Result<()> {
        let mut inner = lock(&self.inner);
        restore_locked(&mut inner, false)
    }

    /// Restores the journal on SIGINT, SIGTERM and SIGHUP, then exits with 128 + signal. A
    /// thread waits for the signals, so this works whatever the main thread is doing. Further
    /// changes through the journal fail once it has been restored that way.
    pub fn install_signal_handlers(&self) -> Result<()> {
        {
            let mut reg = registry();
            reg.retain(|w| w.strong_count() > 0);
            reg.push(Arc::downgrade(&self.inner));
        }
        static INSTALLED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
        INSTALLED
            .get_or_init(|| {
                use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
                let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
                    .map_err(|e| format!("installing signal handlers: {}", e))?;
                std::thread::Builder::new()
                    .name("restore-on-signal".into())
                    .spawn(move || {
                        if let Some(sig) = signals.forever().next() {
                            restore_after_signal(sig);
                        }
                    })
                    .map(|_| ())
                    .map_err(|e| format!("starting the signal thread: {}", e))
            })
            .clone()
            .map_err(|e| anyhow!(e))
    }
}

/// Something to run on a signal before the journal restores: releasing what would keep a
/// change from being undone while this process still runs (the open files of a tracefs
/// instance keep it from being removed).
pub type SignalHook = dyn Fn() + Send + Sync;

/// Registers `hook` to run on SIGINT/SIGTERM/SIGHUP before the journals restore; it is
/// forgotten when the last `Arc` of it is dropped.
pub fn before_signal_restore(hook: &Arc<SignalHook>) {
    let mut hooks = signal_hooks();
    hooks.retain(|w| w.strong_count() > 0);
    hooks.push(Arc::downgrade(hook));
}

fn signal_hooks() -> MutexGuard<'static, Vec<Weak<SignalHook>>> {
    static HOOKS: Mutex<Vec<Weak<SignalHook>>> = Mutex::new(Vec::new());
    HOOKS.lock().unwrap_or_else(|e| e.into_inner())
}

fn registry() -> MutexGuard<'static, Vec<Weak<Mutex<Inner>>>> {
    static REG: Mutex<Vec<Weak<Mutex<Inner>>>> = Mutex::new(Vec::new());
    REG.lock().unwrap_or_else(|e| e.into_inner())
}

fn restore_after_signal(sig: i32) -> ! {
    crate::errln!("resctl-bench: got signal {}, restoring host changes", sig);
    let hooks: Vec<_> = signal_hooks().iter().filter_map(|w| w.upgrade()).collect();
    for h in hooks {
        h();
    }
    let journals: Vec<_> = registry().iter().filter_map(|w| w.upgrade()).collect();
    for j in journals {
        let mut inner = lock(&j);
        if let Err(e) = restore_locked(&mut inner, true) {
            crate::errln!("resctl-bench: {:#}", e);
        }
        inner.closed = true;
    }
    std::process::exit(128 + sig);
}

impl Drop for Journal {
    fn drop(&mut self) {
        if let Err(e) = self.restore_all() {
            log::error!("{:#}", e);
        }
    }
}

impl ChangeJournal for Journal {
    fn record(&mut self, path: &Path, old: &str) -> Result<()> {
        self.record_old(path, old)
    }

    fn created_dir(&mut self, path: &Path) -> Result<()> {
        self.record_created_dir(path)
    }
}

fn read_journal_file(file: &Path) -> Result<JournalFile> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JournalFile::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    if text.trim().is_empty() {
        return Ok(JournalFile::default());
    }
    serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{} is not a restore journal this version can read ({}); the host values it holds \
             were not restored: restore them by hand, then remove the file",
            file.display(),
            e
        )
    })
}

fn save(inner: &Inner) -> Result<()> {
    let jf = JournalFile {
        pid: std::process::id(),
        changes: inner.changes.clone(),
    };
    crate::util::atomic::write_atomic(&inner.file, |w| {
        serde_json::to_writer_pretty(&mut *w, &jf).map_err(std::io::Error::other)?;
        w.write_all(b"\n")
    })
    .with_context(|| format!("saving restore journal {}", inner.file.display()))
}

fn remove_journal_file(file: &Path) -> Result<()> {
    match std::fs::remove_file(file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", file.display())),
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Undoes the journal's changes. `each`: log every restored change (a crashed run's leftovers,
/// a signal); otherwise one line sums up a normal end, and `-v` lists them.
fn restore_locked(inner: &mut Inner, each: bool) -> Result<()> {
    if inner.changes.is_empty() {
        return Ok(());
    }
    let mut failed = Vec::new();
    let mut errors = Vec::new();
    let mut restored = 0;
    for change in inner.changes.iter().rev() {
        match restore_one(change, inner.remount, inner.systemd.as_ref()) {
            Ok(()) if each => log::info!("restored {}", change),
            Ok(()) => {
                restored += 1;
                log::debug!("restored {}", change)
            }
            // The owner removed it already (a tracefs instance on a normal stop).
            Err(e) if is_not_found(&e) && matches!(change, Change::CreatedDir { .. }) => {
                log::debug!("{}: already removed", change)
            }
            Err(e) if is_not_found(&e) => {
                log::warn!("can't restore {}: it no longer exists", change)
            }
            Err(e) => {
                errors.push(format!("{}: {:#}", change, e));
                failed.push(change.clone());
            }
        }
    }
    if restored > 0 {
        log::info!("host restored ({} changes undone)", restored);
    }
    failed.reverse();
    inner.changes = failed;
    if inner.changes.is_empty() {
        remove_journal_file(&inner.file)?;
        Ok(())
    } else {
        save(inner)?;
        bail!(
            "failed to restore {} host change(s), still listed in {}: {}",
            errors.len(),
            inner.file.display(),
            errors.join("; ")
        )
    }
}

fn is_not_found(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
    })
}

fn restore_one(change: &Change, remount: RemountFn, systemd: &dyn Manager) -> Result<()> {
    match change {
        Change::Write { path, old } => {
            if path.file_name().and_then(|n| n.to_str()) == Some("cgroup.subtree_control") {
                restore_subtree_control(path, old)
            } else {
                write_file(path, old)
            }
        }
        Change::CreatedDir { path } => remove_created_dir(path),
        Change::Remount(r) => remount(r, &r.old),
        Change::UnitProp {
            unit,
            prop,
            restore,
            dropin,
        } => unit_undo::prop(systemd, unit, prop, restore, *dropin),
        Change::TransientUnit { unit, cgroup } => {
            unit_undo::transient(systemd, unit, cgroup.as_deref())
        }
        Change::StoppedUnit { unit } => systemd.start(unit),
    }
}

/// Removes a directory we created. A cgroup of ours that still holds processes (a helper such
/// as the balloon, left by a killed run) has them killed through `cgroup.kill` first.
fn remove_created_dir(path: &Path) -> Result<()> {
    let err = match std::fs::remove_dir(path) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let kill = path.join("cgroup.kill");
    if err.raw_os_error() != Some(libc::EBUSY) || !kill.exists() {
        return Err(err).with_context(|| format!("removing directory {}", path.display()));
    }
    leave_cgroup(path)?;
    log::info!("killing the processes left in {}", path.display());
    write_file(&kill, "1")?;
    let start = std::time::Instant::now();
    loop {
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && start.elapsed() < std::time::Duration::from_secs(10) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            Err(e) => {
                return Err(e).with_context(|| format!("removing directory {}", path.display()))
            }
        }
    }
}

/// If this process is in the cgroup at `path` (a run moves itself into hostcritical.slice),
/// moves it to the parent cgroup so that `cgroup.kill` doesn't kill the restore itself. The
/// normal exit moves back to where the run started before restoring; this covers the signal
/// path, which restores from the handler.
fn leave_cgroup(path: &Path) -> Result<()> {
    let me = std::process::id();
    let procs = std::fs::read_to_string(path.join("cgroup.procs")).unwrap_or_default();
    if !procs
        .lines()
        .any(|l| l.trim().parse::<u32>().ok() == Some(me))
    {
        return Ok(());
    }
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    write_file(&parent.join("cgroup.procs"), &me.to_string())
        .with_context(|| format!("moving this process out of {}", path.display()))
}

/// Enables the recorded controllers that are off now and disables those that were off.
fn restore_subtree_control(path: &Path, old: &str) -> Result<()> {
    let cur =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let old: Vec<&str> = old.split_whitespace().collect();
    let cur: Vec<&str> = cur.split_whitespace().collect();
    let mut ops: Vec<String> = old
        .iter()
        .filter(|c| !cur.contains(c))
        .map(|c| format!("+{}", c))
        .collect();
    ops.extend(
        cur.iter()
            .filter(|c| !old.contains(c))
            .map(|c| format!("-{}", c)),
    );
    if ops.is_empty() {
        return Ok(());
    }
    write_file(path, &ops.join(" "))
}

/// Writes `text` to an existing file (sysfs/procfs/cgroupfs files are never created).
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("opening {} for writing", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {:?} to {}", text, path.display()))
}

/// The text that, written to `path`, undoes writing `new` over the current content `cur`.
pub fn undo_value(path: &Path, cur: &str, new: &str) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name == "scheduler" {
        return bracketed(cur).unwrap_or_else(|| cur.trim().to_string());
    }
    if is_keyed(path) {
        let dev = new.split_whitespace().next().unwrap_or("");
        if let Some(line) = cur
            .lines()
            .find(|l| l.split_whitespace().next() == Some(dev))
        {
            return iocost_auto_form(name, line.trim());
        }
        return match name {
            "io.cost.qos" => format!("{} enable=0", dev),
            "io.cost.model" => format!("{} ctrl=auto", dev),
            "io.max" => format!("{} rbps=max wbps=max riops=max wiops=max", dev),
            "io.latency" => format!("{} target=0", dev),
            _ => format!("{} default", dev),
        };
    }
    cur.trim_end_matches('\n').to_string()
}

/// An io.cost line under `ctrl=auto` is restored without its parameters: any parameter
/// written switches the kernel to user control, whatever `ctrl=` says.
fn iocost_auto_form(name: &str, line: &str) -> String {
    let mut it = line.split_whitespace();
    let dev = it.next().unwrap_or("");
    let kv: Vec<&str> = it.collect();
    if !kv.contains(&"ctrl=auto") {
        return line.to_string();
    }
    match name {
        "io.cost.qos" => {
            let enable = kv
                .iter()
                .find(|t| t.starts_with("enable="))
                .copied()
                .unwrap_or("enable=0");
            format!("{} {} ctrl=auto", dev, enable)
        }
        "io.cost.model" => format!("{} ctrl=auto", dev),
        _ => line.to_string(),
    }
}

/// The `[selected]` entry of a sysfs choice list such as `mq-deadline kyber [none]`.
pub fn bracketed(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// Mount flags for the per-mount options of mountinfo, so a remount keeps them.
fn mount_flags(opts: &str) -> libc::c_ulong {
    let mut flags: libc::c_ulong = 0;
    for o in opts.split(',') {
        flags |= match o {
            "ro" => libc::MS_RDONLY,
            "nosuid" => libc::MS_NOSUID,
            "nodev" => libc::MS_NODEV,
            "noexec" => libc::MS_NOEXEC,
            "noatime" => libc::MS_NOATIME,
            "nodiratime" => libc::MS_NODIRATIME,
            "relatime" => libc::MS_RELATIME,
            "strictatime" => libc::MS_STRICTATIME,
            "sync" => libc::MS_SYNCHRONOUS,
            "dirsync" => libc::MS_DIRSYNC,
            "lazytime" => libc::MS_LAZYTIME,
            _ => 0,
        };
    }
    flags
}

/// Remounts `r.target` with filesystem options `data` (mount(2) with MS_REMOUNT, keeping the
/// per-mount flags). `rw`/`ro` in `data` are dropped: they are mount flags.
pub fn remount_sys(r: &Remount, data: &str) -> Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let data: Vec<&str> = data
        .split(',')
        .filter(|o| !o.is_empty() && *o != "rw" && *o != "ro")
        .collect();
    let data = data.join(",");
    let c = |s: &[u8], what: &str| {
        CString::new(s).map_err(|_| anyhow!("{} {:?} contains a NUL byte", what, s))
    };
    let target = c(r.target.as_os_str().as_bytes(), "mount point")?;
    let source = c(r.source.as_bytes(), "mount source")?;
    let fstype = c(r.fstype.as_bytes(), "filesystem type")?;
    let cdata = c(data.as_bytes(), "mount options")?;
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_REMOUNT | mount_flags(&r.mount_opts),
            cdata.as_ptr() as *const libc::c_void,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("remounting {} with options {:?}", r.target.display(), data));
    }
    Ok(())
}

mod change;
mod unit_undo;
mod units;

#[cfg(test)]
mod tests;
