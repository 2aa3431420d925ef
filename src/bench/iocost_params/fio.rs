//! `engine=fio`: a step's job run by fio's libaio engine, as upstream's script runs its steps,
//! and fio's JSON read as that script reads it: the bandwidth of all of fio's jobs summed, the
//! latency percentile of the first job. The job is the same `IoJob` our engine would run
//! (`measure`), turned into fio's options, so only the engine differs between the two.

use super::measure::Measured;
use crate::workload::ioengine::job::{IoJob, Rate, Stop};
use crate::workload::ioengine::pace::Arrivals;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// fio on `PATH`, or a usage error naming the fix.
pub fn find() -> Result<PathBuf> {
    match crate::util::proc::which("fio") {
        Some(p) => Ok(p),
        None => crate::usage_bail!(
            "iocost-params: engine=fio needs fio, which is not on PATH (install it, e.g. \
             `apt install fio`, or run with engine=ours)"
        ),
    }
}

/// fio's options for `job`: upstream's script's own (`--name=coef`, libaio, O_DIRECT, time
/// based, `--numjobs`, `--iodepth`, `--rate_iops` per job) and what else the job asks for.
pub fn args(job: &IoJob) -> Result<Vec<String>, String> {
    let secs = match &job.stop {
        Stop::Time(d) if d.as_secs() > 0 && d.subsec_nanos() == 0 => d.as_secs(),
        other => return Err(format!("fio runs whole seconds, not {:?}", other)),
    };
    // fio splits `filename` at colons.
    let file = job.target.to_string_lossy().replace(':', "\\:");
    let mut a = vec![
        format!("--direct={}", job.direct as u8),
        "--ioengine=libaio".into(),
        "--name=coef".into(),
        format!("--filename={}", file),
        format!("--runtime={}", secs),
        "--time_based".into(),
        format!("--readwrite={}", job.rw_name()),
        format!("--iodepth={}", job.qd),
        format!("--blocksize={}", job.bs),
        format!("--numjobs={}", job.workers),
        "--eta=never".into(),
        "--output-format=json".into(),
    ];
    if job.read_pct > 0 && job.read_pct < 100 {
        a.push(format!("--rwmixread={}", job.read_pct));
    }
    let depth = |n: u32| if n == 0 { job.qd } else { n };
    if job.batch != 1 {
        a.push(format!("--iodepth_batch_submit={}", depth(job.batch)));
    }
    if job.reap != 1 {
        a.push(format!("--iodepth_batch_complete_max={}", depth(job.reap)));
    }
    if job.align != 0 && job.align != job.bs {
        a.push(format!("--blockalign={}", job.align));
    }
    if job.start > 0 {
        a.push(format!("--offset={}", job.start));
    }
    if job.end > 0 {
        a.push(format!("--size={}", job.end.saturating_sub(job.start)));
    }
    if !job.ramp.is_zero() {
        a.push(format!("--ramp_time={}ms", job.ramp.as_millis()));
    }
    // Our rate is the whole job's, fio's each of its jobs'.
    let per_job = |v: f64| (v / job.workers as f64).round().max(1.0) as u64;
    match job.rate {
        None => {}
        Some(Rate::Iops(v)) => a.push(format!("--rate_iops={}", per_job(v))),
        Some(Rate::Bps(v)) => a.push(format!("--rate={}", per_job(v))),
    }
    if job.rate.is_some() {
        match job.arrivals {
            Arrivals::Linear => {}
            Arrivals::Poisson => a.push("--rate_process=poisson".into()),
            Arrivals::Stratified => return Err("fio has no stratified arrivals".into()),
        }
    }
    Ok(a)
}

/// Runs `job` through `fio` (which dies with us) and reads its direction's numbers.
pub fn run(fio: &Path, job: &IoJob, write: bool) -> Result<Measured> {
    let args = args(job).map_err(|e| anyhow::anyhow!("engine=fio: {}", e))?;
    let mut cmd = Command::new(fio);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A group of its own: a terminal's Ctrl-C reaches us, whose exit then ends fio.
    crate::util::proc::die_with_parent(&mut cmd, true);
    log::debug!("iocost-params: {} {}", fio.display(), args.join(" "));
    let out = cmd
        .output()
        .with_context(|| format!("starting {}", fio.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty());
        bail!(
            "{} {}: {}",
            fio.display(),
            out.status,
            last.unwrap_or("no message")
        );
    }
    parse(&text, write).with_context(|| format!("reading the output of {}", fio.display()))
}

