//! What one hashd request does: read a few chunks of testfiles (page cache), touch a few
//! chunks of the anonymous area, hash what was read, and sleep in between like a service
//! waiting on the network.
//!
//! Sizes and positions are clamped-normal draws. Positions are relative (`rel ∈ [−1, 1]`,
//! scaled by the current footprint fraction) and map to pages so that 0 is the hottest page
//! and growing |rel| spreads the accesses outward — positive values over even pages, negative
//! over odd ones for files — so scaling the amplitude grows or shrinks the touched region
//! around a fixed hot centre.

use super::accdist::AccDist;
use super::anon::{self, AnonArea, AnonPages};
use super::dist::{ClampedNormal, Rng};
use super::params::Params;
use super::testfiles::{TestFiles, PAGE};
use crate::util::proc::thread_cpu_secs;
use sha1::{Digest, Sha1};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// Nominal CPU time of a mean request in fake-CPU mode.
pub const FAKE_CPU_LAT: f64 = 0.015;

/// Maps `rel ∈ [−1, 1]` onto `n` slots: `2·floor((n/2)·|rel|)`, plus 1 when rel < 0, capped
/// at n − 1. rel = 0 is slot 0.
pub fn rel_to_slot(rel: f64, n: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    let mag = rel.abs().min(1.0);
    let mut s = 2 * ((n as f64 / 2.0) * mag).floor() as u64;
    if rel < 0.0 {
        s += 1;
    }
    s.min(n - 1)
}

/// The page of the anon area where a chunk starts: the mapping runs over the bytes of
/// `anon_bytes − (chunk_pages − 1)·PAGE` (so a whole chunk fits) and the byte is divided by
/// PAGE.
pub fn anon_chunk_page(rel: f64, anon_bytes: u64, chunk_pages: u64) -> u64 {
    let span = anon_bytes
        .saturating_sub((chunk_pages.saturating_sub(1)) * PAGE)
        .max(1);
    rel_to_slot(rel, span) / PAGE
}

/// Everything a request needs that only changes with the params; rebuilt on a reload.
#[derive(Debug)]
pub struct ReqConfig {
    pub file_size: ClampedNormal,
    pub anon_size: ClampedNormal,
    pub sleep: ClampedNormal,
    pub file_addr: ClampedNormal,
    pub anon_addr: ClampedNormal,
    pub chunk_pages: u64,
    pub file_write_frac: f64,
    pub anon_write_frac: f64,
    pub cpu_ratio: f64,
    pub fake_cpu_load: bool,
    /// Requests made as upstream's rd-hashd makes them (the `upstream` module).
    pub upstream_requests: bool,
    /// Fake-CPU seconds per byte of buffer × cpu_ratio.
    pub fake_tpb: f64,
    /// Pages of testfiles in the footprint.
    pub file_pages: u64,
    /// Bytes of anon area in the footprint.
    pub anon_bytes: u64,
    /// Access histograms over the file pages and the anon pages (off without acc_dist_slots).
    pub file_dist: Option<AccDist>,
    pub anon_dist: Option<AccDist>,
}

impl ReqConfig {
    /// `file_pages` and `anon_bytes` are the footprint (see `Footprint`).
    pub fn new(p: &Params, file_pages: u64, anon_bytes: u64) -> ReqConfig {
        let mean = p.file_size_mean as f64;
        let anon_mean = mean * p.anon_size_ratio;
        let page = PAGE as f64;
        let denom = mean * p.cpu_ratio * (1.0 + p.anon_size_ratio);
        ReqConfig {
            file_size: ClampedNormal::new(
                mean,
                mean * p.file_size_stdev_ratio,
                page,
                (2.0 * mean).max(page),
            ),
            anon_size: ClampedNormal::new(
                anon_mean,
                anon_mean * p.anon_size_stdev_ratio,
                page,
                (2.0 * anon_mean).max(page),
            ),
            sleep: ClampedNormal::new(
                p.sleep_mean,
                p.sleep_mean * p.sleep_stdev_ratio,
                0.0,
                2.0 * p.sleep_mean,
            ),
            file_addr: ClampedNormal::new(0.0, p.file_addr_stdev_ratio, -1.0, 1.0),
            anon_addr: ClampedNormal::new(0.0, p.anon_addr_stdev_ratio, -1.0, 1.0),
            chunk_pages: p.chunk_pages as u64,
            file_write_frac: p.file_write_frac,
            anon_write_frac: p.anon_write_frac,
            cpu_ratio: p.cpu_ratio,
            fake_cpu_load: p.fake_cpu_load,
            upstream_requests: p.upstream_requests,
            fake_tpb: if denom > 0.0 {
                FAKE_CPU_LAT / denom
            } else {
                0.0
            },
            file_pages,
            anon_bytes,
            file_dist: AccDist::new(p.acc_dist_slots, file_pages),
            anon_dist: AccDist::new(p.acc_dist_slots, anon_bytes / PAGE),
        }
    }

