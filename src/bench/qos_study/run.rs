//! The study's run: the test files and the services' cgroups, each service alone, then every
//! profile `repeat` times with the services side by side — the profile's controller set up,
//! its knobs in the services' cgroups, the background doing its work while the others run
//! until it is done. The record is checkpointed after every run; a resumed study goes on at
//! the first run it lacks.

use super::profiles::{self, Baseline, Capacity, Control, Knobs, Profile, Service};
use super::props::{job_for, QosStudyProps};
use super::record::{MixedRun, QosStudyRecord, ServiceOut};
use crate::bench::contract::ctx::RunCtx;
use crate::logging::progress;
use crate::system::cgroup::{write_file, CgroupFs};
use crate::system::iocost::IoCostKnobs;
use crate::util::now;
use crate::workload::ioengine::job::{IoJob, Stop};
use crate::workload::iojob::handle::IoChild;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The services' cgroups: siblings in workload.slice, so that only the profile's knobs set
/// them apart.
pub fn cgroup(svc: Service) -> &'static str {
    match svc {
        Service::Client => "workload.slice/rd-qos-client.service",
        Service::Background => "workload.slice/rd-qos-background.service",
        Service::BestEffort => "workload.slice/rd-qos-best-effort.service",
    }
}

/// How long a stopped service gets to write what it measured.
const STOP_GRACE: Duration = Duration::from_secs(15);

/// What every run of one study shares.
struct Env {
    fs: CgroupFs,
    dev: String,
    work: PathBuf,
    files: BTreeMap<Service, PathBuf>,
    alone_s: f64,
    dur_s: f64,
}

pub fn run(ctx: &mut RunCtx, props: &QosStudyProps) -> Result<QosStudyRecord> {
    let start = now();
    let quick = ctx.quick();
    let work = ctx.scratch_dir()?.join("qos-study");
    let mut rec = resumable(ctx, props, quick).unwrap_or_else(|| QosStudyRecord {
        period: (start, start),
        profiles: props.profiles.clone(),
        repeat: props.repeat(quick),
        bg_size: props.bg_size.unwrap_or(0),
        dur_s: props.dur(quick),
        ..Default::default()
    });
    let props = &{
        let host = ctx.session().context("qos-study needs the host session")?;
        let mut p = props.clone();
        p.profiles = usable(&CgroupFs::new(host.hp()), &props.profiles, props.named)?;
        p
    };
    let iocost = if props.profiles.iter().any(|p| p.control == Control::Iocost) {
        let dir = ctx.dir().to_path_buf();
        let mut host = ctx.session().context("qos-study needs the host session")?;
        Some(crate::bench::iocost_params::ensure_model(&mut host, &dir, quick, "qos-study")?.0)
    } else {
        None
    };
    let env = setup(ctx, props, quick, &work, &mut rec)?;
    rec.iocost = match &iocost {
        Some(k) => Some(format!(
            "{} / {}",
            crate::system::iocost::model_line(
                k.devnr.parse().map_err(anyhow::Error::msg)?,
                &k.model
            ),
            k.qos.line()
        )),
        None => None,
    };
    run_alone(ctx, props, &env, &mut rec)?;
    rec.capacity = Some(Capacity {
        iops: rec.alone.get(&Service::Client).map_or(0.0, |o| o.iops),
        bps: rec.alone.get(&Service::Background).map_or(0.0, |o| o.bps),
    });
    run_profiles(ctx, props, &env, iocost.as_ref(), &mut rec)?;
    rec.period.1 = now();
    Ok(rec)
}

