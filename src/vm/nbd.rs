//! nbdkit between QEMU and the scratch image, for disk profiles with a per-IO latency: nbdkit's
//! delay filter holds every read and write (and trim) for the latency before the file plugin
//! serves it, and QEMU's drive connects to nbdkit's Unix socket instead of opening the image.
//! nbdkit runs the parallel thread model, so concurrent IOs wait side by side instead of in turn;
//! QEMU's throttling (applied before a request reaches nbdkit) still caps the rate.

use super::setup;
use crate::error::UsageError;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long nbdkit may take to listen on its socket.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// `nbdkit`, or a usage error naming the profile that needs it, the package and the fix.
pub fn tool(profile: &str) -> Result<PathBuf> {
    setup::which(setup::NBDKIT).ok_or_else(|| {
        UsageError::new(format!(
            "vm: disk profile {} adds a per-IO latency with nbdkit, which is not installed \
             (Debian package {}); run {}",
            profile,
            setup::NBDKIT,
            setup::FIX
        ))
        .into()
    })
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .with_context(|| format!("{}: not valid UTF-8", p.display()))
}

/// What nbdkit serves and how.
pub struct Server<'a> {
    pub image: &'a Path,
    pub socket: &'a Path,
    /// Written by nbdkit once the socket listens.
    pub pidfile: &'a Path,
    pub latency_ms: u32,
    /// Keep the host page cache out (the counterpart of QEMU's `cache=none`).
    pub direct: bool,
}

impl Server<'_> {
    pub fn args(&self) -> Result<Vec<String>> {
        let delay = format!("{}ms", self.latency_ms);
        let mut a: Vec<String> = [
            // Foreground so that we are its parent and can stop it; it also dies with us.
            "--foreground",
            "--exit-with-parent",
            "--threads",
            // QEMU's NBD client keeps at most 16 requests in flight.
            "16",
            "--unix",
            path_str(self.socket)?,
            "--pidfile",
            path_str(self.pidfile)?,
            "--filter=delay",
            "file",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.push(format!("file={}", path_str(self.image)?));
        if self.direct {
            a.push("cache=none".into());
        }
        // wdelay covers write, zero and trim.
        a.push(format!("rdelay={}", delay));
        a.push(format!("wdelay={}", delay));
        Ok(a)
    }

    /// Starts nbdkit and waits until it listens. `log` gets its stderr.
    pub fn start(&self, nbdkit: &Path, log: &Path) -> Result<Running> {
        let _ = std::fs::remove_file(self.socket);
        let _ = std::fs::remove_file(self.pidfile);
        let args = self.args()?;
        log::debug!("vm: {} {}", nbdkit.display(), args.join(" "));
        let err =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = Command::new(nbdkit);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err);
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                // Our own process group: Ctrl-C reaches only us, and we stop QEMU before nbdkit.
                libc::setpgid(0, 0);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", nbdkit.display()))?;
        let mut running = Running {
            child,
            socket: self.socket.to_path_buf(),
            pidfile: self.pidfile.to_path_buf(),
        };
        let started = Instant::now();
        loop {
            let listening = std::fs::read_to_string(self.pidfile).is_ok_and(|s| s.ends_with('\n'))
                && self.socket.exists();
            if listening {
                return Ok(running);
            }
            let tail = || {
                let s = std::fs::read_to_string(log).unwrap_or_default();
                let lines: Vec<&str> = s.lines().collect();
                lines[lines.len().saturating_sub(5)..].join(" | ")
            };
            if let Ok(Some(st)) = running.child.try_wait() {
                bail!(
                    "vm: nbdkit exited ({}) before serving the disk: {}",
                    st,
                    tail()
                );
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "vm: nbdkit did not listen on {} within {}s: {}",
                    self.socket.display(),
                    START_TIMEOUT.as_secs(),
                    tail()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A running nbdkit: stopped (SIGTERM, then SIGKILL) and its socket removed when dropped.
pub struct Running {
    child: Child,
    socket: PathBuf,
    pidfile: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
            }
            let t = Instant::now();
            while matches!(self.child.try_wait(), Ok(None)) {
                if t.elapsed() > Duration::from_secs(2) {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbdkit_command_line_delays_reads_and_writes_in_parallel() {
        let s = Server {
            image: Path::new("/w/disk.img"),
            socket: Path::new("/w/nbd.sock"),
            pidfile: Path::new("/w/nbdkit.pid"),
            latency_ms: 6,
            direct: true,
        };
        assert_eq!(
            s.args().unwrap().join(" "),
            "--foreground --exit-with-parent --threads 16 --unix /w/nbd.sock \
             --pidfile /w/nbdkit.pid --filter=delay file file=/w/disk.img cache=none \
             rdelay=6ms wdelay=6ms"
        );
        let s = Server {
            direct: false,
            latency_ms: 12,
            ..s
        };
        let a = s.args().unwrap().join(" ");
        assert!(!a.contains("cache=none"));
        assert!(a.ends_with("file=/w/disk.img rdelay=12ms wdelay=12ms"));
    }
}
