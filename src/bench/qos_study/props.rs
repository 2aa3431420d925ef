//! `qos-study`'s properties: which profiles, how often, and each service's IO job.

use super::profiles::{self, Profile, Service};
use crate::bench::contract::api::{prop, PropDesc, SpecError, ValueKind};
use crate::spec::{Group, JobSpec};
use crate::workload::ioengine::job::{IoJob, Pattern, Rate, Stop};
use std::path::PathBuf;
use std::time::Duration;

const RW: &[&str] = &["read", "write", "rw", "randread", "randwrite", "randrw"];

pub static PROPS: [PropDesc; 19] = [
    prop(
        "profiles",
        ValueKind::Str,
        "/-separated profiles to run (every built-in one, or the file's)",
    ),
    prop(
        "profile-file",
        ValueKind::Str,
        "profiles from a file, one service a line (doc qos-study)",
    ),
    prop(
        "repeat",
        ValueKind::Int,
        "runs of every profile (3; 1 with --quick)",
    ),
    prop(
        "client-rw",
        ValueKind::Enum(RW),
        "the client's IO, fio's names (randwrite)",
    ),
    prop("client-bs", ValueKind::Size, "the client's IO size (4K)"),
    prop(
        "client-qd",
        ValueKind::Int,
        "the client's IOs in flight (64)",
    ),
    prop(
        "client-rate",
        ValueKind::Float,
        "an open-loop rate for the client, IOPS (none: closed loop)",
    ),
    prop(
        "bg-rw",
        ValueKind::Enum(RW),
        "the background's IO (rw: sequential, half reads)",
    ),
    prop("bg-bs", ValueKind::Size, "the background's IO size (1M)"),
    prop(
        "bg-qd",
        ValueKind::Int,
        "the background's IOs in flight (8)",
    ),
    prop(
        "bg-size",
        ValueKind::Size,
        "the background's work (what it moves alone in alone-dur)",
    ),
    prop(
        "best-effort",
        ValueKind::Bool,
        "run the third service, best effort (false)",
    ),
    prop("be-rw", ValueKind::Enum(RW), "its IO (randread)"),
    prop("be-bs", ValueKind::Size, "its IO size (64K)"),
    prop("be-qd", ValueKind::Int, "its IOs in flight (4)"),
    prop(
        "file-size",
        ValueKind::Size,
        "each service's test file (2G; 512M with --quick)",
    ),
    prop(
        "alone-dur",
        ValueKind::Duration,
        "each service's run alone (30s; 10s with --quick)",
    ),
    prop(
        "dur",
        ValueKind::Duration,
        "the longest a mixed run lasts (10m; 2m with --quick)",
    ),
    prop(
        "seed",
        ValueKind::Int,
        "seed of the services' offsets and mixes",
    ),
];

pub const DFL_REPEAT: u32 = 3;
pub const DFL_FILE_SIZE: u64 = 2 << 30;
pub const QUICK_FILE_SIZE: u64 = 512 << 20;
pub const DFL_ALONE_S: f64 = 30.0;
pub const QUICK_ALONE_S: f64 = 10.0;
pub const DFL_DUR_S: f64 = 600.0;
pub const QUICK_DUR_S: f64 = 120.0;

#[derive(Debug, Clone)]
pub struct QosStudyProps {
    pub profiles: Vec<Profile>,
    /// Whether the profiles were named (`profiles=`, `profile-file=`) rather than the default
    /// list, which leaves out what the kernel can't run.
    pub named: bool,
    /// `None`: 3, or 1 with --quick.
    pub repeat: Option<u32>,
    /// The services' jobs (targets filled in by the run; the background stops after its
    /// work, the others run until it is done). `None`: best effort is off.
    pub jobs: [Option<IoJob>; 3],
    /// Given sizes and durations (`None`: the default for the mode; for `bg_size`, what the
    /// background moves alone in `alone_dur`).
    pub bg_size: Option<u64>,
    pub file_size: Option<u64>,
    pub alone_dur: Option<f64>,
    pub dur: Option<f64>,
}

impl QosStudyProps {
    pub fn repeat(&self, quick: bool) -> u32 {
        self.repeat.unwrap_or(if quick { 1 } else { DFL_REPEAT })
    }

    pub fn file_size(&self, quick: bool) -> u64 {
        self.file_size.unwrap_or(if quick {
            QUICK_FILE_SIZE
        } else {
            DFL_FILE_SIZE
        })
    }

    pub fn alone_dur(&self, quick: bool) -> f64 {
        self.alone_dur
            .unwrap_or(if quick { QUICK_ALONE_S } else { DFL_ALONE_S })
    }

