//! A request made the way upstream's rd-hashd 2.2.5 makes it (the `upstream_requests` param).
//!
//! The lean request of the parent module reads a chunk in one call into a buffer that lives
//! as long as the worker and hashes anon pages in place. Upstream's request instead builds a
//! fresh zero-filled buffer as long as all the data it touches and keeps it until the request
//! ends; opens the testfile for every chunk and reads each page with its own seek and read
//! (only a page's first 8 bytes with fake CPU load); appends every anon page it touches to
//! the buffer (with fake CPU load one byte of it into a zeroed page); and hashes with
//! rd-hashd's portable SHA-1, not the CPU's SHA instructions. Measured under emulation that
//! is 2.2× the CPU per request with fake CPU load and tens of MiB more anonymous memory at a
//! handful of requests in flight, which moves the footprint the storage bench finds
//! (benches-doc/fidelity.md). The sleeps are three, as upstream's.

use super::{
    anon, anon_chunk_page, hash_with, rel_to_slot, sleep_secs, AnonArea, Outcome, ReqConfig,
    Request, TestFiles, Workspace, PAGE, TIMED_EVERY,
};
use crate::util::proc::thread_cpu_secs;
use std::io::{Read, Seek, SeekFrom, Write};

/// Runs `req` as upstream does: file phase, sleep, anon phase, sleep, hash, sleep; the buffer
/// is dropped at the end.
pub fn run(
    req: &Request,
    cfg: &ReqConfig,
    files: &TestFiles,
    area: &AnonArea,
    ws: &mut Workspace,
) -> Outcome {
    let timed = ws.nr_runs % TIMED_EVERY == 0;
    ws.nr_runs += 1;
    let mut buf = Vec::new();
    let io_errors = file_phase(req, cfg, files, ws, &mut buf);
    sleep_secs(req.sleep / 3.0);
    anon_phase(req, cfg, area, ws, &mut buf);
    sleep_secs(req.sleep / 3.0);
    let out = if cfg.fake_cpu_load {
        sleep_secs(buf.len() as f64 * cfg.cpu_ratio * cfg.fake_tpb);
        Outcome {
            digest: [0; 20],
            hashed: 0,
            hash_cpu: None,
            io_errors,
        }
    } else {
        let t0 = timed.then(thread_cpu_secs);
        let (digest, hashed) = hash_with::<sha1_smol::Sha1>(&buf, cfg.cpu_ratio);
        Outcome {
            digest,
            hashed,
            hash_cpu: t0.map(|t0| thread_cpu_secs() - t0),
            io_errors,
        }
    };
    sleep_secs(req.sleep / 3.0);
    drop(buf);
    out
}

/// Reads the request's chunks into `buf`; returns the chunks that failed (logging the first).
fn file_phase(
    req: &Request,
    cfg: &ReqConfig,
    files: &TestFiles,
    ws: &mut Workspace,
    buf: &mut Vec<u8>,
) -> u32 {
    let nr_pages = cfg.file_pages.min(files.nr_pages());
    if nr_pages == 0 {
        return 0;
    }
    let mut errors = 0;
    for _ in 0..req.file_chunks {
        let rel = cfg.file_addr.sample(&mut ws.rng) * req.file_addr_frac;
        let page = rel_to_slot(rel, nr_pages);
        let (fi, off) = files.locate(page);
        let write = ws.rng.chance(cfg.file_write_frac);
        let want = (cfg.chunk_pages * PAGE) as usize;
        match load(files, fi, off, want, write, cfg.fake_cpu_load, buf) {
            Ok(size) => {
                if let Some(dist) = &cfg.file_dist {
                    dist.add_run(page, size as u64 / PAGE);
                }
            }
            Err(e) => {
                if errors == 0 {
                    log::warn!("testfile {} at {}: {}", fi, off, e);
                }
                errors += 1;
            }
        }
    }
    errors
}

/// One chunk as upstream loads it: open the file, grow `buf` by the chunk (zero-filled), and
/// per page seek and read (8 bytes with fake CPU load), writing the incremented first word
/// back when the chunk writes. Returns the chunk's bytes.
fn load(
    files: &TestFiles,
    fi: u64,
    off: u64,
    want: usize,
    write: bool,
    fake_cpu: bool,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut f = std::fs::File::options()
        .read(true)
        .write(write)
        .open(files.path(fi))?;
    let size = want.min(f.metadata()?.len().saturating_sub(off) as usize);
    let at = buf.len();
    buf.resize(at + size, 0);
    let page = PAGE as usize;
    for p in (0..size).step_by(page) {
        let n = if fake_cpu { 8 } else { page }.min(size - p);
        f.seek(SeekFrom::Start(off + p as u64))?;
        f.read_exact(&mut buf[at + p..at + p + n])?;
        if write && n >= 8 {
            let mut word = [0u8; 8];
            word.copy_from_slice(&buf[at + p..at + p + 8]);
            let v = u64::from_ne_bytes(word).wrapping_add(1);
            f.seek(SeekFrom::Start(off + p as u64))?;
            f.write_all(&v.to_ne_bytes())?;
        }
    }
    Ok(size)
}

/// Touches the request's anon chunks as the lean request does and appends each page to
/// `buf`: the whole page, or with fake CPU load its first byte into a zeroed page.
fn anon_phase(
    req: &Request,
    cfg: &ReqConfig,
    area: &AnonArea,
    ws: &mut Workspace,
    buf: &mut Vec<u8>,
) {
    if req.anon_chunks == 0 {
        return;
    }
    let page = PAGE as usize;
    area.with_pages(|pages| {
        let bytes = cfg.anon_bytes.min(pages.nr_pages() * PAGE);
        for _ in 0..req.anon_chunks {
            let rel = cfg.anon_addr.sample(&mut ws.rng) * req.anon_addr_frac;
            let base = anon_chunk_page(rel, bytes, cfg.chunk_pages);
            let write = ws.rng.chance(cfg.anon_write_frac);
            for i in 0..cfg.chunk_pages {
                let pg = pages.page(base + i);
                anon::fill_if_new(pg, &mut ws.rng);
                if write {
                    anon::bump(pg);
                }
                let at = buf.len();
                buf.resize(at + page, 0);
                if cfg.fake_cpu_load {
                    let w0 = pg[0].load(std::sync::atomic::Ordering::Relaxed);
                    buf[at] = w0.to_ne_bytes()[0];
                } else {
                    anon::copy_page(pg, &mut buf[at..]);
                }
            }
            if let Some(dist) = &cfg.anon_dist {
                dist.add_run(base, cfg.chunk_pages);
            }
        }
    });
}
