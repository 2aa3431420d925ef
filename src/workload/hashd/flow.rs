//! The flow of requests the workers share: what is in flight against the target, how a
//! finishing request is accounted and what runs next, and the counters the dispatcher
//! publishes.
//!
//! A fractional target is dithered: each completion keeps the floor or the floor plus one
//! in flight, the latter while the requests in flight have been short of the target over time
//! (their time integral against the target's), so the time average is the target. With
//! few requests in flight (6 at 167 RPS in a quick guest) one request more or less is a sixth
//! of the rate; keeping only the floor left the controller hopping between two rates that
//! straddle its target, the per-second rate swinging by that much.
//!
//! A target below one is the same dither between none and one in flight: a request is
//! started when the idle time has paid for the time one ran over the target, so a request
//! shorter than 1 / rate is followed by a gap instead of running hashd above its rate.
//!
//! With upstream's flow (`upstream_flow`) the floor alone is kept in flight, and at least one,
//! as rd-hashd's dispatcher does: below two requests in flight its rate is one request's.

use super::dist::Rng;
use super::request::{self, ReqConfig, Request};
use std::sync::Arc;
use std::time::Instant;

/// Bound on the request-seconds the dither may owe or be owed.
const OWED_MAX: f64 = 1.0;
/// The smallest target (requests in flight on average) the flow paces.
const MIN_TARGET: f64 = super::control::MIN_CONCURRENCY;

pub(super) struct Job {
    pub(super) req: Request,
    pub(super) cfg: Arc<ReqConfig>,
}

/// What the dispatcher and the workers share: what a finishing worker needs to account its
/// request and to draw the next one.
pub(super) struct Flow {
    pub(super) req_cfg: Arc<ReqConfig>,
    rng: Rng,
    /// Requests to keep in flight on average: the controller's concurrency, at least 1.
    pub(super) target: f64,
    /// Keep `max(floor(target), 1)` in flight, as upstream's dispatcher (no dither, no pacing).
    pub(super) upstream: bool,
    /// Request-seconds the requests in flight are behind the target, since `at` seconds after
    /// `origin` (bounded: a target that can't be met doesn't build up a debt).
    owed: f64,
    at: f64,
    origin: Instant,
    pub(super) file_addr_frac: f64,
    pub(super) anon_addr_frac: f64,
    /// Hash-log line padding of the current params.
    pub(super) padding: usize,
    pub(super) stopped: bool,
    pub(super) nr_in_flight: u64,
    pub(super) nr_done: u64,
    pub(super) io_errors: u64,
    pub(super) bytes_hashed: u64,
    /// Bytes hashed and the thread CPU seconds it took, over the requests that timed it.
    pub(super) timed_bytes: u64,
    pub(super) timed_cpu: f64,
    /// Latencies of the requests completed in the current control period.
    pub(super) window_lats: Vec<f64>,
}

impl Flow {
    pub(super) fn new(
        req_cfg: Arc<ReqConfig>,
        rng: Rng,
        target: f64,
        addr_fracs: (f64, f64),
    ) -> Flow {
        Flow {
            req_cfg,
            rng,
            target: target.max(MIN_TARGET),
            upstream: false,
            owed: 0.0,
            at: 0.0,
            origin: Instant::now(),
            file_addr_frac: addr_fracs.0,
            anon_addr_frac: addr_fracs.1,
            padding: 0,
            stopped: false,
            nr_in_flight: 0,
            nr_done: 0,
            io_errors: 0,
            bytes_hashed: 0,
            timed_bytes: 0,
            timed_cpu: 0.0,
            window_lats: Vec::new(),
        }
    }

    pub(super) fn draw(&mut self) -> Job {
        let req = Request::draw(
            &self.req_cfg,
            &mut self.rng,
            self.file_addr_frac,
            self.anon_addr_frac,
        );
        self.nr_in_flight += 1;
        Job {
            req,
            cfg: self.req_cfg.clone(),
        }
    }

    pub(super) fn complete(&mut self, lat: f64, out: &request::Outcome) {
        self.nr_in_flight = self.nr_in_flight.saturating_sub(1);
        self.nr_done += 1;
        self.io_errors += out.io_errors as u64;
        self.bytes_hashed += out.hashed;
        if let Some(cpu) = out.hash_cpu {
            self.timed_bytes += out.hashed;
            self.timed_cpu += cpu;
        }
        self.window_lats.push(lat);
    }

