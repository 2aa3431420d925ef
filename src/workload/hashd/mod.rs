//! hashd: the bundled latency-sensitive workload (our rd-hashd).
//!
//! Each request reads testfile chunks through the page cache, touches chunks of a lazily filled
//! anonymous area, SHA-1-hashes what it read and sleeps in between like a service waiting on
//! the network. A two-PID control loop holds the target RPS unless the controlled latency
//! percentile (p95, 75 ms by default) would miss its target. It runs as the hidden `__hashd`
//! subcommand ([`cmd`]); benches start and steer it through [`handle`].
//!
//! * [`params`] — `params.json`, defaults and live reload
//! * [`testfiles`] — the testfile set (layout, reuse, page-cache drop)
//! * [`dist`] — random numbers and the clamped-normal distribution
//! * [`anon`] — the lazily filled anonymous area
//! * [`accdist`] — the per-page access histograms (`acc_dist_slots`)
//! * [`request`] — what one request does, the address mapping, hashing and fake-CPU mode
//! * [`control`] — the PID controllers
//! * [`dispatch`] — worker pool, control periods, statistics
//! * [`flow`] — the requests in flight against the target, completions
//! * [`stats`] — exact percentiles and the status file
//! * [`logger`] — the hash log at `log_bps`
//! * [`sizing`] — the sizing bench: rps_max and the sustainable memory footprint

pub mod accdist;
pub mod anon;
pub mod cmd;
pub mod control;
pub mod dispatch;
pub mod dist;
pub mod flow;
pub mod handle;
pub mod logger;
pub mod params;
pub mod request;
pub mod sizing;
pub mod stats;
pub mod testfiles;

pub use cmd::HashdArgs;
pub use handle::{Hashd, HashdOpts};
pub use params::Params;
pub use stats::HashdStatus;
