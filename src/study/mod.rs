//! Study primitives and the tables rendered from study results.
