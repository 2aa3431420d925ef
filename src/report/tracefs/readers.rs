//! Reading the trace: the raw per-CPU ring buffers (non-blocking, polled) or `trace_pipe`
//! text, feeding the matcher.

use super::events::BlockEvent;
use super::matcher::Matcher;
use crate::report::trace_page::{decode_page, EventLayout, PageLayout};
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// What the source and its reader thread share.
pub(super) struct Shared {
    pub(super) stop: AtomicBool,
    /// Set by the reader thread once its files are closed.
    pub(super) finished: AtomicBool,
    pub(super) matcher: Mutex<Matcher>,
    /// Why the reader thread stopped early.
    pub(super) error: Mutex<Option<String>>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

pub(super) enum Input {
    Raw(RawInput),
    Text(std::fs::File),
}

pub(super) fn open_nonblock(p: &Path) -> Result<std::fs::File> {
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
pub(super) struct RawInput {
    pipes: Vec<std::fs::File>,
    page: PageLayout,
    layouts: Vec<EventLayout>,
    page_size: usize,
}

impl RawInput {
    pub(super) fn open(inst: &Path, layouts: Vec<EventLayout>) -> Result<Self> {
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
pub(super) fn poll_any(files: &[&std::fs::File], ms: i32) -> Result<()> {
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
pub(super) fn read_some(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize> {
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
pub(super) const RAW_DRAIN_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);

/// Every [`RAW_DRAIN_INTERVAL`], drains every CPU's raw pipe and feeds the events of the pass
/// to the matcher in time order.
pub(super) fn read_raw(mut inp: RawInput, shared: &Shared) -> Result<()> {
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
pub(super) fn read_text(mut pipe: std::fs::File, shared: &Shared) -> Result<()> {
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
