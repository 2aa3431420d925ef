//! The run path: load the result file → link specs to entries → per job run (or reuse) →
//! checkpoint → study → solve → save → restore the host → print the summaries. `study` and `solve` take the same path
//! but never run anything: they re-derive results of completed entries.

use crate::bench::{self, AnyBench, Apply, BenchJob, FormatOpts, JobRecord};
use crate::error::UsageError;
use crate::format::job_name;
use crate::result::sysinfo::Sysinfo;
use crate::result::{pack, to_raw, Entry, ResultFile};
use crate::spec::JobSpec;
use crate::system::session::{Needs, Session};
use crate::system::HostPaths;
use anyhow::{Context, Result};
use serde_json::value::RawValue;
use std::path::{Path, PathBuf};

/// Which stage(s) a `run_cmd` invocation executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Run (or resume) the jobs, then study and solve.
    Run,
    /// Re-derive results from records and per-second reports (default
    /// `<result stem>-report.d`).
    Study { reports_dir: Option<PathBuf> },
    /// Re-derive results from the stored results only.
    Solve,
}

impl Mode {
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Run => "run",
            Mode::Study { .. } => "study",
            Mode::Solve => "solve",
        }
    }
}

/// What the run path needs from the global options.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub result: PathBuf,
    /// Top-level work directory (`report.d/` lives here).
    pub dir: PathBuf,
    /// The validated global options, recorded in each entry's sysinfo.
    pub bench_args: Option<serde_json::Value>,
    /// What benches that touch the system need from the options (`None`: such benches can't
    /// run, e.g. in tests of the run machinery).
    pub system: Option<crate::system::session::SessionOpts>,
    /// `--quick`: benches shorten their phases.
    pub quick: bool,
}

use crate::bench::contract::ctx::{JobStart, RunCtx, StudyCtx, SysinfoSrc};
use crate::bench::contract::host::RunHost;
use crate::bench::contract::workdir;
use crate::util::now;

/// Whether every job's bench can take this mode, checked before anything runs so a bad spec
/// late in the list doesn't fail after hours of work. Every bench can `solve` what it stored.
fn check_runnable(mode: &Mode, jobs: &[(JobSpec, Box<dyn BenchJob>)]) -> Result<()> {
    if *mode == Mode::Solve {
        return Ok(());
    }
    for (spec, job) in jobs {
        if !job.bench().desc().runnable {
            crate::usage_bail!(
                "{:?} can't {} in this version yet; format/summary of existing results work",
                spec.kind,
                mode.name()
            );
        }
    }
    Ok(())
}

/// The jobs with, before each whose bench names a job to run first (`runs_first`), that job —
/// unless an earlier job of the invocation or a finished entry of the file is of its kind.
fn with_first_runs(
    jobs: Vec<(JobSpec, Box<dyn BenchJob>)>,
    file: &ResultFile,
) -> Result<Vec<(JobSpec, Box<dyn BenchJob>)>> {
    let mut out: Vec<(JobSpec, Box<dyn BenchJob>)> = Vec::with_capacity(jobs.len() + 1);
    for (spec, job) in jobs {
        if let Some(text) = job.bench().desc().runs_first {
            let first = JobSpec::parse(text)?;
            let earlier = out.iter().any(|(s, _)| s.kind == first.kind);
            let stored = file
                .entries
                .iter()
                .any(|e| e.spec.kind == first.kind && e.result.is_some() && !e.incomplete);
            if !earlier && !stored {
                log::info!(
                    "{}: no finished {} run in the result file or before it on the command \
                     line; running `{}` first, as its own job",
                    job_name(&spec),
                    first.kind,
                    text
                );
                let first_job = bench::validate_run(&first)?;
                out.push((first, first_job));
            }
        }
        out.push((spec, job));
    }
    Ok(out)
}

