//! `__vm-scenario`: guest-side sequences the VM tests need inside one boot, printed as one JSON
//! object for the host-side test to assert on. Each drives the real binary (`/proc/self/exe`)
//! as a user would and reads the kernel knobs directly, never through the code under test.
//!
//! * `restore-after-kill`: gives swappiness, the IO scheduler, wbt and io.cost non-bench values,
//!   starts `run systest:hold=…`, SIGKILLs it as soon as its fix pass has changed all four,
//!   then opens the restore journal of the same `--dir` (what every start does first) and
//!   reads the knobs again; finally a complete run must leave them as they were, too.
//! * `balloon`: `run systest` under `--mem-profile P`; reports what the job saw while the
//!   balloon was up, and whether any balloon process or `balloon.slice` is left afterwards.
//! * `reports`: `run systest:hold=…` with `--swappiness 70`; while it holds, where the run's
//!   process is (cgroup), swappiness and its tracefs instance; afterwards the entry's period,
//!   how many `report.d` files fall in it and what one of them says, the summary, and what the
//!   run left behind. Then a second run is stopped with SIGTERM while it holds, and the same
//!   leftovers are read. `--run-result FILE` sends the first run's result there (e.g. into the
//!   shared directory, so that `vm` binds FILE's report directory at `WORK/report.d`).
//! * `system`: `deps --fix`, then `restore-after-kill` (in WORK/restore), `balloon` (in
//!   WORK/balloon) and `reports` (in WORK, whose `report.d` `vm` may bind) in one boot, as one
//!   object with a member for each.
//! * `iocost-qos`: see `vm_iocost_qos` (with protection's parts from `vm_protection`).
//! * `seq`: the `--cmd` command lines one after another with `--dir WORK` (their output passed
//!   on), so several runs share one guest and its scratch disk (bench.json, testfiles); stops
//!   at the first that fails. Measurement scripts use it.
//! * `fio-compare`: see `fio_compare` (scripts/fio-compare).
//! * `curve-fio`: see `curve_fio` (scripts/curve-compare).
//! * `fast-compare`: see `fast_compare` (scripts/io-fast-compare).

use super::guest::{
    bench_cmd, bench_cmd_to, exists, procs_with_arg, read, KnobPaths, Knobs, SLICES,
};
use super::probe::scratch_device;
use crate::cli::testaid::{Scenario, ScenarioArgs};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Serialize)]
struct RestoreAfterKill {
    device: String,
    /// The knobs before the killed run started.
    before: Knobs,
    /// Right after the SIGKILL.
    during: Knobs,
    /// restore.json as the killed run left it.
    journal_after_kill: Option<serde_json::Value>,
    /// After opening the journal of the same directory, as the next start does.
    after_next_start: Knobs,
    journal_exists_after_next_start: bool,
    slices_after_next_start: Vec<String>,
    /// A complete run afterwards: its exit status, stdout (summary) and the knobs after it.
    rerun_status: Option<i32>,
    rerun_stdout: String,
    after_rerun: Knobs,
}