    fn chunk_bytes(&self) -> f64 {
        (self.chunk_pages * PAGE) as f64
    }
}

/// One request as the dispatcher drew it.
#[derive(Debug, Clone)]
pub struct Request {
    pub file_chunks: u64,
    pub anon_chunks: u64,
    pub sleep: f64,
    pub file_addr_frac: f64,
    pub anon_addr_frac: f64,
    /// Latency is measured from here (dispatch), so queueing and thread start count.
    pub start: Instant,
}

impl Request {
    pub fn draw(cfg: &ReqConfig, rng: &mut Rng, file_addr_frac: f64, anon_addr_frac: f64) -> Self {
        let cb = cfg.chunk_bytes();
        let file_size = cfg.file_size.sample(rng);
        let anon_size = cfg.anon_size.sample(rng);
        Request {
            file_chunks: ((file_size / cb).ceil() as u64).max(1),
            anon_chunks: (anon_size / cb).ceil() as u64,
            sleep: cfg.sleep.sample(rng),
            file_addr_frac,
            anon_addr_frac,
            start: Instant::now(),
        }
    }
}

/// A worker's reusable state. The file buffer only grows, so a request doesn't pay for
/// zeroing it. Anon pages aren't copied: the request notes which chunks it touched and the
/// hash reads them in place.
pub struct Workspace {
    pub rng: Rng,
    buf: Vec<u8>,
    /// Which of the request's file bytes `buf[0]` holds: the ones before were hashed right
    /// after their read and no later pass needs them, so the buffer was reused (see
    /// [`feed_early`]).
    buf_base: usize,
    /// File bytes the current request read (in fake-CPU mode only counted).
    file_len: usize,
    /// First pages of the anon chunks the current request touched (real hashing only).
    anon_bases: Vec<u64>,
    /// Anon bytes the current request touched.
    anon_len: usize,
    /// The first hash pass, fed the file bytes it covers right after they are read.
    sha: Sha1,
    /// Bytes of the first pass fed into `sha` so far.
    fed: usize,
    /// Whether the current request times its hashing (see [`TIMED_EVERY`]).
    timed: bool,
    /// Requests this workspace has run.
    nr_runs: u64,
    /// Thread CPU seconds the current request spent hashing (timed requests only).
    hash_cpu: f64,
    /// (testfile, offset, bytes) of each chunk read, for the tests to rebuild the bytes.
    #[cfg(test)]
    reads: Vec<(u64, u64, u64)>,
    /// The anon pages' bytes as each chunk left them right after its touches.
    #[cfg(test)]
    touched: Vec<u8>,
}

impl Default for Workspace {
    fn default() -> Self {
        Workspace {
            rng: Rng::from_entropy(),
            buf: Vec::new(),
            buf_base: 0,
            file_len: 0,
            anon_bases: Vec::new(),
            anon_len: 0,
            sha: Sha1::new(),
            fed: 0,
            timed: false,
            nr_runs: 0,
            hash_cpu: 0.0,
            #[cfg(test)]
            reads: Vec::new(),
            #[cfg(test)]
            touched: Vec::new(),
        }
    }
}

impl Workspace {
    /// The next `n` bytes of the file buffer, appended.
    fn next_file_bytes(&mut self, n: usize) -> &mut [u8] {
        let at = self.file_len - self.buf_base;
        let end = at + n;
        if self.buf.len() < end {
            self.buf.resize(end.max(2 * self.buf.len()), 0);
        }
        self.file_len += n;
        &mut self.buf[at..end]
    }

