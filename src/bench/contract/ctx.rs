//! What a bench's `run` and `study` get from the runner: [`RunCtx`] (its previous record,
//! checkpoints into the result file, the host session) and [`StudyCtx`].

use super::host::RunHost;
use crate::format::job_name;
use crate::report::reporter::ReporterHandle;
use crate::result::sysinfo::Sysinfo;
use crate::result::{to_raw, ResultFile};
use crate::spec::JobSpec;
use crate::system::bench_json::BenchKnobs;
use crate::system::session::BenchHost;
use crate::util::now;
use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};

/// What a bench's `run` gets beside its properties: the matched previous record (incremental benches resume
/// from it), checkpointing into the result file, and — for benches that touch the system — the
/// host session (balloon, running reporter).
pub struct RunCtx<'a> {
    spec: JobSpec,
    prev_record: Option<Box<RawValue>>,
    dir: PathBuf,
    file: &'a mut ResultFile,
    idx: usize,
    period_start: u64,
    sysinfo: SysinfoSrc<'a>,
    /// Set by [`RunCtx::revert_knobs_at_end`].
    revert_knobs: bool,
    quick: bool,
    /// Set while a sub-bench runs inside this job ([`RunCtx::nested`]).
    nest: Option<Nest>,
    /// The work directory claimed by [`RunCtx::scratch_dir`] for a job without the host session.
    dir_lock: Option<crate::util::lockfile::LockFile>,
}

/// Where a job's run starts: what the runner hands [`RunCtx::new`].
pub(in crate::bench) struct JobStart<'a> {
    pub spec: JobSpec,
    /// The job's record in the result file from an earlier run, if any.
    pub prev_record: Option<Box<RawValue>>,
    pub dir: PathBuf,
    pub file: &'a mut ResultFile,
    /// The job's entry in `file`.
    pub idx: usize,
    pub period_start: u64,
    pub sysinfo: SysinfoSrc<'a>,
    pub quick: bool,
}

/// What the runner gets back when the bench's run has returned ([`RunCtx::finish`]).
pub(in crate::bench) struct JobEnd<'a> {
    pub file: &'a mut ResultFile,
    pub prev_record: Option<Box<RawValue>>,
    /// The entry's sysinfo, as the job left the host (or as the job forwarded it).
    pub sysinfo: SysinfoSrc<'a>,
}

/// Where a sub-bench's checkpoints go: into `outer` (the job's own record) at the JSON
/// pointer `at`.
pub(in crate::bench) struct Nest {
    outer: serde_json::Value,
    at: String,
}

/// Where an entry's sysinfo comes from: fixed (benches that don't touch the system), or read
/// from the host session whenever it is stored, so the header shows the host as the job left it.
pub(in crate::bench) enum SysinfoSrc<'a> {
    Fixed(Box<RawValue>),
    Session {
        host: &'a mut RunHost,
        /// The job's own part: our version, its options, its quick mark.
        base: Box<Sysinfo>,
        needs: &'static crate::bench::contract::needs::SystemNeeds,
    },
}

impl SysinfoSrc<'_> {
    pub(in crate::bench) fn current(&self) -> Result<Box<RawValue>> {
        match self {
            SysinfoSrc::Fixed(raw) => Ok(raw.clone()),
            SysinfoSrc::Session { host, base, needs } => to_raw(&host.session.sysinfo(
                (**base).clone(),
                needs.sysreqs,
                needs.mem_profile,
            )?),
        }
    }
}

impl<'a> RunCtx<'a> {
    pub(in crate::bench) fn new(start: JobStart<'a>) -> Self {
        RunCtx {
            spec: start.spec,
            prev_record: start.prev_record,
            dir: start.dir,
            file: start.file,
            idx: start.idx,
            period_start: start.period_start,
            sysinfo: start.sysinfo,
            revert_knobs: false,
            quick: start.quick,
            nest: None,
            dir_lock: None,
        }
    }