    pub fn dur(&self, quick: bool) -> f64 {
        self.dur
            .unwrap_or(if quick { QUICK_DUR_S } else { DFL_DUR_S })
    }

    /// Which services run.
    pub fn present(&self) -> [bool; 3] {
        [0, 1, 2].map(|i| self.jobs[i].is_some())
    }
}

/// One service's job from `PREFIX-rw`, `-bs`, `-qd` over its defaults.
fn service_job(
    g: &Group,
    prefix: &str,
    (rw, bs, qd): (&str, u64, u32),
    seed: u64,
) -> Result<IoJob, SpecError> {
    let key = |k: &str| format!("{}-{}", prefix, k);
    let mut job = IoJob::new(PathBuf::new());
    let rw = g.text(&key("rw")).unwrap_or(rw);
    job.pattern = if rw.starts_with("rand") {
        Pattern::Rand
    } else {
        Pattern::Seq
    };
    job.read_pct = match rw.trim_start_matches("rand") {
        "read" => 100,
        "write" => 0,
        _ => 50,
    };
    job.bs = g.u64(&key("bs"), ValueKind::Size)?.unwrap_or(bs);
    job.qd = match g.u64(&key("qd"), ValueKind::Int)? {
        Some(q) if !(1..=4096).contains(&q) => {
            return Err(g.err(format!("{}={} is not from 1 to 4096", key("qd"), q)))
        }
        q => q.map_or(qd, |q| q as u32),
    };
    job.batch = 1;
    job.seed = seed;
    job.percentiles = vec![50.0, 90.0, 95.0, 99.0, 99.5, 99.9];
    job.check()
        .map_err(|e| g.err(format!("{}: {}", prefix, e)))?;
    Ok(job)
}

/// The profiles `profiles=` names among the built-in ones and the file's.
fn pick_profiles(g: &Group) -> Result<Vec<Profile>, SpecError> {
    let from_file = match g.text("profile-file") {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| g.err(format!("profile-file={}: {}", path, e)))?;
            profiles::parse_file(&text)
                .map_err(|e| g.err(format!("profile-file={}: {}", path, e)))?
        }
        None => Vec::new(),
    };
    let Some(names) = g.text("profiles") else {
        return Ok(if from_file.is_empty() {
            profiles::builtin()
        } else {
            from_file
        });
    };
    let mut out: Vec<Profile> = Vec::new();
    for name in names.split('/').map(str::trim) {
        let p = from_file
            .iter()
            .find(|p| p.name == name)
            .cloned()
            .or_else(|| profiles::find(name))
            .ok_or_else(|| {
                let mut known: Vec<String> =
                    profiles::builtin().into_iter().map(|p| p.name).collect();
                known.extend(from_file.iter().map(|p| p.name.clone()));
                g.err(format!(
                    "profiles: no profile {:?} (accepted: {})",
                    name,
                    known.join(", ")
                ))
            })?;
        if !out.iter().any(|o| o.name == p.name) {
            out.push(p);
        }
    }
    Ok(out)
}

fn secs(g: &Group, key: &str) -> Result<Option<f64>, SpecError> {
    match g.f64(key, ValueKind::Duration)? {
        Some(s) if s < 1.0 => Err(g.err(format!("{}: {} s is under a second", key, s))),
        s => Ok(s),
    }
}

pub fn read(spec: &JobSpec) -> Result<QosStudyProps, SpecError> {
    let g = spec.group(0);
    let seed = g.u64("seed", ValueKind::Int)?.unwrap_or(0x5eed);
    let mut client = service_job(&g, "client", ("randwrite", 4096, 64), seed)?;
    if let Some(r) = g.f64("client-rate", ValueKind::Float)? {
        if !(r > 0.0 && r.is_finite()) {
            return Err(g.err(format!("client-rate={} is not a rate above 0 IOPS", r)));
        }
        client.rate = Some(Rate::Iops(r));
    }
    let bg = service_job(&g, "bg", ("rw", 1 << 20, 8), seed ^ 1)?;
    let be = match g.flag("best-effort")? {
        Some(true) => Some(service_job(&g, "be", ("randread", 64 << 10, 4), seed ^ 2)?),
        _ => {
            if let Some(k) = ["be-rw", "be-bs", "be-qd"]
                .into_iter()
                .find(|k| g.text(k).is_some())
            {
                return Err(g.err(format!("{} is for best-effort; give best-effort too", k)));
            }
            None
        }
    };
    let repeat = match g.u64("repeat", ValueKind::Int)? {
        Some(r) if !(1..=100).contains(&r) => {
            return Err(g.err(format!("repeat={} is not from 1 to 100", r)))
        }
        r => r.map(|r| r as u32),
    };
    let bg_size = g.u64("bg-size", ValueKind::Size)?;
    let file_size = g.u64("file-size", ValueKind::Size)?;
    for (k, v, min) in [
        ("bg-size", bg_size, bg.bs),
        ("file-size", file_size, bg.bs.max(client.bs)),
    ] {
        if v.is_some_and(|v| v < min) {
            return Err(g.err(format!("{} is below one IO of {} bytes", k, min)));
        }
    }
    Ok(QosStudyProps {
        profiles: pick_profiles(&g)?,
        named: g.text("profiles").is_some() || g.text("profile-file").is_some(),
        repeat,
        jobs: [Some(client), Some(bg), be],
        bg_size,
        file_size,
        alone_dur: secs(&g, "alone-dur")?,
        dur: secs(&g, "dur")?,
    })
}