    /// The buffered file bytes `[from, to)` of the request (`from` ≥ `buf_base`).
    fn file_bytes(&self, from: usize, to: usize) -> &[u8] {
        &self.buf[from - self.buf_base..to - self.buf_base]
    }

    /// Bytes the request hashes once per whole pass: its file pages, then its anon pages.
    fn len(&self) -> usize {
        self.file_len + self.anon_len
    }

    /// The thread CPU clock before a piece of hashing, if this request is timed.
    fn hash_clock(&self) -> Option<f64> {
        self.timed.then(thread_cpu_secs)
    }

    /// Adds the CPU time since `t0` (from [`Workspace::hash_clock`]) to the request's hashing.
    fn charge_hash(&mut self, t0: Option<f64>) {
        if let Some(t0) = t0 {
            self.hash_cpu += thread_cpu_secs() - t0;
        }
    }
}

/// Every this many requests a worker times its hashing with the thread CPU clock: a read is
/// a system call (~0.4 µs on a VM) and a timed request makes two per chunk, about 1 % of
/// its CPU; timing one in eight keeps that to ~0.1 % and still yields thousands of samples a
/// minute.
pub const TIMED_EVERY: u64 = 8;

/// What a finished request reports.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub digest: [u8; 20],
    /// Bytes hashed (0 in fake-CPU mode).
    pub hashed: u64,
    /// CPU seconds the hashing took (this thread), for the requests that time it (one in
    /// [`TIMED_EVERY`]).
    pub hash_cpu: Option<f64>,
    pub io_errors: u32,
}

fn sleep_secs(s: f64) {
    if s > 0.0 && s.is_finite() {
        std::thread::sleep(Duration::from_secs_f64(s));
    }
}

/// How the file and anon phases feed the first hash pass early (real hashing only).
struct Early {
    /// Anon bytes the request will touch: `anon_chunks` whole chunks.
    anon_len: usize,
    cpu_ratio: f64,
    /// Whether a later pass hashes the bytes again (so the buffer must keep them, and the
    /// anon phase leaves its pages to the hash step, which reads them all at one time).
    more: bool,
}

/// Runs `req` as a lean request (with `cfg.upstream_requests` the worker runs the `upstream`
/// module's request instead): file phase, sleep, anon phase, sleep, hash, sleep. Adjacent
/// sleeps are slept as one: with fake CPU load the last three, and the last two when the phases did all the
/// hashing.
///
/// With real hashing the first hash pass takes each file chunk right after its read, while it
/// is still in the CPU cache, as far as the pass surely covers it (its truncation point only
/// depends on the file bytes read so far and the anon length, known from the draw). When that
/// pass is the only one, it also takes each anon chunk right after its touches — as upstream,
/// which copies a page into the hash buffer when it touches it — so the hash step only
/// finishes the digest. The digest and the bytes hashed are those of hashing the bytes as the
/// phases left them; part of the hashing CPU time just moves before the sleeps, and the
/// request's total is unchanged.
pub fn run(
    req: &Request,
    cfg: &ReqConfig,
    files: &TestFiles,
    area: &AnonArea,
    ws: &mut Workspace,
) -> Outcome {
    debug_assert!(
        !cfg.upstream_requests,
        "upstream's requests have their own run"
    );
    ws.buf_base = 0;
    ws.file_len = 0;
    ws.anon_len = 0;
    ws.anon_bases.clear();
    ws.fed = 0;
    ws.hash_cpu = 0.0;
    ws.timed = ws.nr_runs % TIMED_EVERY == 0;
    ws.nr_runs += 1;
    Digest::reset(&mut ws.sha);
    #[cfg(test)]
    {
        ws.reads.clear();
        ws.touched.clear();
    }
    let early = (!cfg.fake_cpu_load && cfg.cpu_ratio > 0.01).then(|| Early {
        anon_len: (req.anon_chunks * cfg.chunk_pages * PAGE) as usize,
        cpu_ratio: cfg.cpu_ratio,
        more: pass(0, cfg.cpu_ratio).1 > 0.01,
    });
    let io_errors = file_phase(req, cfg, files, ws, early.as_ref());
    sleep_secs(req.sleep / 3.0);
    anon_phase(req, cfg, area, ws, early.as_ref());
    if cfg.fake_cpu_load {
        // Nothing runs between the last three sleeps (the second stands for the hashing):
        // one sleep for all three spares two wakeups.
        let fake = ws.len() as f64 * cfg.cpu_ratio * cfg.fake_tpb;
        sleep_secs(2.0 * req.sleep / 3.0 + fake);
        return Outcome {
            digest: [0; 20],
            hashed: 0,
            hash_cpu: None,
            io_errors,
        };
    }
    // When the phases fed the only hash pass, the hash step just finishes the digest: the
    // sleeps before and after it become one, which spares a wakeup.
    let fed_all = early.as_ref().is_some_and(|e| !e.more);
    sleep_secs(req.sleep / 3.0 * if fed_all { 2.0 } else { 1.0 });
    let t0 = ws.hash_clock();
    let (digest, hashed) = hash_request(ws, area, cfg.chunk_pages, cfg.cpu_ratio);
    ws.charge_hash(t0);
    let hash_cpu = ws.timed.then_some(ws.hash_cpu);
    if !fed_all {
        sleep_secs(req.sleep / 3.0);
    }
    Outcome {
        digest,
        hashed,
        hash_cpu,
        io_errors,
    }
}