fn restore_after_kill(work: &Path) -> Result<serde_json::Value> {
    let dev = scratch_device()?;
    let paths = KnobPaths::new(&dev);
    let guest = paths.read()?;
    // Values a bench run changes: swappiness below 60, a real scheduler, wbt on, io.cost off.
    let avail = read(&paths.scheduler)?;
    let sched = ["mq-deadline", "kyber", "bfq"]
        .into_iter()
        .find(|s| {
            avail
                .split_whitespace()
                .any(|a| a.trim_matches(['[', ']']) == *s)
        })
        .with_context(|| format!("no IO scheduler other than none in {:?}", avail))?;
    let wanted = Knobs {
        swappiness: "10".into(),
        scheduler: sched.into(),
        wbt_lat_usec: if guest.wbt_lat_usec == "0" {
            "75000".into()
        } else {
            guest.wbt_lat_usec.clone()
        },
        iocost_enable: "0".into(),
        iocost_qos: String::new(),
    };
    paths.write(&wanted)?;
    let before = paths.read()?;
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;

    let mut child = bench_cmd(work, &["-M", "off", "run", "systest:hold=300"])
        .spawn()
        .context("starting the run to kill")?;
    let fixed = |k: &Knobs| {
        k.swappiness == "60"
            && k.scheduler == "none"
            && k.wbt_lat_usec == "0"
            && k.iocost_enable == "1"
    };
    let start = Instant::now();
    loop {
        if fixed(&paths.read()?) {
            break;
        }
        if let Some(st) = child.try_wait()? {
            bail!("the run ended ({}) before changing all four knobs", st);
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("the run didn't change all four knobs within 120s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().context("killing the run")?;
    child.wait()?;
    let during = paths.read()?;
    let jf = work.join(crate::system::restore::JOURNAL_FILE);
    let journal_after_kill = match std::fs::read_to_string(&jf) {
        Ok(t) => {
            Some(serde_json::from_str(&t).with_context(|| format!("parsing {}", jf.display()))?)
        }
        Err(_) => None,
    };

    // The next start: the first thing every run does is opening the journal.
    let journal = crate::system::restore::Journal::open(work)?;
    let after_next_start = paths.read()?;
    let journal_exists_after_next_start = jf.exists();
    drop(journal);
    let slices_after_next_start = SLICES
        .iter()
        .filter(|s| exists(s))
        .map(|s| s.to_string())
        .collect();

    let out = bench_cmd(work, &["-M", "off", "run", "systest:id=rerun"])
        .output()
        .context("running systest to completion")?;
    let after_rerun = paths.read()?;
    paths.write(&guest)?;
    Ok(serde_json::to_value(RestoreAfterKill {
        device: dev.name,
        before,
        during,
        journal_after_kill,
        after_next_start,
        journal_exists_after_next_start,
        slices_after_next_start,
        rerun_status: out.status.code(),
        rerun_stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        after_rerun,
    })?)
}

fn mem_available() -> Result<u64> {
    let mi = crate::system::sysinfo::read_meminfo(&crate::system::HostPaths::real())?;
    mi.get("MemAvailable")
        .copied()
        .context("no MemAvailable in /proc/meminfo")
}

/// Processes whose command line mentions `__balloon`.
fn balloon_procs() -> Vec<u32> {
    procs_with_arg("__balloon")
}

#[derive(Debug, Serialize)]
struct BalloonScenario {
    mem_total: u64,
    mem_available_before: u64,
    run_status: Option<i32>,
    run_stdout: String,
    /// The systest record (MemAvailable and balloon.slice while the balloon was up).
    record: serde_json::Value,
    /// sysinfo.mem of the entry.
    mem: serde_json::Value,
    mem_available_after: u64,
    balloon_procs_after: Vec<u32>,
    balloon_slice_after: bool,
}

fn balloon(work: &Path, profile: &str) -> Result<serde_json::Value> {
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let mi = crate::system::sysinfo::read_meminfo(&crate::system::HostPaths::real())?;
    let before = mem_available()?;
    let out = bench_cmd(work, &["-M", profile, "run", "systest"])
        .output()
        .context("running systest")?;
    // Let the kernel settle the freed memory's accounting.
    std::thread::sleep(Duration::from_millis(200));
    let after = mem_available()?;
    let rf = work.join("result.json");
    let entries: serde_json::Value = match std::fs::read_to_string(&rf) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("parsing {}", rf.display()))?,
        Err(_) => serde_json::Value::Null,
    };
    Ok(serde_json::to_value(BalloonScenario {
        mem_total: mi.get("MemTotal").copied().unwrap_or(0),
        mem_available_before: before,
        run_status: out.status.code(),
        run_stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        record: entries[0]["record"].clone(),
        mem: entries[0]["sysinfo"]["mem"].clone(),
        mem_available_after: after,
        balloon_procs_after: balloon_procs(),
        balloon_slice_after: exists("/sys/fs/cgroup/balloon.slice"),
    })?)
}

/// What a run left on the host after it ended.
#[derive(Debug, Serialize)]
struct Leftovers {
    swappiness: String,
    slices: Vec<String>,
    restore_json: bool,
    tracefs_instances: Vec<String>,
}

fn tracefs_instances() -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/sys/kernel/tracing/instances") else {
        return Vec::new();
    };
    let mut v: Vec<String> = rd
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(crate::report::tracefs::INSTANCE_PREFIX))
        .collect();
    v.sort();
    v
}

