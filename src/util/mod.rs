//! Small helpers every layer may use: reading one-line kernel files, starting child processes
//! that die with us, the unix time and where a wall-clock second's mark is.

pub mod atomic;
pub mod create;
pub mod fs;
pub mod lockfile;
pub mod out;
pub mod proc;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Current unix time in seconds.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// How long from the wall-clock time `now` (since the epoch) to the next instant `at` into a
/// second (strictly after `now`). Loops that pace themselves by it keep one phase within the
/// wall-clock second however long each pass takes, instead of drifting by that time: hashd
/// writes its status at +0 ms and the per-second reporter reads it at +500 ms, so each report
/// sees exactly one new status; the hog runs' loop reads it at +250 ms.
pub fn until_mark(now: Duration, at: Duration) -> Duration {
    let sec = Duration::from_secs(1);
    let at = Duration::from_nanos((at.as_nanos() % sec.as_nanos()) as u64);
    let into = Duration::from_nanos(now.subsec_nanos() as u64);
    if into < at {
        at - into
    } else {
        sec - into + at
    }
}

/// [`until_mark`] from the current wall-clock time.
pub fn until_next_mark(at: Duration) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    until_mark(now, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_mark_is_strictly_ahead_and_within_a_second() {
        let ms = Duration::from_millis;
        let at = ms(250);
        assert_eq!(until_mark(Duration::new(100, 0), at), ms(250));
        assert_eq!(until_mark(Duration::new(100, 100_000_000), at), ms(150));
        // On the mark: the next second's.
        assert_eq!(until_mark(Duration::new(100, 250_000_000), at), ms(1000));
        assert_eq!(until_mark(Duration::new(100, 900_000_000), at), ms(350));
        assert_eq!(until_mark(Duration::new(100, 500_000_000), ms(0)), ms(500));
        assert_eq!(until_mark(Duration::new(100, 0), ms(0)), ms(1000));
    }
}
