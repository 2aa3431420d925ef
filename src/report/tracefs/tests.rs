use super::*;

// Lines as the Debian 6.1 guest prints them.
const ISSUE: &str = "    resctl-bench-312     [001] d..1.    78.113806: block_rq_issue: 254,0 R 4096 () 1219048 + 8 [resctl-bench]";
const COMPLETE: &str =
    "          <idle>-0       [000] ..s1.    78.114052: block_rq_complete: 254,0 R () 1219048 + 8 [0]";

fn ev(kind: EventKind, ts_us: u64, sector: u64, t: usize) -> BlockEvent {
    BlockEvent {
        kind,
        ts_ns: ts_us * 1000,
        dev: (254, 0),
        io_type: Some(t),
        sector,
        nr_sector: 8,
    }
}

#[test]
fn parses_issue_and_complete_lines() {
    assert_eq!(
        parse_line(ISSUE),
        TraceLine::Event(BlockEvent {
            kind: EventKind::Issue,
            ts_ns: 78_113_806_000,
            dev: (254, 0),
            io_type: Some(0),
            sector: 1_219_048,
            nr_sector: 8,
        })
    );
    assert_eq!(
        parse_line(COMPLETE),
        TraceLine::Event(BlockEvent {
            kind: EventKind::Complete,
            ts_ns: 78_114_052_000,
            dev: (254, 0),
            io_type: Some(0),
            sector: 1_219_048,
            nr_sector: 8,
        })
    );
    // A comm with spaces and a passthrough command with hex bytes.
    let l = "  kworker/u4:2 x-55 [000] ..... 9.000001: block_rq_issue: 8,16 FWS 0 (35 00 00) 0 + 0 [a b]";
    match parse_line(l) {
        TraceLine::Event(e) => {
            assert_eq!(
                (e.dev, e.io_type, e.sector, e.nr_sector),
                ((8, 16), Some(1), 0, 0)
            );
            assert_eq!(e.ts_ns, 9_000_001_000);
        }
        other => panic!("{:?}", other),
    }
    let l = "  <idle>-0 [001] d.h1. 10.5: block_rq_requeue: 254,0 W () 8 + 16 [0]";
    assert!(
        matches!(parse_line(l), TraceLine::Event(e) if e.kind == EventKind::Requeue && e.ts_ns == 10_500_000_000)
    );
}

#[test]
fn lost_other_and_malformed_lines() {
    assert_eq!(parse_line("CPU:1 [LOST 42 EVENTS]"), TraceLine::Lost(42));
    assert_eq!(parse_line(""), TraceLine::Other);
    assert_eq!(
        parse_line(" x-1 [000] ..... 1.0: sched_switch: prev=a"),
        TraceLine::Other
    );
    for bad in [
        " x-1 [000] ..... 1.0: block_rq_issue: 254,0 R",
        " x-1 [000] ..... 1.0: block_rq_issue: 254:0 R 4096 () 1 + 8 [x]",
        " x-1 [000] ..... nope: block_rq_complete: 254,0 R () 1 + 8 [0]",
        " x-1 [000] ..... 1.0: block_rq_complete: 254,0 R () 1 - 8 [0]",
        " x-1 [000] ..... 1.0: block_rq_complete: 254,0 R 1 + 8 [0]",
        " x-1 [000] ..... 1.0: block_rq_complete: 254,0 R () 99999999999999999999999 + 8 [0]",
    ] {
        assert_eq!(parse_line(bad), TraceLine::Malformed, "{}", bad);
    }
}

#[test]
fn rwbs_classification() {
    for (rwbs, t) in [
        ("R", Some(0)),
        ("RA", Some(0)),
        ("RSM", Some(0)),
        ("W", Some(1)),
        ("WS", Some(1)),
        ("WFS", Some(1)),
        ("FWS", Some(1)),
        ("FWFS", Some(1)),
        ("D", Some(2)),
        ("DE", Some(2)),
        ("F", Some(3)),
        ("FF", Some(3)),
        ("FS", Some(3)),
        ("N", None),
        ("", None),
    ] {
        assert_eq!(rwbs_type(rwbs), t, "{}", rwbs);
    }
}

#[test]
fn timestamps_keep_all_digits() {
    assert_eq!(parse_ts("1.5"), Some(1_500_000_000));
    assert_eq!(parse_ts("0.000000001"), Some(1));
    assert_eq!(parse_ts("12345.678901"), Some(12_345_678_901_000));
    assert_eq!(parse_ts("1.0000000001"), None);
    assert_eq!(parse_ts("1"), None);
    assert_eq!(parse_ts("1.-5"), None);
}

#[test]
fn kernel_dev_encoding() {
    assert_eq!(kernel_dev((254, 0)), 254 << 20);
    assert_eq!(kernel_dev((8, 17)), (8 << 20) | 17);
}

