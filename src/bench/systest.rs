//! `systest`: a hidden bench that runs on the full host setup of `system::session` (systemd
//! check, restore journal, bench slices, every requirement with its fix pass, memory profile and
//! balloon) and records what the host looks like from inside that setup: `MemAvailable` and
//! what `balloon.slice` holds. `hold=DUR` keeps it running (and the host changed) that long. The
//! VM tests drive it to check the system layer end to end.

use super::contract::api::{
    prop, Bench, BenchDesc, FormatOpts, Shape, SpecError, Stored, ValueKind,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::spec::JobSpec;
use crate::system::cgroup::{CgroupFs, Slice};
use crate::system::HostPaths;
use crate::units::format_size;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

pub struct SysTest;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SysTestRecord {
    /// `MemAvailable` of /proc/meminfo once the job started (bytes).
    pub mem_available: u64,
    /// `memory.current` / `memory.swap.current` of balloon.slice (absent without the slice).
    pub balloon_current: Option<u64>,
    pub balloon_swap: Option<u64>,
    /// How long the job held the setup (seconds).
    pub held: f64,
}

pub static DESC: BenchDesc = BenchDesc {
    kind: "systest",
    about: "Internal bench holding the full host setup (sysreqs, journal, memory profile)",
    hidden: true,
    incremental: false,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &[prop(
            "hold",
            ValueKind::Duration,
            "keep the setup this long",
        )],
        forward: &[],
        group_props: None,
        open_keys: None,
        format_props: &[],
    },
    doc: None,
    system: Some(&super::contract::needs::ALL),
};

/// The systest properties.
#[derive(Debug, Clone, PartialEq)]
pub struct SysTestProps {
    /// How long to keep the setup, in seconds.
    pub hold: f64,
}

impl Bench for SysTest {
    type Props = SysTestProps;
    type Record = SysTestRecord;
    /// The record as it is.
    type Result = SysTestRecord;

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<SysTestProps, SpecError> {
        let hold = spec.group(0).f64("hold", ValueKind::Duration)?;
        Ok(SysTestProps {
            hold: hold.unwrap_or(0.0),
        })
    }

    fn run(&self, _ctx: &mut RunCtx, props: &SysTestProps) -> Result<SysTestRecord> {
        let hold = props.hold;
        let hp = HostPaths::real();
        let mi = crate::system::sysinfo::read_meminfo(&hp)?;
        let cg = CgroupFs::new(&hp);
        let mut rec = SysTestRecord {
            mem_available: mi.get("MemAvailable").copied().unwrap_or(0),
            balloon_current: cg.read_memory_current(Slice::Balloon.name()).ok(),
            balloon_swap: cg.read_swap_current(Slice::Balloon.name()).ok(),
            held: 0.0,
        };
        log::info!(
            "systest: MemAvailable={} balloon.slice={}; holding for {}s",
            format_size(rec.mem_available as f64),
            rec.balloon_current
                .map(|b| format_size(b as f64))
                .unwrap_or_else(|| "-".into()),
            hold
        );
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < hold {
            std::thread::sleep(Duration::from_millis(50));
        }
        rec.held = start.elapsed().as_secs_f64();
        Ok(rec)
    }

    fn study(&self, _ctx: &StudyCtx, record: &SysTestRecord) -> Result<SysTestRecord> {
        Ok(record.clone())
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, _opts: &FormatOpts) -> Result<()> {
        let r = &stored.result;
        let opt = |v: Option<u64>| v.map(|b| format_size(b as f64)).unwrap_or("-".into());
        out.push_str(&format!(
            "Systest: MemAvailable={} balloon.slice memory={} swap={} held={:.1}s\n",
            format_size(r.mem_available as f64),
            opt(r.balloon_current),
            opt(r.balloon_swap),
            r.held
        ));
        Ok(())
    }
}
