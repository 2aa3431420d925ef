//! One worker's loop, written against a [`Backend`] (io_uring, the blocking pool, or a
//! simulated device in the tests) and a [`Clock`], so pacing, ramp, stop and accounting are
//! the same code whatever does the IO, and are tested on a simulated clock.
//!
//! Per IO four times: `due` (when it was scheduled: the moment a slot freed up in a closed
//! loop, its slot in the schedule in an open one), `prep` (when it was prepared for the
//! kernel), `submit` (after the submission call returned) and the completion (when it was
//! reaped). `slat = submit − prep` and `clat = completion − submit` are fio's (its `start_time`
//! and `issue_time`); `lat = completion − due` adds the wait before the IO was prepared, so an
//! open loop's latency includes any wait for a free slot or a late worker.

use super::job::{IoJob, Pattern, Stop};
use super::pace::{Arrivals, Schedule};
use super::stats::{Cpu, Stamps, WorkerStats};
use super::steady::{Counted, Live};
use anyhow::{bail, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};

/// How long IOs may be in flight with none completing before the device counts as hung.
pub const STALL_MAX_NS: u64 = 60_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub write: bool,
    pub offset: u64,
    pub len: u32,
}

/// A completion: the slot and the bytes transferred, or `-errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    pub slot: usize,
    pub res: i64,
}

pub trait Backend {
    /// Queues `op` into `slot` (its buffer); not submitted yet.
    fn prep(&mut self, slot: usize, op: Op) -> std::io::Result<()>;
    /// Submits everything queued.
    fn submit(&mut self) -> std::io::Result<()>;
    /// Waits for at least one completion (there is at least one IO in flight), or until `until`
    /// (clock ns) when given, and appends what completed, at most `max` (the rest stay for the
    /// next wait, oldest first).
    fn wait(&mut self, until: Option<u64>, max: usize, done: &mut Vec<Done>)
        -> std::io::Result<()>;
    /// The ramp is over: CPU time from now on is the job's.
    fn ramp_ended(&mut self) {}
    /// After the last IO: CPU time the backend used outside the worker's own thread since
    /// [`Backend::ramp_ended`].
    fn finish(&mut self) -> super::stats::Cpu {
        super::stats::Cpu::default()
    }
}

pub trait Clock {
    /// ns since some fixed start.
    fn now(&self) -> u64;
    fn sleep_until(&self, t: u64);
    /// CPU time the calling thread has used so far.
    fn thread_cpu(&self) -> Cpu {
        Cpu::default()
    }
}

/// The real clock.
#[derive(Debug, Clone, Copy)]
pub struct MonoClock(std::time::Instant);

impl MonoClock {
    pub fn new() -> Self {
        MonoClock(std::time::Instant::now())
    }
}

impl Default for MonoClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonoClock {
    #[inline]
    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }

    fn sleep_until(&self, t: u64) {
        let now = self.now();
        if t > now {
            std::thread::sleep(std::time::Duration::from_nanos(t - now));
        }
    }

    fn thread_cpu(&self) -> Cpu {
        Cpu::thread()
    }
}

/// What one worker does: the job's share.
#[derive(Debug, Clone)]
pub struct WorkerPlan {
    pub index: u32,
    pub read_pct: u32,
    pub pattern: Pattern,
    pub bs: u64,
    pub align: u64,
    /// Offsets fall in `[lo, hi)`; a sequential worker walks its own part of the job's range.
    pub lo: u64,
    pub hi: u64,
    pub qd: usize,
    /// IOs per submission call (1 to `qd`).
    pub batch: usize,
    /// Completions taken per wait (1 to `qd`).
    pub reap: usize,
    pub ramp_ns: u64,
    pub stop: Stop,
    pub iops: Option<f64>,
    pub arrivals: Arrivals,
    pub seed: u64,
}

