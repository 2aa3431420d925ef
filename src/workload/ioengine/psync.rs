//! The fallback backend where io_uring is unavailable: `qd` threads per worker, each doing one
//! blocking `pread`/`pwrite` at a time, so the queue depth is the number of threads busy.
//! Submission hands an IO to the pool; `clat` then includes the hand-over.

use super::buf::Buffers;
use super::drive::{Backend, Clock, Done, MonoClock, Op};
use super::stats::Cpu;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// An IO for a pool thread: the slot, the op, and the slot's buffer address.
type Job = (usize, Op, usize);

pub struct Psync {
    to_pool: Option<Sender<Job>>,
    done_rx: Receiver<Done>,
    threads: Vec<JoinHandle<Cpu>>,
    queued: Vec<Job>,
    bufs: Buffers,
    clock: MonoClock,
    inflight: usize,
    /// Set at the end of the ramp: the IO threads count their CPU time from then on.
    ramp_ended: Arc<AtomicBool>,
}

/// Runs IOs until the pool closes; returns the CPU time used after `ramp_ended` was set.
fn io_thread(
    fd: RawFd,
    jobs: Arc<Mutex<Receiver<Job>>>,
    done: Sender<Done>,
    ramp_ended: Arc<AtomicBool>,
) -> Cpu {
    let mut start: Option<Cpu> = None;
    loop {
        // A poisoned lock means another IO thread panicked: stop too.
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => break,
        };
        let Ok((slot, op, addr)) = job else { break };
        // Blocked in recv until now, so nothing is lost by starting the count here.
        if start.is_none() && ramp_ended.load(Ordering::Relaxed) {
            start = Some(Cpu::thread());
        }
        let ptr = addr as *mut libc::c_void;
        let n = unsafe {
            if op.write {
                libc::pwrite(fd, ptr, op.len as usize, op.offset as libc::off_t)
            } else {
                libc::pread(fd, ptr, op.len as usize, op.offset as libc::off_t)
            }
        };
        let res = if n < 0 {
            -(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO) as i64)
        } else {
            n as i64
        };
        if done.send(Done { slot, res }).is_err() {
            break;
        }
    }
    start.map_or_else(Cpu::default, |s| Cpu::thread().since(&s))
}

impl Psync {
    pub fn new(fd: RawFd, bufs: Buffers, qd: usize, clock: MonoClock) -> io::Result<Psync> {
        let (to_pool, jobs) = channel::<Job>();
        let (done_tx, done_rx) = channel();
        let jobs = Arc::new(Mutex::new(jobs));
        let ramp_ended = Arc::new(AtomicBool::new(false));
        let threads = (0..qd.max(1))
            .map(|i| {
                let (jobs, done, ended) = (jobs.clone(), done_tx.clone(), ramp_ended.clone());
                std::thread::Builder::new()
                    .name(format!("io-psync-{}", i))
                    .spawn(move || io_thread(fd, jobs, done, ended))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Psync {
            to_pool: Some(to_pool),
            done_rx,
            threads,
            queued: Vec::with_capacity(qd),
            bufs,
            clock,
            inflight: 0,
            ramp_ended,
        })
    }
}

impl Backend for Psync {
    fn prep(&mut self, slot: usize, op: Op) -> io::Result<()> {
        self.queued.push((slot, op, self.bufs.ptr(slot) as usize));
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        let tx = self
            .to_pool
            .as_ref()
            .ok_or_else(|| io::Error::other("IO pool closed"))?;
        for job in self.queued.drain(..) {
            tx.send(job)
                .map_err(|_| io::Error::other("the IO threads are gone"))?;
            self.inflight += 1;
        }
        Ok(())
    }

    fn wait(&mut self, until: Option<u64>, max: usize, done: &mut Vec<Done>) -> io::Result<()> {
        let first = match until {
            None => self
                .done_rx
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected),
            Some(t) => {
                let now = self.clock.now();
                self.done_rx
                    .recv_timeout(Duration::from_nanos(t.saturating_sub(now)))
            }
        };
        match first {
            Ok(d) => done.push(d),
            Err(RecvTimeoutError::Timeout) => return Ok(()),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("the IO threads are gone"))
            }
        }
        let mut n = 1;
        while n < max {
            let Ok(d) = self.done_rx.try_recv() else {
                break;
            };
            done.push(d);
            n += 1;
        }
        self.inflight -= n;
        Ok(())
    }

    fn ramp_ended(&mut self) {
        self.ramp_ended.store(true, Ordering::Relaxed);
    }

    fn finish(&mut self) -> Cpu {
        let mut cpu = Cpu::default();
        self.to_pool = None;
        if self.inflight > 0 {
            // A hung IO: its thread can't be joined; the buffers stay for it.
            self.bufs.leak = true;
            return cpu;
        }
        for t in self.threads.drain(..) {
            if let Ok(c) = t.join() {
                cpu.add(&c);
            }
        }
        cpu
    }
}

impl Drop for Psync {
    fn drop(&mut self) {
        self.finish();
    }
}
