//! What a bench may do with the host session while it runs: read the host paths, the scratch
//! device and the memory profile, size the balloon, correct the measured `avail`, create its
//! cgroups, drop the page cache, read the benchmark parameters and apply hashd parameters a
//! nested sizing found. Setup, the fix passes and the restore stay with the runner.

use super::Session;
use crate::result::sysinfo::MemProfile;
use crate::system::{blockdev, HostPaths};
use anyhow::Result;

/// A bench's view of the session (see the module docs).
pub struct BenchHost<'a>(&'a mut Session);

impl<'a> BenchHost<'a> {
    pub fn new(session: &'a mut Session) -> Self {
        Self(session)
    }

    pub fn hp(&self) -> &HostPaths {
        self.0.hp()
    }

    pub fn scratch_dev(&self) -> Option<&blockdev::DevInfo> {
        self.0.scratch_dev()
    }

    pub fn has_slices(&self) -> bool {
        self.0.has_slices()
    }

    pub fn create_cgroup(&mut self, cg: &str) -> Result<()> {
        self.0.create_cgroup(cg)
    }

    pub fn drop_caches(&self) -> Result<()> {
        self.0.drop_caches()
    }

    pub fn mem(&self) -> Option<&MemProfile> {
        self.0.mem()
    }

    pub fn mem_avail_unmeasured(&self) -> bool {
        self.0.mem_avail_unmeasured()
    }

    pub fn update_mem_avail(&mut self, avail: u64) -> Result<&MemProfile> {
        self.0.update_mem_avail(avail)
    }

    pub fn set_balloon(&mut self, size: u64) -> Result<()> {
        self.0.set_balloon(size)
    }

    /// The benchmark parameters in effect.
    pub fn bench_knobs(&self) -> Option<&crate::system::bench_json::BenchKnobs> {
        self.0.bench_knobs()
    }

    /// hashd parameters a bench found on the way (a nested hashd-params run): into the
    /// working copy, and bench.json when `commit`.
    pub fn apply_hashd(
        &mut self,
        knobs: crate::system::bench_json::HashdKnobs,
        commit: bool,
    ) -> Result<()> {
        self.0.apply_hashd(knobs, commit)
    }

    /// io.cost parameters a bench found on the way (a nested iocost-params run), like
    /// [`BenchHost::apply_hashd`]; the kernel gets them when the job enforces io.
    pub fn apply_iocost(
        &mut self,
        knobs: crate::system::iocost::IoCostKnobs,
        commit: bool,
    ) -> Result<()> {
        self.0.apply_iocost(knobs, commit)
    }

    /// io.cost off on the scratch device for the rest of the job (journaled).
    pub fn iocost_off_for_job(&mut self) -> Result<()> {
        self.0.iocost_off_for_job()
    }

    /// The scratch device's `queue/<knob>` set to `value` (journaled); returns what it was.
    pub fn set_scratch_queue_knob(&mut self, knob: &str, value: &str) -> Result<String> {
        self.0.set_scratch_queue_knob(knob, value)
    }
}
