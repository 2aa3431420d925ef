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

use crate::report::iolat_source::{IoLatSample, IoLatSource};
use crate::report::model::{IoLatHists, IO_TYPES};
use crate::report::trace_page::{decode_page, EventLayout, PageLayout};
use crate::system::journal_api::{ChangeJournal, NoJournal};
use crate::system::HostPaths;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Name of the reader thread.
pub const READER_COMM: &str = "iolat-tracefs";

/// Prefix of our instance names; the pid of the owning process follows.
pub const INSTANCE_PREFIX: &str = "resctl-bench-";

/// Events we enable, relative to the instance's `events/`. The requeue event is optional.
const EV_ISSUE: &str = "block/block_rq_issue";
const EV_COMPLETE: &str = "block/block_rq_complete";
const EV_REQUEUE: &str = "block/block_rq_requeue";

/// Issues waiting for their completion are kept up to this many; beyond it the ones older than
/// the histogram range are dropped, and if that isn't enough, all of them.
const MAX_PENDING: usize = 65_536;
/// Pending issues older than this can't produce a latency the histogram distinguishes.
const STALE_NS: u64 = crate::report::hist::MAX_NS;

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

/// What a block event line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Issue,
    Complete,
    Requeue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEvent {
    pub kind: EventKind,
    /// Trace clock timestamp in nanoseconds (microsecond resolution in text).
    pub ts_ns: u64,
    pub dev: (u32, u32),
    /// Index into [`IO_TYPES`], `None` for operations we don't classify.
    pub io_type: Option<usize>,
    pub sector: u64,
    pub nr_sector: u32,
}

/// One line of `trace_pipe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceLine {
    Event(BlockEvent),
    /// `CPU:N [LOST M EVENTS]`: the ring buffer overran.
    Lost(u64),
    /// Anything else (other events, blank lines).
    Other,
    /// A block event line we couldn't parse.
    Malformed,
}

/// The IO type of an `rwbs` string: an optional leading `F` (preflush) and then the operation
/// letter `R`, `W`, `D` (discard; `DE` secure erase), `F` (flush), `N` (other). Index into
/// [`IO_TYPES`].
pub fn rwbs_type(rwbs: &str) -> Option<usize> {
    let b = rwbs.as_bytes();
    let op = match (b.first(), b.get(1)) {
        (Some(b'F'), Some(c)) if b"RWDEFN".contains(c) => *c,
        (Some(c), _) => *c,
        (None, _) => return None,
    };
    match op {
        b'R' => Some(0),
        b'W' => Some(1),
        b'D' => Some(2),
        b'F' => Some(3),
        _ => None,
    }
}