/// Each service alone, with no control: the device's capacity the profiles are shares of.
fn run_alone(
    ctx: &mut RunCtx,
    props: &QosStudyProps,
    env: &Env,
    rec: &mut QosStudyRecord,
) -> Result<()> {
    for svc in Service::ALL {
        let Some(job) = &props.jobs[svc.index()] else {
            continue;
        };
        if rec.alone.contains_key(&svc) {
            continue;
        }
        control(ctx, Control::None, None)?;
        progress::phase(format!("{} alone", svc.name()));
        let jobs = vec![(
            svc,
            job_for(job, svc, env.files[&svc].clone(), rec.bg_size, env.alone_s),
        )];
        let (out, _, _) = run_services(env, &jobs, &BTreeMap::new(), rec.bg_size)?;
        let o = &out[&svc];
        log_service(&format!("{} alone", svc.name()), o);
        if svc == Service::Background && rec.bg_size == 0 {
            // Its work in the mixed runs: what it moved alone, in whole IOs.
            rec.bg_size = (o.bytes / job.bs * job.bs).max(job.bs);
            log::info!(
                "qos-study: the background's work is {} (what it moved alone in {:.0} s)",
                crate::units::format_size(rec.bg_size as f64),
                env.alone_s
            );
        }
        rec.alone.insert(svc, o.clone());
        checkpoint(ctx, rec)?;
    }
    Ok(())
}

/// Every profile `repeat` times, the repetitions interleaved (all profiles once, then again),
/// so a drift of the device over the study spreads over all of them.
fn run_profiles(
    ctx: &mut RunCtx,
    props: &QosStudyProps,
    env: &Env,
    iocost: Option<&IoCostKnobs>,
    rec: &mut QosStudyRecord,
) -> Result<()> {
    let present = props.present();
    let base = Baseline {
        cap: rec.capacity.unwrap_or(Capacity {
            iops: 0.0,
            bps: 0.0,
        }),
        alone_lat_us: Service::ALL.map(|s| {
            rec.alone.get(&s).map_or(0.0, |o| {
                // io.latency judges the mean on a rotating disk, the 90th percentile elsewhere.
                if rec.rotational {
                    o.lat_mean_us
                } else {
                    o.lat(Some(90.0)).unwrap_or(0.0)
                }
            })
        }),
        read_frac: Service::ALL.map(|s| {
            props.jobs[s.index()]
                .as_ref()
                .map_or(0.0, |j| f64::from(j.read_pct) / 100.0)
        }),
    };
    let total = rec.repeat as usize * props.profiles.len();
    for rep in 0..rec.repeat {
        for (pi, p) in props.profiles.iter().enumerate() {
            if rec.has_run(&p.name, rep) {
                continue;
            }
            let nth = rep as usize * props.profiles.len() + pi + 1;
            progress::phase(format!(
                "{} run {}/{} ({} of {})",
                p.name,
                rep + 1,
                rec.repeat,
                nth,
                total
            ));
            control(ctx, p.control, iocost)?;
            let knobs = profiles::knobs(p, present, &base);
            let knobs: BTreeMap<Service, Knobs> = Service::ALL
                .into_iter()
                .filter(|s| present[s.index()])
                .map(|s| (s, knobs[s.index()]))
                .collect();
            let jobs: Vec<(Service, IoJob)> = Service::ALL
                .into_iter()
                .filter_map(|s| {
                    let j = props.jobs[s.index()].as_ref()?;
                    Some((
                        s,
                        job_for(j, s, env.files[&s].clone(), rec.bg_size, env.dur_s),
                    ))
                })
                .collect();
            let (services, bg_secs, bg_done) = run_services(env, &jobs, &knobs, rec.bg_size)
                .with_context(|| format!("qos-study: profile {} run {}", p.name, rep + 1))?;
            let run = MixedRun {
                profile: p.name.clone(),
                rep,
                knobs,
                services,
                bg_secs,
                bg_done,
            };
            log_run(&run);
            rec.runs.push(run);
            checkpoint(ctx, rec)?;
        }
    }
    Ok(())
}

/// The record a resumed run continues, when it was made for the same profiles and sizes.
fn resumable(ctx: &RunCtx, props: &QosStudyProps, quick: bool) -> Option<QosStudyRecord> {
    let rec: QosStudyRecord = ctx.prev_record()?;
    let same = rec.profiles == props.profiles
        && rec.repeat == props.repeat(quick)
        && props.bg_size.is_none_or(|b| b == rec.bg_size);
    if same && !rec.runs.is_empty() {
        log::info!(
            "qos-study: continuing after {} recorded run(s)",
            rec.runs.len()
        );
    }
    same.then_some(rec)
}

