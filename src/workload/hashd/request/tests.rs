use super::*;

#[test]
fn slot_mapping_interleaves_around_a_hot_centre() {
    assert_eq!(rel_to_slot(0.0, 100), 0);
    assert_eq!(rel_to_slot(-0.0001, 100), 1);
    assert_eq!(rel_to_slot(0.1, 100), 10);
    assert_eq!(rel_to_slot(-0.1, 100), 11);
    assert_eq!(rel_to_slot(1.0, 100), 99, "capped at n-1");
    assert_eq!(rel_to_slot(-1.0, 100), 99);
    assert_eq!(rel_to_slot(0.999, 101), 100);
    assert_eq!(rel_to_slot(-1.0, 101), 100);
    assert_eq!(rel_to_slot(0.5, 1), 0);
    assert_eq!(rel_to_slot(0.5, 0), 0);
    // Positive → even, negative → odd.
    for i in 0..200 {
        let rel = i as f64 / 200.0;
        assert_eq!(rel_to_slot(rel, 1000) % 2, 0);
        assert_eq!(rel_to_slot(-rel - 1e-9, 1000) % 2, 1);
    }
}

#[test]
fn scaling_rel_keeps_the_hot_centre() {
    // Halving the amplitude halves the touched range; slot 0 stays the hottest.
    let n = 10_000;
    let d = ClampedNormal::new(0.0, 0.215, -1.0, 1.0);
    let mut rng = Rng::seeded(11);
    let mut full = vec![0u32; n as usize];
    let mut half = vec![0u32; n as usize];
    for _ in 0..200_000 {
        let r = d.sample(&mut rng);
        full[rel_to_slot(r, n) as usize] += 1;
        half[rel_to_slot(r * 0.5, n) as usize] += 1;
    }
    let max_touched = |h: &[u32]| h.iter().rposition(|c| *c > 0).unwrap_or(0);
    assert!(max_touched(&half) <= n as usize / 2 + 1);
    assert!(max_touched(&full) > n as usize * 9 / 10);
    let mass = |h: &[u32], lo: usize, hi: usize| h[lo..hi].iter().sum::<u32>();
    assert!(mass(&full, 0, 100) > mass(&full, 5000, 5100) * 5);
    assert!(mass(&half, 0, 100) > mass(&full, 0, 100));
}

#[test]
fn anon_chunks_fit_inside_the_area() {
    let bytes = 100 * PAGE;
    assert_eq!(anon_chunk_page(0.0, bytes, 25), 0);
    for rel in [1.0, -1.0, 0.999, -0.5] {
        let p = anon_chunk_page(rel, bytes, 25);
        assert!(p + 25 <= 100, "rel {rel}: chunk at {p} overruns");
    }
    assert_eq!(anon_chunk_page(1.0, 10 * PAGE, 25), 0, "tiny area");
}

#[test]
fn hash_scaling_by_cpu_ratio() {
    let buf: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    assert_eq!(hash(&buf, 0.93).1, 930);
    assert_eq!(hash(&buf, 1.0).1, 1000);
    assert_eq!(hash(&buf, 2.5).1, 2500);
    assert_eq!(hash(&buf, 0.0).1, 0);
    let (d, _) = hash(&buf, 1.0);
    let mut h = Sha1::new();
    h.update(&buf);
    assert_eq!(d, <[u8; 20]>::from(h.finalize()));
}

#[test]
fn the_portable_sha1_of_upstreams_requests_gives_the_same_digests() {
    let buf: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    for ratio in [0.0, 0.5, 0.93, 1.0, 2.5] {
        assert_eq!(
            hash_with::<sha1_smol::Sha1>(&buf, ratio),
            hash(&buf, ratio),
            "cpu_ratio {ratio}"
        );
    }
}