fn leftovers(work: &Path) -> Result<Leftovers> {
    Ok(Leftovers {
        swappiness: read(Path::new(SWAPPINESS))?,
        slices: SLICES
            .iter()
            .filter(|s| exists(s))
            .map(|s| s.to_string())
            .collect(),
        restore_json: work.join(crate::system::restore::JOURNAL_FILE).exists(),
        tracefs_instances: tracefs_instances(),
    })
}

/// What a holding run looks like from outside.
#[derive(Debug, Default, Serialize)]
struct Holding {
    /// `/proc/PID/cgroup` of the run.
    cgroup: String,
    swappiness: String,
    tracefs_instances: Vec<String>,
    /// Seconds until the run's first report appeared.
    first_report_after: f64,
}

const SWAPPINESS: &str = "/proc/sys/vm/swappiness";

/// Waits until the run has written a report (its setup is complete), then looks at it.
fn watch_holding(child: &mut std::process::Child, work: &Path) -> Result<Holding> {
    let link = work.join(crate::report::reporter::REPORT_LINK);
    let start = Instant::now();
    let _ = std::fs::remove_file(&link);
    loop {
        if link.exists() {
            break;
        }
        if let Some(st) = child.try_wait()? {
            bail!("the run ended ({}) before writing a report", st);
        }
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("no report within 120s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Holding {
        cgroup: read(Path::new(&format!("/proc/{}/cgroup", child.id())))?,
        swappiness: read(Path::new(SWAPPINESS))?,
        tracefs_instances: tracefs_instances(),
        first_report_after: start.elapsed().as_secs_f64(),
    })
}

#[derive(Debug, Serialize)]
struct ReportsScenario {
    swappiness_before: String,
    holding: Holding,
    run_status: Option<i32>,
    run_stdout: String,
    period: serde_json::Value,
    /// `report.d/<sec>.json` files with `sec` in the entry's period (inclusive).
    reports_in_period: u64,
    /// A report from the middle of the period: its swappiness, which units it has usages of,
    /// whether its IO latencies are unavailable (diskstats fallback), its io.cost QoS.
    mid_report: serde_json::Value,
    after: Leftovers,
    /// The second run, stopped with SIGTERM while holding.
    term_holding: Holding,
    term_status: Option<i32>,
    term_signal: Option<i32>,
    after_term: Leftovers,
}

fn reports(work: &Path, result: Option<&Path>) -> Result<serde_json::Value> {
    use std::os::unix::process::ExitStatusExt;
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let rf = result
        .map(Path::to_path_buf)
        .unwrap_or_else(|| work.join("result.json"));
    let swappiness_before = read(Path::new(SWAPPINESS))?;
    let run_args = ["-M", "off", "--swappiness", "70", "run", "systest:hold=6"];
    let mut child = bench_cmd_to(work, &rf, &run_args)
        .spawn()
        .context("starting the run")?;
    let holding = watch_holding(&mut child, work)?;
    let out = child.wait_with_output().context("waiting for the run")?;
    let after = leftovers(work)?;

    let entries: serde_json::Value = match std::fs::read_to_string(&rf) {
        Ok(t) => serde_json::from_str(&t).with_context(|| format!("parsing {}", rf.display()))?,
        Err(_) => serde_json::Value::Null,
    };
    let period = entries[0]["period"].clone();
    let (p0, p1) = (
        period[0].as_u64().unwrap_or(0),
        period[1].as_u64().unwrap_or(0),
    );
    let rdir = crate::report::reports_dir(work);
    let reports_in_period = (p0..=p1)
        .filter(|sec| crate::report::report_path(&rdir, *sec).exists())
        .count() as u64;
    let mid = crate::report::report_path(&rdir, p0 + (p1.saturating_sub(p0)) / 2);
    let mid_report = match std::fs::read_to_string(&mid) {
        Ok(t) => {
            let r: serde_json::Value =
                serde_json::from_str(&t).with_context(|| format!("parsing {}", mid.display()))?;
            serde_json::json!({
                "swappiness": r["swappiness"],
                "units": r["usages"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
                "iolat_unavailable": r.get("iolat_unavailable").cloned().unwrap_or(false.into()),
                "iolat_read_p50": r["iolat"]["read"]["50"],
                "iocost_qos": r["iocost"]["qos"],
            })
        }
        Err(e) => serde_json::json!({ "error": format!("{}: {}", mid.display(), e) }),
    };

    // The signal path: SIGTERM while holding.
    let mut child = bench_cmd(work, &["-M", "off", "run", "systest:id=term,hold=300"])
        .spawn()
        .context("starting the run to stop")?;
    let term_holding = watch_holding(&mut child, work)?;
    // SAFETY: kill(2) on the pid of our own child.
    if unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) } != 0 {
        bail!("kill: {}", std::io::Error::last_os_error());
    }
    let st = child.wait()?;
    let after_term = leftovers(work)?;

    Ok(serde_json::to_value(ReportsScenario {
        swappiness_before,
        holding,
        run_status: out.status.code(),
        run_stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        period,
        reports_in_period,
        mid_report,
        after,
        term_holding,
        term_status: st.code(),
        term_signal: st.signal(),
        after_term,
    })?)
}

