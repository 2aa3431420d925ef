//! `__journal-test`: one journaled change held until killed, for the restore tests (signals,
//! SIGKILL and the next start's recovery).

use crate::system::restore::Journal;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

/// Opens the journal of `dir`,
/// installs the signal handlers, sets `path` to `value` through it, prints `changed` and then
/// waits (spinning when `spin`, so the main thread is busy) until killed, or returns after
/// `exit_after` seconds (restoring through Drop).
pub fn journal_test(
    dir: &Path,
    path: &Path,
    value: &str,
    spin: bool,
    exit_after: Option<f64>,
) -> Result<()> {
    let journal = Journal::open(dir)?;
    journal.install_signal_handlers()?;
    journal.set(path, value)?;
    println!("changed");
    std::io::stdout().flush().context("writing to stdout")?;
    let start = std::time::Instant::now();
    let done = || exit_after.is_some_and(|s| start.elapsed().as_secs_f64() >= s);
    let mut x: u64 = 0;
    while !done() {
        if spin {
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    drop(journal);
    Ok(())
}
