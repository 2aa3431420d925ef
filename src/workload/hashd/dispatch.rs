//! The dispatcher: keeps `concurrency` requests in flight on average on a dynamic worker pool
//! and once per control period turns the completions into statistics and a control update.
//!
//! What is in flight, and how a finishing worker refills it, is in [`super::flow`].
//!
//! Workers are threads: one per in-flight request, created when no idle one is waiting and
//! reaped after a minute idle, so a sleeping request uses no CPU and still counts as in
//! flight. A worker that finishes a request accounts it and, while fewer than the target are in
//! flight, draws the next request itself and runs it: a hand-off through the dispatcher thread
//! cost two thread wakeups per request, a sixth of what hashd spends besides hashing. The
//! dispatcher thread tops up the requests in flight when the target rises, runs the control
//! loop and publishes the statistics. With upstream's requests (`upstream_requests`) every
//! successor goes through the dispatcher as in rd-hashd, whose dispatcher hears of each
//! completion and queues the next request to an idle worker: those two wakeups are part of
//! what an upstream request costs.

use super::accdist::AccDist;
use super::anon::AnonArea;
use super::control::{Control, MIN_CONCURRENCY};
use super::dist::Rng;
use super::flow::{Flow, Job};
use super::logger::Logger;
use super::params::Params;
use super::request::{self, ReqConfig, Workspace};
use super::stats::{lat_stats, Stat};
use super::testfiles::{TestFiles, PAGE};
use crate::report::model::HashdLat;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Idle workers exit after this long.
const WORKER_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Statistics are ignored this long after a params change.
const PARAMS_SETTLE: Duration = Duration::from_secs(1);
/// Counters in the published `Stat` are refreshed at least this often.
const COUNTER_REFRESH: Duration = Duration::from_millis(200);
/// The longest the dispatcher sleeps.
const DISPATCH_WAKE: Duration = Duration::from_millis(100);

/// Messages to the dispatcher.
enum Msg {
    Params(Box<Params>),
    Stop,
    /// A worker's successor requests, to be queued by the dispatcher (upstream's hand-off).
    Handoff(Vec<Job>),
}

/// The memory footprint the params ask for, given the hashd size and the testfiles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// size × mem_frac: what a memory probe is about.
    pub total: u64,
    /// The page-cache share actually used (file_frac clamped to what the testfiles hold).
    pub file_frac: f64,
    pub file_pages: u64,
    pub anon_bytes: u64,
}

impl Footprint {
    pub fn new(p: &Params, size: u64, file_max_frac: f64, testfiles_size: u64) -> Footprint {
        let size_f = size as f64;
        let mut ff = p.file_frac.min(file_max_frac);
        if size > 0 {
            ff = ff.min(testfiles_size as f64 / size_f);
        }
        let total = size_f * p.mem_frac;
        let file_bytes = (total * ff).min(testfiles_size as f64);
        Footprint {
            total: total as u64,
            file_frac: ff,
            file_pages: (file_bytes / PAGE as f64) as u64,
            anon_bytes: (size_f * (p.mem_frac * (1.0 - ff)).clamp(0.0, 1.0)) as u64,
        }
    }
}

struct PoolState {
    queue: VecDeque<Job>,
    idle: u64,
    /// Dispatching has stopped: idle workers exit.
    stopped: bool,
}

