//! The memory profile and the balloon.
//!
//! A memory profile `P` (GiB, a power of two) makes every machine look like a `P`-GiB one to the
//! benches: the workload may use `share(P)`, hashd benches size themselves to `target(P)`, and a
//! balloon process in `balloon.slice` (swap disabled there) takes `avail − share` so the rest of
//! the system really sees only the profile's memory.
//!
//! `avail` is the memory the benches could get on this machine: `--mem-avail`, or else an
//! estimate (see [`estimate_avail`]).

use crate::error::UsageError;
use crate::result::sysinfo::MemProfile;
use crate::system::cgroup::{CgroupFs, Slice};
use crate::system::sysinfo::read_meminfo;
use crate::system::HostPaths;
use crate::units::format_size;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The memory profile (GiB) runs use unless told otherwise; results of other profiles aren't
/// comparable with default runs.
pub const DFL_MEM_PROFILE: u32 = 16;

pub const GIB: u64 = 1 << 30;
const PAGE: u64 = 4096;

/// The workload's memory in a `profile`-GiB machine: P/2 GiB up to 4, 3P/4 GiB up to 16, P − 8
/// GiB above.
pub fn mem_share(profile: u32) -> u64 {
    let p = profile as u64;
    if p <= 4 {
        p * GIB / 2
    } else if p <= 16 {
        p * GIB * 3 / 4
    } else {
        (p - 8) * GIB
    }
}

/// What hashd benches size themselves to: the share minus a slack of an eighth, at most 1 GiB.
pub fn mem_target(share: u64) -> u64 {
    share - (share / 8).min(GIB)
}

/// Where `avail` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvailSource {
    /// `--mem-avail`.
    Given,
    /// [`estimate_avail`].
    Estimated,
    /// Profile `off`: the machine's size.
    MachineSize,
    /// Measured by a hashd bench, or corrected by the storage bench's retries.
    Measured,
}

/// Memory used by our own bench slices (workload.slice, balloon.slice) that `MemAvailable`
/// leaves out: it goes back to the benches, so it counts as available. Their page cache is
/// left out here, as `MemAvailable` already counts it as reclaimable: a previous run's hashd
/// testfiles in workload.slice's cache were counted twice (a 3.9G estimate in a 3.8G guest).
fn bench_slices_usage(cg: &CgroupFs) -> u64 {
    [Slice::Workload, Slice::Balloon]
        .iter()
        .filter_map(|s| {
            let cur = cg.read_memory_current(s.name()).ok()?;
            let file = cg
                .read_memory_stat(s.name())
                .ok()
                .and_then(|st| st.get("file").copied())
                .unwrap_or(0);
            Some(cur.saturating_sub(file))
        })
        .sum()
}

/// The estimate of the memory available to benches until the hashd-based estimation lands:
/// what the kernel reports as available without swapping (`MemAvailable`: free memory plus the
/// reclaimable page cache) plus what our own bench slices hold now. What the kernel, the rest of
/// the system and hostcritical/system/init use at this moment is thereby left out. It doesn't
/// count memory that could be freed by swapping other processes out, so it is on the low side;
/// it is never more than the machine's memory.
pub fn estimate_avail(hp: &HostPaths) -> Result<u64> {
    let mi = read_meminfo(hp)?;
    let Some(avail) = mi.get("MemAvailable").copied() else {
        bail!(
            "{} has no MemAvailable line; give --mem-avail",
            hp.path("proc/meminfo").display()
        );
    };
    let est = avail + bench_slices_usage(&CgroupFs::new(hp));
    Ok(match mi.get("MemTotal").copied() {
        Some(total) if total > 0 => est.min(total),
        _ => est,
    })
}

/// The memory profile of a run: `profile` `None` is `off`. Fails (usage error) when the
/// profile's share doesn't fit into `avail`.
pub fn resolve(
    hp: &HostPaths,
    profile: Option<u32>,
    mem_avail: Option<u64>,
) -> Result<(MemProfile, AvailSource)> {
    let total = read_meminfo(hp)?.get("MemTotal").copied().unwrap_or(0);
    let Some(profile) = profile else {
        return Ok((
            MemProfile {
                profile: 0,
                avail: total,
                share: total,
                target: mem_target(total),
            },
            AvailSource::MachineSize,
        ));
    };
    let (avail, src) = match mem_avail {
        Some(a) => (a, AvailSource::Given),
        None => (estimate_avail(hp)?, AvailSource::Estimated),
    };
    let share = mem_share(profile);
    if share > avail {
        return Err(UsageError::new(format!(
            "--mem-profile {} needs {} of memory for the workload but only {} is available{}; \
             use a lower --mem-profile (or off)",
            profile,
            format_size(share as f64),
            format_size(avail as f64),
            match src {
                AvailSource::Estimated => " (estimated; --mem-avail overrides)",
                _ => "",
            }
        ))
        .into());
    }
    Ok((
        MemProfile {
            profile,
            avail,
            share,
            target: mem_target(share),
        },
        src,
    ))
}