/// A SHA-1 implementation a request can hash with.
pub trait Sha1Impl {
    fn start() -> Self;
    fn feed(&mut self, bytes: &[u8]);
    fn finish(self) -> [u8; 20];
}

/// Ours: the `sha1` crate, which runs the CPU's SHA instructions where it has them.
impl Sha1Impl for Sha1 {
    fn start() -> Self {
        Sha1::new()
    }
    fn feed(&mut self, bytes: &[u8]) {
        self.update(bytes)
    }
    fn finish(self) -> [u8; 20] {
        self.finalize().into()
    }
}

/// rd-hashd 2.2.5's: `sha1_smol`, portable code only. Upstream's requests hash with it, so
/// that their hashing costs what rd-hashd's does: on a CPU with SHA instructions ~2.4× the
/// `sha1` crate's; under TCG, which emulates them, only a few percent more.
impl Sha1Impl for sha1_smol::Sha1 {
    fn start() -> Self {
        sha1_smol::Sha1::new()
    }
    fn feed(&mut self, bytes: &[u8]) {
        self.update(bytes)
    }
    fn finish(self) -> [u8; 20] {
        self.digest().bytes()
    }
}

/// SHA-1 over `buf` scaled by `cpu_ratio`: whole passes while the ratio is ≥ 0.99, then one
/// pass over the leading `round(len × rest)` bytes. Returns the digest and bytes hashed.
pub fn hash(buf: &[u8], cpu_ratio: f64) -> ([u8; 20], u64) {
    hash_with::<Sha1>(buf, cpu_ratio)
}

/// [`hash`] with the SHA-1 implementation `H`.
pub fn hash_with<H: Sha1Impl>(buf: &[u8], cpu_ratio: f64) -> ([u8; 20], u64) {
    hash_scaled(H::start(), 0, buf.len(), cpu_ratio, |h, from, to| {
        h.feed(&buf[from..to])
    })
}

/// One pass of [`hash`] over `len` bytes with `r` (> 0.01) passes left: the bytes it hashes
/// (a leading part when r < 0.99) and the passes left after it.
fn pass(len: usize, r: f64) -> (usize, f64) {
    if r < 0.99 {
        (((len as f64 * r).round() as usize).min(len), 0.0)
    } else {
        (len, r - 1.0)
    }
}

/// The pass structure of [`hash`] over `len` bytes that `feed(hasher, from, to)` hashes bytes
/// `[from, to)` of, so the bytes needn't be in one buffer. `h` has been fed the first `pre`
/// bytes of the first pass already (at most what that pass covers).
fn hash_scaled<H: Sha1Impl>(
    mut h: H,
    pre: usize,
    len: usize,
    cpu_ratio: f64,
    mut feed: impl FnMut(&mut H, usize, usize),
) -> ([u8; 20], u64) {
    let mut r = cpu_ratio;
    let mut len = len;
    let mut from = pre;
    let mut hashed = 0u64;
    while r > 0.01 {
        (len, r) = pass(len, r);
        debug_assert!(from <= len);
        feed(&mut h, from.min(len), len);
        from = 0;
        hashed += len as u64;
    }
    (h.finish(), hashed)
}