fn checkpoint(ctx: &mut RunCtx, rec: &mut QosStudyRecord) -> Result<()> {
    rec.period.1 = now();
    ctx.checkpoint(rec)
}

/// The device, the test files and the cgroups.
fn setup(
    ctx: &mut RunCtx,
    props: &QosStudyProps,
    quick: bool,
    work: &Path,
    rec: &mut QosStudyRecord,
) -> Result<Env> {
    let mut host = ctx.session().context("qos-study needs the host session")?;
    if !host.has_slices() {
        bail!(
            "qos-study runs its services in cgroups of their own; this session has no bench slices"
        );
    }
    let fs = CgroupFs::new(host.hp());
    let dev = host
        .scratch_dev()
        .cloned()
        .context("qos-study needs the scratch device")?;
    rec.dev = format!("{}:{}", dev.devnr.0, dev.devnr.1);
    rec.rotational = dev.rotational;
    std::fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let mut files = BTreeMap::new();
    for svc in Service::ALL
        .into_iter()
        .filter(|s| props.present()[s.index()])
    {
        let path = work.join(format!("{}-testfile", svc.name()));
        progress::phase(format!("test file of {}", svc.name()));
        crate::workload::ioengine::testfile::ensure(&path, props.file_size(quick), true)
            .with_context(|| format!("the test file {}", path.display()))?;
        files.insert(svc, path);
        host.create_cgroup(cgroup(svc))?;
    }
    Ok(Env {
        fs,
        dev: rec.dev.clone(),
        work: work.to_path_buf(),
        files,
        alone_s: props.alone_dur(quick),
        dur_s: props.dur(quick),
    })
}

/// The profiles this kernel can run: one whose controller is missing (its knob file in the
/// slice the services run in) is refused before anything runs when it was named, and left out
/// of the default list with a warning.
fn usable(fs: &CgroupFs, profiles: &[Profile], named: bool) -> Result<Vec<Profile>> {
    let mut out = Vec::new();
    for p in profiles {
        let file = match p.control {
            Control::None => None,
            Control::Iocost => Some("io.weight"),
            Control::Iomax => Some("io.max"),
            Control::Iolatency => Some("io.latency"),
        };
        let path = file.map(|f| fs.path("workload.slice").join(f));
        match (path, file) {
            (Some(path), Some(file)) if !path.exists() => {
                if named {
                    crate::usage_bail!(
                        "qos-study: profile {} needs {}, which this kernel lacks ({} is \
                         missing); leave it out with profiles=",
                        p.name,
                        file,
                        path.display()
                    );
                }
                log::warn!(
                    "qos-study: leaving out profile {}: this kernel has no {}",
                    p.name,
                    file
                );
            }
            _ => out.push(p.clone()),
        }
    }
    Ok(out)
}

/// The profile's controller: io.cost on with the measured model for iocost profiles, off for
/// the others.
fn control(ctx: &mut RunCtx, c: Control, iocost: Option<&IoCostKnobs>) -> Result<()> {
    let mut host = ctx.session().context("qos-study needs the host session")?;
    match (c, iocost) {
        (Control::Iocost, Some(k)) => host.apply_iocost(k.clone(), false),
        (Control::Iocost, None) => bail!("an iocost profile without an io.cost model"),
        _ => host.iocost_off_for_job(),
    }
}

/// Writes `k` into the cgroup of a service (every knob, so one profile's values never carry
/// over into the next: no value is written as the knob's default).
fn write_knobs(fs: &CgroupFs, cg: &str, dev: &str, k: &Knobs) -> Result<()> {
    let dir = fs.path(cg);
    let set = |file: &str, value: String, needed: bool| -> Result<()> {
        let path = dir.join(file);
        if !path.exists() {
            if needed {
                bail!(
                    "{} is missing: the kernel lacks this controller",
                    path.display()
                );
            }
            return Ok(());
        }
        write_file(&path, &value)
            .with_context(|| format!("writing {:?} to {}", value, path.display()))?;
        Ok(())
    };
    set(
        "io.weight",
        format!("default {}", k.io_weight.unwrap_or(100)),
        k.io_weight.is_some(),
    )?;
    set(
        "io.max",
        k.io_max.unwrap_or_default().line(dev),
        k.io_max.is_some(),
    )?;
    set(
        "io.latency",
        match k.io_latency_us {
            Some(us) => format!("{} target={}", dev, us),
            None => format!("{} target=max", dev),
        },
        k.io_latency_us.is_some(),
    )
}