#[test]
fn matches_issue_to_complete_by_sector() {
    let mut m = Matcher::new((254, 0));
    m.feed_line(ISSUE);
    m.feed_line(COMPLETE);
    // Two reads in flight, completing out of order.
    m.feed(&ev(EventKind::Issue, 1000, 16, 0));
    m.feed(&ev(EventKind::Issue, 1010, 24, 0));
    m.feed(&ev(EventKind::Complete, 1110, 24, 0));
    m.feed(&ev(EventKind::Complete, 2000, 16, 0));
    // A write, a completion we never saw issued, another device, an unclassified op.
    m.feed(&ev(EventKind::Issue, 3000, 100, 1));
    m.feed(&ev(EventKind::Complete, 3050, 100, 1));
    m.feed(&ev(EventKind::Complete, 3060, 7, 0));
    m.feed(&BlockEvent {
        dev: (8, 0),
        ..ev(EventKind::Issue, 3000, 1, 0)
    });
    m.feed(&BlockEvent {
        io_type: None,
        ..ev(EventKind::Issue, 3000, 2, 0)
    });
    let c = &m.counters;
    assert_eq!((c.issues, c.completes, c.matched), (6, 5, 4));
    // The completion without issue waits for one (another CPU's buffer may hold it).
    assert_eq!((c.unmatched, c.ignored), (0, 2));
    assert_eq!((m.nr_pending(), m.nr_waiting()), (0, 1));
    let s = m.sample();
    let h = s.hists.as_ref().unwrap();
    assert_eq!(h.read.total(), 3);
    assert_eq!(h.read.min_ns(), Some(100_000));
    assert_eq!(h.read.max_ns(), Some(1_000_000));
    assert_eq!(h.write.total(), 1);
    assert_eq!(h.write.max_ns(), Some(50_000));
    // p50 of 100 µs, 246 µs, 1 ms is 246 µs (its bucket's midpoint, within 3 %).
    let p50 = s.pcts["read"]["50"];
    assert!((p50 - 246e-6).abs() < 246e-6 * 0.035, "{}", p50);
    assert_eq!(s.pcts["read"]["100"], 1e-3);
    assert_eq!(s.pcts["discard"]["50"], 0.0);
    assert!((s.means["read"] - (100e-6 + 246e-6 + 1e-3) / 3.0).abs() < 1e-12);
    assert!(!s.means.contains_key("discard"));
    assert!(!s.unavailable);
    // Two seconds of event time later it counts as unmatched.
    m.feed(&ev(EventKind::Issue, 3060 + 2_000_001, 500, 0));
    m.sample();
    assert_eq!((m.counters.unmatched, m.nr_waiting()), (1, 0));
}

#[test]
fn completion_read_before_its_issue_still_pairs() {
    let mut m = Matcher::new((254, 0));
    // CPU 1's buffer (completions) drained before CPU 0's (issues).
    m.feed(&ev(EventKind::Complete, 1200, 8, 0));
    m.feed(&ev(EventKind::Complete, 1300, 16, 1));
    m.feed(&ev(EventKind::Issue, 1000, 8, 0));
    m.feed(&ev(EventKind::Issue, 1250, 16, 1));
    // An issue later than the waiting completion of its key doesn't pair with it.
    m.feed(&ev(EventKind::Complete, 1400, 24, 0));
    m.feed(&ev(EventKind::Issue, 1500, 24, 0));
    let (h, _) = m.take_interval();
    assert_eq!((h.read.total(), h.read.max_ns()), (1, Some(200_000)));
    assert_eq!((h.write.total(), h.write.max_ns()), (1, Some(50_000)));
    assert_eq!((m.nr_pending(), m.nr_waiting()), (1, 1));
    // Likewise a completion earlier than the pending issue of its key.
    let mut m = Matcher::new((254, 0));
    m.feed(&ev(EventKind::Issue, 2000, 8, 0));
    m.feed(&ev(EventKind::Complete, 1900, 8, 0));
    assert_eq!(
        (m.nr_pending(), m.nr_waiting(), m.counters.matched),
        (1, 1, 0)
    );
}

