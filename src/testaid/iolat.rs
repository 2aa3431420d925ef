//! `__iolat`: runs an IO latency source for a few seconds, optionally next to a 4 KiB O_DIRECT
//! random-read load on the device, and prints per-second read/write p50/p99 (stderr) and a
//! JSON summary (stdout). The VM tests use it to compare disk profiles.

use crate::cli::testaid::IoLatArgs;
use crate::report::diskstats::{open_best, DiskStatsSource};
use crate::report::iolat_source::{IoLatSample, IoLatSource};
use crate::report::tracefs::{ReadMode, TraceFsSource, READER_COMM};
use crate::system::change_journal::NoJournal;
use crate::system::HostPaths;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Serialize)]
struct Second {
    read_p50: f64,
    read_p99: f64,
    reads: u64,
    read_mean: f64,
    write_p50: f64,
    write_p99: f64,
    writes: u64,
}

#[derive(Debug, Serialize)]
struct Summary {
    source: String,
    device: String,
    devnr: String,
    secs: u64,
    unavailable: bool,
    /// Median over the seconds with reads of the per-second read p50 (seconds).
    read_p50_median: f64,
    read_p99_median: f64,
    /// Median of the per-second mean read latency (the only figure diskstats has).
    read_mean_median: f64,
    /// Reads the source saw per second.
    read_iops: f64,
    per_sec: Vec<Second>,
    #[serde(skip_serializing_if = "Option::is_none")]
    load: Option<crate::workload::randread::RandRead>,
    counters: std::collections::BTreeMap<String, u64>,
    /// CPU time (user + system) of the tracefs reader thread per second of wall time.
    reader_cpu_util: f64,
    /// No tracefs instance of this process is left after the source was dropped.
    instance_removed: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn pct(s: &IoLatSample, t: &str, p: &str) -> f64 {
    s.pcts.get(t).and_then(|m| m.get(p)).copied().unwrap_or(0.0)
}

fn count(s: &IoLatSample, t: &str) -> u64 {
    s.hists
        .as_ref()
        .and_then(|h| h.get(t))
        .map_or(0, |h| h.total())
}

/// CPU seconds (user + system) used by this process's threads named `comm`.
fn thread_cpu_secs(comm: &str) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let Ok(rd) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut total = 0.0;
    for ent in rd.flatten() {
        let p = ent.path();
        if std::fs::read_to_string(p.join("comm")).map_or(true, |c| c.trim() != comm) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(p.join("stat")) else {
            continue;
        };
        // Fields after the parenthesized comm: state is field 3, utime 14, stime 15.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        total += (ticks(11) + ticks(12)) / tck;
    }
    total
}

fn show_formats(hp: &HostPaths) {
    let root = match crate::report::tracefs::tracefs_root(hp) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{:#}", e);
            return;
        }
    };
    let files = ["header_page", "header_event"]
        .iter()
        .map(|f| root.join("events").join(f))
        .chain(
            ["block_rq_issue", "block_rq_complete", "block_rq_requeue"]
                .iter()
                .map(|ev| root.join("events/block").join(ev).join("format")),
        );
    for p in files {
        match crate::report::tracefs::read_in_one(&p) {
            Ok(t) => eprintln!("== {}\n{}", p.display(), t),
            Err(e) => eprintln!("== {}: {}", p.display(), e),
        }
    }
}

/// The device to watch (`--dev`, else the VM's scratch disk): its name and `MAJ:MIN`.
fn device(a: &IoLatArgs, hp: &HostPaths) -> Result<(String, String)> {
    Ok(match &a.dev {
        Some(n) => {
            let p = hp.path(format!("sys/class/block/{}/dev", n));
            let t = std::fs::read_to_string(&p)
                .with_context(|| format!("--dev {:?}: reading {}", n, p.display()))?;
            (n.clone(), t.trim().to_string())
        }
        None => {
            let d = crate::testaid::probe::scratch_device()
                .context("no --dev given and not in a resctl-bench VM")?;
            (d.name, d.maj_min)
        }
    })
}

/// The latency source `--source` names.
fn open_source(which: &str, hp: &HostPaths, devnr: (u32, u32)) -> Result<Box<dyn IoLatSource>> {
    Ok(match which {
        "auto" => open_best(hp, devnr)?,
        "tracefs" => Box::new(TraceFsSource::open(hp, devnr)?),
        "tracefs-text" => Box::new(TraceFsSource::open_with(
            hp,
            devnr,
            ReadMode::Text,
            &mut NoJournal,
        )?),
        "diskstats" => Box::new(DiskStatsSource::open(hp, devnr)?),
        other => crate::usage_bail!(
            "--source {:?} is not a latency source (accepted: auto, tracefs, tracefs-text, diskstats)",
            other
        ),
    })
}

