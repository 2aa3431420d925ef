//! The io_uring backend: one ring per worker, one submission per batch of prepared IOs, and
//! waits that also end at a time (`IORING_ENTER_EXT_ARG`, or a timeout entry on kernels
//! without it). [`UringOpts`] turns on the lower-overhead settings: registered buffers and
//! file, a submission-polling kernel thread, polled completions, deferred task work.

use super::buf::Buffers;
use super::drive::{Backend, Clock, Done, MonoClock, Op};
use super::job::UringOpts;
use super::stats::Cpu;
use io_uring::{opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::RawFd;
use std::sync::Mutex;

/// `user_data` of the timeout entries (slots are small numbers).
const TIMEOUT: u64 = u64::MAX;

/// How long the submission-polling thread spins without work before it sleeps (fio's and the
/// kernel's default).
const SQ_IDLE_MS: u32 = 1000;

/// Serializes ring set-up, so a worker can tell which new thread is its submission poller.
static SETUP: Mutex<()> = Mutex::new(());

pub struct Uring {
    ring: IoUring,
    fd: RawFd,
    bufs: Buffers,
    clock: MonoClock,
    opts: UringOpts,
    ext_arg: bool,
    inflight: usize,
    /// Read by the kernel when a timeout entry is submitted.
    ts: Box<types::Timespec>,
    timeout_pending: bool,
    /// The submission-polling thread (`sqthread_poll`) and its CPU time at the ramp's end.
    sq_thread: Option<(u32, u64)>,
}

impl Uring {
    /// Whether this kernel (and any seccomp policy) lets us set up a ring.
    pub fn available() -> Result<(), String> {
        IoUring::new(2).map(|_| ()).map_err(|e| e.to_string())
    }

    /// Which of `want`'s settings a ring here can have: each one set up on a small ring (the
    /// task-run flags fall back to `COOP_TASKRUN` alone before 6.1). `hipri` is the caller's
    /// to judge (it depends on the device). Returns what works and a note on what didn't.
    pub fn supported(want: UringOpts) -> (UringOpts, Vec<String>) {
        let mut got = want;
        let mut notes = Vec::new();
        if want.sqthread_poll
            && IoUring::<squeue::Entry>::builder()
                .setup_sqpoll(SQ_IDLE_MS)
                .build(2)
                .is_err()
        {
            got.sqthread_poll = false;
            notes.push("no sqthread_poll (the kernel refused IORING_SETUP_SQPOLL)".into());
        }
        if want.taskrun && got.sqthread_poll {
            // The task-work flags are for rings whose submitter takes interrupts: the kernel
            // refuses them beside a submission poller, which takes SINGLE_ISSUER alone.
            notes.push("taskrun with sqthread_poll: SINGLE_ISSUER only".into());
        } else if want.taskrun && taskrun_builder(true).build(2).is_err() {
            if taskrun_builder(false).build(2).is_err() {
                got.taskrun = false;
                notes.push("no taskrun (the kernel has no IORING_SETUP_COOP_TASKRUN)".into());
            } else {
                notes.push("taskrun without DEFER_TASKRUN (kernel before 6.1)".into());
            }
        }
        (got, notes)
    }

    pub fn new(
        fd: RawFd,
        bufs: Buffers,
        qd: usize,
        clock: MonoClock,
        opts: UringOpts,
    ) -> io::Result<Uring> {
        // Room for every slot plus a timeout entry.
        let entries = (qd as u32 + 1).next_power_of_two();
        let (ring, sq_thread) = build(entries, &opts)?;
        if opts.fixedbufs {
            let iov: Vec<libc::iovec> = (0..qd)
                .map(|i| libc::iovec {
                    iov_base: bufs.ptr(i).cast(),
                    iov_len: bufs.each(),
                })
                .collect();
            // SAFETY: the buffers stay allocated while the ring is registered with them: the
            // ring is dropped before `bufs` (field order), or the buffers are leaked.
            unsafe { ring.submitter().register_buffers(&iov) }.map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "registering {} buffers of {} bytes (fixedbufs; locked-memory limit?): {}",
                        qd,
                        bufs.each(),
                        e
                    ),
                )
            })?;
        }
        if opts.registerfiles {
            ring.submitter()
                .register_files(&[fd])
                .map_err(|e| io::Error::new(e.kind(), format!("registering the file: {}", e)))?;
        }
        let ext_arg = ring.params().is_feature_ext_arg();
        Ok(Uring {
            ring,
            fd,
            bufs,
            clock,
            opts,
            ext_arg,
            inflight: 0,
            ts: Box::new(types::Timespec::new()),
            timeout_pending: false,
            sq_thread: sq_thread.map(|t| (t, 0)),
        })
    }

    /// Takes up to `max` completions from the ring, oldest first; the rest stay there.
    fn reap(&mut self, max: usize, done: &mut Vec<Done>) {
        let mut n = 0;
        for cqe in self.ring.completion() {
            if cqe.user_data() == TIMEOUT {
                self.timeout_pending = false;
                continue;
            }
            n += 1;
            self.inflight -= 1;
            done.push(Done {
                slot: cqe.user_data() as usize,
                res: cqe.result() as i64,
            });
            if n == max {
                break;
            }
        }
    }

    fn sqe(&self, slot: usize, op: Op) -> squeue::Entry {
        let buf = self.bufs.ptr(slot);
        // Without registered buffers, the slot's buffer index is not read.
        let idx = slot as u16;
        macro_rules! build {
            ($fd:expr) => {
                match (op.write, self.opts.fixedbufs) {
                    (true, true) => opcode::WriteFixed::new($fd, buf, op.len, idx)
                        .offset(op.offset)
                        .build(),
                    (false, true) => opcode::ReadFixed::new($fd, buf, op.len, idx)
                        .offset(op.offset)
                        .build(),
                    (true, false) => opcode::Write::new($fd, buf, op.len)
                        .offset(op.offset)
                        .build(),
                    (false, false) => opcode::Read::new($fd, buf, op.len)
                        .offset(op.offset)
                        .build(),
                }
            };
        }
        let sqe = if self.opts.registerfiles {
            build!(types::Fixed(0))
        } else {
            build!(types::Fd(self.fd))
        };
        sqe.user_data(slot as u64)
    }

    /// With polled completions and no polling thread, only our own submission calls find
    /// completions and the kernel ignores a wait's time limit: poll until one completes or it
    /// is `until`.
    fn poll_until(&mut self, until: u64, max: usize, done: &mut Vec<Done>) -> io::Result<()> {
        while done.is_empty() && self.clock.now() < until {
            match self.ring.submit_and_wait(0) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
            self.reap(max, done);
        }
        Ok(())
    }
}

