//! The log: `env_logger` on stderr (level from `-v`, overridable with `RUST_LOG`), and with
//! `--logfile FILE` every line that reaches the console also appended to FILE with a local
//! timestamp, so a long run leaves a record of what it did and when.

use crate::error::UsageError;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// The `--logfile`, once opened.
static LOGFILE: OnceLock<Mutex<File>> = OnceLock::new();

/// Appends a timestamped line to the log file, if there is one.
fn append(level: &dyn std::fmt::Display, msg: &dyn std::fmt::Display) {
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
        // A full disk mustn't stop the run; the console still has the line.
        let _ = f.write_all(line.as_bytes());
    }
}

/// Records the error a command ends with in the log file (the console gets it from `main`).
pub fn log_final_error(msg: &str) {
    append(&"ERROR", &msg);
}

/// The console logger, plus a copy of every line it prints in the log file.
struct Tee {
    console: env_logger::Logger,
}

impl log::Log for Tee {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        self.console.enabled(meta)
    }

    fn log(&self, record: &log::Record) {
        if !self.console.matches(record) {
            return;
        }
        self.console.log(record);
        append(&record.level(), record.args());
    }

    fn flush(&self) {
        self.console.flush();
    }
}

/// Opens the log file for appending (created if missing). A path we can't write is a usage
/// error; a FIFO without a reader is refused rather than waited on.
fn open_logfile(path: &Path) -> Result<File, UsageError> {
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            UsageError::new(format!(
                "--logfile {}: can't open it for appending ({}); give a writable file path",
                path.display(),
                e
            ))
        })
}

/// Installs the logger. Only fails for a `--logfile` that can't be opened.
pub fn init(verbose: u8, logfile: Option<&Path>) -> Result<(), UsageError> {
    let console = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(
        match verbose {
            0 => "info",
            1 => "debug",
            _ => "trace",
        },
    ))
    .format_timestamp(None)
    .build();
    let Some(path) = logfile else {
        let max = console.filter();
        if log::set_boxed_logger(Box::new(console)).is_ok() {
            log::set_max_level(max);
        }
        return Ok(());
    };
    let _ = LOGFILE.set(Mutex::new(open_logfile(path)?));
    let max = console.filter();
    let tee = Tee { console };
    if log::set_boxed_logger(Box::new(tee)).is_ok() {
        log::set_max_level(max);
    }
    Ok(())
}
