//! The hash log: one line per completed request, padded so that at `rps_max` hashd writes
//! about `log_bps` bytes per second — the workload's write IO.
//!
//! Lines look like `[2024-05-01 12:00:03] <sha1 hex> 45.12ms`; when a padding is set, a short
//! line is extended with random letters to `padding` bytes including the newline. The file
//! rotates at `unit` bytes (1 GiB) to `<log>-<secs>.<usecs>`; archives beyond
//! `ceil(log_size / unit) − 1` are deleted oldest first.
//!
//! A writer thread does the IO, fed by a bounded queue holding a minute of lines at rps_max;
//! it writes what has gathered at most ten times a second.
//! Backpressure policy (upstream blocks the dispatcher when the queue is full, so log stalls
//! leak into request latency by accident): when the queue is full the line is dropped and
//! counted, so request latency never waits for the log.

use super::dist::Rng;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

/// Rotation size.
pub const LOG_UNIT: u64 = 1 << 30;
/// Seconds of lines at rps_max the queue holds.
const HOLD_SECS: usize = 60;
/// How long the writer lets lines gather after the first one arrives (far less than the
/// queue holds).
const BATCH: std::time::Duration = std::time::Duration::from_millis(100);

struct Line {
    at: SystemTime,
    digest: [u8; 20],
    lat: f64,
    padding: usize,
}