/// A workspace as a request would leave it: `file_pages` pages of file bytes, anon chunks
/// of 4 pages at `bases`; returns it with the bytes the hash must cover, concatenated.
fn filled_workspace(area: &AnonArea, file_pages: usize, bases: &[u64]) -> (Workspace, Vec<u8>) {
    let mut ws = Workspace {
        rng: Rng::seeded(21),
        ..Workspace::default()
    };
    let mut rng = Rng::seeded(22);
    rng.fill(ws.next_file_bytes(file_pages * PAGE as usize));
    area.with_pages(|pages| {
        for &b in bases {
            for i in 0..4 {
                let pg = pages.page(b + i);
                // Leave one page fresh: the hash copies it instead of reading in place.
                if b + i != 9 {
                    anon::fill_if_new(pg, &mut rng);
                    anon::bump(pg);
                }
            }
            ws.anon_bases.push(b);
            ws.anon_len += 4 * PAGE as usize;
        }
    });
    // The bytes as they are now (later chunks bumped pages of earlier ones).
    let mut concat = ws.buf[..ws.file_len].to_vec();
    area.with_pages(|pages| {
        for &b in bases {
            for i in 0..4 {
                let mut copy = vec![0u8; PAGE as usize];
                anon::copy_page(pages.page(b + i), &mut copy);
                concat.extend_from_slice(&copy);
            }
        }
    });
    (ws, concat)
}