/// `m` with a new `avail`; a usage error when the profile's share doesn't fit into it.
pub fn with_avail(m: &MemProfile, avail: u64) -> Result<MemProfile> {
    if m.profile == 0 {
        return Ok(m.clone());
    }
    if m.share > avail {
        return Err(UsageError::new(format!(
            "--mem-profile {} needs {} of memory for the workload but only {} is available \
             (measured); use a lower --mem-profile (or off)",
            m.profile,
            format_size(m.share as f64),
            format_size(avail as f64)
        ))
        .into());
    }
    Ok(MemProfile { avail, ..m.clone() })
}

/// The balloon size of a profile: `avail − share` (0 for `off`).
pub fn balloon_size(mem: &MemProfile) -> u64 {
    if mem.profile == 0 {
        0
    } else {
        mem.avail.saturating_sub(mem.share)
    }
}

/// The balloon size during hashd benches: `avail − target`, so the benches size themselves
/// to the profile's target (0 for `off`).
pub fn hashd_balloon_size(mem: &MemProfile) -> u64 {
    if mem.profile == 0 {
        0
    } else {
        mem.avail.saturating_sub(mem.target)
    }
}

/// A running balloon: a child process (`resctl-bench __balloon`) holding `size` bytes of
/// touched anonymous memory. Resized through its stdin; killed when stopped or dropped, and by
/// the kernel when this process dies (parent-death signal).
pub struct Balloon {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    size: u64,
}

impl Balloon {
    /// Starts the balloon process, moves it into `balloon.slice` of `cg` (when given; the slice
    /// must exist) and grows it to `size` bytes. Returns once the memory is taken.
    pub fn start(cg: Option<&CgroupFs>, size: u64) -> Result<Balloon> {
        let exe = std::path::Path::new("/proc/self/exe");
        Self::start_exe(exe, cg.map(|fs| (fs, Slice::Balloon.name())), size)
    }

    /// [`Balloon::start`] with the resctl-bench binary at `exe` (tests), moved into cgroup
    /// `cg` when given. In a cgroup that may swap, it is a memory hog that holds what it can.
    pub fn start_exe(
        exe: &std::path::Path,
        cg: Option<(&CgroupFs, &str)>,
        size: u64,
    ) -> Result<Balloon> {
        let mut cmd = Command::new(exe);
        cmd.arg("__balloon")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        crate::util::proc::die_with_parent(&mut cmd, false);
        let mut child = cmd.spawn().context("starting the balloon process")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the balloon process has no stdin/stdout pipe");
        };
        let mut b = Balloon {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            size: 0,
        };
        if let Some((fs, name)) = cg {
            fs.move_pid(name, b.child.id())
                .with_context(|| format!("moving the balloon process into {}", name))?;
        }
        b.resize(size)?;
        Ok(b)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Bytes held now.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Grows or shrinks the balloon to `size` bytes (rounded down to pages); returns when done.
    pub fn resize(&mut self, size: u64) -> Result<()> {
        writeln!(self.stdin, "{}", size)
            .and_then(|_| self.stdin.flush())
            .context("talking to the balloon process")?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .context("reading the balloon's reply")?;
        let held = line
            .trim()
            .strip_prefix("ok ")
            .and_then(|n| n.parse::<u64>().ok());
        match held {
            Some(n) => {
                self.size = n;
                log::debug!(
                    "balloon (pid {}) holds {}",
                    self.pid(),
                    format_size(n as f64)
                );
                Ok(())
            }
            None if line.is_empty() => {
                let status = self.child.wait().ok();
                bail!(
                    "the balloon process died while taking {} ({})",
                    format_size(size as f64),
                    status
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "status unknown".into())
                )
            }
            None => bail!("the balloon process replied {:?}", line.trim()),
        }
    }

    /// Kills the balloon process and waits for it.
    pub fn stop(mut self) -> Result<()> {
        self.kill()
    }

    fn kill(&mut self) -> Result<()> {
        if self.child.try_wait().ok().flatten().is_some() {
            return Ok(());
        }
        self.child.kill().context("killing the balloon process")?;
        self.child
            .wait()
            .context("waiting for the balloon process")?;
        Ok(())
    }
}

impl Drop for Balloon {
    fn drop(&mut self) {
        if let Err(e) = self.kill() {
            log::warn!("{:#}", e);
        }
    }
}

/// Anonymous memory mapped in chunks; each page touched so it is resident.
struct Held {
    chunks: Vec<(*mut libc::c_void, usize)>,
    total: u64,
}

const CHUNK: u64 = 64 << 20;

impl Held {
    fn grow(&mut self, size: u64) -> Result<()> {
        while self.total < size {
            let len = (size - self.total).min(CHUNK) as usize;
            // SAFETY: a fresh private anonymous mapping; we only write inside it.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error())
                    .with_context(|| format!("mapping {} bytes", len));
            }
            let bytes = p as *mut u8;
            let mut off = 0;
            while off < len {
                // SAFETY: off < len, inside the mapping.
                unsafe { std::ptr::write_volatile(bytes.add(off), 0xa5) };
                off += PAGE as usize;
            }
            self.chunks.push((p, len));
            self.total += len as u64;
        }
        Ok(())
    }

    fn shrink(&mut self, size: u64) {
        while self.total > size {
            let Some((p, len)) = self.chunks.pop() else {
                break;
            };
            // SAFETY: unmapping a mapping we created and no longer use.
            unsafe { libc::munmap(p, len) };
            self.total -= len as u64;
        }
    }
}

