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

use super::probe::{scratch_device, Device};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    RestoreAfterKill,
    Balloon,
}

#[derive(Debug, Clone, Args)]
pub struct ScenarioArgs {
    #[arg(value_enum)]
    pub scenario: Scenario,
    /// Work directory of the runs (on the scratch disk)
    #[arg(long = "work", default_value = "/var/lib/resctl-demo/scenario")]
    pub work: PathBuf,
    /// `balloon`: the memory profile
    #[arg(long = "profile", default_value = "1")]
    pub profile: String,
}

/// The four knobs the kill scenario watches, as the kernel shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Knobs {
    pub swappiness: String,
    /// The selected scheduler.
    pub scheduler: String,
    pub wbt_lat_usec: String,
    /// `enable=` of the device's io.cost.qos line (`0` without a line).
    pub iocost_enable: String,
    /// The device's whole io.cost.qos line (`ctrl=` and parameters), empty without one.
    pub iocost_qos: String,
}

struct KnobPaths {
    swappiness: PathBuf,
    scheduler: PathBuf,
    wbt: PathBuf,
    qos: PathBuf,
    maj_min: String,
}

impl KnobPaths {
    fn new(dev: &Device) -> Self {
        let q = Path::new("/sys/block").join(&dev.name).join("queue");
        Self {
            swappiness: "/proc/sys/vm/swappiness".into(),
            scheduler: q.join("scheduler"),
            wbt: q.join("wbt_lat_usec"),
            qos: "/sys/fs/cgroup/io.cost.qos".into(),
            maj_min: dev.maj_min.clone(),
        }
    }

    fn read(&self) -> Result<Knobs> {
        let sched = read(&self.scheduler)?;
        let qos = read(&self.qos)?;
        let line = qos
            .lines()
            .find(|l| l.split_whitespace().next() == Some(self.maj_min.as_str()));
        let enable = line
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|kv| kv.strip_prefix("enable="))
            })
            .unwrap_or("0")
            .to_string();
        Ok(Knobs {
            swappiness: read(&self.swappiness)?,
            scheduler: crate::system::restore::bracketed(&sched).unwrap_or(sched),
            wbt_lat_usec: read(&self.wbt)?,
            iocost_enable: enable,
            iocost_qos: line.unwrap_or("").trim().to_string(),
        })
    }

    /// Writes the knobs directly (no journal).
    fn write(&self, k: &Knobs) -> Result<()> {
        write(&self.swappiness, &k.swappiness)?;
        write(&self.scheduler, &k.scheduler)?;
        write(&self.wbt, &k.wbt_lat_usec)?;
        write(
            &self.qos,
            &format!("{} enable={}", self.maj_min, k.iocost_enable),
        )
    }
}

fn read(p: &Path) -> Result<String> {
    Ok(std::fs::read_to_string(p)
        .with_context(|| format!("reading {}", p.display()))?
        .trim()
        .to_string())
}

fn write(p: &Path, v: &str) -> Result<()> {
    std::fs::write(p, v).with_context(|| format!("writing {:?} to {}", v, p.display()))
}

/// `resctl-bench --dir WORK -r WORK/result.json ARGS…`, stdout captured, stderr passed on.
fn bench_cmd(work: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("/proc/self/exe");
    c.arg("--dir")
        .arg(work)
        .arg("-r")
        .arg(work.join("result.json"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}

fn exists(p: &str) -> bool {
    Path::new(p).exists()
}

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

const SLICES: [&str; 4] = [
    "/sys/fs/cgroup/hostcritical.slice",
    "/sys/fs/cgroup/workload.slice",
    "/sys/fs/cgroup/system.slice",
    "/sys/fs/cgroup/balloon.slice",
];

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
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{}/cmdline", pid))
                .map(|c| c.split(|b| *b == 0).any(|a| a == b"__balloon"))
                .unwrap_or(false)
        })
        .collect()
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

pub fn run(a: &ScenarioArgs) -> Result<()> {
    let v = match a.scenario {
        Scenario::RestoreAfterKill => restore_after_kill(&a.work)?,
        Scenario::Balloon => balloon(&a.work, &a.profile)?,
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &v)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}
