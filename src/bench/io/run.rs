//! Running an `io` entry's jobs: one after another, and those marked `together` at the same
//! time as the job before them, each on its own workers.

use super::jobfile::FileJob;
use super::props::IoProps;
use super::record::{IoRecord, NamedIo};
use crate::bench::contract::ctx::RunCtx;
use crate::units::format_size;
use crate::util::now;
use crate::workload::ioengine::job::{IoJob, Stop};
use crate::workload::ioengine::result::{si, size_text, IoResult};
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where the job runs: `target=`, or the test file under `<dir>/scratch`, written first when
/// missing (then `true`).
pub fn prepare_target(ctx: &mut RunCtx, props: &IoProps) -> Result<(PathBuf, bool)> {
    Ok(match &props.target {
        Some(t) => (t.clone(), false),
        None => {
            let path = ctx.scratch_dir()?.join("io-testfile");
            crate::logging::progress::phase("test file");
            let written = crate::workload::ioengine::testfile::ensure(
                &path,
                props.file_size,
                props.job.direct,
            )
            .with_context(|| format!("the test file {}", path.display()))?;
            (path, written)
        }
    })
}

/// Refuses, before any IO, a run whose IO buffers (queue depth × workers × block size per job,
/// the jobs of a run together) take more memory than the host has available: each value may
/// be fine alone while together they would bring in the OOM killer.
fn check_buffers(jobs: &[FileJob]) -> Result<()> {
    let hp = crate::system::HostPaths::real();
    let Some(avail) = crate::system::sysinfo::read_meminfo(&hp)
        .ok()
        .and_then(|m| m.get("MemAvailable").copied())
    else {
        return Ok(());
    };
    for run in runs(jobs) {
        let need: u128 = run
            .iter()
            .map(|j| {
                let job = &j.props.job;
                job.qd as u128 * job.workers as u128 * job.bs as u128
            })
            .sum();
        if need > avail as u128 {
            crate::usage_bail!(
                "io{}: the IO buffers (qd x workers x bs) take {}, more than the {} this host \
                 has available; lower qd, workers or bs",
                if run[0].name == "io" {
                    String::new()
                } else {
                    format!(" {}", run[0].name)
                },
                format_size(need.min(u64::MAX as u128) as f64),
                format_size(avail as f64)
            );
        }
    }
    Ok(())
}

/// The jobs in runs: each run is a job and those after it marked `together`.
fn runs(jobs: &[FileJob]) -> Vec<&[FileJob]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=jobs.len() {
        if i == jobs.len() || !jobs[i].together {
            out.push(&jobs[start..i]);
            start = i;
        }
    }
    out
}

/// The progress line of a run and how long it takes.
fn show(run: &[(String, IoJob)]) {
    let what: Vec<String> = run
        .iter()
        .map(|(name, j)| {
            format!(
                "{}{} bs={} qd={} on {}",
                if name.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", name)
                },
                j.rw_name(),
                size_text(j.bs),
                j.qd,
                j.target.display()
            )
        })
        .collect();
    crate::logging::progress::phase(what.join(" + "));
    let secs = run.iter().filter_map(|(_, j)| match j.stop {
        Stop::Time(d) => Some((d + j.ramp).as_secs_f64()),
        Stop::Bytes(_) => None,
    });
    crate::logging::progress::eta(secs.reduce(f64::max));
}

/// Runs the jobs of one run at the same time; the first failure stops the others.
fn run_together(run: &[(String, IoJob)]) -> Result<Vec<IoResult>> {
    let abort = AtomicBool::new(false);
    if let [(_, job)] = run {
        return crate::workload::ioengine::run::run(job, &abort).map(|r| vec![r]);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = run
            .iter()
            .map(|(name, job)| {
                let abort = &abort;
                s.spawn(move || {
                    let r = crate::workload::ioengine::run::run(job, abort)
                        .with_context(|| format!("io job {}", name));
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("an io job's thread panicked"))?
            })
            .collect()
    })
}

fn log_result(name: &str, io: &IoResult) {
    // p99 of each direction that did IO (a write-only job's read side is all zeros).
    let p99 = |d: &crate::workload::ioengine::stats::DirOut| {
        d.clat
            .percentiles
            .iter()
            .find(|p| p.0 == "99.000000")
            .map(|p| p.1 / 1000)
            .filter(|_| d.clat.n > 0)
    };
    let clat = match (p99(&io.read), p99(&io.write)) {
        (Some(r), Some(w)) => format!("clat p99 read {} µs, write {} µs", r, w),
        (Some(x), None) | (None, Some(x)) => format!("clat p99 {} µs", x),
        (None, None) => "no IO completed".to_string(),
    };
    log::info!(
        "io{}: {} IOPS, {}/s, {} ({})",
        if name.is_empty() {
            String::new()
        } else {
            format!(" {}", name)
        },
        si(io.read.iops + io.write.iops),
        format_size(io.read.bw_bytes + io.write.bw_bytes),
        clat,
        io.engine
    );
}

