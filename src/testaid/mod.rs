//! Hidden subcommands that exist only for the tests and the measurement scripts: they drive
//! one product piece on its own (the reporter, the IO-latency source, hashd's sizing search,
//! the restore journal, result saves under SIGKILL) or run guest-side checks in the VM tests
//! (`__probe`, `__vm-scenario`), and print what the test checks. They sit at the top, beside `cli`, so the product layers never import the
//! command line.

pub mod fio_compare;
pub mod hashd_bench;
pub mod iolat;
pub mod journal_test;
pub mod probe;
pub mod reporter;
pub mod save_test;
pub mod vm_iocost_qos;
pub mod vm_protection;
pub mod vm_scenario;