/// `job` of `svc` for a run: its target, and how it stops — the background after `bg_size`
/// bytes (when known), the others after `secs` (a mixed run stops them when the background is
/// done).
pub fn job_for(job: &IoJob, svc: Service, target: PathBuf, bg_size: u64, secs: f64) -> IoJob {
    let mut j = job.clone();
    j.target = target;
    j.stop = match svc {
        Service::Background if bg_size > 0 => Stop::Bytes(bg_size),
        _ => Stop::Time(Duration::from_secs_f64(secs)),
    };
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> JobSpec {
        JobSpec::parse(text).unwrap()
    }

    #[test]
    fn defaults_are_the_seeds_client_against_a_sequential_background() {
        let p = read(&spec("qos-study")).unwrap();
        let c = p.jobs[0].as_ref().unwrap();
        assert_eq!((c.rw_name().as_str(), c.bs, c.qd), ("randwrite", 4096, 64));
        let b = p.jobs[1].as_ref().unwrap();
        assert_eq!((b.rw_name().as_str(), b.bs, b.qd), ("rw", 1 << 20, 8));
        assert!(p.jobs[2].is_none());
        assert_eq!(p.present(), [true, true, false]);
        assert_eq!(p.profiles.len(), profiles::builtin().len());
        assert!(!p.named);
        assert_eq!((p.repeat(false), p.repeat(true)), (3, 1));
        assert_eq!(p.bg_size, None);
        assert_eq!((p.alone_dur(false), p.alone_dur(true)), (30.0, 10.0));
    }

    #[test]
    fn profiles_are_picked_by_name_in_the_order_given() {
        let p = read(&spec(
            "qos-study:profiles=iocost-high-client/none,best-effort,be-qd=2",
        ))
        .unwrap();
        let names: Vec<&str> = p.profiles.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["iocost-high-client", "none"]);
        assert!(p.named);
        assert_eq!(p.jobs[2].as_ref().map(|j| j.qd), Some(2));
    }

    #[test]
    fn bad_values_say_what_is_accepted() {
        for (text, want) in [
            (
                "qos-study:profiles=wpq",
                "no profile \"wpq\" (accepted: none, iocost-high-client",
            ),
            ("qos-study:client-qd=0", "client-qd=0 is not from 1 to 4096"),
            ("qos-study:be-qd=4", "be-qd is for best-effort"),
            ("qos-study:repeat=0", "repeat=0 is not from 1 to 100"),
            ("qos-study:client-rate=0", "client-rate=0 is not a rate"),
            ("qos-study:bg-size=4k", "bg-size is below one IO"),
            ("qos-study:dur=0.5", "under a second"),
            (
                "qos-study:profile-file=/nonexistent/p",
                "profile-file=/nonexistent/p:",
            ),
        ] {
            let e = read(&spec(text)).unwrap_err().msg;
            assert!(e.contains(want), "{}: {}", text, e);
        }
    }

    #[test]
    fn a_profile_file_adds_profiles_and_is_the_default_list() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p");
        std::fs::write(&f, "mine iomax background 0% 1 10%\n").unwrap();
        let p = read(&spec(&format!("qos-study:profile-file={}", f.display()))).unwrap();
        assert_eq!(p.profiles.len(), 1);
        assert_eq!(p.profiles[0].allocs[1].limit, Some(0.1));
        let p = read(&spec(&format!(
            "qos-study:profile-file={},profiles=none/mine",
            f.display()
        )))
        .unwrap();
        assert_eq!(p.profiles.len(), 2);
    }
}