/// `SECS.FRACTION` (any number of fraction digits up to 9) in nanoseconds.
fn parse_ts(tok: &str) -> Option<u64> {
    let (secs, frac) = tok.split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut frac_ns: u64 = frac.parse().ok()?;
    for _ in frac.len()..9 {
        frac_ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Parses one `trace_pipe` line.
pub fn parse_line(line: &str) -> TraceLine {
    let line = line.trim_end_matches(['\n', '\r']);
    let Some(at) = line.find(" block_rq_") else {
        if let Some(rest) = line.split_once("[LOST ").map(|(_, r)| r) {
            if let Some(n) = rest.split_whitespace().next().and_then(|n| n.parse().ok()) {
                return TraceLine::Lost(n);
            }
        }
        return TraceLine::Other;
    };
    let (head, rest) = (&line[..at], &line[at + 1..]);
    let Some((name, body)) = rest.split_once(": ") else {
        return TraceLine::Other;
    };
    let kind = match name {
        "block_rq_issue" => EventKind::Issue,
        "block_rq_complete" => EventKind::Complete,
        "block_rq_requeue" => EventKind::Requeue,
        _ => return TraceLine::Other,
    };
    parse_body(kind, head, body).map_or(TraceLine::Malformed, TraceLine::Event)
}

fn parse_body(kind: EventKind, head: &str, body: &str) -> Option<BlockEvent> {
    let ts_ns = parse_ts(
        head.trim_end()
            .strip_suffix(':')?
            .rsplit(char::is_whitespace)
            .next()?,
    )?;
    let mut toks = body.splitn(3, ' ');
    let (maj, min) = toks.next()?.split_once(',')?;
    let dev = (maj.parse().ok()?, min.parse().ok()?);
    let rwbs = toks.next()?;
    let mut rest = toks.next()?;
    if kind == EventKind::Issue {
        // The byte count precedes the command.
        let (bytes, r) = rest.split_once(' ')?;
        bytes.parse::<u64>().ok()?;
        rest = r;
    }
    // `(cmd)`: hex bytes of passthrough commands, empty otherwise.
    let rest = rest.strip_prefix('(')?;
    let rest = &rest[rest.find(')')? + 1..];
    let mut t = rest.split_whitespace();
    let sector = t.next()?.parse().ok()?;
    if t.next()? != "+" {
        return None;
    }
    let nr_sector = t.next()?.parse().ok()?;
    Some(BlockEvent {
        kind,
        ts_ns,
        dev,
        io_type: rwbs_type(rwbs),
        sector,
        nr_sector,
    })
}

/// Event counts of a source, for logs and the `__iolat` summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    pub issues: u64,
    pub completes: u64,
    pub requeues: u64,
    /// Completions paired with an issue and recorded.
    pub matched: u64,
    /// Completions without a pending issue (issued before we started, or the issue was lost).
    pub unmatched: u64,
    /// Events of other devices or operations we don't classify.
    pub ignored: u64,
    pub malformed: u64,
    /// Events the kernel dropped (`[LOST N EVENTS]` lines).
    pub lost: u64,
    /// Pending issues thrown away to keep the map bounded.
    pub pending_dropped: u64,
}

impl Counters {
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("issues", self.issues),
            ("completes", self.completes),
            ("requeues", self.requeues),
            ("matched", self.matched),
            ("unmatched", self.unmatched),
            ("ignored", self.ignored),
            ("malformed", self.malformed),
            ("lost", self.lost),
            ("pending_dropped", self.pending_dropped),
        ]
    }
}

type Key = ((u32, u32), u64, u32);

/// A completion read before its issue (events of different CPUs arrive in separate buffers).
#[derive(Debug, Clone, Copy)]
struct Waiting {
    ts_ns: u64,
    io_type: usize,
}

/// Pairs issues with completions and keeps the histograms: cumulative and since the last
/// [`Matcher::take_interval`].
///
/// Events may arrive out of order across CPUs, so either side can wait for the other: an
/// issue pairs with the oldest waiting completion of its key that isn't earlier than the issue,
/// a completion with the oldest pending issue of its key that isn't later. Completions still
/// waiting [`WAIT_NS`] after the newest event seen had their issue before tracing started (or
/// lost) and count as unmatched.
#[derive(Debug)]
pub struct Matcher {
    dev: (u32, u32),
    pending: HashMap<Key, VecDeque<u64>>,
    nr_pending: usize,
    waiting: HashMap<Key, VecDeque<Waiting>>,
    nr_waiting: usize,
    max_pending: usize,
    newest_ts: u64,
    cum: IoLatHists,
    cur: IoLatHists,
    /// Sum of the latencies (ns) and count per IO type since the last take.
    cur_sum: [(u128, u64); 4],
    pub counters: Counters,
}

/// How long a completion waits for its issue (in event time).
pub const WAIT_NS: u64 = 2_000_000_000;

impl Matcher {
    pub fn new(dev: (u32, u32)) -> Self {
        Self::with_max_pending(dev, MAX_PENDING)
    }

    pub fn with_max_pending(dev: (u32, u32), max_pending: usize) -> Self {
        Self {
            dev,
            pending: HashMap::new(),
            nr_pending: 0,
            waiting: HashMap::new(),
            nr_waiting: 0,
            max_pending: max_pending.max(1),
            newest_ts: 0,
            cum: IoLatHists::default(),
            cur: IoLatHists::default(),
            cur_sum: [(0, 0); 4],
            counters: Counters::default(),
        }
    }