    /// CPU seconds hashing `bytes_hashed` took, at the rate of the timed requests.
    pub(super) fn hash_cpu(&self) -> f64 {
        if self.timed_bytes == 0 {
            return 0.0;
        }
        self.bytes_hashed as f64 * self.timed_cpu / self.timed_bytes as f64
    }

    /// A request to run, while fewer than `cap` are in flight.
    pub(super) fn draw_below(&mut self, cap: u64) -> Option<Job> {
        (!self.stopped && self.nr_in_flight < cap).then(|| self.draw())
    }

    /// The next request to run, while fewer than the target's floor are in flight (topping up
    /// after the target rose), or, below a target of one, the paced request once it is due.
    pub(super) fn next(&mut self) -> Option<Job> {
        let floor = self.target.floor() as u64;
        // (Within a nanosecond's worth: the due time is computed from the same sum.)
        let cap = if self.upstream {
            floor.max(1)
        } else if floor == 0 && self.owed >= -1e-9 {
            1
        } else {
            floor
        };
        self.draw_below(cap)
    }

    /// Seconds until the next paced request is due: only below a target of one with nothing
    /// in flight, when the idle time has yet to pay off what the last request ran over.
    pub(super) fn due_in(&self, now: f64) -> Option<f64> {
        (!self.stopped && !self.upstream && self.target < 1.0 && self.nr_in_flight == 0).then(
            || {
                let idle = (now - self.at).max(0.0);
                ((-self.owed) / self.target - idle).max(0.0)
            },
        )
    }

