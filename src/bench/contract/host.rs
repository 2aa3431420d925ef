//! The host side of a run: the session and the reporter on it.

use crate::report::reporter::ReporterHandle;
use crate::system::session::Session;
use anyhow::Result;

/// The host side of a run: the session and the reporter sampling it. Fields drop in order, so
/// the reporter stops first (its tracefs instance is journaled, and it reads the slices).
pub struct RunHost {
    pub reporter: Option<ReporterHandle>,
    pub session: Session,
    /// The work directory claimed for this run (`workdir::claim`), released last.
    pub _dir_lock: Option<crate::util::lockfile::LockFile>,
}

impl RunHost {
    /// Stops the reporter, then restores the host (errors name what stayed changed).
    pub fn finish(mut self) -> Result<()> {
        if let Some(h) = self.reporter.take() {
            match h.stop() {
                Ok(st) => log::debug!(
                    "reporter: {} reports written, {} seconds skipped, {} write errors",
                    st.written,
                    st.skipped,
                    st.write_errors
                ),
                Err(e) => log::warn!("{:#}", e),
            }
        }
        self.session.finish()
    }
}