impl WorkerPlan {
    /// Worker `index`'s share of `job` on a target of `size` bytes.
    pub fn of(job: &IoJob, index: u32, size: u64) -> WorkerPlan {
        let align = job.alignment();
        let end = if job.end == 0 {
            size
        } else {
            job.end.min(size)
        };
        let (mut lo, mut hi) = (job.start, end);
        if job.pattern == Pattern::Seq && job.workers > 1 {
            // Split into aligned parts, one per worker, so sequential streams don't overlap.
            let part = (end - job.start) / job.workers as u64 / align * align;
            if part >= job.bs {
                lo = job.start + part * index as u64;
                hi = lo + part;
            }
        }
        WorkerPlan {
            index,
            read_pct: job.read_pct,
            pattern: job.pattern,
            bs: job.bs,
            align,
            lo,
            hi,
            qd: job.qd as usize,
            batch: job.submit_batch() as usize,
            reap: job.reap_max() as usize,
            ramp_ns: job.ramp.as_nanos() as u64,
            stop: match job.stop {
                Stop::Bytes(b) => Stop::Bytes(b.div_ceil(job.workers as u64)),
                s => s,
            },
            iops: job.worker_iops(),
            arrivals: job.arrivals,
            seed: job
                .seed
                .wrapping_add((index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        }
    }
}

/// Offsets and directions, in issue order.
struct OpGen {
    rng: SmallRng,
    read_pct: u32,
    pattern: Pattern,
    bs: u64,
    align: u64,
    lo: u64,
    /// Aligned positions an IO can start at: `lo + k × align`, `k < slots`.
    slots: u64,
    next_seq: u64,
}

impl OpGen {
    fn new(p: &WorkerPlan) -> Result<OpGen> {
        let lo = p.lo.div_ceil(p.align) * p.align;
        if p.hi < lo + p.bs {
            bail!(
                "worker {}: the range {}..{} holds no aligned IO of {} bytes",
                p.index,
                p.lo,
                p.hi,
                p.bs
            );
        }
        Ok(OpGen {
            rng: SmallRng::seed_from_u64(p.seed),
            read_pct: p.read_pct,
            pattern: p.pattern,
            bs: p.bs,
            align: p.align,
            lo,
            slots: (p.hi - lo - p.bs) / p.align + 1,
            next_seq: 0,
        })
    }

    #[inline]
    fn next(&mut self) -> Op {
        let write = match self.read_pct {
            100 => false,
            0 => true,
            r => self.rng.gen_range(0..100) >= r,
        };
        let k = match self.pattern {
            Pattern::Rand => self.rng.gen_range(0..self.slots),
            Pattern::Seq => {
                let k = self.next_seq;
                // Next block right after this one, wrapping at the end of the range.
                let step = self.bs.div_ceil(self.align);
                self.next_seq = if k + step < self.slots { k + step } else { 0 };
                k
            }
        };
        Op {
            write,
            offset: self.lo + k * self.align,
            len: self.bs as u32,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    due: u64,
    prep: u64,
    submit: u64,
    write: bool,
    len: u32,
    offset: u64,
}

/// Hands the prepared IOs to the kernel and stamps their submission time.
fn submit_queued<B: Backend, C: Clock>(
    b: &mut B,
    clock: &C,
    slots: &mut [Slot],
    queued: &mut Vec<usize>,
) -> Result<()> {
    b.submit()?;
    let t = clock.now();
    for &s in queued.iter() {
        slots[s].submit = t;
    }
    queued.clear();
    Ok(())
}

/// When a worker measures and stops: the ramp's end and, by its stop, a deadline or a byte
/// budget (counted from the ramp's end).
struct Span {
    ramp_end: u64,
    deadline: Option<u64>,
    budget: u64,
}

impl Span {
    fn of(plan: &WorkerPlan, t0: u64) -> Span {
        let ramp_end = t0 + plan.ramp_ns;
        let (deadline, budget) = match plan.stop {
            Stop::Time(d) => (Some(ramp_end + d.as_nanos() as u64), u64::MAX),
            Stop::Bytes(n) => (None, n),
        };
        Span {
            ramp_end,
            deadline,
            budget,
        }
    }
}

/// Where the next IOs come from: what they are, and when they are due (open loop).
struct Source {
    gen: OpGen,
    sched: Option<Schedule>,
}

/// The worker's IO slots: each one's IO, the free ones, those prepared but not submitted and
/// the completions of the last wait.
struct Ring {
    slots: Vec<Slot>,
    free: Vec<usize>,
    queued: Vec<usize>,
    done: Vec<Done>,
    batch: usize,
}

impl Ring {
    fn new(qd: usize, batch: usize) -> Ring {
        Ring {
            slots: vec![Slot::default(); qd],
            free: (0..qd).rev().collect(),
            queued: Vec::with_capacity(qd),
            done: Vec::with_capacity(qd),
            batch,
        }
    }

    fn inflight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Fills the free slots with the IOs due by `now`, submitting every `batch`; counts the
    /// bytes issued after the ramp into `issued` and stops at the budget.
    fn fill<B: Backend, C: Clock>(
        &mut self,
        b: &mut B,
        clock: &C,
        src: &mut Source,
        now: u64,
        span: &Span,
        issued: &mut u64,
    ) -> Result<()> {
        while let Some(&slot) = self.free.last() {
            let due = match &mut src.sched {
                None => now,
                Some(s) if s.next_due() <= now => s.take(),
                Some(_) => break,
            };
            self.free.pop();
            let op = src.gen.next();
            b.prep(slot, op)?;
            self.slots[slot] = Slot {
                due,
                prep: clock.now(),
                submit: 0,
                write: op.write,
                len: op.len,
                offset: op.offset,
            };
            self.queued.push(slot);
            if self.queued.len() >= self.batch {
                submit_queued(b, clock, &mut self.slots, &mut self.queued)?;
            }
            if now >= span.ramp_end {
                *issued += op.len as u64;
                if *issued >= span.budget {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The completions of the last wait, reaped at `t`, into `st` (those of the ramp are not
    /// counted); frees their slots. Returns whether one failed and when the last counted one
    /// completed.
    fn reap(
        &mut self,
        st: &mut WorkerStats,
        t: u64,
        span: &Span,
        ramp_ns: u64,
        live: Option<&Live>,
    ) -> (bool, Option<u64>) {
        let (mut failed, mut last, mut got) = (false, None, Counted::default());
        for d in self.done.drain(..) {
            let s = self.slots[d.slot];
            self.free.push(d.slot);
            if d.res < 0 {
                st.errors += 1;
                if st.first_error.is_none() {
                    st.first_error = Some(format!(
                        "{} of {} bytes at offset {}: {}",
                        if s.write { "write" } else { "read" },
                        s.len,
                        s.offset,
                        std::io::Error::from_raw_os_error((-d.res) as i32)
                    ));
                }
                failed = true;
                continue;
            }
            // Completions at the very end of the ramp belong to it (a second is (k, k+1]).
            if t < span.ramp_end || (t == span.ramp_end && ramp_ns > 0) {
                continue;
            }
            let sec = ((t - span.ramp_end).saturating_sub(1) / 1_000_000_000) as usize;
            let dir = if s.write { &mut st.write } else { &mut st.read };
            dir.record(
                d.res as u64,
                (d.res as u64) < s.len as u64,
                Stamps {
                    wait: s.prep.saturating_sub(s.due),
                    slat: s.submit.saturating_sub(s.prep),
                    clat: t.saturating_sub(s.submit),
                },
                sec,
            );
            got.ios += 1;
            got.bytes += d.res as u64;
            got.lat_sum_ns += t.saturating_sub(s.due);
            last = Some(t);
        }
        if let Some(l) = live {
            l.add(&got);
        }
        (failed, last)
    }
}

/// The worker's open-loop schedule, if it has a rate. Stratified arrivals keep the count exact
/// over the ramp and the measured time.
fn schedule(plan: &WorkerPlan, t0: u64) -> Option<Schedule> {
    let s = Schedule::new(plan.iops?, plan.arrivals, t0, plan.seed ^ 0xa11);
    Some(match plan.stop {
        Stop::Time(d) if plan.ramp_ns > 0 => s.with_strata(plan.ramp_ns, d.as_nanos() as u64),
        Stop::Time(d) => s.with_strata(d.as_nanos() as u64, d.as_nanos() as u64),
        Stop::Bytes(_) => s,
    })
}

/// Runs one worker to its stop (or until `abort`) and returns what it measured.
pub fn drive<B: Backend, C: Clock>(
    plan: &WorkerPlan,
    b: &mut B,
    clock: &C,
    abort: &AtomicBool,
) -> Result<WorkerStats> {
    drive_live(plan, b, clock, abort, None)
}

/// [`drive`], adding what it counts to `live` as it goes (the steady-state watch reads it).
pub fn drive_live<B: Backend, C: Clock>(
    plan: &WorkerPlan,
    b: &mut B,
    clock: &C,
    abort: &AtomicBool,
    live: Option<&Live>,
) -> Result<WorkerStats> {
    let mut st = WorkerStats::default();
    let t0 = clock.now();
    let span = Span::of(plan, t0);
    let mut src = Source {
        gen: OpGen::new(plan)?,
        sched: schedule(plan, t0),
    };
    let qd = plan.qd.max(1);
    let mut ring = Ring::new(qd, plan.batch.clamp(1, qd));
    // Bytes issued since the ramp ended (the size-based stop).
    let mut issued = 0u64;
    let mut stopped_at: Option<u64> = None;
    let mut last_done = span.ramp_end;
    // The last completion, or the first submission after a time with nothing in flight.
    let mut progress = t0;
    let mut failed = false;
    // CPU time counts from the end of the ramp, as the IOs do (fio does the same).
    let mut cpu_start: Option<Cpu> = None;
    loop {
        let now = clock.now();
        if cpu_start.is_none() && now >= span.ramp_end {
            cpu_start = Some(clock.thread_cpu());
            b.ramp_ended();
        }
        if ring.inflight() == 0 {
            // Nothing in flight: the no-completion watch starts with the next submission.
            progress = now;
        }
        let issuing = !failed
            && !abort.load(Ordering::Relaxed)
            && span.deadline.map_or(issued < span.budget, |d| now < d);
        if !issuing && stopped_at.is_none() {
            stopped_at = Some(now);
        }
        if issuing {
            ring.fill(b, clock, &mut src, now, &span, &mut issued)?;
        }
        if !ring.queued.is_empty() {
            submit_queued(b, clock, &mut ring.slots, &mut ring.queued)?;
        }
        let inflight = ring.inflight();
        if inflight == 0 {
            if !issuing {
                break;
            }
            // Open loop, nothing in flight: sleep to the next due IO (or the end).
            if let Some(s) = &src.sched {
                let t = span.deadline.map_or(s.next_due(), |d| d.min(s.next_due()));
                clock.sleep_until(t);
            }
            continue;
        }
        let stall_end = progress + STALL_MAX_NS;
        if now >= stall_end {
            bail!(
                "{} IOs in flight and none completed for {} s: the device stopped completing IOs",
                inflight,
                STALL_MAX_NS / 1_000_000_000
            );
        }
        // Wake for the next due IO (a free slot to use) and for the end, whatever comes first.
        let mut until = stall_end;
        if issuing {
            if let Some(d) = span.deadline {
                until = until.min(d);
            }
            if let (Some(s), false) = (&src.sched, ring.free.is_empty()) {
                until = until.min(s.next_due());
            }
        }
        b.wait(Some(until), plan.reap.clamp(1, qd), &mut ring.done)?;
        let t = clock.now();
        if !ring.done.is_empty() {
            progress = t;
        }
        let (any_failed, last) = ring.reap(&mut st, t, &span, plan.ramp_ns, live);
        failed |= any_failed;
        last_done = last.unwrap_or(last_done);
    }
    // The measured span: from the end of the ramp to when issuing stopped, or to the last
    // completion drained after that.
    st.runtime_ns = last_done
        .max(stopped_at.unwrap_or(last_done))
        .saturating_sub(span.ramp_end);
    if let Some(c0) = cpu_start {
        st.cpu = clock.thread_cpu().since(&c0);
    }
    failed_ios(plan, &st)?;
    Ok(st)
}

/// The worker's error when any of its IOs failed: the first, and how many more.
fn failed_ios(plan: &WorkerPlan, st: &WorkerStats) -> Result<()> {
    if let Some(e) = &st.first_error {
        bail!(
            "worker {}: {} (and {} more failed IOs)",
            plan.index,
            e,
            st.errors - 1
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests;
