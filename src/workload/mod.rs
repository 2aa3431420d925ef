//! The processes benches start: `hashd`, the bundled latency-sensitive workload, and the
//! random-read IO load; the memory hog that floods memory against them; an IO engine job in a
//! process of its own (`iojob`), which a cgroup can hold.

pub mod hashd;
pub mod ioengine;
pub mod iojob;
pub mod memhog;
pub mod randread;
