use super::*;
use std::cell::Cell;
use std::time::Duration;

const MS: u64 = 1_000_000;

struct SimClock(Cell<u64>);

impl Clock for SimClock {
    fn now(&self) -> u64 {
        self.0.get()
    }
    fn sleep_until(&self, t: u64) {
        if t > self.0.get() {
            self.0.set(t);
        }
    }
    /// As if the worker were busy all the time.
    fn thread_cpu(&self) -> Cpu {
        Cpu {
            usr_ns: 0,
            sys_ns: self.0.get(),
        }
    }
}

/// A device whose service time is a function of the submission time; unlimited parallelism
/// (the worker's queue depth is the limit).
struct SimDev<'a, F: Fn(u64) -> u64> {
    clock: &'a SimClock,
    /// Completion time for an IO submitted at t.
    done_at: F,
    queued: Vec<(usize, Op)>,
    inflight: Vec<(usize, u64, u32)>,
    ops: Vec<Op>,
    waits: u64,
    /// Submission calls that handed over at least one IO.
    submits: u64,
}

impl<'a, F: Fn(u64) -> u64> SimDev<'a, F> {
    fn new(clock: &'a SimClock, done_at: F) -> Self {
        SimDev {
            clock,
            done_at,
            queued: vec![],
            inflight: vec![],
            ops: vec![],
            waits: 0,
            submits: 0,
        }
    }
}

impl<F: Fn(u64) -> u64> Backend for SimDev<'_, F> {
    fn prep(&mut self, slot: usize, op: Op) -> std::io::Result<()> {
        self.queued.push((slot, op));
        self.ops.push(op);
        Ok(())
    }
    fn submit(&mut self) -> std::io::Result<()> {
        let now = self.clock.now();
        if !self.queued.is_empty() {
            self.submits += 1;
        }
        for (slot, op) in self.queued.drain(..) {
            self.inflight.push((slot, (self.done_at)(now), op.len));
        }
        Ok(())
    }
    fn wait(
        &mut self,
        until: Option<u64>,
        max: usize,
        done: &mut Vec<Done>,
    ) -> std::io::Result<()> {
        self.waits += 1;
        let next = self
            .inflight
            .iter()
            .map(|i| i.1)
            .min()
            .expect("waited with nothing in flight");
        let t = until.map_or(next, |u| u.min(next)).max(self.clock.now());
        self.clock.0.set(t);
        let mut n = 0;
        self.inflight.retain(|&(slot, at, len)| {
            if at <= t && n < max {
                n += 1;
                done.push(Done {
                    slot,
                    res: len as i64,
                });
                false
            } else {
                true
            }
        });
        Ok(())
    }
}

fn plan(qd: usize, stop: Stop, iops: Option<f64>) -> WorkerPlan {
    WorkerPlan {
        index: 0,
        read_pct: 100,
        pattern: Pattern::Rand,
        bs: 4096,
        align: 4096,
        lo: 0,
        hi: 1 << 30,
        qd,
        batch: qd,
        reap: qd,
        ramp_ns: 0,
        stop,
        iops,
        arrivals: Arrivals::Linear,
        seed: 1,
    }
}

fn run<F: Fn(u64) -> u64>(p: &WorkerPlan, done_at: F) -> (WorkerStats, Vec<Op>) {
    let clock = SimClock(Cell::new(0));
    let mut dev = SimDev::new(&clock, done_at);
    let st = drive(p, &mut dev, &clock, &AtomicBool::new(false)).unwrap();
    (st, dev.ops)
}

#[test]
fn closed_loop_keeps_the_queue_full() {
    // 1 ms per IO, QD 4, 1 s: 4000 IOs, each 1 ms.
    let p = plan(4, Stop::Time(Duration::from_secs(1)), None);
    let (st, _) = run(&p, |t| t + MS);
    assert_eq!(st.read.ios, 4000);
    assert_eq!(st.write.ios, 0);
    assert_eq!(st.read.clat.max(), MS);
    assert_eq!(st.read.slat.max(), 0);
    assert_eq!(st.runtime_ns, 1000 * MS);
    assert_eq!(st.read.seconds.len(), 1);
}