/// Handle to the log writer thread.
pub struct Logger {
    tx: Option<SyncSender<Line>>,
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Logger {
    /// Opens `path` for appending and starts the writer. `rps_max` sizes the queue.
    pub fn start(path: &Path, log_size: u64, rps_max: u32) -> Result<Logger> {
        Self::start_with_unit(path, log_size, rps_max, LOG_UNIT)
    }

    pub fn start_with_unit(path: &Path, log_size: u64, rps_max: u32, unit: u64) -> Result<Logger> {
        let file = open_append(path)?;
        let cap = (rps_max.max(100) as usize) * HOLD_SECS;
        let (tx, rx) = sync_channel(cap);
        let mut w = Writer {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(256 << 10, file.0),
            size: file.1,
            unit: unit.max(1),
            keep: (log_size.div_ceil(unit.max(1)) as usize).saturating_sub(1),
            rng: Rng::from_entropy(),
        };
        let thread = std::thread::Builder::new()
            .name("hashd-log".into())
            .spawn(move || w.run(rx))
            .context("starting the hash log writer")?;
        Ok(Logger {
            tx: Some(tx),
            dropped: Arc::new(AtomicU64::new(0)),
            thread: Some(thread),
        })
    }

    /// Queues a line; never blocks (a full queue drops the line and counts it).
    pub fn log(&self, digest: [u8; 20], lat: f64, padding: usize) {
        let Some(tx) = &self.tx else { return };
        let line = Line {
            at: SystemTime::now(),
            digest,
            lat,
            padding,
        };
        match tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Lines dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Writes out what is queued and stops the writer.
    pub fn finish(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Logger {
    fn drop(&mut self) {
        self.finish();
    }
}

fn open_append(path: &Path) -> Result<(File, u64)> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening hash log {}", path.display()))?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    Ok((f, size))
}

struct Writer {
    path: PathBuf,
    out: BufWriter<File>,
    size: u64,
    unit: u64,
    keep: usize,
    rng: Rng,
}

/// The `[YYYY-mm-dd HH:MM:SS] ` prefix, formatted once per second.
#[derive(Default)]
struct Stamp {
    secs: u64,
    text: String,
}

impl Stamp {
    fn get(&mut self, at: std::time::SystemTime) -> &str {
        let secs = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if secs != self.secs || self.text.is_empty() {
            let t = chrono::DateTime::<chrono::Local>::from(at);
            self.text = format!("[{}] ", t.format("%Y-%m-%d %H:%M:%S"));
            self.secs = secs;
        }
        &self.text
    }
}

/// Formats one log line into `buf`.
fn format_line(buf: &mut Vec<u8>, line: &Line, rng: &mut Rng, stamp: &mut Stamp) {
    use std::io::Write as _;
    const HEX: &[u8; 16] = b"0123456789abcdef";
    buf.extend_from_slice(stamp.get(line.at).as_bytes());
    for b in line.digest {
        buf.push(HEX[(b >> 4) as usize]);
        buf.push(HEX[(b & 0xf) as usize]);
    }
    let _ = write!(buf, " {:.2}ms", line.lat * 1000.0);
    if buf.len() + 1 < line.padding {
        buf.push(b' ');
        // Random lowercase letters, eight from each draw.
        while buf.len() + 1 < line.padding {
            let mut r = rng.next_u64();
            for _ in 0..8 {
                if buf.len() + 1 >= line.padding {
                    break;
                }
                buf.push(b'a' + ((r & 0xff) % 26) as u8);
                r >>= 8;
            }
        }
    }
    buf.push(b'\n');
}

impl Writer {
    fn run(&mut self, rx: Receiver<Line>) {
        let mut buf = Vec::with_capacity(4096);
        let mut stamp = Stamp::default();
        let mut warned = false;
        while let Ok(line) = rx.recv() {
            // Let lines gather before writing: a wakeup and a write per request cost hashd
            // about 1 % of its CPU; the log is only written later, never lost.
            std::thread::sleep(BATCH);
            let mut next = Some(line);
            while let Some(line) = next {
                buf.clear();
                format_line(&mut buf, &line, &mut self.rng, &mut stamp);
                if let Err(e) = self.write(&buf) {
                    if !warned {
                        log::warn!("hash log {}: {:#}", self.path.display(), e);
                        warned = true;
                    }
                }
                next = rx.try_recv().ok();
            }
            // Queue drained: hand what we have to the kernel.
            let _ = self.out.flush();
        }
        let _ = self.out.flush();
    }

    fn write(&mut self, line: &[u8]) -> Result<()> {
        if self.size >= self.unit {
            self.rotate()?;
        }
        self.out.write_all(line)?;
        self.size += line.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> Result<()> {
        self.out.flush()?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!("-{}.{:06}", now.as_secs(), now.subsec_micros()));
        std::fs::rename(&self.path, &name)
            .with_context(|| format!("rotating {}", self.path.display()))?;
        let (f, size) = open_append(&self.path)?;
        self.out = BufWriter::with_capacity(256 << 10, f);
        self.size = size;
        self.prune();
        Ok(())
    }

    /// Deletes the oldest archives beyond `keep`.
    fn prune(&self) {
        let (Some(dir), Some(base)) = (self.path.parent(), self.path.file_name()) else {
            return;
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let prefix = format!("{}-", base.to_string_lossy());
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let mut archives: Vec<(f64, PathBuf)> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let stamp: f64 = name.strip_prefix(&prefix)?.parse().ok()?;
                Some((stamp, e.path()))
            })
            .collect();
        archives.sort_by(|a, b| a.0.total_cmp(&b.0));
        let excess = archives.len().saturating_sub(self.keep);
        for (_, p) in archives.into_iter().take(excess) {
            if let Err(e) = std::fs::remove_file(&p) {
                log::debug!("can't remove {}: {}", p.display(), e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_padded_to_the_padding() {
        let mut rng = Rng::seeded(1);
        let line = Line {
            at: SystemTime::now(),
            digest: [0xab; 20],
            lat: 0.04512,
            padding: 200,
        };
        let mut buf = Vec::new();
        format_line(&mut buf, &line, &mut rng, &mut Stamp::default());
        assert_eq!(buf.len(), 200);
        let s = String::from_utf8(buf.clone()).unwrap();
        assert!(
            s.contains(&format!("] {} 45.12ms ", "ab".repeat(20))),
            "{s}"
        );
        assert!(s.ends_with('\n') && s.matches('\n').count() == 1);
        buf.clear();
        format_line(
            &mut buf,
            &Line { padding: 0, ..line },
            &mut rng,
            &mut Stamp::default(),
        );
        assert!(buf.len() < 80 && buf.ends_with(b"45.12ms\n"));
        // The padding is lowercase letters; the cached stamp is the line's second.
        let mut stamp = Stamp::default();
        buf.clear();
        format_line(&mut buf, &line, &mut rng, &mut stamp);
        let s = String::from_utf8(buf).unwrap();
        let pad = s.trim_end().rsplit(' ').next().unwrap();
        assert!(
            pad.len() > 100 && pad.bytes().all(|b| b.is_ascii_lowercase()),
            "{pad}"
        );
        let t = chrono::DateTime::<chrono::Local>::from(line.at);
        assert!(s.starts_with(&format!("[{}] ", t.format("%Y-%m-%d %H:%M:%S"))));
    }

    #[test]
    fn rotates_and_keeps_a_bounded_number_of_archives() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hashd.log");
        // Units of 1000 bytes, log_size 2500 → keep 2 archives.
        let mut lg = Logger::start_with_unit(&path, 2500, 100, 1000).unwrap();
        for i in 0..100 {
            lg.log([i as u8; 20], 0.01, 100);
            if i % 10 == 9 {
                // Give rotation distinct timestamps.
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        lg.finish();
        assert_eq!(lg.dropped(), 0);
        let mut archives = 0;
        let mut total = 0;
        for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let len = e.metadata().unwrap().len();
            total += len;
            if name != "hashd.log" {
                assert!(name.starts_with("hashd.log-"), "{name}");
                archives += 1;
            }
            assert!(len <= 1000, "{name}: {len}");
        }
        assert_eq!(archives, 2);
        assert!(total <= 3000);
    }
}
