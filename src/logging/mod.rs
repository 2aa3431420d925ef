//! The log on stderr: `[HH:MM:SS] message` at the default level; `-v` (or `RUST_LOG`, whose
//! filter syntax wins over `-v`) adds debug lines, milliseconds and module paths. With
//! `--logfile FILE` every line that reaches the console is also appended to FILE with a local
//! date and time, so a long run leaves a record of what it did and when.

pub mod progress;

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

/// Lines written only to the log file (the progress line on a terminal, which the console
/// shows redrawn in place).
pub fn to_file_only(level: log::Level, msg: &str) {
    append(&level, &msg);
}

/// The console logger: `RUST_LOG`-style filtering (`env_filter`), our line format, printed through the progress
/// display so a redrawn progress line isn't torn; every printed line also goes to the log file.
struct Console {
    filter: env_filter::Filter,
    /// Module paths and milliseconds (`-v`, `RUST_LOG`); otherwise `[HH:MM:SS] message`, the
    /// level named only when it isn't INFO.
    detailed: bool,
}

impl Console {
    fn line(&self, record: &log::Record) -> String {
        let now = chrono::Local::now();
        if self.detailed {
            format!(
                "[{} {:<5} {}] {}",
                now.format("%H:%M:%S%.3f"),
                record.level(),
                record.target(),
                record.args()
            )
        } else if record.level() == log::Level::Info {
            format!("[{}] {}", now.format("%H:%M:%S"), record.args())
        } else {
            format!(
                "[{} {}] {}",
                now.format("%H:%M:%S"),
                record.level(),
                record.args()
            )
        }
    }
}

impl log::Log for Console {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        self.filter.enabled(meta)
    }

    fn log(&self, record: &log::Record) {
        if !self.filter.matches(record) {
            return;
        }
        progress::print_line(&self.line(record));
        append(&record.level(), record.args());
    }

    fn flush(&self) {}
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
    let env = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
    let mut builder = env_filter::Builder::new();
    match &env {
        Some(spec) => builder.parse(spec),
        None => builder.parse(match verbose {
            0 => "info",
            1 => "debug",
            _ => "trace",
        }),
    };
    let filter = builder.build();
    if let Some(path) = logfile {
        let _ = LOGFILE.set(Mutex::new(open_logfile(path)?));
    }
    let max = filter.filter();
    let console = Console {
        filter,
        detailed: verbose > 0 || env.is_some(),
    };
    if log::set_boxed_logger(Box::new(console)).is_ok() {
        log::set_max_level(max);
    }
    Ok(())
}