#[test]
fn open_loop_latency_counts_from_the_schedule_through_a_stall() {
    // 1000 IOPS on a 1 ms device that stalls from 500 to 600 ms (IOs submitted then complete
    // at 601 ms); QD 4 fills within the stall and the schedule keeps running.
    let stall = |t: u64| {
        if (500 * MS..600 * MS).contains(&t) {
            601 * MS
        } else {
            t + MS
        }
    };
    let p = plan(4, Stop::Time(Duration::from_secs(2)), Some(1000.0));
    let (open, _) = run(&p, stall);
    // Every scheduled IO was issued and counted: the stall did not thin out the load.
    assert!((1999..=2001).contains(&open.read.ios), "{}", open.read.ios);
    let lat = &open.read.lat;
    assert!(lat.max() >= 100 * MS, "max {}", lat.max());
    // IOs due during the stall waited for it: about 100 of 2000 are slow, so p95 is not.
    assert!(
        lat.percentile(99.0) > 30 * MS,
        "p99 {}",
        lat.percentile(99.0)
    );
    assert!(
        lat.percentile(90.0) <= 2 * MS,
        "p90 {}",
        lat.percentile(90.0)
    );
    let slow = slower_than(&open.read.lat, 10 * MS);
    assert!((90..=140).contains(&slow), "{} slow IOs", slow);
    // The waiting shows in lat only: the IOs were prepared when a slot freed up, and slat and
    // clat are the submission's and the device's own time.
    assert!(open.read.slat.max() < MS);
    assert!(open.read.clat.max() <= 101 * MS);
    assert!(open.read.lat.mean() > open.read.slat.mean() + open.read.clat.mean() + 1e6);

    // A closed loop on the same device at QD 1 only sees the one IO caught in the stall.
    let p = plan(1, Stop::Time(Duration::from_secs(2)), None);
    let (closed, _) = run(&p, stall);
    let slow = slower_than(&closed.read.lat, 10 * MS);
    assert_eq!(slow, 1);
}

/// How many samples of `h` lie in buckets above `ns`.
fn slower_than(h: &crate::workload::ioengine::hist::LatHist, ns: u64) -> u64 {
    h.out(&[]).bins.range(ns + 1..).map(|(_, c)| c).sum()
}

#[test]
fn poisson_arrivals_average_the_rate() {
    let mut p = plan(64, Stop::Time(Duration::from_secs(10)), Some(500.0));
    p.arrivals = Arrivals::Poisson;
    let (st, _) = run(&p, |t| t + 100_000);
    let iops = st.read.ios as f64 / (st.runtime_ns as f64 / 1e9);
    assert!((iops - 500.0).abs() < 25.0, "{}", iops);
    // Per-second samples cover the run.
    assert_eq!(st.read.seconds.len(), 10);
}

#[test]
fn batch_sets_the_ios_per_submission_call() {
    // QD 8, every IO 1 ms: all 8 complete together, so with batch 8 one call refills the
    // queue; with batch 1 each IO has its own call; with batch 3, three calls (3+3+2).
    for (batch, calls_per_round) in [(8, 1), (1, 8), (3, 3)] {
        let mut p = plan(8, Stop::Bytes(8 * 4096 * 10), None);
        p.batch = batch;
        let clock = SimClock(Cell::new(0));
        let mut dev = SimDev::new(&clock, |t| t + MS);
        let st = drive(&p, &mut dev, &clock, &AtomicBool::new(false)).unwrap();
        assert_eq!(st.read.ios, 80, "batch {}", batch);
        assert_eq!(dev.submits, 10 * calls_per_round, "batch {}", batch);
        assert_eq!(st.read.clat.max(), MS, "batch {}", batch);
    }
}

#[test]
fn reap_sets_the_completions_taken_per_wait() {
    // QD 8, every IO 1 ms: all 8 complete together; reap 1 takes them one wait each (the
    // rest stay queued), refilling each slot before the next, reap 3 in 3+3+2. The first 8
    // go in one call (batch 8), the 72 after them in one call per wait.
    for (reap, waits_per_round, submits) in [(8, 1, 10), (1, 8, 73), (3, 3, 28)] {
        let mut p = plan(8, Stop::Bytes(8 * 4096 * 10), None);
        p.reap = reap;
        let clock = SimClock(Cell::new(0));
        let mut dev = SimDev::new(&clock, |t| t + MS);
        let st = drive(&p, &mut dev, &clock, &AtomicBool::new(false)).unwrap();
        assert_eq!(st.read.ios, 80, "reap {}", reap);
        assert_eq!(dev.waits, 10 * waits_per_round, "reap {}", reap);
        assert_eq!(dev.submits, submits, "reap {}", reap);
        assert_eq!(st.read.clat.max(), MS, "reap {}", reap);
    }
}

#[test]
fn the_ramp_is_run_but_not_counted() {
    let mut p = plan(1, Stop::Time(Duration::from_secs(1)), None);
    p.ramp_ns = 500 * MS;
    let (st, ops) = run(&p, |t| t + MS);
    assert_eq!(ops.len(), 1500);
    assert_eq!(st.read.ios, 1000);
    assert_eq!(st.runtime_ns, 1000 * MS);
    // CPU time counts from the end of the ramp too.
    assert_eq!(st.cpu.sys_ns, 1000 * MS);
}