    /// Seconds since the flow began.
    pub(super) fn now(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    /// Accounts the requests in flight up to `now`; called before they change.
    pub(super) fn account(&mut self, now: f64) {
        let dt = (now - self.at).max(0.0);
        let short = self.target - self.nr_in_flight as f64;
        self.owed = (self.owed + short * dt).clamp(-OWED_MAX, OWED_MAX);
        self.at = self.at.max(now);
    }

    /// What a worker that just completed a request runs next, and at most one more for the
    /// pool: in flight goes back to the target's floor, or to its floor plus one while the
    /// requests in flight are behind the target.
    pub(super) fn after_complete(&mut self) -> (Option<Job>, Option<Job>) {
        let floor = self.target.floor() as u64;
        let cap = if self.upstream {
            floor.max(1)
        } else if self.owed > 0.0 {
            floor + 1
        } else {
            floor
        };
        (self.draw_below(cap), self.draw_below(cap))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::hashd::params::Params;

    fn flow(target: f64) -> Flow {
        let cfg = ReqConfig::new(&Params::default(), 1000, 1 << 20);
        Flow::new(Arc::new(cfg), Rng::seeded(3), target, (1.0, 1.0))
    }

    fn outcome() -> request::Outcome {
        request::Outcome {
            digest: [0; 20],
            hashed: 100,
            hash_cpu: Some(0.5),
            io_errors: 1,
        }
    }

    #[test]
    fn a_finishing_worker_continues_while_below_the_target() {
        let mut fl = flow(3.0);
        let started: Vec<Job> = std::iter::from_fn(|| fl.next()).collect();
        assert_eq!(started.len(), 3, "topped up to the target");
        assert_eq!(fl.nr_in_flight, 3);
        // Steady target: each completion draws its successor, in flight stays at 3.
        fl.complete(0.02, &outcome());
        let (next, extra) = fl.after_complete();
        assert!(next.is_some() && extra.is_none());
        assert_eq!(fl.nr_in_flight, 3);
        // The target falls: completions drain until it is met.
        fl.target = 1.0;
        fl.complete(0.03, &outcome());
        assert!(fl.after_complete().0.is_none());
        fl.complete(0.04, &outcome());
        assert!(fl.after_complete().0.is_none());
        assert_eq!(fl.nr_in_flight, 1);
        fl.complete(0.05, &outcome());
        assert!(fl.after_complete().0.is_some());
        // Stopped: nothing more is drawn.
        fl.stopped = true;
        fl.complete(0.06, &outcome());
        assert_eq!(fl.after_complete().0.map(|_| ()), None);
        assert!(fl.next().is_none());
        assert_eq!(fl.nr_done, 5);
        assert_eq!(fl.window_lats, vec![0.02, 0.03, 0.04, 0.05, 0.06]);
        assert_eq!((fl.bytes_hashed, fl.io_errors), (500, 5));
        assert!((fl.hash_cpu() - 2.5).abs() < 1e-9);
        // Untimed requests count at the timed ones' rate.
        fl.complete(
            0.07,
            &request::Outcome {
                hash_cpu: None,
                ..outcome()
            },
        );
        assert_eq!(fl.bytes_hashed, 600);
        assert!((fl.hash_cpu() - 3.0).abs() < 1e-9);
    }

    /// Requests in flight on average at `target`, each taking `lat` seconds ± 20 %, over
    /// `secs`: a discrete-event run of the flow (completions in time order, each worker running
    /// what `after_complete` hands it, the extra one started at once).
    fn mean_in_flight(target: f64, lat: f64, secs: f64, upstream: bool) -> f64 {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut fl = flow(target);
        fl.upstream = upstream;
        let mut rng = Rng::seeded(7);
        let mut lat_us = || (lat * rng.uniform(0.8, 1.2) * 1e6) as u64;
        // Finish times in microseconds.
        let mut ends: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
        while fl.next().is_some() {
            ends.push(Reverse(lat_us()));
        }
        let (mut area, mut last) = (0.0, 0u64);
        while let Some(Reverse(t)) = ends.pop() {
            if t as f64 > secs * 1e6 {
                break;
            }
            area += (t - last) as f64 * (ends.len() + 1) as f64;
            last = t;
            fl.account(t as f64 / 1e6);
            fl.complete(lat, &outcome());
            let (next, extra) = fl.after_complete();
            for _ in next.into_iter().chain(extra) {
                ends.push(Reverse(t + lat_us()));
            }
            // Nothing in flight (a target below one): the dispatcher starts one when due.
            if let Some(due) = fl.due_in(t as f64 / 1e6) {
                let start = t + (due * 1e6).ceil() as u64;
                last = start.max(last);
                fl.account(start as f64 / 1e6);
                assert!(
                    fl.next().is_some(),
                    "the paced request is due at {start} µs (owed {}, target {})",
                    fl.owed,
                    fl.target
                );
                ends.push(Reverse(start + lat_us()));
            }
        }
        area / last as f64
    }

    #[test]
    fn a_target_below_one_is_paced_with_idle_gaps() {
        for t in [0.25, 0.5, 0.9] {
            let m = mean_in_flight(t, 0.036, 100.0, false);
            assert!((m - t).abs() < 0.02, "target {t} kept {m:.3} in flight");
        }
        // One in flight for 0.1 s at 0.5 owes 0.05 request-seconds: the next is due 0.1 s later.
        let mut fl = flow(0.5);
        assert!(fl.next().is_some() && fl.next().is_none());
        assert_eq!(fl.due_in(0.0), None, "one is in flight");
        fl.account(0.1);
        fl.complete(0.1, &outcome());
        assert!(fl.after_complete().0.is_none());
        let due = fl.due_in(0.1).unwrap();
        assert!((due - 0.1).abs() < 1e-9, "{due}");
        assert!((fl.due_in(0.15).unwrap() - 0.05).abs() < 1e-9);
        fl.account(0.15);
        assert!(fl.next().is_none(), "not due yet");
        fl.account(0.2);
        assert!(fl.next().is_some());
    }

    #[test]
    fn upstream_s_flow_keeps_the_floor_and_at_least_one() {
        for (t, kept) in [(0.5, 1.0), (1.9, 1.0), (2.0, 2.0), (6.75, 6.0)] {
            let m = mean_in_flight(t, 0.036, 100.0, true);
            assert!((m - kept).abs() < 1e-9, "target {t} kept {m:.3} in flight");
        }
        let mut fl = flow(0.5);
        fl.upstream = true;
        assert!(fl.next().is_some() && fl.next().is_none());
        fl.complete(0.1, &outcome());
        assert!(fl.after_complete().0.is_some(), "no gap below one");
        assert_eq!(fl.due_in(0.1), None);
    }

    #[test]
    fn a_fractional_target_is_kept_in_flight_on_average() {
        let means: Vec<f64> = [6.0, 6.25, 6.5, 6.75, 6.99]
            .iter()
            .map(|&t| mean_in_flight(t, 0.036, 100.0, false))
            .collect();
        assert!((means[0] - 6.0).abs() < 1e-9, "{:?}", means);
        for (t, m) in [6.25, 6.5, 6.75].iter().zip(&means[1..4]) {
            assert!(
                (m - t).abs() < 0.02,
                "target {} kept {:.3} in flight: {:?}",
                t,
                m,
                means
            );
        }
        assert!(means.windows(2).all(|w| w[0] < w[1]), "{:?}", means);
        assert!((means[4] - 6.99).abs() < 0.02, "{:?}", means);
    }
}