/// One sample a second for `secs` seconds from `start`, each also printed; whether any said
/// the latencies were unavailable.
fn sample_secs(
    src: &mut dyn IoLatSource,
    start: Instant,
    secs: u64,
) -> Result<(Vec<Second>, bool)> {
    let mut per_sec = Vec::new();
    let mut unavailable = false;
    for i in 1..=secs {
        let at = start + Duration::from_secs(i);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        let s = src.sample()?;
        unavailable |= s.unavailable;
        let sec = Second {
            read_p50: pct(&s, "read", "50"),
            read_p99: pct(&s, "read", "99"),
            reads: count(&s, "read"),
            read_mean: s.means.get("read").copied().unwrap_or(0.0),
            write_p50: pct(&s, "write", "50"),
            write_p99: pct(&s, "write", "99"),
            writes: count(&s, "write"),
        };
        eprintln!(
            "[{:>3}s] read p50 {:>9.1}us p99 {:>9.1}us mean {:>9.1}us n {:>6} | write p50 {:>9.1}us p99 {:>9.1}us n {:>6}",
            i,
            sec.read_p50 * 1e6,
            sec.read_p99 * 1e6,
            sec.read_mean * 1e6,
            sec.reads,
            sec.write_p50 * 1e6,
            sec.write_p99 * 1e6,
            sec.writes
        );
        per_sec.push(sec);
    }
    Ok((per_sec, unavailable))
}

pub fn run(a: &IoLatArgs) -> Result<()> {
    let hp = HostPaths::real();
    if a.show_formats {
        show_formats(&hp);
    }
    let (name, majmin) = device(a, &hp)?;
    let devnr = crate::system::blockdev::parse_devnr(&majmin)
        .with_context(|| format!("bad device number {:?} of {}", majmin, name))?;
    let mut src = open_source(&a.source, &hp, devnr)?;
    let load = match a.load.as_deref() {
        None => None,
        Some("randread") => {
            let target = Path::new("/dev").join(&name);
            let (dur, jobs) = (Duration::from_secs(a.secs), a.jobs);
            Some(std::thread::spawn(move || {
                crate::workload::randread::randread(&target, dur, jobs)
            }))
        }
        Some(other) => crate::usage_bail!("--load {:?}: only randread is accepted", other),
    };
    // Discard anything before the start.
    src.sample()?;
    let (start, cpu0) = (Instant::now(), thread_cpu_secs(READER_COMM));
    let (per_sec, unavailable) = sample_secs(&mut *src, start, a.secs)?;
    let wall = start.elapsed().as_secs_f64();
    let reader_cpu_util = (thread_cpu_secs(READER_COMM) - cpu0) / wall;
    let load = match load {
        None => None,
        Some(h) => Some(
            h.join()
                .map_err(|_| anyhow::anyhow!("the load thread panicked"))??,
        ),
    };
    let with_reads = |f: fn(&Second) -> f64| -> Vec<f64> {
        per_sec
            .iter()
            .filter(|s| s.reads > 0 || s.read_mean > 0.0)
            .map(f)
            .collect()
    };
    let reads: u64 = per_sec.iter().map(|s| s.reads).sum();
    let counters = src
        .counters()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let summary = Summary {
        source: src.name().to_string(),
        device: name,
        devnr: majmin,
        secs: a.secs,
        unavailable,
        read_p50_median: median(with_reads(|s| s.read_p50)),
        read_p99_median: median(with_reads(|s| s.read_p99)),
        read_mean_median: median(with_reads(|s| s.read_mean)),
        read_iops: reads as f64 / wall,
        per_sec,
        load,
        counters,
        reader_cpu_util,
        instance_removed: false,
    };
    drop(src);
    let mut summary = summary;
    summary.instance_removed = crate::report::tracefs::tracefs_root(&hp).map_or(true, |r| {
        !r.join("instances")
            .join(format!(
                "{}{}",
                crate::report::tracefs::INSTANCE_PREFIX,
                std::process::id()
            ))
            .exists()
    });
    println!("{}", serde_json::to_string_pretty(&summary)?);
    if a.load.is_some() && summary.read_p50_median == 0.0 && summary.read_mean_median == 0.0 {
        bail!("the source saw no reads of the load");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }
}
