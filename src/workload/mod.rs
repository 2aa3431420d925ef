//! The processes benches start: `hashd`, the bundled latency-sensitive workload.

pub mod hashd;