fn taskrun_builder(defer: bool) -> io_uring::Builder<squeue::Entry> {
    let mut b = IoUring::<squeue::Entry>::builder();
    b.setup_single_issuer().setup_coop_taskrun();
    if defer {
        b.setup_defer_taskrun();
    }
    b
}

/// The ring with `opts`' set-up flags, and the tid of its submission-polling thread.
fn build(entries: u32, opts: &UringOpts) -> io::Result<(IoUring, Option<u32>)> {
    let mut b = match (opts.taskrun, opts.sqthread_poll) {
        (true, true) => {
            let mut b = IoUring::<squeue::Entry>::builder();
            b.setup_single_issuer();
            b
        }
        // DEFER_TASKRUN where the kernel has it (6.1), else COOP_TASKRUN.
        (true, false) if taskrun_builder(true).build(2).is_ok() => taskrun_builder(true),
        (true, false) => taskrun_builder(false),
        (false, _) => IoUring::<squeue::Entry>::builder(),
    };
    if opts.hipri {
        b.setup_iopoll();
    }
    if !opts.sqthread_poll {
        return Ok((b.build(entries)?, None));
    }
    b.setup_sqpoll(SQ_IDLE_MS);
    let _one = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    let before = threads();
    let ring = b.build(entries)?;
    // The poller names itself `iou-sqp-PID` when it first runs, which may be a moment after
    // the set-up returned.
    let t0 = std::time::Instant::now();
    let tid = loop {
        let named = threads().into_iter().find(|t| {
            !before.contains(t)
                && std::fs::read_to_string(format!("/proc/self/task/{}/comm", t))
                    .is_ok_and(|c| c.starts_with("iou-sqp"))
        });
        if named.is_some() || t0.elapsed() > std::time::Duration::from_secs(1) {
            break named;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    if tid.is_none() {
        log::warn!("io: can't find the submission-polling thread: its CPU time is not counted");
    }
    Ok((ring, tid))
}

/// The process's threads.
fn threads() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// A thread's time on a CPU so far, ns (the first field of its `schedstat`).
fn thread_cpu_ns(tid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/task/{}/schedstat", tid))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn timespec(ns: u64) -> types::Timespec {
    types::Timespec::new()
        .sec(ns / 1_000_000_000)
        .nsec((ns % 1_000_000_000) as u32)
}

impl Backend for Uring {
    fn prep(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let sqe = self.sqe(slot, op);
        // The buffer and the fd outlive the IO: the buffers are ours until every IO completed
        // (or are leaked when we give up on them).
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
        self.inflight += 1;
        Ok(())
    }

    fn submit(&mut self) -> io::Result<()> {
        loop {
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    fn wait(&mut self, until: Option<u64>, max: usize, done: &mut Vec<Done>) -> io::Result<()> {
        self.reap(max, done);
        if !done.is_empty() {
            return Ok(());
        }
        let res = match until {
            None => self.ring.submit_and_wait(1),
            Some(t) if self.opts.hipri && !self.opts.sqthread_poll => {
                return self.poll_until(t, max, done)
            }
            Some(t) => {
                let now = self.clock.now();
                if t <= now {
                    return Ok(());
                }
                *self.ts = timespec(t - now);
                if self.ext_arg {
                    let args = types::SubmitArgs::new().timespec(&self.ts);
                    self.ring.submitter().submit_with_args(1, &args)
                } else {
                    if !self.timeout_pending {
                        let sqe = opcode::Timeout::new(&*self.ts)
                            .count(1)
                            .build()
                            .user_data(TIMEOUT);
                        unsafe { self.ring.submission().push(&sqe) }
                            .map_err(|_| io::Error::other("io_uring submission queue full"))?;
                        self.timeout_pending = true;
                    }
                    self.ring.submit_and_wait(1)
                }
            }
        };
        match res {
            Ok(_) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {}
            Err(e) => return Err(e),
        }
        self.reap(max, done);
        Ok(())
    }

    fn ramp_ended(&mut self) {
        if let Some((tid, at)) = &mut self.sq_thread {
            *at = thread_cpu_ns(*tid);
        }
    }

    /// The submission-polling thread's CPU time since the ramp (all of it kernel time).
    fn finish(&mut self) -> Cpu {
        match self.sq_thread {
            Some((tid, at)) => Cpu {
                usr_ns: 0,
                sys_ns: thread_cpu_ns(tid).saturating_sub(at),
            },
            None => Cpu::default(),
        }
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // IOs still in flight (a worker that gave up): the kernel may write into the buffers
        // after the ring is gone.
        if self.inflight > 0 {
            self.bufs.leak = true;
        }
    }
}