/// fio's JSON document (after any lines fio printed before it), `write`'s side of it.
pub fn parse(text: &str, write: bool) -> Result<Measured> {
    let start = match text.find("\n{") {
        _ if text.starts_with('{') => 0,
        Some(i) => i + 1,
        None => bail!("no JSON document in fio's output"),
    };
    let doc: Value = serde_json::from_str(&text[start..]).context("fio's JSON")?;
    let Some(jobs) = doc["jobs"].as_array().filter(|j| !j.is_empty()) else {
        bail!("fio's JSON has no jobs");
    };
    let dir = if write { "write" } else { "read" };
    let num = |v: &Value, what: &str| {
        v.as_f64()
            .with_context(|| format!("fio's JSON: {} is not a number", what))
    };
    let (mut iops, mut bw, mut ios, mut lat_sum) = (0.0, 0.0, 0.0, 0.0);
    for (i, j) in jobs.iter().enumerate() {
        let e = j["error"].as_i64().unwrap_or(0);
        if e != 0 {
            bail!("fio's job {} ended with error {}", i, e);
        }
        let d = &j[dir];
        iops += num(&d["iops"], "iops")?;
        bw += num(&d["bw_bytes"], "bw_bytes")?;
        let n = num(&d["total_ios"], "total_ios")?;
        ios += n;
        lat_sum += n * d["lat_ns"]["mean"].as_f64().unwrap_or(0.0);
    }
    if ios == 0.0 {
        bail!("fio completed no {} IOs", dir);
    }
    let first = &jobs[0][dir];
    let mut clat_pcts = Vec::new();
    if let Some(m) = first["clat_ns"]["percentile"].as_object() {
        for (k, v) in m {
            let p: f64 = k
                .parse()
                .with_context(|| format!("fio's JSON: percentile {:?}", k))?;
            clat_pcts.push((p, num(v, "a percentile's latency")? as u64));
        }
    }
    clat_pcts.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(Measured {
        engine: format!("{} libaio", doc["fio version"].as_str().unwrap_or("fio")),
        runtime_ns: (num(&first["runtime"], "runtime")? * 1e6) as u64,
        iops,
        bw_bytes: bw,
        lat_mean_ns: lat_sum / ios,
        clat_pcts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::iocost_params::measure::{self, Jobs, Step, FULL};

    /// fio's shape for one job: `iops`, `bw`, `ios` of `dir`, the clat percentiles given.
    fn job(dir: &str, iops: f64, bw: f64, ios: u64, lat: f64, p50: u64, p95: u64) -> Value {
        let side = serde_json::json!({
            "iops": iops, "bw_bytes": bw, "total_ios": ios, "runtime": 60085,
            "lat_ns": {"mean": lat},
            "clat_ns": {"mean": lat, "percentile": {"50.000000": p50, "95.000000": p95,
                                                    "99.000000": p95 * 2}},
        });
        let zero = serde_json::json!({"iops": 0.0, "bw_bytes": 0, "total_ios": 0, "runtime": 0,
                                      "lat_ns": {"mean": 0.0}, "clat_ns": {"mean": 0.0}});
        let (r, w) = if dir == "read" {
            (side, zero)
        } else {
            (zero, side)
        };
        serde_json::json!({"jobname": "coef", "error": 0, "read": r, "write": w})
    }

    #[test]
    fn the_steps_are_upstreams_command_lines() {
        let p = Path::new("/d/scratch/iocost-testfile");
        let up = |s: Step, rot: bool, r: u64| args(&s.job(p, rot, &FULL, r, Jobs::Upstream));
        let a = up(Step::Rbps, false, 0).unwrap();
        assert_eq!(
            a.join(" "),
            "--direct=1 --ioengine=libaio --name=coef --filename=/d/scratch/iocost-testfile \
             --runtime=60 --time_based --readwrite=read --iodepth=1 --blocksize=134217728 \
             --numjobs=8 --eta=never --output-format=json"
        );
        let a = up(Step::Wseqiops, true, 0).unwrap();
        assert!(a.contains(&"--numjobs=1".into()) && a.contains(&"--readwrite=write".into()));
        assert!(a.contains(&"--iodepth=256".into()));
        assert!(a.contains(&"--iodepth_batch_submit=16".into()), "{:?}", a);
        // The latency runs: each of the 8 jobs at 90 % of the random IOPS, rounded down.
        let a = up(Step::Rlat, false, 10_001).unwrap();
        assert!(a.contains(&"--rate_iops=9000".into()), "{:?}", a);
        assert!(a.contains(&"--readwrite=randread".into()));
        assert!(!a.iter().any(|o| o.starts_with("--ramp_time")));
        // Our shapes run too: their ramp, their rate split over the jobs.
        let ours = Step::Wlat.job(p, false, &FULL, 10_000, Jobs::Ours);
        let a = args(&ours).unwrap();
        assert!(a.contains(&"--ramp_time=5000ms".into()), "{:?}", a);
        assert!(a.contains(&"--rate_iops=2250".into()), "{:?}", a);
    }

    #[test]
    fn jobs_fio_cant_run_are_refused() {
        let mut j = IoJob::new("/x:y".into());
        assert!(args(&j).unwrap().contains(&"--filename=/x\\:y".into()));
        j.stop = Stop::Bytes(1 << 20);
        assert!(args(&j).unwrap_err().contains("whole seconds"));
        j.stop = Stop::Time(std::time::Duration::from_millis(1500));
        assert!(args(&j).is_err());
        j.stop = Stop::Time(std::time::Duration::from_secs(2));
        j.rate = Some(Rate::Iops(100.0));
        j.arrivals = Arrivals::Stratified;
        assert!(args(&j).unwrap_err().contains("stratified"));
        j.arrivals = Arrivals::Poisson;
        assert!(args(&j).unwrap().contains(&"--rate_process=poisson".into()));
    }

    #[test]
    fn output_is_read_as_upstreams_script_reads_it() {
        let doc = serde_json::json!({
            "fio version": "fio-3.33",
            "jobs": [job("read", 1000.0, 4096000.0, 60000, 2.0e8, 240_000_000, 460_000_000),
                     job("read", 900.0, 3686400.0, 30000, 3.5e8, 250_000_000, 530_000_000)],
        });
        // fio may print notes before the document.
        let text = format!(
            "note: something\n{}",
            serde_json::to_string_pretty(&doc).unwrap()
        );
        let m = parse(&text, false).unwrap();
        assert_eq!(m.engine, "fio-3.33 libaio");
        assert_eq!((m.iops, m.bw_bytes), (1900.0, 7782400.0));
        assert_eq!(m.runtime_ns, 60_085_000_000);
        // The mean over every IO; the percentiles the first job's.
        assert_eq!(m.lat_mean_ns, 2.5e8);
        assert_eq!(m.clat_at(95.0), 460_000_000);
        assert_eq!(measure::lat_target(95.0, &m), 690_000);
        assert_eq!(measure::value(Step::Rrandiops, &m), 1900);
        // The other direction completed nothing: an error, not a zero model.
        let e = parse(&text, true).unwrap_err();
        assert!(format!("{:#}", e).contains("no write IOs"), "{:#}", e);
    }

    #[test]
    fn broken_output_is_an_error() {
        for (text, what) in [
            ("", "no JSON"),
            ("{\"jobs\": []}", "no jobs"),
            ("{\"jobs\": [{\"error\": 5}]}", "error 5"),
            (
                "{\"jobs\": [{\"read\": {\"iops\": \"x\"}}]}",
                "not a number",
            ),
            ("{", "fio's JSON"),
        ] {
            let e = format!("{:#}", parse(text, false).unwrap_err());
            assert!(e.contains(what), "{:?}: {}", text, e);
        }
    }
}
