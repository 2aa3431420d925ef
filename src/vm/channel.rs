//! Host ends of the guest's character devices: QEMU connects each chardev to a Unix socket we
//! listen on, and a thread per socket relays what arrives (stdout, stderr, console, events).

use super::protocol::Event;
use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

pub struct Relay {
    path: PathBuf,
    handle: Option<JoinHandle<()>>,
}

impl Relay {
    /// Listens on `path` and feeds every byte of the first connection to `sink` until EOF.
    pub fn start(path: &Path, mut sink: impl FnMut(&[u8]) + Send + 'static) -> Result<Self> {
        let listener =
            UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
        let handle = std::thread::spawn(move || {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => sink(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return,
                }
            }
        });
        Ok(Self {
            path: path.to_path_buf(),
            handle: Some(handle),
        })
    }

    /// Waits for the relay to drain; call after QEMU exited. A socket QEMU never connected to
    /// gets a dummy connection so the thread stops waiting.
    pub fn finish(mut self) {
        if let Some(h) = self.handle.take() {
            if !h.is_finished() {
                let _ = UnixStream::connect(&self.path);
            }
            let _ = h.join();
        }
    }
}

/// Sink that copies to our stdout or stderr, flushing each chunk; a closed pipe is ignored so
/// the guest never blocks on it.
pub fn to_stdio(stderr: bool) -> impl FnMut(&[u8]) + Send + 'static {
    move |b| {
        let _ = if stderr {
            let mut e = std::io::stderr().lock();
            e.write_all(b).and_then(|_| e.flush())
        } else {
            let mut o = std::io::stdout().lock();
            o.write_all(b).and_then(|_| o.flush())
        };
    }
}

/// The last bytes of the guest console, to show when the guest dies.
#[derive(Clone, Default)]
pub struct Tail(Arc<Mutex<Vec<u8>>>);

const TAIL_MAX: usize = 32 << 10;

impl Tail {
    pub fn sink(&self, echo: bool) -> impl FnMut(&[u8]) + Send + 'static {
        let tail = self.0.clone();
        let mut stderr = to_stdio(true);
        move |b| {
            if echo {
                stderr(b);
            }
            if let Ok(mut t) = tail.lock() {
                t.extend_from_slice(b);
                if t.len() > TAIL_MAX {
                    let cut = t.len() - TAIL_MAX;
                    t.drain(..cut);
                }
            }
        }
    }

    /// The last `n` non-empty lines, without carriage returns.
    pub fn lines(&self, n: usize) -> Vec<String> {
        let t = self.0.lock().map(|t| t.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&t).replace('\r', "");
        let lines: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        lines[lines.len().saturating_sub(n)..].to_vec()
    }
}

/// Sink that parses control-port lines into events.
pub fn events(tx: mpsc::Sender<Event>) -> impl FnMut(&[u8]) + Send + 'static {
    let mut line = Vec::new();
    move |b| {
        for &c in b {
            if c != b'\n' {
                line.push(c);
                continue;
            }
            match serde_json::from_slice::<Event>(&line) {
                Ok(ev) => {
                    let _ = tx.send(ev);
                }
                Err(_) => log::debug!(
                    "vm: unreadable control line {:?}",
                    String::from_utf8_lossy(&line)
                ),
            }
            line.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_parsed() {
        let (tx, rx) = mpsc::channel();
        let mut sink = events(tx);
        sink(b"{\"event\":\"ready\",\"upt");
        sink(b"ime\":1.5}\n{\"event\":\"exit\",\"code\":7}\ngarbage\n");
        assert_eq!(rx.try_recv().unwrap(), Event::Ready { uptime: 1.5 });
        assert_eq!(rx.try_recv().unwrap(), Event::Exit { code: 7 });
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        let t = Tail::default();
        let mut s = t.sink(false);
        s(b"a\r\nb\r\n\r\nc");
        s(b"d\n");
        assert_eq!(t.lines(2), vec!["b", "cd"]);
    }

    #[test]
    fn relay_copies_a_connection_and_finishes_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let p = dir.path().join("a.sock");
        let r = Relay::start(&p, move |b| g.lock().unwrap().extend_from_slice(b)).unwrap();
        let mut c = UnixStream::connect(&p).unwrap();
        c.write_all(b"x\r\ny").unwrap();
        drop(c);
        r.finish();
        assert_eq!(&*got.lock().unwrap(), b"x\r\ny");
        let idle = Relay::start(&dir.path().join("b.sock"), |_| {}).unwrap();
        idle.finish();
    }
}