/// The balloon process (`__balloon`): reads a byte count per line on stdin, holds that much
/// touched anonymous memory (rounded down to pages), answers `ok BYTES`; exits on EOF.
pub fn balloon_main() -> Result<()> {
    let mut held = Held {
        chunks: Vec::new(),
        total: 0,
    };
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.context("reading stdin")?;
        let want: u64 = line
            .trim()
            .parse()
            .with_context(|| format!("__balloon: {:?} is not a byte count", line.trim()))?;
        let want = want / PAGE * PAGE;
        // Shrinking to below the wanted size first keeps whole chunks simple to regrow.
        held.shrink(want);
        held.grow(want)?;
        writeln!(out, "ok {}", held.total)
            .and_then(|_| out.flush())
            .context("writing stdout")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::blockdev::testutil::put;

    #[test]
    fn share_and_target_follow_the_profile_table() {
        assert_eq!(mem_share(1), GIB / 2);
        assert_eq!(mem_share(4), 2 * GIB);
        assert_eq!(mem_share(8), 6 * GIB);
        assert_eq!(mem_share(16), 12 * GIB);
        assert_eq!(mem_share(32), 24 * GIB);
        assert_eq!(mem_target(12 * GIB), 11 * GIB);
        assert_eq!(mem_target(GIB / 2), GIB / 2 - GIB / 16);
    }

    fn host(total_kb: u64, avail_kb: u64) -> (tempfile::TempDir, HostPaths) {
        let t = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(t.path());
        put(
            &hp.path("proc/meminfo"),
            &format!(
                "MemTotal: {} kB\nMemFree: 1 kB\nMemAvailable: {} kB\n",
                total_kb, avail_kb
            ),
        );
        (t, hp)
    }

    #[test]
    fn resolve_profiles() {
        let (_t, hp) = host(32 << 20, 30 << 20);
        let (m, src) = resolve(&hp, Some(16), None).unwrap();
        assert_eq!(src, AvailSource::Estimated);
        assert_eq!((m.avail, m.share, m.target), (30 * GIB, 12 * GIB, 11 * GIB));
        assert_eq!(balloon_size(&m), 18 * GIB);
        // Our own slices' memory counts as available.
        put(
            &hp.cgroup().join("balloon.slice/memory.current"),
            "1073741824\n",
        );
        assert_eq!(estimate_avail(&hp).unwrap(), 31 * GIB);
        // Their page cache is in MemAvailable already: only the rest is added.
        put(
            &hp.cgroup().join("workload.slice/memory.current"),
            "1610612736\n",
        );
        put(
            &hp.cgroup().join("workload.slice/memory.stat"),
            "anon 536870912\nfile 1073741824\n",
        );
        assert_eq!(estimate_avail(&hp).unwrap(), 31 * GIB + GIB / 2);
        // Never more than the machine's memory.
        put(
            &hp.cgroup().join("balloon.slice/memory.current"),
            "2147483648\n",
        );
        assert_eq!(estimate_avail(&hp).unwrap(), 32 * GIB);
        let (m, src) = resolve(&hp, Some(8), Some(7 * GIB)).unwrap();
        assert_eq!(src, AvailSource::Given);
        assert_eq!((m.avail, m.share), (7 * GIB, 6 * GIB));
        let (m, _) = resolve(&hp, None, Some(GIB)).unwrap();
        assert_eq!((m.profile, m.avail, m.share), (0, 32 * GIB, 32 * GIB));
        assert_eq!(m.target, 31 * GIB);
        assert_eq!(balloon_size(&m), 0);
    }

    #[test]
    fn too_big_a_profile_is_a_usage_error() {
        let (_t, hp) = host(4 << 20, 3 << 20);
        let e = resolve(&hp, Some(16), None).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some());
        let msg = e.to_string();
        assert!(msg.contains("use a lower --mem-profile"), "{}", msg);
        assert!(msg.contains("estimated"), "{}", msg);
    }

    #[test]
    fn meminfo_without_mem_available_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(t.path());
        put(&hp.path("proc/meminfo"), "MemTotal: 100 kB\n");
        assert!(estimate_avail(&hp).is_err());
        put(&hp.path("proc/meminfo"), "garbage");
        assert!(resolve(&hp, Some(1), None).is_err());
    }

    #[test]
    fn held_memory_grows_and_shrinks_by_pages() {
        let mut h = Held {
            chunks: Vec::new(),
            total: 0,
        };
        h.grow(CHUNK + 3 * PAGE).unwrap();
        assert_eq!(h.total, CHUNK + 3 * PAGE);
        assert_eq!(h.chunks.len(), 2);
        h.shrink(PAGE);
        assert_eq!(h.total, 0);
        h.grow(5 * PAGE).unwrap();
        assert_eq!(h.total, 5 * PAGE);
        h.shrink(0);
    }
}