/// `run`, `study` or `solve` the given jobs against the result file.
/// The jobs come from [`bench::validate_run`]: their properties are read.
pub fn run_cmd(cfg: &RunConfig, mode: Mode, jobs: Vec<(JobSpec, Box<dyn BenchJob>)>) -> Result<()> {
    if jobs.is_empty() {
        crate::usage_bail!(
            "{} needs at least one job spec (BENCH[:KEY=VAL,...]), on the command line or via -f",
            mode.name()
        );
    }
    check_runnable(&mode, &jobs)?;
    // Held until the last save: a second writer of the file fails at once instead of one
    // run's jobs silently overwriting the other's.
    let _lock = crate::result::lock::ResultLock::acquire(&cfg.result)?;
    let mut file = ResultFile::load(&cfg.result)?;
    let jobs = match mode {
        Mode::Run => with_first_runs(jobs, &file)?,
        _ => jobs,
    };
    let specs: Vec<JobSpec> = jobs.iter().map(|(s, _)| s.clone()).collect();
    file.set_reorder(mode == Mode::Run);
    let idxs = file.link_where(
        &specs,
        |kind| bench::find(kind).is_some_and(|b| b.desc().incremental),
        |s, entry| entry.record.as_deref().is_none_or(|r| jobs[s].1.answers(r)),
    );

    let reports_dir = match &mode {
        Mode::Run => cfg.dir.join("report.d"),
        // Where a run in `vm` (or an unpacked tarball) left them, else where a run on this
        // host did.
        Mode::Study { reports_dir } => reports_dir.clone().unwrap_or_else(|| {
            let beside = pack::default_reports_dir(&cfg.result);
            let host = cfg.dir.join("report.d");
            if !beside.is_dir() && host.is_dir() {
                host
            } else {
                beside
            }
        }),
        Mode::Solve => PathBuf::new(),
    };
    let sysinfo = to_raw(&Sysinfo::current(cfg.bench_args.clone(), cfg.quick))?;
    let mut session = match mode {
        Mode::Run => start_session(cfg, &file, &jobs, &idxs)?,
        _ => None,
    };

    // The jobs' summaries go last, after the host is restored, so the result is what the
    // screen ends with; a failed job still shows those that finished before it.
    let mut summaries = String::new();
    let mut shown: Vec<String> = Vec::new();
    let mut outcome = Ok(());
    let inv = Invocation {
        cfg,
        mode: &mode,
        reports_dir,
        sysinfo,
    };
    for ((spec, job), idx) in jobs.into_iter().zip(idxs) {
        let label = format_spec_of(&spec);
        match run_job(&inv, &mut file, Job { spec, job, idx }, session.as_mut()) {
            Ok(()) => {
                summaries += &summary_of(&file.entries[idx])?;
                shown.push(label);
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    let restored = match session {
        Some(s) => s.finish().context("restoring the host configuration"),
        None => Ok(()),
    };
    print_summaries(&summaries, &cfg.result, &shown);
    outcome.and(restored)
}

/// How `format` picks a job's entry: its kind, and its id if it has one.
fn format_spec_of(spec: &JobSpec) -> String {
    match &spec.id {
        Some(id) => format!("{}:id={}", spec.kind, id),
        None => spec.kind.clone(),
    }
}

/// Prints the jobs' summaries and, on stderr, how to see their full reports.
fn print_summaries(summaries: &str, result: &Path, shown: &[String]) {
    use std::io::Write;
    if summaries.is_empty() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    // `| head` closing the pipe is not worth failing the run for.
    let _ = stdout
        .write_all(summaries.as_bytes())
        .and_then(|_| stdout.flush());
    crate::errln!(
        "Full report: resctl-bench -r {} format {}",
        result.display(),
        shown.join(" ")
    );
}

/// Whether the job will run (not just reuse a complete record of a non-incremental bench).
fn will_run(file: &ResultFile, idx: usize, bench: &dyn AnyBench) -> bool {
    let e = &file.entries[idx];
    let complete = e.record.is_some() && !e.incomplete;
    !complete || bench.desc().incremental
}

/// The host setup for the jobs that touch the system, before the first job runs: the union of
/// their requirements is the gate; the first such job's `passive=` rules the first fix pass.
fn start_session(
    cfg: &RunConfig,
    file: &ResultFile,
    jobs: &[(JobSpec, Box<dyn BenchJob>)],
    idxs: &[usize],
) -> Result<Option<RunHost>> {
    let mut needs: Option<Needs> = None;
    let mut kinds: Vec<&str> = Vec::new();
    for ((spec, job), idx) in jobs.iter().zip(idxs) {
        let Some(sys) = job.bench().desc().system else {
            continue;
        };
        if !will_run(file, *idx, job.bench()) {
            continue;
        }
        if !kinds.contains(&spec.kind.as_str()) {
            kinds.push(&spec.kind);
        }
        let n = needs.get_or_insert_with(|| Needs {
            sysreqs: Vec::new(),
            mem_profile: false,
            enforce: sys.enforce_for(spec.passive.as_deref()),
        });
        for r in sys.sysreqs {
            if !n.sysreqs.contains(r) {
                n.sysreqs.push(*r);
            }
        }
        n.mem_profile |= sys.mem_profile;
    }
    let Some(mut needs) = needs else {
        return Ok(None);
    };
    // SAFETY: geteuid has no preconditions and can't fail.
    if unsafe { libc::geteuid() } != 0 {
        crate::usage_bail!(
            "{} {} root: {} cgroups, swap and kernel settings of this host (and restores them); \
             run resctl-bench as root (e.g. with sudo), or try it in a throwaway VM: resctl-bench vm",
            kinds.join(", "),
            if kinds.len() > 1 { "need" } else { "needs" },
            if kinds.len() > 1 { "they change" } else { "it changes" },
        );
    }
    needs.sysreqs.sort();
    let Some(opts) = &cfg.system else {
        crate::usage_bail!("these benches need the host setup, which this invocation lacks");
    };
    let dir_lock = workdir::claim(&cfg.dir)?;
    let mut session = Session::start(HostPaths::real(), opts, &needs)?;
    let reporter =
        crate::report::reporter::start_on(&mut session, opts).context("starting the reporter")?;
    Ok(Some(RunHost {
        reporter: Some(reporter),
        session,
        _dir_lock: Some(dir_lock),
    }))
}

/// `study`/`solve` of a spec that no run in the file matches: the entries of the same bench
/// the file does hold, to pass instead (a non-incremental bench matches only equal props).
fn no_stored_run(file: &ResultFile, spec: &JobSpec, mode: &Mode) -> UsageError {
    let stored: Vec<String> = file
        .entries
        .iter()
        .filter(|e| e.spec.kind == spec.kind && e.spec.id == spec.id && e.record.is_some())
        .map(|e| e.spec.canonical())
        .collect();
    let what = format!(
        "{}: the result file holds no run of {:?} to {}",
        job_name(spec),
        spec.canonical(),
        mode.name()
    );
    match &stored[..] {
        [] => UsageError::new(format!("{}; run it first", what)),
        [one] => UsageError::new(format!(
            "{}; it holds {:?}, whose properties differ: pass that spec ({} {})",
            what,
            one,
            mode.name(),
            one
        )),
        _ => UsageError::new(format!(
            "{}; it holds {}, whose properties differ: pass one of those specs",
            what,
            stored
                .iter()
                .map(|s| format!("{:?}", s))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// What every job of one invocation shares.
struct Invocation<'a> {
    cfg: &'a RunConfig,
    mode: &'a Mode,
    /// Where `study` reads the per-second reports.
    reports_dir: PathBuf,
    /// The sysinfo of jobs that don't touch the host.
    sysinfo: Box<RawValue>,
}

/// One job: its spec, its bench with the properties read, and the entry it writes.
struct Job {
    spec: JobSpec,
    job: Box<dyn BenchJob>,
    idx: usize,
}

/// Runs, studies or solves one job into its entry of `file`, saved when it is done.
fn run_job(
    inv: &Invocation,
    file: &mut ResultFile,
    job: Job,
    host: Option<&mut RunHost>,
) -> Result<()> {
    let name = job_name(&job.spec);
    let prev = &file.entries[job.idx];
    let complete = prev.record.is_some() && !prev.incomplete;
    match inv.mode {
        Mode::Run => run_one(inv, file, job, host),
        _ if prev.record.is_none() => Err(no_stored_run(file, &job.spec, inv.mode).into()),
        _ if !complete => crate::usage_bail!(
            "{} isn't complete; {} needs a finished run",
            name,
            inv.mode.name()
        ),
        Mode::Solve => solve_one(file, &job),
        Mode::Study { .. } => {
            let record = stored_record(file, &job)?;
            study_into(inv, file, &job, &*record)?;
            file.touch(job.idx);
            file.save()
        }
    }
}

/// `solve`: the job's stored result re-derived from itself, saved when it changes.
fn solve_one(file: &mut ResultFile, job: &Job) -> Result<()> {
    let name = job_name(&job.spec);
    let old = file.entries[job.idx].result.as_deref();
    let Some(old) = old else {
        crate::usage_bail!("{} isn't complete; solve needs a finished run", name);
    };
    let solved = job
        .job
        .solve(old)
        .with_context(|| format!("{}: solve failed", name))?;
    let Some(result) = solved else {
        // What the stored data implies is what is stored: nothing to write.
        log::info!(
            "{}: the stored result is what its data solves to; unchanged",
            name
        );
        return Ok(());
    };
    file.entries[job.idx].result = Some(to_raw(&result)?);
    file.touch(job.idx);
    file.save()
}

/// `run`: the job measured (or its complete record reused), studied and saved, then what it
/// hands to the later jobs applied.
fn run_one(
    inv: &Invocation,
    file: &mut ResultFile,
    job: Job,
    mut host: Option<&mut RunHost>,
) -> Result<()> {
    let name = job_name(&job.spec);
    let idx = job.idx;
    let prev = file.entries[idx].record.clone();
    let complete = prev.is_some() && !file.entries[idx].incomplete;
    // The entry now stands for this spec (an incremental bench may have linked an entry with
    // other props; apply/commit may differ).
    file.entries[idx].spec = job.spec.clone();
    let desc = job.job.bench().desc();
    let (record, reused) = match prev {
        Some(_) if complete && !desc.incremental => {
            log::info!("{}: {}", name, REUSING);
            (stored_record(file, &job)?, true)
        }
        prev => {
            let src = match (desc.system, host.as_deref_mut()) {
                (Some(needs), Some(h)) => {
                    // A bench that measures avail sets its balloon once it knows it.
                    let s = &mut h.session;
                    let balloon =
                        needs.mem_profile && !(needs.measures_avail && s.mem_avail_unmeasured());
                    s.prepare_job(needs.enforce_for(job.spec.passive.as_deref()), balloon)
                        .with_context(|| format!("{}: preparing the host", name))?;
                    SysinfoSrc::Session {
                        host: h,
                        base: Box::new(Sysinfo::current(inv.cfg.bench_args.clone(), inv.cfg.quick)),
                        needs,
                    }
                }
                _ => SysinfoSrc::Fixed(inv.sysinfo.clone()),
            };
            let rec = execute(file, &job.spec, &*job.job, idx, prev, inv.cfg, src)?;
            (rec, false)
        }
    };
    if let Err(e) = study_into(inv, file, &job, &*record) {
        // Keep the record: the run is done and only the study needs redoing.
        file.entries[idx].result = None;
        file.touch(idx);
        file.save()?;
        return Err(e);
    }
    file.touch(idx);
    file.save()?;
    // After the save: a failure to apply doesn't lose the finished record.
    apply_record(&name, &*record, host.map(|h| &mut h.session), reused)
}

/// The job's stored record, read into its bench's model.
fn stored_record<'j>(file: &ResultFile, job: &'j Job) -> Result<Box<dyn JobRecord + 'j>> {
    let name = job_name(&job.spec);
    let raw = file.entries[job.idx].record.as_deref();
    let raw = raw.ok_or_else(|| UsageError::new(format!("{}: no record", name)))?;
    job.job
        .stored(raw)
        .with_context(|| format!("{}: reading the stored record", name))
}

/// The job's record studied into its entry's result (not saved).
fn study_into(
    inv: &Invocation,
    file: &mut ResultFile,
    job: &Job,
    record: &dyn JobRecord,
) -> Result<()> {
    let idx = job.idx;
    let sctx = StudyCtx::new(inv.reports_dir.clone(), file.entries[idx].period);
    let result = record
        .study(&sctx)
        .with_context(|| format!("{}: study failed", job_name(&job.spec)))?;
    file.entries[idx].result = Some(result);
    Ok(())
}

/// Applies what a finished record hands to the later jobs (see [`bench::Bench::applies`]), after its
/// run or when it is reused.
fn apply_record(
    name: &str,
    record: &dyn JobRecord,
    session: Option<&mut Session>,
    reused: bool,
) -> Result<()> {
    let Some(apply) = record
        .applies()
        .with_context(|| format!("{}: reading the parameters to apply", name))?
    else {
        return Ok(());
    };
    let Some(session) = session else {
        // Only a reused record gets here (a bench that applies needs the host to run): no job
        // of this invocation touches the host, so none would see the parameters, and a commit
        // wrote them to bench.json when the record was made.
        log::info!(
            "{}: parameters not applied again: no job of this run uses them",
            name
        );
        return Ok(());
    };
    let (what, commit) = match &apply {
        Apply::Hashd { commit, .. } => ("hashd", *commit),
        Apply::IoCost { commit, .. } => ("io.cost", *commit),
    };
    log::info!(
        "{}: {} {} parameters{}",
        name,
        if commit { "committing" } else { "applying" },
        what,
        if reused { " of the reused record" } else { "" }
    );
    match apply {
        Apply::Hashd { knobs, commit } => session.apply_hashd(knobs, commit),
        Apply::IoCost { knobs, commit } => session.apply_iocost(knobs, commit),
    }
    .with_context(|| format!("{}: applying the {} parameters", name, what))
}

/// What a re-run of a job whose record is already complete logs, incremental or not.
const REUSING: &str = "already complete, reusing the record in the result file";

/// Runs one job; returns the final record (stored in the entry).
fn execute<'j>(
    file: &mut ResultFile,
    spec: &JobSpec,
    job: &'j dyn BenchJob,
    idx: usize,
    prev: Option<Box<RawValue>>,
    cfg: &RunConfig,
    sysinfo: SysinfoSrc,
) -> Result<Box<dyn JobRecord + 'j>> {
    let name = job_name(spec);
    let start = now();
    let old_period = file.entries[idx].period;
    let period_start = match &prev {
        Some(_) if old_period.0 > 0 => old_period.0.min(start),
        _ => start,
    };
    // A complete record of an incremental bench is handed to the bench, which decides whether
    // anything is left; what happened is logged once it's known (below).
    let prev_complete = prev.is_some() && !file.entries[idx].incomplete;
    match &prev {
        None => log::info!("{}: starting", name),
        Some(_) if prev_complete => {
            log::debug!("{}: checking the completed record for remaining work", name)
        }
        Some(_) => log::info!(
            "{}: continuing from the checkpoint in the result file",
            name
        ),
    }
    let mut ctx = RunCtx::new(JobStart {
        spec: spec.clone(),
        prev_record: prev,
        dir: cfg.dir.clone(),
        file,
        idx,
        period_start,
        sysinfo,
        quick: cfg.quick,
    });
    let display = crate::logging::progress::job(&format_spec_of(spec));
    let run = job.run(&mut ctx);
    drop(display);
    let end = ctx.finish(run.is_ok())?;
    let record = run.with_context(|| format!("{} failed", name))?;
    // Sampled at the job's end, as upstream does: the iocost state, swappiness and zswap the
    // job left are what its numbers were measured under.
    let sysinfo = end
        .sysinfo
        .current()
        .with_context(|| format!("{}: reading the host's sysinfo", name))?;
    let file = end.file;
    let raw = record.to_raw()?;
    // Compared as JSON values: the stored record may be laid out otherwise (an older version's).
    let value = |r: &RawValue| serde_json::from_str::<serde_json::Value>(r.get()).ok();
    let unchanged = end
        .prev_record
        .as_deref()
        .and_then(value)
        .is_some_and(|prev| value(&raw) == Some(prev));
    let e: &mut Entry = &mut file.entries[idx];
    if unchanged && !e.incomplete {
        // Nothing left to do: keep the entry (period, sysinfo) as it was.
        log::info!("{}: {}", name, REUSING);
    } else {
        if prev_complete {
            log::info!("{}: extended the completed record in the result file", name);
        }
        e.incomplete = false;
        e.record = Some(raw);
        e.period = (period_start, now().max(period_start));
        e.sysinfo = sysinfo;
    }
    Ok(record)
}

/// The short report of a finished job: exactly what `summary` prints for the entry
/// (separator, header block, body), rendered by the same `format_entry`.
fn summary_of(entry: &Entry) -> Result<String> {
    let opts = FormatOpts {
        full: false,
        ..Default::default()
    };
    let mut out = String::new();
    if !crate::bench::results::show::format_entry(&mut out, entry, &opts)? {
        // Can't happen for a bench that just ran (it has a formatter), but don't print a
        // header-less body if it ever does.
        log::warn!(
            "{}: this version can't format {} results",
            job_name(&entry.spec),
            entry.spec.kind
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