/// Runs `jobs` side by side, each in its service's cgroup with its knobs. With a background
/// doing its `bg_size` of work, the run ends when it is done (the others are stopped then) or
/// at the cap; otherwise when every job has run its time.
fn run_services(
    env: &Env,
    jobs: &[(Service, IoJob)],
    knobs: &BTreeMap<Service, Knobs>,
    bg_size: u64,
) -> Result<(BTreeMap<Service, ServiceOut>, f64, bool)> {
    let exe = Path::new("/proc/self/exe");
    let mut children: Vec<(Service, IoChild)> = Vec::new();
    for (svc, job) in jobs {
        let cg = cgroup(*svc);
        let c = IoChild::spawn(exe, svc.name(), job, &env.work, Some((&env.fs, cg)))?;
        write_knobs(
            &env.fs,
            cg,
            &env.dev,
            &knobs.get(svc).copied().unwrap_or_default(),
        )
        .with_context(|| format!("setting up {}", cg))?;
        children.push((*svc, c));
    }
    let t0 = Instant::now();
    for (_, c) in &mut children {
        c.go()?;
    }
    let has_bg = jobs
        .iter()
        .any(|(s, j)| *s == Service::Background && matches!(j.stop, Stop::Bytes(_)));
    let cap = if has_bg {
        env.dur_s
    } else {
        env.alone_s + 30.0
    };
    let (mut bg_secs, mut bg_done) = (0.0, false);
    let mut shown = t0;
    loop {
        // 100 ms: the resolution of the background's completion time.
        std::thread::sleep(Duration::from_millis(100));
        let mut all_done = true;
        for (svc, c) in &mut children {
            let ended = c.try_wait()?.is_some();
            all_done &= ended;
            if ended && *svc == Service::Background && !bg_done {
                bg_done = true;
                bg_secs = t0.elapsed().as_secs_f64();
            }
        }
        if all_done || (has_bg && bg_done) {
            break;
        }
        if t0.elapsed().as_secs_f64() >= cap {
            if !has_bg {
                bail!("the services alone ran past their time by 30 s");
            }
            bg_secs = cap;
            break;
        }
        // The progress line once a second: reading the samples file competes with the
        // services for the CPU.
        if shown.elapsed() < Duration::from_secs(1) {
            continue;
        }
        shown = Instant::now();
        if let Some((_, c)) = children
            .iter()
            .find(|(s, _)| has_bg && *s == Service::Background)
        {
            if let Some(s) = c.samples().last() {
                progress::status(format!(
                    "background {:.0}% done",
                    s.bytes as f64 * 100.0 / bg_size.max(1) as f64
                ));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (svc, c) in &mut children {
        c.stop(STOP_GRACE)?;
        let r = c
            .result()
            .with_context(|| format!("the {} service", svc.name()))?;
        out.insert(*svc, ServiceOut::of(&r));
    }
    Ok((out, bg_secs, bg_done))
}

fn log_service(what: &str, o: &ServiceOut) {
    log::info!(
        "qos-study: {}: {:.0} IOPS, {:.1} MiB/s, lat mean {:.0} us p99 {:.0} us",
        what,
        o.iops,
        o.bps / (1 << 20) as f64,
        o.lat_mean_us,
        o.lat(Some(99.0)).unwrap_or(0.0)
    );
}

fn log_run(r: &MixedRun) {
    for (svc, o) in &r.services {
        log_service(
            &format!("{} run {}: {}", r.profile, r.rep + 1, svc.name()),
            o,
        );
    }
    log::info!(
        "qos-study: {} run {}: the background {} in {:.1} s",
        r.profile,
        r.rep + 1,
        if r.bg_done {
            "finished"
        } else {
            "did not finish"
        },
        r.bg_secs
    );
}
