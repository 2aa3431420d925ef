//! IO-completion latencies from tracefs block events.
//!
//! [`TraceFsSource`] creates a private tracefs instance (`instances/resctl-bench-<pid>`), enables
//! `block:block_rq_issue`, `block:block_rq_complete` (and `block:block_rq_requeue`, to forget
//! requests the driver hands back) filtered in the kernel to the scratch device, and reads the
//! instance on a background thread. An issue and its completion are paired by
//! (device, sector, sector count); the latency is completion time − issue time. `block_rq_issue`
//! fires where the kernel stamps `io_start_time_ns` (the request is handed to the driver), so
//! this is the same dispatch-to-completion *device* latency upstream measures with BPF: it
//! excludes time spent in the IO scheduler and in io.cost throttling.
//!
//! Events are read as binary ring-buffer pages from the per-CPU `trace_pipe_raw` files
//! ([`super::trace_page`]), with nanosecond timestamps. Because each CPU has its own buffer, an
//! IO completed on another CPU than it was issued on may be read before its issue; the
//! [`Matcher`] pairs them in either order. The text `trace_pipe` is kept as an alternative
//! reader ([`ReadMode::Text`]): the kernel formats every event, which costs several times the
//! CPU, and in the VM test host it fell far behind a 17k IOPS load (benches-doc/common.md, "IO
//! latency"). Its lines look like this (Linux 6.1; microsecond timestamps):
//!
//! ```text
//!   resctl-bench-312     [001] d..1.    78.113806: block_rq_issue: 254,0 R 4096 () 1219048 + 8 [resctl-bench]
//!         <idle>-0       [000] ..s1.    78.114052: block_rq_complete: 254,0 R () 1219048 + 8 [0]
//! ```
//!
//! Here: the source (instance set-up, threads, samples); `events` parses trace lines,
//! `matcher` pairs them into latencies, `readers` read the raw buffers or the text pipe.

use crate::report::iolat_source::{IoLatSample, IoLatSource};
use crate::report::trace_page::EventLayout;
use crate::system::change_journal::{ChangeJournal, NoJournal};
use crate::system::HostPaths;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub mod events;
mod matcher;
mod readers;

pub use events::*;
pub use matcher::*;
pub use readers::*;

/// Name of the reader thread.
pub const READER_COMM: &str = "iolat-tracefs";

/// Prefix of our instance names; the pid of the owning process follows.
pub const INSTANCE_PREFIX: &str = "resctl-bench-";

/// Events we enable, relative to the instance's `events/`. The requeue event is optional.
const EV_ISSUE: &str = "block/block_rq_issue";
const EV_COMPLETE: &str = "block/block_rq_complete";
const EV_REQUEUE: &str = "block/block_rq_requeue";

/// The tracefs mount: `sys/kernel/tracing`, else the debugfs path.
pub fn tracefs_root(hp: &HostPaths) -> Result<PathBuf> {
    for rel in ["sys/kernel/tracing", "sys/kernel/debug/tracing"] {
        let p = hp.path(rel);
        if p.join("instances").is_dir() {
            return Ok(p);
        }
    }
    bail!(
        "tracefs is not mounted ({} has no instances/ directory)",
        hp.path("sys/kernel/tracing").display()
    )
}

/// The kernel's `dev_t` encoding in tracepoints: `MAJ << 20 | MIN`.
pub fn kernel_dev(devnr: (u32, u32)) -> u64 {
    ((devnr.0 as u64) << 20) | (devnr.1 as u64 & ((1 << 20) - 1))
}

/// Latency source reading block events of one device from a private tracefs instance.
pub struct TraceFsSource {
    inst: PathBuf,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    /// Stops the reader on a signal so the restore journal can remove the instance (open
    /// trace files keep it busy).
    _on_signal: Arc<crate::system::restore::SignalHook>,
}

fn write_knob(path: &Path, val: &str) -> Result<()> {
    std::fs::write(path, val).with_context(|| format!("writing {:?} to {}", val, path.display()))
}

/// Whether a process exists.
fn pid_alive(hp: &HostPaths, pid: u32) -> bool {
    hp.path(format!("proc/{}", pid)).exists()
}