    pub fn nr_pending(&self) -> usize {
        self.nr_pending
    }

    pub fn nr_waiting(&self) -> usize {
        self.nr_waiting
    }

    pub fn feed_line(&mut self, line: &str) {
        match parse_line(line) {
            TraceLine::Event(ev) => self.feed(&ev),
            TraceLine::Lost(n) => self.counters.lost += n,
            TraceLine::Malformed => {
                if self.counters.malformed == 0 {
                    log::warn!("iolat: can't parse trace line {:?}", line);
                }
                self.counters.malformed += 1
            }
            TraceLine::Other => {}
        }
    }

    pub fn feed(&mut self, ev: &BlockEvent) {
        match ev.kind {
            EventKind::Issue => self.counters.issues += 1,
            EventKind::Complete => self.counters.completes += 1,
            EventKind::Requeue => self.counters.requeues += 1,
        }
        let Some(io_type) = ev.io_type.filter(|_| ev.dev == self.dev) else {
            self.counters.ignored += 1;
            return;
        };
        self.newest_ts = self.newest_ts.max(ev.ts_ns);
        let key = (ev.dev, ev.sector, ev.nr_sector);
        match ev.kind {
            EventKind::Issue => {
                if let Some(c) = self.take_waiting(&key, ev.ts_ns) {
                    self.record(c.io_type, c.ts_ns - ev.ts_ns);
                    return;
                }
                if self.nr_pending >= self.max_pending {
                    self.prune();
                }
                let q = self.pending.entry(key).or_default();
                // Keep each queue in time order even when CPUs' events interleave.
                let at = q.partition_point(|&t| t <= ev.ts_ns);
                q.insert(at, ev.ts_ns);
                self.nr_pending += 1;
            }
            EventKind::Requeue => {
                // The request will be issued again; its latency starts then.
                self.take_pending(&key, None);
            }
            EventKind::Complete => match self.take_pending(&key, Some(ev.ts_ns)) {
                Some(issued) => self.record(io_type, ev.ts_ns - issued),
                None => {
                    if self.nr_waiting >= self.max_pending {
                        self.prune();
                    }
                    let q = self.waiting.entry(key).or_default();
                    let at = q.partition_point(|w| w.ts_ns <= ev.ts_ns);
                    q.insert(
                        at,
                        Waiting {
                            ts_ns: ev.ts_ns,
                            io_type,
                        },
                    );
                    self.nr_waiting += 1;
                }
            },
        }
    }

    fn record(&mut self, io_type: usize, lat: u64) {
        self.counters.matched += 1;
        let name = IO_TYPES[io_type];
        if let Some(h) = self.cum.get_mut(name) {
            h.record_ns(lat);
        }
        if let Some(h) = self.cur.get_mut(name) {
            h.record_ns(lat);
        }
        let s = &mut self.cur_sum[io_type];
        s.0 += lat as u128;
        s.1 += 1;
    }

    /// Removes the oldest pending issue of `key` not later than `before` (the newest one when
    /// `before` is `None`).
    fn take_pending(&mut self, key: &Key, before: Option<u64>) -> Option<u64> {
        let q = self.pending.get_mut(key)?;
        let ts = match before {
            Some(t) => match q.front() {
                Some(&f) if f <= t => q.pop_front(),
                _ => None,
            },
            None => q.pop_back(),
        };
        if q.is_empty() {
            self.pending.remove(key);
        }
        if ts.is_some() {
            self.nr_pending -= 1;
        }
        ts
    }

    /// Removes the oldest waiting completion of `key` not earlier than `issued`.
    fn take_waiting(&mut self, key: &Key, issued: u64) -> Option<Waiting> {
        let q = self.waiting.get_mut(key)?;
        let at = q.iter().position(|w| w.ts_ns >= issued)?;
        let w = q.remove(at);
        if q.is_empty() {
            self.waiting.remove(key);
        }
        if w.is_some() {
            self.nr_waiting -= 1;
        }
        w
    }