/// The results a checkpoint of this job file kept for `run` (starting at job `at`): each
/// job of the run with the same name and the same job as run then.
fn kept(prev: &[NamedIo], at: usize, run: &[(String, IoJob)]) -> Option<Vec<NamedIo>> {
    let old = prev.get(at..at + run.len())?;
    old.iter()
        .zip(run)
        .all(|(o, (name, job))| o.name == *name && o.io.job == *job)
        .then(|| old.to_vec())
}

/// Runs `jobs` (one from a spec, or a job file's — whose text has the SHA-1 `sha1` — when
/// `named`) and returns the record. A job file's record is checkpointed after each run, and a
/// run the checkpoint holds is kept.
pub fn run_jobs(
    ctx: &mut RunCtx,
    jobs: &[FileJob],
    named: bool,
    sha1: Option<String>,
) -> Result<IoRecord> {
    check_buffers(jobs)?;
    let prev: Vec<NamedIo> = match named {
        true => ctx.prev_record::<IoRecord>().map_or(Vec::new(), |r| r.jobs),
        false => Vec::new(),
    };
    let mut rec = IoRecord {
        period: (now(), 0),
        testfile_written: false,
        io: None,
        jobs: Vec::new(),
        // In every checkpoint too: a resume links only to a record of the same file.
        jobs_sha1: sha1,
    };
    let all = runs(jobs);
    for (i, run) in all.iter().enumerate() {
        let mut ready = Vec::new();
        for fj in run.iter() {
            let (target, w) = prepare_target(ctx, &fj.props)?;
            rec.testfile_written |= w;
            let mut job = fj.props.job.clone();
            job.target = target;
            ready.push((
                if named {
                    fj.name.clone()
                } else {
                    String::new()
                },
                job,
            ));
        }
        if let Some(old) = kept(&prev, rec.jobs.len(), &ready) {
            log::info!("io: {} measured before the checkpoint, kept", ready[0].0);
            rec.jobs.extend(old);
            continue;
        }
        show(&ready);
        for (fj, io) in run.iter().zip(run_together(&ready)?) {
            log_result(if named { &fj.name } else { "" }, &io);
            rec.jobs.push(NamedIo {
                name: fj.name.clone(),
                together: fj.together,
                io,
            });
        }
        if named && i + 1 < all.len() {
            rec.period.1 = now();
            ctx.checkpoint(&rec)?;
        }
    }
    rec.period.1 = now();
    if !named {
        rec.io = rec.jobs.pop().map(|j| j.io);
    }
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_keeps_a_run_only_with_the_same_names_and_jobs() {
        let mut job = IoJob::new("/t".into());
        job.stop = Stop::Time(std::time::Duration::from_millis(100));
        let io = crate::workload::ioengine::sim::run(&job, 1 << 20, |_| 100_000).unwrap();
        let named = |n: &str| NamedIo {
            name: n.into(),
            together: false,
            io: io.clone(),
        };
        let prev = [named("a"), named("b")];
        let ready = |n: &str, j: &IoJob| vec![(n.to_string(), j.clone())];
        assert_eq!(kept(&prev, 1, &ready("b", &job)).map(|k| k.len()), Some(1));
        // Another name, another job, or a run the checkpoint doesn't reach: run it again.
        assert!(kept(&prev, 1, &ready("c", &job)).is_none());
        let mut other = job.clone();
        other.qd = 2;
        assert!(kept(&prev, 1, &ready("b", &other)).is_none());
        assert!(kept(&prev, 2, &ready("b", &job)).is_none());
        // The stored job reads back equal (floats and all) after the result file's JSON.
        let back: NamedIo =
            serde_json::from_str(&serde_json::to_string(&prev[0]).unwrap()).unwrap();
        assert!(kept(&[back], 0, &ready("a", &job)).is_some());
    }

    #[test]
    fn together_jobs_join_the_run_before_them() {
        let text = "[[job]]\nname=\"a\"\n[[job]]\nname=\"b\"\ntogether=true\n[[job]]\nname=\"c\"\n[[job]]\nname=\"d\"\n[[job]]\nname=\"e\"\ntogether=true\n[[job]]\nname=\"f\"\ntogether=true\n";
        let jobs = super::super::jobfile::parse(text, &Default::default()).unwrap();
        let names: Vec<Vec<&str>> = runs(&jobs)
            .iter()
            .map(|r| r.iter().map(|j| j.name.as_str()).collect())
            .collect();
        assert_eq!(names, [vec!["a", "b"], vec!["c"], vec!["d", "e", "f"]]);
    }
}
