//! Study primitives and the tables rendered from study results.

pub mod iolat;
pub mod rstat;
