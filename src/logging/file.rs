//! The `--logfile`: every console line, and the error a command ends with, appended with a
//! local date and time.

use crate::error::UsageError;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// The `--logfile`, once opened.
pub(super) static LOGFILE: OnceLock<Mutex<LogFile>> = OnceLock::new();

pub(super) struct LogFile {
    file: File,
    path: std::path::PathBuf,
    /// A write failed and the console said so (once).
    failed: bool,
}

/// Appends a timestamped line to the log file, if there is one.
pub(super) fn append(level: &dyn std::fmt::Display, msg: &dyn std::fmt::Display) {
    let Some(file) = LOGFILE.get() else {
        return;
    };
    let line = format!(
        "[{} {:<5}] {}\n",
        chrono::Local::now().format("%Y-%m-%d %H:%M:%S%.3f"),
        level.to_string(),
        msg
    );
    if let Ok(mut f) = file.lock() {
        // A full disk mustn't stop the run; the console still has the line, and says once
        // that the file is missing lines.
        if let Err(e) = f.file.write_all(line.as_bytes()) {
            if !f.failed {
                f.failed = true;
                crate::errln!(
                    "warning: --logfile {}: can't write to it ({}); lines from now on may be \
                     missing there (the console has them)",
                    f.path.display(),
                    e
                );
            }
        }
    }
}

/// Records the error a command ends with in the log file (the console gets it from `main`).
pub fn log_final_error(msg: &str) {
    append(&"ERROR", &msg);
}

/// Lines written only to the log file (the progress line on a terminal, which the console
/// shows redrawn in place).
pub fn to_file_only(level: log::Level, msg: &str) {
    append(&level, &msg);
}

/// Opens the log file for appending (created if missing). A path we can't write is a usage
/// error; a FIFO without a reader is refused rather than waited on.
pub(super) fn open_logfile(path: &Path) -> Result<LogFile, UsageError> {
    let file = crate::util::create::open_append(path).map_err(|e| {
        UsageError::new(format!(
            "--logfile {}: can't open it for appending ({:#}); give a writable file path",
            path.display(),
            e
        ))
    })?;
    Ok(LogFile {
        file,
        path: path.to_path_buf(),
        failed: false,
    })
}