    /// Ends the run: puts back the host parameters the job asked to
    /// ([`RunCtx::revert_knobs_at_end`]); a revert that fails fails a run that went well
    /// (after a failed run it is only logged). Releases the work directory's claim.
    pub(in crate::bench) fn finish(self, run_ok: bool) -> Result<JobEnd<'a>> {
        let name = job_name(&self.spec);
        let RunCtx {
            file,
            prev_record,
            mut sysinfo,
            revert_knobs,
            ..
        } = self;
        if let (true, SysinfoSrc::Session { host, .. }) = (revert_knobs, &mut sysinfo) {
            match host.session.revert_knobs() {
                Err(e) if run_ok => {
                    return Err(e.context(format!("{}: reverting the parameters", name)))
                }
                Err(e) => log::warn!("{}: reverting the parameters: {:#}", name, e),
                Ok(()) => log::debug!("{}: parameters reverted to the job's start", name),
            }
        }
        Ok(JobEnd {
            file,
            prev_record,
            sysinfo,
        })
    }
}

impl RunCtx<'_> {
    /// The nearest finished entry of `kind` before this job's in the result file (iocost-tune
    /// works on the iocost-qos run before it).
    pub fn done_entry(&self, kind: &str) -> Option<&crate::result::Entry> {
        self.file.entries[..self.idx]
            .iter()
            .rev()
            .find(|e| e.spec.kind == kind && e.result.is_some() && !e.incomplete)
    }

    /// Records `sysinfo` as the job's, for a job that doesn't touch the host and stands for
    /// another's measurements (iocost-tune carries its iocost-qos run's). A job on the host
    /// keeps the host's.
    pub fn forward_sysinfo(&mut self, sysinfo: Box<RawValue>) {
        if let SysinfoSrc::Fixed(_) = self.sysinfo {
            self.sysinfo = SysinfoSrc::Fixed(sysinfo);
        }
    }

    /// The record this job left in the result file earlier (incremental benches only; for other
    /// benches a complete record is reused without running), read as the bench's record. One
    /// policy for every bench: a record this version can't read is logged and the job starts
    /// over (`None`), as when there is none.
    pub fn prev_record<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        let raw = self.prev_record.as_deref()?;
        serde_json::from_str(raw.get())
            .map_err(|e| {
                log::warn!(
                    "{}: the earlier record in the result file can't be read ({}); starting over",
                    crate::format::job_name(&self.spec),
                    e
                )
            })
            .ok()
    }

    /// The result of this job's finished entry from an earlier run, read as `T`: `None` when
    /// there is none, the entry is a checkpoint, it can't be read (nothing depends on it but
    /// what a bench keeps for when reports are gone), or inside a sub-bench (the entry is the
    /// outer job's).
    pub fn prev_result<T: serde::de::DeserializeOwned>(&self) -> Option<T> {
        if self.nest.is_some() {
            return None;
        }
        self.prev_record.as_ref()?;
        let e = &self.file.entries[self.idx];
        if e.incomplete {
            return None;
        }
        serde_json::from_str(e.result.as_deref()?.get()).ok()
    }

    /// `--quick`: shortened phases (the result carries the mark).
    pub fn quick(&self) -> bool {
        self.quick
    }

    /// Top-level work directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `<dir>/scratch`, for a job's test files: the work directory is claimed for this run
    /// first (a second run with the same `--dir` is refused while this one holds it; runs on
    /// the host session hold it from their start).
    pub fn scratch_dir(&mut self) -> Result<PathBuf> {
        if matches!(self.sysinfo, SysinfoSrc::Fixed(_)) && self.dir_lock.is_none() {
            self.dir_lock = Some(super::workdir::claim(&self.dir)?);
        }
        // Made here, and not through another user's link (`util::create`).
        crate::util::create::ensure_dir(&self.dir.join("scratch"), "scratch directory")
    }

    /// Where the per-second reports of this run go (`<dir>/report.d`).
    pub fn reports_dir(&self) -> PathBuf {
        crate::report::reports_dir(&self.dir)
    }

    /// The host session as benches with `system` needs see it (e.g. to resize the balloon).
    pub fn session(&mut self) -> Option<BenchHost<'_>> {
        self.host().map(|(s, _)| s)
    }

    /// The session and the running reporter together (hashd benches need both).
    pub fn host(&mut self) -> Option<(BenchHost<'_>, Option<&ReporterHandle>)> {
        match &mut self.sysinfo {
            SysinfoSrc::Session { host, .. } => {
                Some((BenchHost::new(&mut host.session), host.reporter.as_ref()))
            }
            SysinfoSrc::Fixed(_) => None,
        }
    }

    /// The running reporter: `set_state`, and `shared()` for the workload statistics (hashd)
    /// and extra cgroups the reports should carry.
    pub fn reporter(&self) -> Option<&ReporterHandle> {
        match &self.sysinfo {
            SysinfoSrc::Session { host, .. } => host.reporter.as_ref(),
            SysinfoSrc::Fixed(_) => None,
        }
    }

    /// The benchmark parameters this job runs with (bench.json with the command-line overrides
    /// and what earlier jobs applied); `None` for benches without system needs.
    pub fn bench_knobs(&self) -> Option<&BenchKnobs> {
        match &self.sysinfo {
            SysinfoSrc::Session { host, .. } => host.session.bench_knobs(),
            SysinfoSrc::Fixed(_) => None,
        }
    }

    /// Asks for the parameters of this job's start to come back when the job ends (however it
    /// ends), undoing what it applied without committing.
    pub fn revert_knobs_at_end(&mut self) {
        self.revert_knobs = true;
    }

    /// Runs a sub-bench as part of this job: `f` gets this context with `prev` as the previous
    /// record to resume from, and its checkpoints put the sub-bench's record into `outer` (this
    /// job's record) at the JSON pointer `at` — which must exist in `outer` — and save that.
    /// Used by benches made of other benches (iocost-qos runs storage and protection).
    pub fn nested<T>(
        &mut self,
        outer: serde_json::Value,
        at: &str,
        prev: Option<Box<RawValue>>,
        f: impl FnOnce(&mut RunCtx) -> Result<T>,
    ) -> Result<T> {
        anyhow::ensure!(self.nest.is_none(), "sub-benches don't nest further");
        anyhow::ensure!(
            outer.pointer(at).is_some(),
            "no place {:?} in the record for the sub-bench",
            at
        );
        let saved = std::mem::replace(&mut self.prev_record, prev);
        self.nest = Some(Nest {
            outer,
            at: at.to_string(),
        });
        let r = f(self);
        self.nest = None;
        self.prev_record = saved;
        r
    }

    /// Stores `record` as the entry's in-progress record and saves the whole result file
    /// atomically. The entry's `result` is left as it was. Inside [`RunCtx::nested`] the
    /// record is the sub-bench's, stored in place in the job's.
    pub fn checkpoint<T: Serialize + ?Sized>(&mut self, record: &T) -> Result<()> {
        let raw = match &mut self.nest {
            Some(n) => {
                let slot = n
                    .outer
                    .pointer_mut(&n.at)
                    .context("the sub-bench's place in the record")?;
                *slot = serde_json::to_value(record)?;
                to_raw(&n.outer)?
            }
            None => to_raw(record)?,
        };
        let e = &mut self.file.entries[self.idx];
        e.record = Some(raw);
        e.incomplete = true;
        e.period = (self.period_start, now().max(self.period_start));
        e.sysinfo = self.sysinfo.current()?;
        self.file.touch(self.idx);
        self.file.save().context("saving checkpoint")?;
        log::debug!("{}: checkpoint saved", job_name(&self.spec));
        Ok(())
    }
}

/// What a bench's `study` gets.
#[derive(Debug, Clone)]
pub struct StudyCtx {
    /// Where the per-second reports (`<t>.json`) are.
    pub reports_dir: PathBuf,
    /// The entry's period `[start, end]` in unix seconds.
    pub period: (u64, u64),
}

impl StudyCtx {
    pub fn new(reports_dir: PathBuf, period: (u64, u64)) -> Self {
        Self {
            reports_dir,
            period,
        }
    }
}