/// `system`: the system layer's scenarios one after another in one guest; each leaves the
/// host as it found it, which is what the next one starts from (and what they check).
fn system(a: &ScenarioArgs) -> Result<serde_json::Value> {
    std::fs::create_dir_all(&a.work).with_context(|| format!("creating {}", a.work.display()))?;
    let deps = Command::new("/proc/self/exe")
        .arg("--dir")
        .arg(&a.work)
        .args(["deps", "--fix"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running deps --fix")?;
    Ok(serde_json::json!({
        "deps": {
            "status": deps.status.code(),
            "stdout": String::from_utf8_lossy(&deps.stdout),
        },
        "restore_after_kill": restore_after_kill(&a.work.join("restore"))?,
        "balloon": balloon(&a.work.join("balloon"), &a.profile)?,
        "reports": reports(&a.work, a.run_result.as_deref())?,
    }))
}

pub fn run(a: &ScenarioArgs) -> Result<()> {
    let v = match a.scenario {
        Scenario::System => system(a)?,
        Scenario::RestoreAfterKill => restore_after_kill(&a.work)?,
        Scenario::Balloon => balloon(&a.work, &a.profile)?,
        Scenario::Reports => reports(&a.work, a.run_result.as_deref())?,
        Scenario::IocostQos => super::vm_iocost_qos::iocost_qos(&a.work)?,
        Scenario::Seq => super::seq::seq(&a.work, &a.cmds)?,
        Scenario::SystemdHost => {
            super::vm_systemd::systemd_host(&a.work, &a.cmds, a.apply.as_deref())?
        }
        Scenario::CurveFio => super::curve_fio::curve_fio(
            &a.work,
            &super::curve_fio::Opts {
                dur: a.dur,
                points: a.points.clone(),
                arrivals: a.arrivals.clone(),
            },
        )?,
        Scenario::FastCompare => super::fast_compare::fast_compare(
            &a.work,
            &super::fast_compare::Opts {
                dur: a.dur,
                target: a.target.clone(),
                rounds: a.rounds.max(1),
            },
        )?,
        Scenario::FioCompare => super::fio_compare::fio_compare(
            &a.work,
            &super::fio_compare::Opts {
                dur: a.dur,
                fio_extra: a.fio_extra.clone(),
                only: a.only.clone(),
                busy: a.busy,
            },
        )?,
    };
    if let Some(dir) = &a.keep {
        use clap::ValueEnum;
        let name = a
            .scenario
            .to_possible_value()
            .map(|v| v.get_name().to_string());
        keep(&a.work, dir, name.as_deref().unwrap_or("scenario"))?;
    }
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &v)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// `--keep`: the runs' result file and per-second reports, copied to `dir` as `name.json` and
/// `name-report.d` (where `study` looks for them).
fn keep(work: &Path, dir: &Path, name: &str) -> Result<()> {
    let result = work.join("result.json");
    if !result.is_file() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::copy(&result, dir.join(format!("{}.json", name)))
        .with_context(|| format!("copying {}", result.display()))?;
    let reports = dir.join(format!("{}-report.d", name));
    std::fs::create_dir_all(&reports)?;
    if let Ok(rd) = std::fs::read_dir(work.join("report.d")) {
        for e in rd.flatten().filter(|e| e.path().is_file()) {
            std::fs::copy(e.path(), reports.join(e.file_name()))
                .with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}
