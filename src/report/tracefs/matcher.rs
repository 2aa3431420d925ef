//! Pairs issues with completions per request into latencies, with counters of what didn't
//! match (requeues, completions without issue, stale waits).

use super::events::{parse_line, BlockEvent, EventKind, TraceLine};
use crate::report::iolat_source::IoLatSample;
use crate::report::model::{IoLatHists, IO_TYPES};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Issues waiting for their completion are kept up to this many; beyond it the ones older than
/// the histogram range are dropped, and if that isn't enough, all of them.
pub(super) const MAX_PENDING: usize = 65_536;
/// Pending issues older than this can't produce a latency the histogram distinguishes.
const STALE_NS: u64 = crate::report::hist::MAX_NS;

/// Event counts of a source, for logs and the `__iolat` summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    pub issues: u64,
    pub completes: u64,
    pub requeues: u64,
    /// Completions paired with an issue and recorded.
    pub matched: u64,
    /// Completions without a pending issue (issued before we started, or the issue was lost).
    pub unmatched: u64,
    /// Events of other devices or operations we don't classify.
    pub ignored: u64,
    pub malformed: u64,
    /// Events the kernel dropped (`[LOST N EVENTS]` lines).
    pub lost: u64,
    /// Pending issues thrown away to keep the map bounded.
    pub pending_dropped: u64,
}

impl Counters {
    pub fn pairs(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("issues", self.issues),
            ("completes", self.completes),
            ("requeues", self.requeues),
            ("matched", self.matched),
            ("unmatched", self.unmatched),
            ("ignored", self.ignored),
            ("malformed", self.malformed),
            ("lost", self.lost),
            ("pending_dropped", self.pending_dropped),
        ]
    }
}

pub(super) type Key = ((u32, u32), u64, u32);

/// A completion read before its issue (events of different CPUs arrive in separate buffers).
#[derive(Debug, Clone, Copy)]
pub(super) struct Waiting {
    ts_ns: u64,
    io_type: usize,
}

/// Pairs issues with completions and keeps the histograms: cumulative and since the last
/// [`Matcher::take_interval`].
///
/// Events may arrive out of order across CPUs, so either side can wait for the other: an
/// issue pairs with the oldest waiting completion of its key that isn't earlier than the issue,
/// a completion with the oldest pending issue of its key that isn't later. Completions still
/// waiting [`WAIT_NS`] after the newest event seen had their issue before tracing started (or
/// lost) and count as unmatched.
#[derive(Debug)]
pub struct Matcher {
    dev: (u32, u32),
    pending: HashMap<Key, VecDeque<u64>>,
    nr_pending: usize,
    waiting: HashMap<Key, VecDeque<Waiting>>,
    nr_waiting: usize,
    max_pending: usize,
    newest_ts: u64,
    cum: IoLatHists,
    cur: IoLatHists,
    /// Sum of the latencies (ns) and count per IO type since the last take.
    cur_sum: [(u128, u64); 4],
    pub counters: Counters,
}

/// How long a completion waits for its issue (in event time).
pub const WAIT_NS: u64 = 2_000_000_000;

impl Matcher {
    pub fn new(dev: (u32, u32)) -> Self {
        Self::with_max_pending(dev, MAX_PENDING)
    }

    pub fn with_max_pending(dev: (u32, u32), max_pending: usize) -> Self {
        Self {
            dev,
            pending: HashMap::new(),
            nr_pending: 0,
            waiting: HashMap::new(),
            nr_waiting: 0,
            max_pending: max_pending.max(1),
            newest_ts: 0,
            cum: IoLatHists::default(),
            cur: IoLatHists::default(),
            cur_sum: [(0, 0); 4],
            counters: Counters::default(),
        }
    }

    pub fn nr_pending(&self) -> usize {
        self.nr_pending
    }

    pub fn nr_waiting(&self) -> usize {
        self.nr_waiting
    }

    pub fn feed_line(&mut self, line: &str) {
        match parse_line(line) {
            TraceLine::Event(ev) => self.feed(&ev),
            TraceLine::Lost(n) => self.counters.lost += n,
            TraceLine::Malformed => {
                if self.counters.malformed == 0 {
                    log::warn!("iolat: can't parse trace line {:?}", line);
                }
                self.counters.malformed += 1
            }
            TraceLine::Other => {}
        }
    }