    /// Gives up on completions that waited too long for their issue.
    pub fn expire_waiting(&mut self) {
        if self.nr_waiting == 0 {
            return;
        }
        let cutoff = self.newest_ts.saturating_sub(WAIT_NS);
        let mut expired = 0;
        self.waiting.retain(|_, q| {
            let before = q.len();
            q.retain(|w| w.ts_ns >= cutoff);
            expired += before - q.len();
            !q.is_empty()
        });
        self.nr_waiting -= expired;
        self.counters.unmatched += expired as u64;
    }

    /// Drops pending issues too old to matter and expires waiting completions; if either map
    /// is still full, empties it.
    fn prune(&mut self) {
        self.expire_waiting();
        if self.nr_waiting >= self.max_pending {
            self.counters.unmatched += self.nr_waiting as u64;
            self.waiting.clear();
            self.nr_waiting = 0;
        }
        let before = self.nr_pending;
        let cutoff = self.newest_ts.saturating_sub(STALE_NS);
        self.pending.retain(|_, q| {
            q.retain(|&ts| ts >= cutoff);
            !q.is_empty()
        });
        self.nr_pending = self.pending.values().map(VecDeque::len).sum();
        if self.nr_pending >= self.max_pending {
            self.pending.clear();
            self.nr_pending = 0;
        }
        let dropped = (before - self.nr_pending) as u64;
        if dropped > 0 && self.counters.pending_dropped == 0 {
            log::warn!(
                "iolat: {} issues never completed; dropping them to bound memory",
                dropped
            );
        }
        self.counters.pending_dropped += dropped;
    }

    /// The histograms and mean latencies (seconds, types with IO only) since the last call,
    /// and resets them.
    pub fn take_interval(&mut self) -> (IoLatHists, BTreeMap<String, f64>) {
        self.expire_waiting();
        let means = IO_TYPES
            .iter()
            .zip(self.cur_sum.iter())
            .filter(|(_, s)| s.1 > 0)
            .map(|(t, s)| (t.to_string(), s.0 as f64 / s.1 as f64 / 1e9))
            .collect();
        self.cur_sum = [(0, 0); 4];
        (std::mem::take(&mut self.cur), means)
    }

    /// Histograms since the start.
    pub fn cumulative(&self) -> &IoLatHists {
        &self.cum
    }

    /// A sample from the interval histograms and the cumulative ones.
    pub fn sample(&mut self) -> IoLatSample {
        let (hists, means) = self.take_interval();
        IoLatSample {
            pcts: hists.pct_maps(),
            cum: self.cum.pct_maps(),
            hists: Some(hists),
            unavailable: false,
            means,
        }
    }
}

struct Shared {
    stop: AtomicBool,
    /// Set by the reader thread once its files are closed.
    finished: AtomicBool,
    matcher: Mutex<Matcher>,
    /// Why the reader thread stopped early.
    error: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

/// How the reader thread gets the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// Binary ring-buffer pages from `per_cpu/cpuN/trace_pipe_raw` (the default).
    Raw,
    /// Text lines from `trace_pipe`: formatted in the kernel, several times more CPU per
    /// event; kept for comparison (`__iolat --source tracefs-text`).
    Text,
}

enum Input {
    Raw(RawInput),
    Text(std::fs::File),
}

fn open_nonblock(p: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p)
        .with_context(|| format!("opening {}", p.display()))
}

/// Reads a file with one read() call: tracefs `events/header_page` returns nothing to reads at
/// a non-zero offset, so a reader that starts with a small buffer sees it cut short.
pub fn read_in_one(p: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(p)?;
    let mut buf = vec![0u8; 64 << 10];
    let n = loop {
        match f.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => break r?,
        }
    };
    buf.truncate(n);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The per-CPU raw pipes of an instance and what it takes to decode their pages.
struct RawInput {
    pipes: Vec<std::fs::File>,
    page: PageLayout,
    layouts: Vec<EventLayout>,
    page_size: usize,
}