/// Feeds the first hash pass the file bytes read so far that it surely covers: the pass cut
/// grows with the file length, so the cut for what has been read is a lower bound. When no
/// later pass reads the bytes again and all are fed, the buffer starts over, so the next chunk
/// is read into memory that is still in the cache.
fn feed_early(ws: &mut Workspace, early: &Early) {
    let len = ws.file_len + early.anon_len;
    let to = pass(len, early.cpu_ratio).0.min(ws.file_len);
    if to > ws.fed {
        let t0 = ws.hash_clock();
        let bytes = &ws.buf[ws.fed - ws.buf_base..to - ws.buf_base];
        ws.sha.update(bytes);
        ws.charge_hash(t0);
        ws.fed = to;
    }
    if !early.more && ws.fed == ws.file_len {
        ws.buf_base = ws.file_len;
    }
}

/// In the anon phase of a one-pass request, after a chunk's touches: feeds the pass what it
/// covers of the bytes so far (the file's final length is known now, so the cut is exact).
fn feed_anon(
    ws: &mut Workspace,
    pages: &AnonPages,
    chunk_pages: u64,
    early: &Early,
    scratch: &mut [u8; PAGE as usize],
) {
    let cut = pass(ws.file_len + early.anon_len, early.cpu_ratio).0;
    let to = cut.min(ws.len());
    if to > ws.fed {
        let t0 = ws.hash_clock();
        let mut h = std::mem::take(&mut ws.sha);
        feed_bytes(&mut h, ws, pages, chunk_pages, (ws.fed, to), scratch);
        ws.sha = h;
        ws.charge_hash(t0);
        ws.fed = to;
    }
}

/// Feeds `h` the request's bytes `[from, to)` — its file bytes followed by its anon pages —
/// reading the anon pages in place (`scratch` holds a copy of a page that isn't filled yet).
fn feed_bytes(
    h: &mut Sha1,
    ws: &Workspace,
    pages: &AnonPages,
    chunk_pages: u64,
    (from, to): (usize, usize),
    scratch: &mut [u8; PAGE as usize],
) {
    let file_len = ws.file_len;
    if from < file_len {
        h.update(ws.file_bytes(from, to.min(file_len)));
    }
    let page = PAGE as usize;
    let (mut a, end) = (from.max(file_len) - file_len, to.max(file_len) - file_len);
    while a < end {
        let i = a / page;
        let pg = ws.anon_bases[i / chunk_pages as usize] + (i as u64 % chunk_pages);
        let at = i * page;
        let (s, e) = (a - at, (end - at).min(page));
        let (head, rest) = anon::page_bytes(pages.page(pg), scratch);
        if s < anon::HEAD {
            h.update(&head[s..e.min(anon::HEAD)]);
        }
        if e > anon::HEAD {
            h.update(&rest[s.max(anon::HEAD) - anon::HEAD..e - anon::HEAD]);
        }
        a = at + e;
    }
}

/// [`hash`] of the request's bytes — its file pages followed by its anon pages — reading the
/// anon pages in place, continuing the first pass from what the phases fed.
fn hash_request(
    ws: &Workspace,
    area: &AnonArea,
    chunk_pages: u64,
    cpu_ratio: f64,
) -> ([u8; 20], u64) {
    let mut scratch = [0u8; PAGE as usize];
    area.with_pages(|pages| {
        hash_scaled(
            ws.sha.clone(),
            ws.fed,
            ws.len(),
            cpu_ratio,
            |h, from, to| feed_bytes(h, ws, pages, chunk_pages, (from, to), &mut scratch),
        )
    })
}