/// Removes instances of ours whose process is gone (a run that was killed).
pub fn remove_stale_instances(hp: &HostPaths, root: &Path) {
    let Ok(rd) = std::fs::read_dir(root.join("instances")) else {
        return;
    };
    for ent in rd.flatten() {
        let name = ent.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(INSTANCE_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || pid_alive(hp, pid) {
            continue;
        }
        match std::fs::remove_dir(ent.path()) {
            Ok(()) => log::info!("removed stale tracefs instance {}", ent.path().display()),
            Err(e) => log::warn!(
                "can't remove stale tracefs instance {}: {}",
                ent.path().display(),
                e
            ),
        }
    }
}

impl TraceFsSource {
    /// Starts tracing `devnr` (the whole-disk `MAJ:MIN`) in a private instance.
    pub fn open(hp: &HostPaths, devnr: (u32, u32)) -> Result<Self> {
        Self::open_with(hp, devnr, ReadMode::Raw, &mut NoJournal)
    }

    /// Like [`TraceFsSource::open`], recording the instance directory in `journal` so the
    /// restore journal removes it if this process is killed.
    pub fn open_journaled(
        hp: &HostPaths,
        devnr: (u32, u32),
        journal: &mut dyn ChangeJournal,
    ) -> Result<Self> {
        Self::open_with(hp, devnr, ReadMode::Raw, journal)
    }

    /// Opens with a choice of reader; see [`ReadMode`].
    pub fn open_with(
        hp: &HostPaths,
        devnr: (u32, u32),
        mode: ReadMode,
        journal: &mut dyn ChangeJournal,
    ) -> Result<Self> {
        let root = tracefs_root(hp)?;
        for ev in [EV_ISSUE, EV_COMPLETE] {
            let f = root.join("events").join(ev).join("format");
            if !f.exists() {
                bail!(
                    "the kernel has no {} trace event ({} missing)",
                    ev,
                    f.display()
                );
            }
        }
        remove_stale_instances(hp, &root);
        let inst =
            root.join("instances")
                .join(format!("{}{}", INSTANCE_PREFIX, std::process::id()));
        if inst.exists() {
            // Left by an earlier source of this process that failed to clean up.
            let _ = std::fs::remove_dir(&inst);
        }
        std::fs::create_dir(&inst)
            .with_context(|| format!("creating tracefs instance {}", inst.display()))?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            matcher: Mutex::new(Matcher::new(devnr)),
            error: Mutex::new(None),
        });
        let on_signal: Arc<crate::system::restore::SignalHook> = {
            let shared = shared.clone();
            Arc::new(move || {
                shared.stop.store(true, Ordering::Relaxed);
                let t = std::time::Instant::now();
                while !shared.finished.load(Ordering::Acquire)
                    && t.elapsed() < std::time::Duration::from_secs(1)
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
        };
        crate::system::restore::before_signal_restore(&on_signal);
        // From here on `src` removes the instance if anything fails.
        let mut src = Self {
            inst,
            shared,
            reader: None,
            _on_signal: on_signal,
        };
        journal.created_dir(&src.inst)?;
        src.setup(devnr, mode)?;
        Ok(src)
    }

    fn setup(&mut self, devnr: (u32, u32), mode: ReadMode) -> Result<()> {
        let inst = self.inst.clone();
        // Timestamps comparable with CLOCK_MONOTONIC; the default clock works as well.
        if let Err(e) = write_knob(&inst.join("trace_clock"), "mono") {
            log::debug!("iolat: keeping the default trace clock: {:#}", e);
        }
        grow_buffers(&inst);
        let filter = format!("dev == {}", kernel_dev(devnr));
        let events = inst.join("events");
        let mut layouts = Vec::new();
        for (ev, kind, required) in [
            (EV_ISSUE, EventKind::Issue, true),
            (EV_COMPLETE, EventKind::Complete, true),
            (EV_REQUEUE, EventKind::Requeue, false),
        ] {
            let dir = events.join(ev);
            let res = write_knob(&dir.join("filter"), &filter)
                .and_then(|_| write_knob(&dir.join("enable"), "1"))
                .and_then(|_| {
                    let f = dir.join("format");
                    let text = std::fs::read_to_string(&f)
                        .with_context(|| format!("reading {}", f.display()))?;
                    EventLayout::parse(kind, &text).with_context(|| format!("{}", f.display()))
                });
            match res {
                Ok(l) => layouts.push(l),
                Err(e) if required => return Err(e),
                Err(e) => log::debug!("iolat: no {}: {:#}", ev, e),
            }
        }
        let input = match mode {
            ReadMode::Raw => Input::Raw(RawInput::open(&inst, layouts)?),
            ReadMode::Text => {
                let p = inst.join("trace_pipe");
                Input::Text(open_nonblock(&p)?)
            }
        };
        write_knob(&inst.join("tracing_on"), "1")?;
        let shared = self.shared.clone();
        self.reader = Some(
            std::thread::Builder::new()
                .name(READER_COMM.into())
                .spawn(move || {
                    raise_priority();
                    let res = match input {
                        Input::Raw(r) => read_raw(r, &shared),
                        Input::Text(f) => read_text(f, &shared),
                    };
                    // The input (and its trace files) was dropped when the reader returned.
                    shared.finished.store(true, Ordering::Release);
                    if let Err(e) = res {
                        log::warn!("iolat: tracefs reader stopped: {:#}", e);
                        *lock(&shared.error) = Some(format!("{:#}", e));
                    }
                })
                .context("starting the tracefs reader thread")?,
        );
        log::debug!(
            "iolat: tracing {}:{} in {} ({}, {:?})",
            devnr.0,
            devnr.1,
            self.inst.display(),
            filter,
            mode
        );
        Ok(())
    }

    /// The instance directory.
    pub fn instance(&self) -> &Path {
        &self.inst
    }

    pub fn counters(&self) -> Counters {
        lock(&self.shared.matcher).counters.clone()
    }

    /// Ring-buffer overruns and dropped events summed over the instance's CPUs
    /// (`per_cpu/cpuN/stats`).
    pub fn overruns(&self) -> (u64, u64) {
        let (mut overrun, mut dropped) = (0, 0);
        let Ok(rd) = std::fs::read_dir(self.inst.join("per_cpu")) else {
            return (0, 0);
        };
        for ent in rd.flatten() {
            let Ok(text) = std::fs::read_to_string(ent.path().join("stats")) else {
                continue;
            };
            for line in text.lines() {
                let val = |k: &str| {
                    line.strip_prefix(k)
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .unwrap_or(0)
                };
                overrun += val("overrun:");
                dropped += val("dropped events:");
            }
        }
        (overrun, dropped)
    }

    fn stop_reader(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.reader.take() {
            if h.join().is_err() {
                log::warn!("iolat: tracefs reader thread panicked");
            }
        }
    }
}

/// Per-CPU ring buffers of our instance: at least this many KiB per CPU …
const BUF_KB_PER_CPU: u64 = 8192;
/// … unless all CPUs together would need more than this (then the kernel's default stays).
const BUF_KB_TOTAL: u64 = 32768;

/// Grows the instance's per-CPU buffers so a reader that falls behind for a few seconds loses
/// nothing, within a fixed memory budget.
fn grow_buffers(inst: &Path) {
    let knob = inst.join("buffer_size_kb");
    let cur = std::fs::read_to_string(&knob)
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let cpus = std::fs::read_dir(inst.join("per_cpu")).map_or(1, |rd| rd.count() as u64);
    let want = (BUF_KB_TOTAL / cpus.max(1)).min(BUF_KB_PER_CPU);
    if want > cur {
        match write_knob(&knob, &want.to_string()) {
            Ok(()) => log::debug!("iolat: trace buffers {} KiB per CPU (was {})", want, cur),
            Err(e) => log::debug!("iolat: keeping {} KiB trace buffers: {:#}", cur, e),
        }
    }
}

/// The reader must keep up with the IO it measures: run it at nice -10 when allowed.
fn raise_priority() {
    // SAFETY: plain syscalls on the calling thread.
    let r = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, -10)
    };
    if r != 0 {
        log::debug!(
            "iolat: reader stays at normal priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl IoLatSource for TraceFsSource {
    fn name(&self) -> &'static str {
        "tracefs"
    }

    fn sample(&mut self) -> Result<IoLatSample> {
        if let Some(e) = lock(&self.shared.error).as_ref() {
            bail!("tracefs IO latency reader failed: {}", e);
        }
        Ok(lock(&self.shared.matcher).sample())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut c = TraceFsSource::counters(self).pairs();
        let (overrun, dropped) = self.overruns();
        c.push(("ring_overrun", overrun));
        c.push(("ring_dropped", dropped));
        c
    }
}

impl Drop for TraceFsSource {
    fn drop(&mut self) {
        self.stop_reader();
        let c = self.counters();
        let (overrun, dropped) = self.overruns();
        let events = self.inst.join("events");
        for ev in [EV_ISSUE, EV_COMPLETE, EV_REQUEUE] {
            let _ = std::fs::write(events.join(ev).join("enable"), "0");
        }
        if c.lost > 0 || overrun > 0 || dropped > 0 {
            log::warn!(
                "iolat: the kernel dropped block events: {} lost in trace_pipe, ring buffer overrun {} dropped {}",
                c.lost,
                overrun,
                dropped
            );
        }
        log::debug!("iolat: tracefs event counts {:?}", c);
        if let Err(e) = std::fs::remove_dir(&self.inst) {
            log::warn!(
                "can't remove tracefs instance {}: {}",
                self.inst.display(),
                e
            );
        }
    }
}

#[cfg(test)]
mod tests;
