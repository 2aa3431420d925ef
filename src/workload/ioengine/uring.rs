//! The io_uring backend: one ring per worker, one submission per batch of prepared IOs, and
//! waits that also end at a time (`IORING_ENTER_EXT_ARG`, or a timeout entry on kernels
//! without it).

use super::buf::Buffers;
use super::drive::{Backend, Clock, Done, MonoClock, Op};
use io_uring::{opcode, types, IoUring};
use std::io;
use std::os::fd::RawFd;

/// `user_data` of the timeout entries (slots are small numbers).
const TIMEOUT: u64 = u64::MAX;

pub struct Uring {
    ring: IoUring,
    fd: RawFd,
    bufs: Buffers,
    clock: MonoClock,
    ext_arg: bool,
    inflight: usize,
    /// Read by the kernel when a timeout entry is submitted.
    ts: Box<types::Timespec>,
    timeout_pending: bool,
}

impl Uring {
    /// Whether this kernel (and any seccomp policy) lets us set up a ring.
    pub fn available() -> Result<(), String> {
        IoUring::new(2).map(|_| ()).map_err(|e| e.to_string())
    }

    pub fn new(fd: RawFd, bufs: Buffers, qd: usize, clock: MonoClock) -> io::Result<Uring> {
        // Room for every slot plus a timeout entry.
        let entries = (qd as u32 + 1).next_power_of_two();
        let ring = IoUring::new(entries)?;
        let ext_arg = ring.params().is_feature_ext_arg();
        Ok(Uring {
            ring,
            fd,
            bufs,
            clock,
            ext_arg,
            inflight: 0,
            ts: Box::new(types::Timespec::new()),
            timeout_pending: false,
        })
    }

    fn reap(&mut self, done: &mut Vec<Done>) {
        for cqe in self.ring.completion() {
            if cqe.user_data() == TIMEOUT {
                self.timeout_pending = false;
                continue;
            }
            self.inflight -= 1;
            done.push(Done {
                slot: cqe.user_data() as usize,
                res: cqe.result() as i64,
            });
        }
    }
}

fn timespec(ns: u64) -> types::Timespec {
    types::Timespec::new()
        .sec(ns / 1_000_000_000)
        .nsec((ns % 1_000_000_000) as u32)
}

impl Backend for Uring {
    fn prep(&mut self, slot: usize, op: Op) -> io::Result<()> {
        let buf = self.bufs.ptr(slot);
        let fd = types::Fd(self.fd);
        let sqe = if op.write {
            opcode::Write::new(fd, buf, op.len)
                .offset(op.offset)
                .build()
        } else {
            opcode::Read::new(fd, buf, op.len).offset(op.offset).build()
        }
        .user_data(slot as u64);
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

    fn wait(&mut self, until: Option<u64>, done: &mut Vec<Done>) -> io::Result<()> {
        self.reap(done);
        if !done.is_empty() {
            return Ok(());
        }
        let res = match until {
            None => self.ring.submit_and_wait(1),
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
        self.reap(done);
        Ok(())
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
