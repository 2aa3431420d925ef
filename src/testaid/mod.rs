//! Hidden subcommands that exist only for the tests and the measurement scripts: they drive
//! one product piece on its own (the reporter, the IO-latency source, hashd's sizing search) and print JSON for the
//! test to check. They sit at the top, beside `cli`, so the product layers never import the
//! command line.

pub mod hashd_bench;
pub mod iolat;
pub mod reporter;
