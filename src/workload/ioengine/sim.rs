//! A simulated device for tests of what stands on the engine: one server taking IOs in
//! arrival order, each for a service time the test chooses, on a simulated clock. A job runs
//! through the same worker loop (`drive`) as on a real device, in simulated time, so a
//! minute-long curve takes milliseconds and queueing theory says what it should measure.

use super::drive::{drive, Backend, Clock, Done, Op, WorkerPlan};
use super::job::IoJob;
use super::result::IoResult;
use super::stats::Cpu;
use std::cell::Cell;
use std::sync::atomic::AtomicBool;

pub struct SimClock(Cell<u64>);

impl Clock for SimClock {
    fn now(&self) -> u64 {
        self.0.get()
    }
    fn sleep_until(&self, t: u64) {
        if t > self.0.get() {
            self.0.set(t);
        }
    }
    fn thread_cpu(&self) -> Cpu {
        Cpu::default()
    }
}

/// One server, first come first served: an IO submitted at `t` completes at
/// `max(t, when the one before it completes) + service(n)`, `n` counting IOs from 0.
struct FifoDev<'a, F: FnMut(u64) -> u64> {
    clock: &'a SimClock,
    service: F,
    served: u64,
    busy_until: u64,
    queued: Vec<(usize, Op)>,
    inflight: Vec<(usize, u64, u32)>,
}

impl<F: FnMut(u64) -> u64> Backend for FifoDev<'_, F> {
    fn prep(&mut self, slot: usize, op: Op) -> std::io::Result<()> {
        self.queued.push((slot, op));
        Ok(())
    }
    fn submit(&mut self) -> std::io::Result<()> {
        let now = self.clock.now();
        for (slot, op) in self.queued.drain(..) {
            self.busy_until = self.busy_until.max(now) + (self.service)(self.served);
            self.served += 1;
            self.inflight.push((slot, self.busy_until, op.len));
        }
        Ok(())
    }
    fn wait(
        &mut self,
        until: Option<u64>,
        max: usize,
        done: &mut Vec<Done>,
    ) -> std::io::Result<()> {
        let next = self.inflight.iter().map(|i| i.1).min().unwrap_or(u64::MAX);
        let t = until.map_or(next, |u| u.min(next)).max(self.clock.now());
        self.clock.0.set(t);
        let mut n = 0;
        self.inflight.retain(|&(slot, at, len)| {
            let keep = at > t || n == max;
            n += usize::from(!keep);
            if !keep {
                done.push(Done {
                    slot,
                    res: len as i64,
                });
            }
            keep
        });
        Ok(())
    }
}

/// Runs `job` (one worker) on a simulated device of `size` bytes whose `n`-th IO takes
/// `service(n)` ns.
pub fn run(job: &IoJob, size: u64, service: impl FnMut(u64) -> u64) -> anyhow::Result<IoResult> {
    anyhow::ensure!(job.workers == 1, "the simulated device serves one worker");
    let clock = SimClock(Cell::new(0));
    let mut dev = FifoDev {
        clock: &clock,
        service,
        served: 0,
        busy_until: 0,
        queued: vec![],
        inflight: vec![],
    };
    let plan = WorkerPlan::of(job, 0, size);
    let st = drive(&plan, &mut dev, &clock, &AtomicBool::new(false))?;
    Ok(super::run::assemble(
        job,
        None,
        String::new(),
        (size, false),
        &[st],
    ))
}
