//! A 4 KiB O_DIRECT random-read load (`__probe --randread`, the `__iolat` load and the
//! reporter's synthetic IO load).

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize)]
pub struct RandRead {
    pub target: String,
    pub jobs: usize,
    pub ios: u64,
    pub secs: f64,
    pub iops: f64,
    pub mean_lat_us: f64,
}

/// 4 KiB random reads with O_DIRECT from `jobs` threads for `dur`: a plain pread loop per
/// thread, so the queue depth is `jobs`.
pub fn randread(target: &Path, dur: Duration, jobs: usize) -> Result<RandRead> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    const BS: u64 = 4096;
    let open = || {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(target)
            .with_context(|| format!("opening {} with O_DIRECT", target.display()))
    };
    let blocks = crate::workload::ioengine::target::size_of(&open()?)? / BS;
    if blocks == 0 {
        bail!("{} is smaller than 4 KiB", target.display());
    }
    let jobs = jobs.max(1);
    let start = Instant::now();
    let deadline = start + dur;
    let handles: Vec<_> = (0..jobs)
        .map(|i| -> Result<_> {
            let f = open()?;
            Ok(std::thread::spawn(move || -> Result<(u64, f64)> {
                let layout = std::alloc::Layout::from_size_align(BS as usize, BS as usize)?;
                let ptr = unsafe { std::alloc::alloc(layout) };
                if ptr.is_null() {
                    bail!("out of memory");
                }
                let buf = unsafe { std::slice::from_raw_parts_mut(ptr, BS as usize) };
                let mut x: u64 = 0x9e37_79b9_7f4a_7c15
                    ^ ((i as u64 + 1) << 32)
                    ^ start.elapsed().as_nanos() as u64;
                let (mut n, mut lat) = (0u64, 0f64);
                let res = loop {
                    let now = Instant::now();
                    if now >= deadline {
                        break Ok((n, lat));
                    }
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if let Err(e) = f.read_exact_at(buf, (x % blocks) * BS) {
                        break Err(anyhow::Error::new(e).context("pread"));
                    }
                    lat += now.elapsed().as_secs_f64();
                    n += 1;
                };
                unsafe { std::alloc::dealloc(ptr, layout) };
                res
            }))
        })
        .collect::<Result<_>>()?;
    let (mut ios, mut lat) = (0u64, 0f64);
    for h in handles {
        let (n, l) = h
            .join()
            .map_err(|_| anyhow::anyhow!("reader thread panicked"))??;
        ios += n;
        lat += l;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(RandRead {
        target: target.display().to_string(),
        jobs,
        ios,
        secs,
        iops: ios as f64 / secs,
        mean_lat_us: if ios > 0 { lat / ios as f64 * 1e6 } else { 0.0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn randread_counts_reads_of_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data");
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        match randread(&p, Duration::from_millis(100), 2) {
            Ok(r) => {
                assert!(r.ios > 0);
                assert!(r.iops > 0.0);
                assert_eq!(r.jobs, 2);
            }
            // Filesystems without O_DIRECT (tmpfs) refuse to open.
            Err(e) => assert!(format!("{:#}", e).contains("O_DIRECT"), "{:#}", e),
        }
    }
}