fn file_phase(
    req: &Request,
    cfg: &ReqConfig,
    files: &TestFiles,
    ws: &mut Workspace,
    early: Option<&Early>,
) -> u32 {
    let mut errors = 0;
    let nr_pages = cfg.file_pages.min(files.nr_pages());
    if nr_pages == 0 {
        return 0;
    }
    for _ in 0..req.file_chunks {
        let rel = cfg.file_addr.sample(&mut ws.rng) * req.file_addr_frac;
        let page = rel_to_slot(rel, nr_pages);
        let (fi, off) = files.locate(page);
        let fsize = files.file_size(fi);
        let write = ws.rng.chance(cfg.file_write_frac);
        let Some(f) = files.file(fi) else {
            errors += 1;
            continue;
        };
        let end = (off + cfg.chunk_pages * PAGE).min(fsize);
        if let Some(dist) = &cfg.file_dist {
            dist.add_run(page, (end - off).div_ceil(PAGE));
        }
        if cfg.fake_cpu_load {
            let mut pos = off;
            while pos < end {
                let mut word = [0u8; 8];
                ws.file_len += PAGE as usize;
                let res = f.read_exact_at(&mut word, pos).map(|_| word);
                errors += page_done(f, fi, pos, res, write, errors);
                pos += PAGE;
            }
        } else {
            // The chunk's pages in one read; page by page if that fails, so errors count per
            // page as they would have.
            let chunk = ws.next_file_bytes((end - off) as usize);
            let whole = f.read_exact_at(chunk, off).is_ok();
            for (i, page) in chunk.chunks_exact_mut(PAGE as usize).enumerate() {
                let pos = off + i as u64 * PAGE;
                let res = if whole {
                    Ok(())
                } else {
                    f.read_exact_at(page, pos)
                };
                let res = res.map(|_| {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(&page[..8]);
                    w
                });
                errors += page_done(f, fi, pos, res, write, errors);
            }
            #[cfg(test)]
            ws.reads.push((fi, off, end - off));
            if let Some(early) = early {
                feed_early(ws, early);
            }
        }
    }
    errors
}

/// After reading page `pos` of testfile `fi`: writes the incremented first word back when
/// the chunk writes, logs the first error. Returns the errors to add.
fn page_done(
    f: &std::fs::File,
    fi: u64,
    pos: u64,
    res: std::io::Result<[u8; 8]>,
    write: bool,
    errors_so_far: u32,
) -> u32 {
    match res {
        Ok(word) if write => {
            let v = u64::from_ne_bytes(word).wrapping_add(1);
            u32::from(f.write_all_at(&v.to_ne_bytes(), pos).is_err())
        }
        Ok(_) => 0,
        Err(e) => {
            if errors_so_far == 0 {
                log::warn!("testfile {} read at {}: {}", fi, pos, e);
            }
            1
        }
    }
}

fn anon_phase(
    req: &Request,
    cfg: &ReqConfig,
    area: &AnonArea,
    ws: &mut Workspace,
    early: Option<&Early>,
) {
    if req.anon_chunks == 0 {
        return;
    }
    let early = early.filter(|e| !e.more);
    let mut scratch = [0u8; PAGE as usize];
    area.with_pages(|pages| {
        let bytes = cfg.anon_bytes.min(pages.nr_pages() * PAGE);
        for _ in 0..req.anon_chunks {
            let rel = cfg.anon_addr.sample(&mut ws.rng) * req.anon_addr_frac;
            let base = anon_chunk_page(rel, bytes, cfg.chunk_pages);
            let write = ws.rng.chance(cfg.anon_write_frac);
            if let Some(dist) = &cfg.anon_dist {
                dist.add_run(base, cfg.chunk_pages);
            }
            for i in 0..cfg.chunk_pages {
                let pg = pages.page(base + i);
                anon::fill_if_new(pg, &mut ws.rng);
                if write {
                    anon::bump(pg);
                }
                if cfg.fake_cpu_load {
                    // One byte is enough to keep the page in use.
                    std::hint::black_box(pg[0].load(std::sync::atomic::Ordering::Relaxed) as u8);
                }
            }
            ws.anon_len += (cfg.chunk_pages * PAGE) as usize;
            #[cfg(test)]
            for i in 0..cfg.chunk_pages {
                let mut copy = vec![0u8; PAGE as usize];
                anon::copy_page(pages.page(base + i), &mut copy);
                ws.touched.extend_from_slice(&copy);
            }
            if !cfg.fake_cpu_load {
                // The hash reads these pages in place.
                ws.anon_bases.push(base);
                if let Some(early) = early {
                    feed_anon(ws, pages, cfg.chunk_pages, early, &mut scratch);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests;
pub mod upstream;
