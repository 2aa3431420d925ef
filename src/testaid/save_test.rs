//! `__save-test`: saves a result file over and over while being killed, for the crash-safety
//! test and script (`tests/result_file.rs`, `scripts/crash-test`).

use anyhow::Result;
use std::io::Write;
use std::path::Path;

/// Loads the entries of `from`, prints
/// `ready`, then saves them to `target` over and over, alternating reversed order (odd saves)
/// and file order (even saves), so that a kill can be checked to leave one of two known
/// contents.
///
/// With `kills == 0` this process does the saving, `loops` times (0 = until killed). Otherwise
/// it forks `kills` saving children one after the other, SIGKILLs each after a random delay of
/// up to about two save durations, prints `killed N` and waits for a line on stdin (the checker
/// is done) before the next. Forking avoids re-loading a large file for every kill.
pub fn save_test(target: &Path, from: &Path, loops: u64, kills: u64, seed: u64) -> Result<()> {
    let entries = crate::result::load_entries(from)?;
    let save_nr = |i: u64| -> Result<()> {
        if i % 2 == 1 {
            crate::result::save::save_entries(target, entries.iter().rev())
        } else {
            crate::result::save::save_entries(target, &entries)
        }
    };
    let say = |msg: &str| -> Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", msg)?;
        out.flush()?;
        Ok(())
    };
    say("ready")?;
    if kills == 0 {
        let mut i = 0u64;
        while loops == 0 || i < loops {
            i += 1;
            save_nr(i)?;
        }
        return Ok(());
    }

    // Calibrate: how long does one save take here?
    let started = std::time::Instant::now();
    save_nr(2)?;
    let max_delay_us = (started.elapsed().as_micros() as u64 * 5 / 2).max(1000);
    let mut rng = seed.max(1);
    let mut line = String::new();
    for k in 0..kills {
        // xorshift64
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = std::time::Duration::from_micros(rng % max_delay_us);
        // SAFETY: this process is single-threaded here; the child only runs our own code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            anyhow::bail!("fork failed: {}", std::io::Error::last_os_error());
        }
        if pid == 0 {
            crate::util::proc::die_with_parent_now();
            let mut i = k;
            loop {
                i += 1;
                if save_nr(i).is_err() {
                    // SAFETY: leaving the child without running the parent's exit handlers.
                    unsafe { libc::_exit(1) };
                }
            }
        }
        std::thread::sleep(delay);
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
        }
        say(&format!("killed {} after {}us", k, delay.as_micros()))?;
        line.clear();
        if std::io::stdin().read_line(&mut line)? == 0 {
            break;
        }
    }
    Ok(())
}