    pub fn feed(&mut self, ev: &BlockEvent) {
        match ev.kind {
            EventKind::Issue => self.counters.issues += 1,
            EventKind::Complete => self.counters.completes += 1,
            EventKind::Requeue => self.counters.requeues += 1,
        }
        let Some(io_type) = ev.io_type.filter(|_| ev.dev == self.dev) else {
            self.counters.ignored += 1;
            return;
        };
        self.newest_ts = self.newest_ts.max(ev.ts_ns);
        let key = (ev.dev, ev.sector, ev.nr_sector);
        match ev.kind {
            EventKind::Issue => {
                if let Some(c) = self.take_waiting(&key, ev.ts_ns) {
                    self.record(c.io_type, c.ts_ns - ev.ts_ns);
                    return;
                }
                if self.nr_pending >= self.max_pending {
                    self.prune();
                }
                let q = self.pending.entry(key).or_default();
                // Keep each queue in time order even when CPUs' events interleave.
                let at = q.partition_point(|&t| t <= ev.ts_ns);
                q.insert(at, ev.ts_ns);
                self.nr_pending += 1;
            }
            EventKind::Requeue => {
                // The request will be issued again; its latency starts then.
                self.take_pending(&key, None);
            }
            EventKind::Complete => match self.take_pending(&key, Some(ev.ts_ns)) {
                Some(issued) => self.record(io_type, ev.ts_ns - issued),
                None => {
                    if self.nr_waiting >= self.max_pending {
                        self.prune();
                    }
                    let q = self.waiting.entry(key).or_default();
                    let at = q.partition_point(|w| w.ts_ns <= ev.ts_ns);
                    q.insert(
                        at,
                        Waiting {
                            ts_ns: ev.ts_ns,
                            io_type,
                        },
                    );
                    self.nr_waiting += 1;
                }
            },
        }
    }

    fn record(&mut self, io_type: usize, lat: u64) {
        self.counters.matched += 1;
        let name = IO_TYPES[io_type];
        if let Some(h) = self.cum.get_mut(name) {
            h.record_ns(lat);
        }
        if let Some(h) = self.cur.get_mut(name) {
            h.record_ns(lat);
        }
        let s = &mut self.cur_sum[io_type];
        s.0 += lat as u128;
        s.1 += 1;
    }

    /// Removes the oldest pending issue of `key` not later than `before` (the newest one when
    /// `before` is `None`).
    fn take_pending(&mut self, key: &Key, before: Option<u64>) -> Option<u64> {
        let q = self.pending.get_mut(key)?;
        let ts = match before {
            Some(t) => match q.front() {
                Some(&f) if f <= t => q.pop_front(),
                _ => None,
            },
            None => q.pop_back(),
        };
        if q.is_empty() {
            self.pending.remove(key);
        }
        if ts.is_some() {
            self.nr_pending -= 1;
        }
        ts
    }

    /// Removes the oldest waiting completion of `key` not earlier than `issued`.
    fn take_waiting(&mut self, key: &Key, issued: u64) -> Option<Waiting> {
        let q = self.waiting.get_mut(key)?;
        let at = q.iter().position(|w| w.ts_ns >= issued)?;
        let w = q.remove(at);
        if q.is_empty() {
            self.waiting.remove(key);
        }
        if w.is_some() {
            self.nr_waiting -= 1;
        }
        w
    }

    /// Gives up on completions that waited too long for their issue.
    pub fn expire_waiting(&mut self) {
        if self.nr_waiting == 0 {
            return;
        }
        let cutoff = self.newest_ts.saturating_sub(WAIT_NS);
        let mut expired = 0;
        self.waiting.retain(|_, q| {
            let before = q.len();
            q.retain(|w| w.ts_ns >= cutoff);
            expired += before - q.len();
            !q.is_empty()
        });
        self.nr_waiting -= expired;
        self.counters.unmatched += expired as u64;
    }

    /// Drops pending issues too old to matter and expires waiting completions; if either map
    /// is still full, empties it.
    fn prune(&mut self) {
        self.expire_waiting();
        if self.nr_waiting >= self.max_pending {
            self.counters.unmatched += self.nr_waiting as u64;
            self.waiting.clear();
            self.nr_waiting = 0;
        }
        let before = self.nr_pending;
        let cutoff = self.newest_ts.saturating_sub(STALE_NS);
        self.pending.retain(|_, q| {
            q.retain(|&ts| ts >= cutoff);
            !q.is_empty()
        });
        self.nr_pending = self.pending.values().map(VecDeque::len).sum();
        if self.nr_pending >= self.max_pending {
            self.pending.clear();
            self.nr_pending = 0;
        }
        let dropped = (before - self.nr_pending) as u64;
        if dropped > 0 && self.counters.pending_dropped == 0 {
            log::warn!(
                "iolat: {} issues never completed; dropping them to bound memory",
                dropped
            );
        }
        self.counters.pending_dropped += dropped;
    }

    /// The histograms and mean latencies (seconds, types with IO only) since the last call,
    /// and resets them.
    pub fn take_interval(&mut self) -> (IoLatHists, BTreeMap<String, f64>) {
        self.expire_waiting();
        let means = IO_TYPES
            .iter()
            .zip(self.cur_sum.iter())
            .filter(|(_, s)| s.1 > 0)
            .map(|(t, s)| (t.to_string(), s.0 as f64 / s.1 as f64 / 1e9))
            .collect();
        self.cur_sum = [(0, 0); 4];
        (std::mem::take(&mut self.cur), means)
    }

    /// Histograms since the start.
    pub fn cumulative(&self) -> &IoLatHists {
        &self.cum
    }

    /// A sample from the interval histograms and the cumulative ones.
    pub fn sample(&mut self) -> IoLatSample {
        let (hists, means) = self.take_interval();
        IoLatSample {
            pcts: hists.pct_maps(),
            cum: self.cum.pct_maps(),
            hists: Some(hists),
            unavailable: false,
            means,
        }
    }
}
