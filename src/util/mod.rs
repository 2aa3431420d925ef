//! Small helpers every layer may use: reading one-line kernel files, starting child processes
//! that die with us, the unix time.

pub mod atomic;
pub mod fs;
pub mod proc;

/// Current unix time in seconds.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