/// The worker pool.
pub struct Pool {
    state: Mutex<PoolState>,
    cv: Condvar,
    nr_workers: AtomicU64,
    files: Arc<TestFiles>,
    area: Arc<AnonArea>,
    flow: Arc<Mutex<Flow>>,
    logger: Option<Arc<Logger>>,
    /// The dispatcher's inbox, for upstream's hand-off.
    dispatcher: Sender<Msg>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    fn new(
        files: Arc<TestFiles>,
        area: Arc<AnonArea>,
        flow: Arc<Mutex<Flow>>,
        logger: Option<Arc<Logger>>,
        dispatcher: Sender<Msg>,
    ) -> Arc<Pool> {
        Arc::new(Pool {
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                idle: 0,
                stopped: false,
            }),
            cv: Condvar::new(),
            nr_workers: AtomicU64::new(0),
            files,
            area,
            flow,
            logger,
            dispatcher,
        })
    }

    /// Queues a job, starting a worker when none is idle to take it.
    fn submit(self: &Arc<Self>, job: Job) {
        let spawn = {
            let mut st = lock(&self.state);
            st.queue.push_back(job);
            st.queue.len() as u64 > st.idle
        };
        if spawn {
            let me = self.clone();
            self.nr_workers.fetch_add(1, Ordering::Relaxed);
            let res = std::thread::Builder::new()
                .name("hashd-worker".into())
                .stack_size(256 << 10)
                .spawn(move || me.worker());
            if let Err(e) = res {
                // The job stays queued for an existing worker.
                self.nr_workers.fetch_sub(1, Ordering::Relaxed);
                log::warn!("can't start a hashd worker: {}", e);
            }
        } else {
            self.cv.notify_one();
        }
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.nr_workers.load(Ordering::Relaxed),
            lock(&self.state).idle,
        )
    }

    /// The next queued job, waiting for one for at most the idle timeout.
    fn wait_job(&self) -> Option<Job> {
        let mut st = lock(&self.state);
        loop {
            if let Some(job) = st.queue.pop_front() {
                return Some(job);
            }
            if st.stopped {
                return None;
            }
            st.idle += 1;
            let (guard, to) = self
                .cv
                .wait_timeout(st, WORKER_IDLE_TIMEOUT)
                .unwrap_or_else(|e| e.into_inner());
            st = guard;
            st.idle -= 1;
            if (to.timed_out() || st.stopped) && st.queue.is_empty() {
                return None;
            }
        }
    }

    fn worker(self: Arc<Self>) {
        let mut ws = Workspace::default();
        while let Some(mut job) = self.wait_job() {
            loop {
                let run = match job.cfg.upstream_requests {
                    true => request::upstream::run,
                    false => request::run,
                };
                let out = run(&job.req, &job.cfg, &self.files, &self.area, &mut ws);
                let lat = job.req.start.elapsed().as_secs_f64();
                let (next, extra, padding) = {
                    let mut fl = lock(&self.flow);
                    let now = fl.now();
                    fl.account(now);
                    fl.complete(lat, &out);
                    let (next, extra) = fl.after_complete();
                    (next, extra, fl.padding)
                };
                let next = if job.cfg.upstream_requests {
                    // Back to idle; the dispatcher queues the successors to a waiting worker.
                    let jobs: Vec<Job> = next.into_iter().chain(extra).collect();
                    if !jobs.is_empty() {
                        let _ = self.dispatcher.send(Msg::Handoff(jobs));
                    }
                    None
                } else {
                    if let Some(j) = extra {
                        self.submit(j);
                    }
                    next
                };
                if let Some(lg) = &self.logger {
                    lg.log(out.digest, lat, padding);
                }
                match next {
                    Some(j) => job = j,
                    None => break,
                }
            }
        }
        self.nr_workers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the dispatcher publishes.
#[derive(Debug, Default)]
pub struct Published {
    pub stat: Stat,
    /// Set when params took effect (for `params_modified` / `mem_probe_at`).
    pub params_at: Option<std::time::SystemTime>,
    pub footprint_total: u64,
    pub lat_pct: f64,
    pub rps_max: u32,
}

/// Handle to a running dispatcher thread.
pub struct Dispatcher {
    tx: Sender<Msg>,
    pub published: Arc<Mutex<Published>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Fixed inputs of a dispatcher.
pub struct DispatchCfg {
    pub size: u64,
    pub file_max_frac: f64,
    pub nr_cpus: usize,
}

impl Dispatcher {
    /// Starts dispatching with `params`.
    pub fn start(
        cfg: DispatchCfg,
        params: Params,
        files: Arc<TestFiles>,
        area: Arc<AnonArea>,
        logger: Option<Arc<Logger>>,
    ) -> anyhow::Result<Dispatcher> {
        let (tx, rx) = channel();
        let published = Arc::new(Mutex::new(Published::default()));
        let mut st = State::new(
            cfg,
            params,
            files,
            area,
            logger,
            published.clone(),
            tx.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("hashd-dispatch".into())
            .spawn(move || st.run(rx))?;
        Ok(Dispatcher {
            tx,
            published,
            thread: Some(thread),
        })
    }

    pub fn set_params(&self, p: Params) {
        let _ = self.tx.send(Msg::Params(Box::new(p)));
    }

    /// Stops dispatching (requests in flight are abandoned) and waits for the dispatcher.
    pub fn stop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Dispatcher {
    fn drop(&mut self) {
        self.stop();
    }
}

struct State {
    cfg: DispatchCfg,
    params: Params,
    files: Arc<TestFiles>,
    area: Arc<AnonArea>,
    pool: Arc<Pool>,
    flow: Arc<Mutex<Flow>>,
    published: Arc<Mutex<Published>>,
    ctl: Control,
    stat: Stat,
    window_start: Instant,
    ignore_until: Instant,
    last_refresh: Instant,
}

impl State {
    fn new(
        cfg: DispatchCfg,
        params: Params,
        files: Arc<TestFiles>,
        area: Arc<AnonArea>,
        logger: Option<Arc<Logger>>,
        published: Arc<Mutex<Published>>,
        dispatcher: Sender<Msg>,
    ) -> State {
        let ctl = Control::new(cfg.nr_cpus, &params);
        let flow = Arc::new(Mutex::new(Flow::new(
            Arc::new(ReqConfig::new(&params, 0, 0)),
            Rng::from_entropy(),
            1.0,
            (ctl.file_addr_frac, ctl.anon_addr_frac),
        )));
        let pool = Pool::new(
            files.clone(),
            area.clone(),
            flow.clone(),
            logger,
            dispatcher,
        );
        let now = Instant::now();
        let mut st = State {
            cfg,
            params: params.clone(),
            files,
            area,
            pool,
            flow,
            published,
            ctl,
            stat: Stat::default(),
            window_start: now,
            ignore_until: now,
            last_refresh: now,
        };
        st.apply_params(params, false);
        st
    }

    /// Takes new params into use: distributions, footprint (anon area resized), padding; on a
    /// change while running, fresh PIDs and a second of ignored statistics.
    fn apply_params(&mut self, p: Params, running: bool) {
        let fp = Footprint::new(&p, self.cfg.size, self.cfg.file_max_frac, self.files.size());
        if let Err(e) = self.area.resize(fp.anon_bytes) {
            log::warn!("resizing the anon area: {:#}", e);
        }
        if running {
            self.ctl.reset(&p);
            self.ignore_until = Instant::now() + PARAMS_SETTLE;
        }
        {
            let mut fl = lock(&self.flow);
            fl.req_cfg = Arc::new(ReqConfig::new(&p, fp.file_pages, fp.anon_bytes));
            fl.upstream = p.upstream_flow;
            fl.padding = p.log_padding();
        }
        self.steer();
        self.stat.file_size = fp.file_pages * PAGE;
        self.stat.anon_size = fp.anon_bytes;
        // The new footprint and the fresh histograms go out before the new params_modified,
        // so a status that shows the latter shows them too.
        self.publish();
        {
            let mut pb = lock(&self.published);
            pb.params_at = Some(std::time::SystemTime::now());
            pb.footprint_total = fp.total;
            pb.lat_pct = p.lat_target_pct;
            pb.rps_max = p.rps_max;
        }
        self.params = p;
    }

    /// Hands the controller's concurrency and address spreads to the workers.
    fn steer(&mut self) {
        let mut fl = lock(&self.flow);
        let now = fl.now();
        fl.account(now);
        fl.target = self.ctl.concurrency.max(MIN_CONCURRENCY);
        fl.file_addr_frac = self.ctl.file_addr_frac;
        fl.anon_addr_frac = self.ctl.anon_addr_frac;
    }

    /// Starts requests until the target is in flight (workers keep it there as they finish,
    /// but not when it rises).
    fn top_up(&mut self) {
        {
            let mut fl = lock(&self.flow);
            let now = fl.now();
            fl.account(now);
        }
        loop {
            let Some(job) = lock(&self.flow).next() else {
                break;
            };
            self.pool.submit(job);
        }
    }

    fn run(&mut self, rx: Receiver<Msg>) {
        loop {
            self.top_up();
            let period = Duration::from_secs_f64(self.params.control_period);
            let mut wait = (self.window_start + period)
                .saturating_duration_since(Instant::now())
                .min(DISPATCH_WAKE);
            // Below one in flight, the next paced request is started on time.
            let due = {
                let fl = lock(&self.flow);
                fl.due_in(fl.now())
            };
            if let Some(due) = due {
                wait = wait.min(Duration::from_secs_f64(due));
            }
            match rx.recv_timeout(wait) {
                Ok(Msg::Params(p)) => self.apply_params(*p, true),
                Ok(Msg::Handoff(jobs)) => jobs.into_iter().for_each(|j| self.pool.submit(j)),
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            self.tick();
        }
        lock(&self.flow).stopped = true;
        lock(&self.pool.state).stopped = true;
        self.pool.cv.notify_all();
        self.publish();
    }

    fn tick(&mut self) {
        let now = Instant::now();
        if now < self.ignore_until {
            self.window_start = now;
            lock(&self.flow).window_lats.clear();
        } else {
            let dur = now.duration_since(self.window_start).as_secs_f64();
            if dur >= self.params.control_period {
                self.control(dur);
                self.window_start = now;
                self.publish();
                return;
            }
        }
        if now.duration_since(self.last_refresh) >= COUNTER_REFRESH {
            self.publish();
        }
    }

    fn control(&mut self, dur: f64) {
        let (mut lats, in_flight) = {
            let mut fl = lock(&self.flow);
            (std::mem::take(&mut fl.window_lats), fl.nr_in_flight)
        };
        let p = &self.params;
        let rps = lats.len() as f64 / dur;
        let lat = if lats.is_empty() {
            let mut l = HashdLat::default();
            if in_flight > 0 {
                // Requests are stuck: slam on the brakes.
                l.ctl = 10.0 * p.lat_target;
                log::warn!(
                    "hashd: no completions in {:.1}s with {} in flight",
                    dur,
                    in_flight
                );
            }
            l
        } else {
            lat_stats(&mut lats, p.lat_target_pct)
        };
        self.ctl.update(p, lat.ctl, rps);
        self.steer();
        self.stat.rps = rps;
        self.stat.lat = lat;
    }

    fn publish(&mut self) {
        self.last_refresh = Instant::now();
        let (workers, idle) = self.pool.counts();
        self.stat.nr_workers = workers;
        self.stat.nr_idle_workers = idle;
        self.stat.concurrency = self.ctl.concurrency;
        self.stat.concurrency_max = self.ctl.concurrency_max;
        self.stat.file_addr_frac = self.ctl.file_addr_frac;
        self.stat.anon_addr_frac = self.ctl.anon_addr_frac;
        {
            let fl = lock(&self.flow);
            self.stat.nr_in_flight = fl.nr_in_flight;
            self.stat.nr_done = fl.nr_done;
            self.stat.io_errors = fl.io_errors;
            self.stat.bytes_hashed = fl.bytes_hashed;
            self.stat.hash_cpu = fl.hash_cpu();
            let counts = |d: &Option<AccDist>| d.as_ref().map_or_else(Vec::new, AccDist::counts);
            self.stat.file_dist = counts(&fl.req_cfg.file_dist);
            self.stat.anon_dist = counts(&fl.req_cfg.anon_dist);
        }
        if let Some(lg) = &self.pool.logger {
            self.stat.log_dropped = lg.dropped();
        }
        let mut pb = lock(&self.published);
        pb.stat = self.stat.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker pool over a small fixture, and its dispatcher inbox.
    fn one_worker_pool(upstream: bool) -> (tempfile::TempDir, Arc<Pool>, Receiver<Msg>) {
        let pages = 64;
        let dir = tempfile::tempdir().unwrap();
        let tf = TestFiles::with_unit(dir.path(), pages * PAGE, 0.0, pages / 4 * PAGE).unwrap();
        tf.prepare(&mut |_| true).unwrap();
        let area = AnonArea::with_unit(pages * PAGE, (pages / 4 * PAGE) as usize).unwrap();
        let p = Params {
            file_size_mean: 4 * PAGE as usize,
            chunk_pages: 2,
            sleep_mean: 0.001,
            fake_cpu_load: true,
            upstream_requests: upstream,
            ..Params::default()
        };
        let cfg = Arc::new(ReqConfig::new(&p, pages, pages * PAGE));
        let flow = Arc::new(Mutex::new(Flow::new(cfg, Rng::seeded(1), 1.0, (1.0, 1.0))));
        let (tx, rx) = channel();
        let pool = Pool::new(Arc::new(tf), Arc::new(area), flow, None, tx);
        (dir, pool, rx)
    }

    fn stop(pool: &Pool) {
        lock(&pool.flow).stopped = true;
        lock(&pool.state).stopped = true;
        pool.cv.notify_all();
    }

    #[test]
    fn upstream_requests_hand_each_successor_to_the_dispatcher() {
        // Lean: the worker runs the successors itself; nothing reaches the dispatcher.
        let (_dir, pool, rx) = one_worker_pool(false);
        let job = lock(&pool.flow).draw();
        pool.submit(job);
        let t = Instant::now();
        while lock(&pool.flow).nr_done < 20 && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(lock(&pool.flow).nr_done >= 20, "the lean worker stalled");
        assert!(
            rx.try_recv().is_err(),
            "a lean successor went to the dispatcher"
        );
        stop(&pool);

        // Upstream's: each completion's successor comes back to the dispatcher, which queues
        // it; the worker doesn't go on by itself.
        let (_dir, pool, rx) = one_worker_pool(true);
        let job = lock(&pool.flow).draw();
        pool.submit(job);
        for round in 1..=5 {
            let Ok(Msg::Handoff(jobs)) = rx.recv_timeout(Duration::from_secs(20)) else {
                panic!("round {round}: no hand-off reached the dispatcher");
            };
            assert_eq!(jobs.len(), 1, "one in flight at a target of one");
            assert_eq!(lock(&pool.flow).nr_done, round);
            jobs.into_iter().for_each(|j| pool.submit(j));
        }
        stop(&pool);
    }

    #[test]
    fn footprint_splits_size_between_files_and_anon() {
        let p = Params::default();
        let size = 4u64 << 30;
        // Testfiles of size × 0.25.
        let fp = Footprint::new(&p, size, 0.25, 1 << 30);
        assert_eq!(fp.total, (size as f64 * 0.8) as u64);
        assert_eq!(fp.file_frac, 0.25);
        assert_eq!(fp.file_pages, (size as f64 * 0.8 * 0.25) as u64 / PAGE);
        assert_eq!(fp.anon_bytes, (size as f64 * 0.8 * 0.75) as u64);
        // file_frac is clamped to file_max_frac and to what the testfiles hold.
        let p2 = Params {
            file_frac: 0.9,
            ..p.clone()
        };
        let fp = Footprint::new(&p2, size, 0.25, 256 << 20);
        assert_eq!(fp.file_frac, 1.0 / 16.0);
        assert!(fp.file_pages * PAGE <= 256 << 20);
    }
}
