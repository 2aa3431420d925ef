//! The processes benches start: `hashd`, the bundled latency-sensitive workload, and the
//! random-read IO load; the memory hog that floods memory against them.

pub mod hashd;
pub mod ioengine;
pub mod memhog;
pub mod randread;
