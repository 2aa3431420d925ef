//! The log on stderr: `[HH:MM:SS] message` at the default level; `-v` (or `RUST_LOG`, whose
//! filter syntax wins over `-v`) adds debug lines, milliseconds and module paths. With
//! `--logfile FILE` every line that reaches the console is also appended to FILE with a local
//! date and time, so a long run leaves a record of what it did and when.

mod file;
pub mod progress;

pub use file::{log_final_error, to_file_only};

use crate::error::UsageError;
use file::{append, open_logfile, LOGFILE};
use std::path::Path;
use std::sync::Mutex;

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
