//! The report files: clearing, the `report.json` link to the latest, and pruning past the
//! retention.

use crate::report::{remove_reports_before, report_path};
use anyhow::Result;
use std::path::{Path, PathBuf};

/// The symlink to the newest report, in the bench directory.
pub const REPORT_LINK: &str = "report.json";

/// Deletes every report (`<sec>.json` and leftover staging files) in `dir`; returns how many.
pub fn clear_reports(dir: &Path) -> Result<usize> {
    let n = remove_reports_before(dir, u64::MAX)?;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for ent in rd.flatten() {
            let name = ent.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') && name.ends_with(".json.tmp") {
                let _ = std::fs::remove_file(ent.path());
            }
        }
    }
    Ok(n)
}

/// Points `<dir>/report.json` at `report.d/<sec>.json`: a staging symlink renamed over the
/// old one, so readers always find a link.
pub fn update_link(dir: &Path, sec: u64) -> std::io::Result<()> {
    let link = dir.join(REPORT_LINK);
    let staging = dir.join(format!("{}.staging", REPORT_LINK));
    let target = Path::new(crate::report::REPORT_DIR).join(format!("{}.json", sec));
    if let Err(e) = std::os::unix::fs::symlink(&target, &staging) {
        // A staging link left by a killed run.
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(e);
        }
        std::fs::remove_file(&staging)?;
        std::os::unix::fs::symlink(&target, &staging)?;
    }
    std::fs::rename(&staging, &link)
}

/// Deletes expired reports as seconds pass: after writing second `sec`, every report before
/// `sec − retention` goes, by name for the seconds elapsed since the last pass (no directory
/// listing every second).
#[derive(Debug)]
pub struct Pruner {
    dir: PathBuf,
    retention: u64,
    /// Every report before this second is gone.
    done_before: u64,
}

/// Beyond this many seconds to catch up (a suspended host), list the directory instead.
pub(super) const PRUNE_BY_NAME_MAX: u64 = 600;

impl Pruner {
    /// Purges what is already expired at `now_sec` (a directory listing).
    pub fn start(dir: &Path, retention: u64, now_sec: u64) -> Result<(Self, usize)> {
        let before = now_sec.saturating_sub(retention);
        let n = remove_reports_before(dir, before)?;
        Ok((
            Self {
                dir: dir.to_path_buf(),
                retention,
                done_before: before,
            },
            n,
        ))
    }

    /// After second `sec` was written; returns how many files went.
    pub fn after_write(&mut self, sec: u64) -> usize {
        let before = sec.saturating_sub(self.retention);
        if before <= self.done_before {
            return 0;
        }
        let n = if before - self.done_before > PRUNE_BY_NAME_MAX {
            remove_reports_before(&self.dir, before).unwrap_or(0)
        } else {
            (self.done_before..before)
                .filter(|s| std::fs::remove_file(report_path(&self.dir, *s)).is_ok())
                .count()
        };
        self.done_before = before;
        n
    }
}
