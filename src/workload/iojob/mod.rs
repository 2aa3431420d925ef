//! An IO engine job in a process of its own (`resctl-bench __io-job`), so that a cgroup holds
//! it: the qos-study's services each run one, side by side in sibling cgroups. It reads the
//! job from a file, waits for a line on stdin (its parent's go once it is in its cgroup),
//! appends the running totals to a samples file once a second, ends early on SIGTERM or SIGINT
//! (what it measured until then is the result) and writes its result file.

pub mod handle;

use crate::workload::ioengine::job::IoJob;
use crate::workload::ioengine::steady::Counted;
use anyhow::{Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// One IO engine job in a process of its own (a cgroup holds it), until done or SIGTERM
#[derive(Debug, Clone, Args)]
pub struct IoJobArgs {
    /// The job (the engine's JSON)
    #[arg(long, value_name = "FILE")]
    pub job: PathBuf,
    /// Running totals, one JSON line a second
    #[arg(long, value_name = "FILE")]
    pub samples: PathBuf,
    /// The engine's result, written at the end
    #[arg(long, value_name = "FILE")]
    pub result: PathBuf,
}

/// The running totals after `ms` milliseconds: IOs, bytes and latency sum since the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub ms: u64,
    pub ios: u64,
    pub bytes: u64,
    pub lat_sum_ns: u64,
}

pub fn run(a: &IoJobArgs) -> Result<()> {
    let text = std::fs::read_to_string(&a.job)
        .with_context(|| format!("reading the job {}", a.job.display()))?;
    let job: IoJob = serde_json::from_str(&text)
        .with_context(|| format!("reading the job {}", a.job.display()))?;
    let abort = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, abort.clone()).context("setting up signals")?;
    }
    // The parent's go: it moves us into our cgroup first, so no IO is charged elsewhere.
    let mut go = String::new();
    std::io::stdin()
        .read_line(&mut go)
        .context("waiting for the go on stdin")?;
    let mut samples = std::fs::File::create(&a.samples)
        .with_context(|| format!("creating {}", a.samples.display()))?;
    let mut failed = None;
    let r = crate::workload::ioengine::run::run_sampled(&job, &abort, &mut |ms, c: Counted| {
        let s = Sample {
            ms,
            ios: c.ios,
            bytes: c.bytes,
            lat_sum_ns: c.lat_sum_ns,
        };
        let line = serde_json::to_string(&s).unwrap_or_default();
        if let Err(e) = writeln!(samples, "{}", line) {
            failed.get_or_insert(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e).with_context(|| format!("writing {}", a.samples.display()));
    }
    let json = serde_json::to_vec(&r).context("serializing the result")?;
    let tmp = crate::util::atomic::temp_path(&a.result);
    crate::util::atomic::write_replacing(&a.result, &tmp, "io job result", |f| f.write_all(&json))
}
