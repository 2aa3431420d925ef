//! File helpers.

use std::path::Path;

/// The content of a small text file (a sysfs or procfs knob), trimmed; `None` if it can't be
/// read.
pub fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}
