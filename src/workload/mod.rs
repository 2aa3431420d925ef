//! The processes benches start: `hashd`, the bundled latency-sensitive workload, and the
//! random-read IO load.

pub mod hashd;
pub mod randread;
