//! The session's memory profile: the measured or estimated `avail`, and the balloon that
//! leaves the profile's share to the benches.
use super::Session;
use crate::result::sysinfo::MemProfile;
use crate::system::cgroup::{CgroupFs, Slice};
use crate::system::mem::{self, AvailSource, Balloon};
use crate::units::format_size;
use anyhow::Result;

impl Session {
    /// Starts, resizes or stops the balloon.
    pub fn set_balloon(&mut self, size: u64) -> Result<()> {
        match (&mut self.memory.balloon, size) {
            (None, 0) => Ok(()),
            (Some(_), 0) => {
                if let Some(b) = self.memory.balloon.take() {
                    b.stop()?;
                }
                log::info!("balloon stopped");
                Ok(())
            }
            (Some(b), size) => b.resize(size),
            (None, size) => {
                let cg = CgroupFs::new(&self.hp);
                let b = Balloon::start(self.cgroups.slices.then_some(&cg), size)?;
                log::info!(
                    "balloon (pid {}) holds {} in {}",
                    b.pid(),
                    format_size(b.size() as f64),
                    Slice::Balloon.name()
                );
                self.memory.balloon = Some(b);
                Ok(())
            }
        }
    }

    /// Whether the memory profile's `avail` is only the quick estimate from `MemAvailable`,
    /// not yet measured by a hashd bench (nor given).
    pub fn mem_avail_unmeasured(&self) -> bool {
        self.memory.src == Some(AvailSource::Estimated)
    }

    /// A new `avail` for the memory profile, measured by a hashd bench or corrected by the
    /// storage bench: the profile is checked against it again (a usage error when its share no
    /// longer fits). The balloon is left to the caller.
    pub fn update_mem_avail(&mut self, avail: u64) -> Result<&MemProfile> {
        let Some(m) = &self.memory.info else {
            anyhow::bail!("no memory profile in this session");
        };
        let m = mem::with_avail(m, avail)?;
        log_mem(&m, AvailSource::Measured);
        self.memory.src = Some(AvailSource::Measured);
        Ok(self.memory.info.insert(m))
    }

    pub fn balloon(&self) -> Option<&Balloon> {
        self.memory.balloon.as_ref()
    }

    pub fn mem(&self) -> Option<&MemProfile> {
        self.memory.info.as_ref()
    }
}

pub(super) fn log_mem(m: &MemProfile, src: AvailSource) {
    if m.profile == 0 {
        log::info!(
            "memory profile off: running at the machine's size ({})",
            format_size(m.share as f64)
        );
        return;
    }
    log::info!(
        "memory profile {}: avail={}{} share={} target={}",
        m.profile,
        format_size(m.avail as f64),
        match src {
            AvailSource::Estimated => " (estimated)",
            AvailSource::Measured => " (measured)",
            _ => "",
        },
        format_size(m.share as f64),
        format_size(m.target as f64)
    );
    // Said once, with the first profile line; a measured avail only refines the numbers.
    if m.profile != crate::system::mem::DFL_MEM_PROFILE && !matches!(src, AvailSource::Measured) {
        log::warn!(
            "memory profile {} isn't the default {}: results aren't comparable with default runs",
            m.profile,
            crate::system::mem::DFL_MEM_PROFILE
        );
    }
}