impl RawInput {
    fn open(inst: &Path, layouts: Vec<EventLayout>) -> Result<Self> {
        let hp = inst.join("events/header_page");
        let page = match read_in_one(&hp) {
            Ok(t) => PageLayout::parse(&t).with_context(|| format!("{}", hp.display()))?,
            Err(e) => {
                log::debug!("iolat: {}: {}; assuming 64-bit pages", hp.display(), e);
                PageLayout::default()
            }
        };
        let dir = inst.join("per_cpu");
        let mut pipes = Vec::new();
        for ent in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let ent = ent.with_context(|| format!("listing {}", dir.display()))?;
            if !ent.file_name().to_string_lossy().starts_with("cpu") {
                continue;
            }
            pipes.push(open_nonblock(&ent.path().join("trace_pipe_raw"))?);
        }
        if pipes.is_empty() {
            bail!("{} lists no CPUs", dir.display());
        }
        // SAFETY: sysconf has no preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Ok(Self {
            pipes,
            page,
            layouts,
            page_size: if page_size > 0 {
                page_size as usize
            } else {
                4096
            },
        })
    }
}

/// Waits up to `ms` for one of `files` to become readable.
fn poll_any(files: &[&std::fs::File], ms: i32) -> Result<()> {
    use std::os::fd::AsRawFd;
    let mut pfds: Vec<libc::pollfd> = files
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a valid array of that many pollfds for the duration of the call.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("polling the trace pipes");
        }
    }
    Ok(())
}

/// One non-blocking read: `Ok(0)` when there is nothing to read now.
fn read_some(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize> {
    loop {
        match f.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(0),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("reading a trace pipe"),
        }
    }
}

/// How often the raw reader drains the per-CPU buffers.
const RAW_DRAIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// Every [`RAW_DRAIN_INTERVAL`], drains every CPU's raw pipe and feeds the events of the pass
/// to the matcher in time order.
fn read_raw(mut inp: RawInput, shared: &Shared) -> Result<()> {
    let mut buf = vec![0u8; inp.page_size];
    let mut events: Vec<BlockEvent> = Vec::new();
    let mut lost = 0;
    let mut bad_pages = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        events.clear();
        for pipe in inp.pipes.iter_mut() {
            // Bounded per pass so one busy CPU can't starve the others' ordering.
            for _ in 0..256 {
                let n = read_some(pipe, &mut buf)?;
                if n == 0 {
                    break;
                }
                let st = decode_page(&buf[..n], &inp.page, &inp.layouts, |e| events.push(e));
                lost += st.lost;
                if st.truncated {
                    if bad_pages == 0 {
                        log::warn!("iolat: a trace page doesn't decode; skipping the rest of it");
                    }
                    bad_pages += 1;
                }
            }
        }
        if !events.is_empty() || lost > 0 || bad_pages > 0 {
            events.sort_by_key(|e| e.ts_ns);
            let mut m = lock(&shared.matcher);
            for e in &events {
                m.feed(e);
            }
            m.counters.lost += std::mem::take(&mut lost);
            m.counters.malformed += std::mem::take(&mut bad_pages);
        }
        // Waking up for every event costs far more than reading full pages in batches; the
        // per-CPU buffers hold seconds of events at the rates we see.
        std::thread::sleep(RAW_DRAIN_INTERVAL);
    }
    Ok(())
}

/// Reads `trace_pipe` lines until told to stop.
fn read_text(mut pipe: std::fs::File, shared: &Shared) -> Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    let mut tail: Vec<u8> = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        let n = read_some(&mut pipe, &mut buf)?;
        if n == 0 {
            poll_any(&[&pipe], 100)?;
            continue;
        }
        tail.extend_from_slice(&buf[..n]);
        let Some(last_nl) = tail.iter().rposition(|&c| c == b'\n') else {
            continue;
        };
        {
            let mut m = lock(&shared.matcher);
            for line in tail[..last_nl].split(|&c| c == b'\n') {
                m.feed_line(&String::from_utf8_lossy(line));
            }
        }
        tail.drain(..=last_nl);
    }
    Ok(())
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