fn sha1_of(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

#[test]
fn digest_is_sha1_of_the_concatenated_bytes() {
    // Two units of 8 pages; the second chunk straddles them, the third repeats pages.
    let area = AnonArea::with_unit(16 * PAGE, 8 * PAGE as usize).unwrap();
    let (ws, c) = filled_workspace(&area, 3, &[0, 6, 2]);
    let len = c.len();
    assert_eq!(len, ws.len());
    let cut = |r: f64| (len as f64 * r).round() as usize;
    for (ratio, expect) in [
        (0.93, sha1_of(&[&c[..cut(0.93)]])),
        (1.0, sha1_of(&[&c])),
        (2.5, sha1_of(&[&c, &c, &c[..cut(0.5)]])),
    ] {
        let (d, n) = hash_request(&ws, &area, 4, ratio);
        assert_eq!(d, expect, "cpu_ratio {ratio}");
        assert_eq!(d, hash(&c, ratio).0, "cpu_ratio {ratio}");
        assert_eq!(n, hash(&c, ratio).1, "cpu_ratio {ratio}");
    }
    // Cuts inside a page's copied head, inside its in-place rest, and in the file bytes.
    for at in [
        3 * PAGE as usize + 2 * PAGE as usize + 10,
        3 * PAGE as usize + 5 * PAGE as usize + 1000,
        PAGE as usize + 7,
    ] {
        let ratio = at as f64 / len as f64;
        let (d, n) = hash_request(&ws, &area, 4, ratio);
        assert_eq!(n, at as u64);
        assert_eq!(d, sha1_of(&[&c[..at]]), "cut at {at}");
    }
}

/// Testfiles and an anon area of `pages` pages each, in units of a quarter of that.
fn fixture(pages: u64) -> (tempfile::TempDir, TestFiles, AnonArea) {
    let dir = tempfile::tempdir().unwrap();
    let tf = TestFiles::with_unit(dir.path(), pages * PAGE, 0.0, pages / 4 * PAGE).unwrap();
    tf.prepare(&mut |_| true).unwrap();
    let area = AnonArea::with_unit(pages * PAGE, (pages / 4 * PAGE) as usize).unwrap();
    (dir, tf, area)
}

/// Runs real requests with `p` at each cpu_ratio (several per workspace, so a reused one
/// starts clean) and checks the digest and the bytes hashed against SHA-1 over the
/// concatenation rebuilt from the testfiles and the anon area. Returns the largest
/// number of file chunks a request read and whether one reused its buffer.
fn check_real_requests(p: &Params, ratios: &[f64]) -> (u64, bool) {
    let (_dir, tf, area) = fixture(64);
    let (mut most_chunks, mut reused) = (0, false);
    for &ratio in ratios {
        let cfg = ReqConfig::new(
            &Params {
                cpu_ratio: ratio,
                ..p.clone()
            },
            64,
            64 * PAGE,
        );
        let mut ws = Workspace::default();
        for _ in 0..4 {
            // As the request reads them (it may write the pages' first words back).
            let files: Vec<Vec<u8>> = (0..tf.nr_files())
                .map(|i| std::fs::read(tf.path(i)).unwrap())
                .collect();
            let req = Request::draw(&cfg, &mut ws.rng, 1.0, 1.0);
            let out = run(&req, &cfg, &tf, &area, &mut ws);
            assert_eq!(out.io_errors, 0);
            // The file bytes as the testfiles hold them, then the anon pages.
            let mut c = Vec::new();
            for &(fi, off, n) in &ws.reads {
                c.extend_from_slice(&files[fi as usize][off as usize..(off + n) as usize]);
            }
            assert_eq!(c.len(), ws.file_len);
            assert_eq!(ws.reads.len() as u64, req.file_chunks);
            most_chunks = most_chunks.max(req.file_chunks);
            reused |= ws.buf_base > 0;
            // A one-pass request hashes the anon pages as each chunk's touches left them;
            // with more passes the hash step reads them all (later chunks of the request
            // may have bumped pages of earlier ones).
            if pass(0, ratio).1 <= 0.01 {
                c.extend_from_slice(&ws.touched);
            } else {
                area.with_pages(|pages| {
                    for b in &ws.anon_bases {
                        for i in 0..p.chunk_pages as u64 {
                            let mut copy = vec![0u8; PAGE as usize];
                            anon::copy_page(pages.page(b + i), &mut copy);
                            c.extend_from_slice(&copy);
                        }
                    }
                });
            }
            assert_eq!(c.len(), ws.len());
            assert_eq!(out.digest, hash(&c, ratio).0, "cpu_ratio {ratio}");
            assert_eq!(out.hashed, hash(&c, ratio).1, "cpu_ratio {ratio}");
        }
    }
    (most_chunks, reused)
}

#[test]
fn a_real_request_hashes_what_it_read_and_touched() {
    let p = Params {
        file_size_mean: 8 * PAGE as usize,
        chunk_pages: 4,
        sleep_mean: 0.0,
        file_write_frac: 0.0,
        anon_write_frac: 0.0,
        ..Params::default()
    };
    check_real_requests(&p, &[0.93, 1.0, 2.5]);
}

#[test]
fn file_bytes_hashed_as_they_are_read_give_the_same_digest() {
    // Several file chunks each and little anon memory, so the cut of a ratio < 1 falls
    // inside the file bytes (the first pass can't take every chunk as it is read), at the
    // edges of the ratios, with anon writes (file writes would change pages the rebuild
    // reads back). 0.005 hashes nothing, 1.0 all once, 1.5 twice.
    let p = Params {
        file_size_mean: 16 * PAGE as usize,
        anon_size_ratio: 0.1,
        chunk_pages: 3,
        sleep_mean: 0.0,
        file_write_frac: 0.0,
        anon_write_frac: 0.5,
        ..Params::default()
    };
    let ratios = [0.005, 0.02, 0.3, 0.5, 0.93, 0.99, 1.0, 1.005, 1.5, 2.5];
    assert!(check_real_requests(&p, &ratios).0 >= 3);
    // Mostly anon bytes: the cut falls in them and every file chunk is fed as it is read.
    let p = Params {
        anon_size_ratio: 3.0,
        ..p
    };
    let (chunks, reused) = check_real_requests(&p, &[0.3, 0.93]);
    assert!(chunks >= 3 && reused);
}

#[test]
fn request_sizes_follow_the_params() {
    let p = Params::default();
    let cfg = ReqConfig::new(&p, 1000, 1 << 20);
    let mut rng = Rng::seeded(4);
    let n = 20_000;
    let (mut fc, mut ac, mut sl) = (0u64, 0u64, 0.0);
    for _ in 0..n {
        let r = Request::draw(&cfg, &mut rng, 1.0, 1.0);
        assert!(r.file_chunks >= 1 && r.file_chunks <= 25);
        assert!((0.0..=0.04).contains(&r.sleep));
        fc += r.file_chunks;
        ac += r.anon_chunks;
        sl += r.sleep;
    }
    let (fc, ac, sl) = (fc as f64 / n as f64, ac as f64 / n as f64, sl / n as f64);
    // ~1.26 MB / 100 KiB ≈ 12.3 → ~12.8 after rounding up; anon 2.3× that.
    assert!((12.0..14.0).contains(&fc), "file chunks {fc}");
    assert!((28.0..31.0).contains(&ac), "anon chunks {ac}");
    assert!((sl - 0.020).abs() < 0.001, "sleep {sl}");
    // Fake CPU: a mean request sleeps 15 ms for its buffer.
    let mean_len = p.file_size_mean as f64 * (1.0 + p.anon_size_ratio);
    assert!((mean_len * cfg.cpu_ratio * cfg.fake_tpb - FAKE_CPU_LAT).abs() < 1e-9);
}

#[test]
fn access_histograms_count_every_page_with_the_hot_slot_first() {
    let (_dir, tf, area) = fixture(256);
    for fake in [false, true] {
        let p = Params {
            file_size_mean: 16 * PAGE as usize,
            chunk_pages: 4,
            sleep_mean: 0.0,
            fake_cpu_load: fake,
            acc_dist_slots: 8,
            ..Params::default()
        };
        let cfg = ReqConfig::new(&p, 256, 256 * PAGE);
        // A fixed seed: the shape checks below are statistical.
        let mut ws = Workspace {
            rng: super::super::dist::Rng::seeded(7),
            ..Workspace::default()
        };
        let (mut file_pages, mut anon_pages) = (0, 0);
        for _ in 0..100 {
            let req = Request::draw(&cfg, &mut ws.rng, 1.0, 1.0);
            run(&req, &cfg, &tf, &area, &mut ws);
            file_pages += ws.file_len as u64 / PAGE;
            anon_pages += req.anon_chunks * p.chunk_pages as u64;
        }
        for (dist, pages) in [(&cfg.file_dist, file_pages), (&cfg.anon_dist, anon_pages)] {
            let c = dist.as_ref().unwrap().counts();
            assert_eq!(c.len(), 8);
            assert_eq!(c.iter().sum::<u64>(), pages, "fake {fake}: {c:?}");
            // The address distribution is centred on page 0 and falls off outward: the first
            // two slots are about equally hot (a draw may favour either), the rest less.
            let hot = c[0].max(c[1]);
            assert!(c[2..].iter().all(|&n| n <= hot), "{c:?}");
            assert!(c[0] > 4 * c[7], "{c:?}");
        }
    }
    // Off by default: nothing is allocated or counted.
    let cfg = ReqConfig::new(&Params::default(), 256, 256 * PAGE);
    assert!(cfg.file_dist.is_none() && cfg.anon_dist.is_none());
}

#[test]
fn a_request_reads_files_and_fills_anon_pages() {
    let (_dir, tf, area) = fixture(64);
    let p = Params {
        file_size_mean: 8 * PAGE as usize,
        chunk_pages: 4,
        sleep_mean: 0.0,
        anon_write_frac: 1.0,
        ..Params::default()
    };
    for fake in [false, true] {
        let p = Params {
            fake_cpu_load: fake,
            ..p.clone()
        };
        let cfg = ReqConfig::new(&p, 64, 64 * PAGE);
        let mut ws = Workspace::default();
        let req = Request::draw(&cfg, &mut ws.rng, 1.0, 1.0);
        let out = run(&req, &cfg, &tf, &area, &mut ws);
        assert_eq!(out.io_errors, 0);
        let pages = (req.file_chunks + req.anon_chunks) * 4;
        if fake {
            assert_eq!(out.hashed, 0);
            assert_eq!(out.digest, [0; 20]);
            assert!(ws.len() as u64 <= pages * PAGE);
        } else {
            assert!(out.hashed > 0 && out.hashed <= pages * PAGE);
            assert_ne!(out.digest, [0; 20]);
        }
    }
    let touched = area.with_pages(|pg| {
        (0..pg.nr_pages())
            .filter(|i| pg.page(*i)[0].load(std::sync::atomic::Ordering::Relaxed) != 0)
            .count()
    });
    assert!(touched > 0);
}

type RunFn = fn(&Request, &ReqConfig, &TestFiles, &AnonArea, &mut Workspace) -> Outcome;

/// Every page of the area filled, so that requests draw from their rng only for positions
/// and write chances, and two runs of one seed take the same pages.
fn fill_area(area: &AnonArea) {
    let mut rng = Rng::seeded(3);
    area.with_pages(|pages| {
        for i in 0..pages.nr_pages() {
            anon::fill_if_new(pages.page(i), &mut rng);
        }
    });
}

#[test]
fn upstream_requests_touch_and_hash_what_lean_ones_do() {
    let (_dir, tf, area) = fixture(64);
    fill_area(&area);
    for fake in [false, true] {
        for ratio in [0.5, 0.93, 2.5] {
            let p = Params {
                file_size_mean: 12 * PAGE as usize,
                chunk_pages: 3,
                sleep_mean: 0.0,
                file_write_frac: 0.0,
                anon_write_frac: 0.0,
                cpu_ratio: ratio,
                fake_cpu_load: fake,
                acc_dist_slots: 64,
                ..Params::default()
            };
            let lean = ReqConfig::new(&p, 64, 64 * PAGE);
            let up = ReqConfig::new(
                &Params {
                    upstream_requests: true,
                    ..p.clone()
                },
                64,
                64 * PAGE,
            );
            assert!(up.upstream_requests && !lean.upstream_requests);
            let mut draw = Rng::seeded(9);
            for seed in 0..4 {
                let req = Request::draw(&lean, &mut draw, 1.0, 0.8);
                let mut outs = Vec::new();
                for (cfg, run) in [(&lean, run as RunFn), (&up, upstream::run)] {
                    let mut ws = Workspace {
                        rng: Rng::seeded(seed),
                        ..Workspace::default()
                    };
                    let out = run(&req, cfg, &tf, &area, &mut ws);
                    assert_eq!(out.io_errors, 0);
                    outs.push((out.digest, out.hashed, out.hash_cpu.is_some()));
                }
                assert_eq!(outs[0], outs[1], "fake {fake}, cpu_ratio {ratio}");
            }
            let counts = |c: &ReqConfig| {
                let f = c.file_dist.as_ref().unwrap().counts();
                let a = c.anon_dist.as_ref().unwrap().counts();
                (f, a)
            };
            let (lf, la) = counts(&lean);
            assert!(lf.iter().sum::<u64>() > 0 && la.iter().sum::<u64>() > 0);
            assert_eq!((lf, la), counts(&up), "fake {fake}: the same pages");
        }
    }
}

#[test]
fn an_upstream_request_writes_back_each_page_it_reads() {
    let (_dir, tf, area) = fixture(64);
    let first_words = || -> Vec<u64> {
        (0..tf.nr_files())
            .flat_map(|i| {
                let bytes = std::fs::read(tf.path(i)).unwrap();
                bytes
                    .chunks(PAGE as usize)
                    .map(|pg| u64::from_ne_bytes(pg[..8].try_into().unwrap()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    for fake in [false, true] {
        let p = Params {
            file_size_mean: 8 * PAGE as usize,
            chunk_pages: 4,
            sleep_mean: 0.0,
            file_write_frac: 1.0,
            fake_cpu_load: fake,
            upstream_requests: true,
            acc_dist_slots: 64,
            ..Params::default()
        };
        let cfg = ReqConfig::new(&p, 64, 64 * PAGE);
        let before = first_words();
        // Seeded: an unlucky draw from entropy read fewer than four pages now and then.
        let mut ws = Workspace {
            rng: Rng::seeded(5),
            ..Workspace::default()
        };
        let req = Request::draw(&cfg, &mut ws.rng, 1.0, 1.0);
        assert_eq!(upstream::run(&req, &cfg, &tf, &area, &mut ws).io_errors, 0);
        let bumps: u64 = before
            .iter()
            .zip(first_words())
            .map(|(b, a)| a.wrapping_sub(*b))
            .sum();
        let read: u64 = cfg.file_dist.as_ref().unwrap().counts().iter().sum();
        assert!(read >= 4, "fake {fake}: {read} pages read");
        assert_eq!(bumps, read, "fake {fake}: one bump per page read");
    }
}