#[test]
fn same_key_pairs_first_in_first_out_and_requeue_forgets() {
    let mut m = Matcher::new((254, 0));
    // Two flushes (sector 0, no data) in flight.
    m.feed(&BlockEvent {
        nr_sector: 0,
        ..ev(EventKind::Issue, 100, 0, 3)
    });
    m.feed(&BlockEvent {
        nr_sector: 0,
        ..ev(EventKind::Issue, 200, 0, 3)
    });
    m.feed(&BlockEvent {
        nr_sector: 0,
        ..ev(EventKind::Complete, 300, 0, 3)
    });
    m.feed(&BlockEvent {
        nr_sector: 0,
        ..ev(EventKind::Complete, 400, 0, 3)
    });
    let (h, _) = m.take_interval();
    assert_eq!(h.flush.min_ns(), Some(200_000));
    assert_eq!(h.flush.max_ns(), Some(200_000));
    assert_eq!(h.flush.total(), 2);
    // Issued, requeued, issued again: latency from the second issue.
    m.feed(&ev(EventKind::Issue, 1000, 8, 0));
    m.feed(&ev(EventKind::Requeue, 1500, 8, 0));
    m.feed(&ev(EventKind::Issue, 5000, 8, 0));
    m.feed(&ev(EventKind::Complete, 5100, 8, 0));
    let (h, _) = m.take_interval();
    assert_eq!(h.read.max_ns(), Some(100_000));
    assert_eq!(m.nr_pending(), 0);
    assert_eq!(m.counters.requeues, 1);
}

#[test]
fn interval_deltas_and_cumulative() {
    let mut m = Matcher::new((254, 0));
    for i in 0..10 {
        m.feed(&ev(EventKind::Issue, i * 10_000, i, 0));
        m.feed(&ev(EventKind::Complete, i * 10_000 + 100, i, 0));
    }
    let s1 = m.sample();
    assert_eq!(s1.hists.as_ref().unwrap().read.total(), 10);
    for i in 0..10 {
        m.feed(&ev(EventKind::Issue, 1_000_000 + i * 10_000, i, 0));
        m.feed(&ev(
            EventKind::Complete,
            1_000_000 + i * 10_000 + 10_000,
            i,
            0,
        ));
    }
    let s2 = m.sample();
    let h2 = s2.hists.as_ref().unwrap();
    assert_eq!(h2.read.total(), 10);
    assert_eq!(h2.read.min_ns(), Some(10_000_000));
    assert!((s2.pcts["read"]["50"] - 0.01).abs() < 0.01 * 0.035);
    // Cumulative: half at 100 µs, half at 10 ms.
    assert_eq!(m.cumulative().read.total(), 20);
    assert!((s2.cum["read"]["25"] - 1e-4).abs() < 1e-4 * 0.035);
    assert_eq!(s2.cum["read"]["00"], 1e-4);
    assert_eq!(s2.cum["read"]["100"], 1e-2);
    // A second without IO: all zero, cumulative unchanged.
    let s3 = m.sample();
    assert!(s3.pcts["read"].values().all(|&v| v == 0.0));
    assert!(s3.hists.as_ref().unwrap().read.is_empty());
    assert_eq!(s3.cum, s2.cum);
    assert!(s3.means.is_empty());
}

#[test]
fn pending_issues_stay_bounded() {
    let mut m = Matcher::with_max_pending((254, 0), 100);
    // Issues that never complete.
    for i in 0..1000u64 {
        m.feed(&ev(EventKind::Issue, i, i, 0));
        assert!(m.nr_pending() <= 100);
    }
    assert!(m.counters.pending_dropped >= 900);
    // Old ones go first when that is enough.
    let mut m = Matcher::with_max_pending((254, 0), 3);
    m.feed(&ev(EventKind::Issue, 0, 1, 0));
    m.feed(&ev(EventKind::Issue, 40_000_000, 2, 0));
    m.feed(&ev(EventKind::Issue, 40_000_001, 3, 0));
    m.feed(&ev(EventKind::Issue, 40_000_002, 4, 0));
    assert_eq!(m.nr_pending(), 3);
    assert_eq!(m.counters.pending_dropped, 1);
    m.feed(&ev(EventKind::Complete, 40_000_010, 2, 0));
    assert_eq!(m.counters.matched, 1);
}

#[test]
fn open_without_tracefs_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let hp = HostPaths::under(dir.path());
    let e = TraceFsSource::open(&hp, (254, 0)).err().unwrap();
    assert!(
        format!("{:#}", e).contains("tracefs is not mounted"),
        "{:#}",
        e
    );
    // Instances dir but no block events.
    std::fs::create_dir_all(dir.path().join("sys/kernel/tracing/instances")).unwrap();
    let e = TraceFsSource::open(&hp, (254, 0)).err().unwrap();
    assert!(format!("{:#}", e).contains("block_rq_issue"), "{:#}", e);
}

#[test]
fn stale_instances_of_dead_processes_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let hp = HostPaths::under(dir.path());
    let root = dir.path().join("sys/kernel/tracing");
    let inst = root.join("instances");
    for n in [
        "resctl-bench-4242",
        "resctl-bench-1",
        "other-7",
        "resctl-bench-x",
    ] {
        std::fs::create_dir_all(inst.join(n)).unwrap();
    }
    std::fs::create_dir_all(dir.path().join("proc/1")).unwrap();
    remove_stale_instances(&hp, &root);
    let mut left: Vec<String> = std::fs::read_dir(&inst)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["other-7", "resctl-bench-1", "resctl-bench-x"]);
}