#[test]
fn a_size_stop_ends_after_the_bytes() {
    let p = plan(8, Stop::Bytes(1 << 20), None);
    let (st, ops) = run(&p, |t| t + MS);
    assert_eq!(ops.len(), 256);
    assert_eq!(st.read.bytes, 1 << 20);
    assert_eq!(st.runtime_ns, 32 * MS);
}

#[test]
fn offsets_stay_aligned_in_range_and_sequential_walks_and_wraps() {
    let mut p = plan(2, Stop::Bytes(64 * 4096), None);
    p.lo = 8192;
    p.hi = 8192 + 10 * 4096 + 100;
    p.read_pct = 50;
    let (st, ops) = run(&p, |t| t + MS);
    assert!(ops
        .iter()
        .all(|o| o.offset % 4096 == 0 && o.offset >= 8192 && o.offset + 4096 <= p.hi));
    let writes = ops.iter().filter(|o| o.write).count();
    assert!((16..=48).contains(&writes), "{}", writes);
    assert_eq!(st.read.ios + st.write.ios, 64);
    p.pattern = Pattern::Seq;
    let (_, ops) = run(&p, |t| t + MS);
    let offs: Vec<u64> = ops
        .iter()
        .take(12)
        .map(|o| (o.offset - 8192) / 4096)
        .collect();
    assert_eq!(offs, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
}

#[test]
fn sequential_workers_get_their_own_part() {
    let mut job = IoJob::new("/x".into());
    job.pattern = Pattern::Seq;
    job.workers = 4;
    job.bs = 1 << 20;
    let parts: Vec<(u64, u64)> = (0..4)
        .map(|i| {
            let p = WorkerPlan::of(&job, i, 10 << 20);
            (p.lo >> 20, p.hi >> 20)
        })
        .collect();
    // 10 MiB over 4 workers in whole blocks.
    assert_eq!(parts, [(0, 2), (2, 4), (4, 6), (6, 8)]);
    job.stop = Stop::Bytes(10);
    assert_eq!(WorkerPlan::of(&job, 0, 10 << 20).stop, Stop::Bytes(3));
}

#[test]
fn a_failed_io_ends_the_worker_with_the_reason() {
    struct Failing<'a>(SimDev<'a, fn(u64) -> u64>);
    impl Backend for Failing<'_> {
        fn prep(&mut self, s: usize, op: Op) -> std::io::Result<()> {
            self.0.prep(s, op)
        }
        fn submit(&mut self) -> std::io::Result<()> {
            self.0.submit()
        }
        fn wait(
            &mut self,
            u: Option<u64>,
            max: usize,
            done: &mut Vec<Done>,
        ) -> std::io::Result<()> {
            self.0.wait(u, max, done)?;
            if self.0.ops.len() > 10 {
                for d in done.iter_mut() {
                    d.res = -(libc::EIO as i64);
                }
            }
            Ok(())
        }
    }
    let clock = SimClock(Cell::new(0));
    let f: fn(u64) -> u64 = |t| t + MS;
    let mut dev = Failing(SimDev::new(&clock, f));
    let p = plan(2, Stop::Time(Duration::from_secs(1)), None);
    let e = drive(&p, &mut dev, &clock, &AtomicBool::new(false)).unwrap_err();
    let msg = format!("{:#}", e);
    assert!(
        msg.starts_with("worker 0: read of 4096 bytes at offset"),
        "{}",
        msg
    );
    assert!(msg.contains("Input/output error"), "{}", msg);
}

#[test]
fn a_device_that_never_completes_is_given_up_on() {
    let p = plan(2, Stop::Time(Duration::from_secs(1)), None);
    let clock = SimClock(Cell::new(0));
    let mut dev = SimDev::new(&clock, |_| u64::MAX);
    let e = drive(&p, &mut dev, &clock, &AtomicBool::new(false)).unwrap_err();
    assert!(
        format!("{}", e).contains("2 IOs in flight and none completed for 60 s"),
        "{}",
        e
    );
}

#[test]
fn abort_stops_issuing_and_drains() {
    let p = plan(4, Stop::Time(Duration::from_secs(100)), None);
    let clock = SimClock(Cell::new(0));
    let abort = AtomicBool::new(true);
    let mut dev = SimDev::new(&clock, |t| t + MS);
    let st = drive(&p, &mut dev, &clock, &abort).unwrap();
    assert_eq!(st.read.ios, 0);
}
