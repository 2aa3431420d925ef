//! The session's benchmark parameters: `bench.json` with the command-line overrides, what
//! jobs apply or commit, and writing the io.cost model and QoS to the kernel at each job start.
use super::{Session, SessionOpts};
use crate::system::bench_json::{BenchFile, BenchKnobs, DevIdent, HashdKnobs};
use crate::system::blockdev::Scratch;
use crate::system::cgroup::DevNr;
use crate::system::iocost::{self, IoCostKnobs};
use crate::system::HostPaths;
use anyhow::Result;

impl Session {
    /// The scratch device's `MAJ:MIN`, when it was found.
    pub(super) fn scratch_devnr(&self) -> Option<DevNr> {
        self.scratch
            .as_ref()
            .ok()
            .map(|s| DevNr::new(s.dev.devnr.0, s.dev.devnr.1))
    }

    /// Writes the io.cost parameters of the working copy for the scratch device, through the
    /// journal, when the current job enforces io (benches-doc/common.md): benchmarked parameters
    /// (`iocost_seq > 0`) give the model and QoS lines; without them a `--iocost-qos` goes on
    /// top of the kernel's current QoS; otherwise iocost is only enabled with the kernel's
    /// defaults. Without io.cost in the kernel (the IoCost requirement says so) nothing happens.
    pub(super) fn write_iocost(&mut self) -> Result<()> {
        let (true, Some(bench), Some(devnr)) = (
            self.knobs.io_enforced,
            &self.knobs.bench,
            self.scratch_devnr(),
        ) else {
            return Ok(());
        };
        if !self.hp.cgroup().join("io.cost.qos").exists() {
            log::warn!("not applying io.cost parameters: the kernel lacks io.cost");
            return Ok(());
        }
        let knobs = bench.knobs.clone();
        let hp = &self.hp;
        let j = &mut self.journal;
        let ovr = self.knobs.qos_ovr.filter(|o| !o.is_empty());
        if ovr.is_some_and(|o| o.off) {
            iocost::set_enable(hp, devnr, false, j)?;
            log::info!("io.cost off on {} (--iocost-qos)", devnr);
            return Ok(());
        }
        iocost::set_enable(hp, devnr, true, j)?;
        if knobs.iocost_seq > 0 {
            let m = iocost::write_model(hp, devnr, &knobs.iocost.model, j)?;
            let q = iocost::write_qos(hp, devnr, &knobs.iocost.qos, j)?;
            if m || q {
                log::info!(
                    "io.cost on {}: {} / {}",
                    devnr,
                    iocost::model_line(devnr, &knobs.iocost.model),
                    knobs.iocost.qos.rounded().line()
                );
            }
        } else if let Some(o) = ovr {
            let qos = o.apply(&iocost::read_qos(hp, devnr)?);
            if iocost::write_qos(hp, devnr, &qos, j)? {
                log::info!("io.cost QoS on {}: {} (--iocost-qos)", devnr, qos.line());
            }
        }
        Ok(())
    }

    /// The benchmark parameters the jobs use (`None` without a scratch device).
    pub fn bench_knobs(&self) -> Option<&BenchKnobs> {
        self.knobs.bench.as_ref().map(|b| &b.knobs)
    }

    /// The bench file, or an error naming what can't be done without it.
    fn bench_mut(&mut self, what: &str) -> Result<&mut BenchFile> {
        match &mut self.knobs.bench {
            Some(b) => Ok(b),
            None => anyhow::bail!(
                "can't {}: no scratch device ({})",
                what,
                self.scratch.as_ref().err().map_or("", |e| e.as_str())
            ),
        }
    }

    /// New io.cost parameters from a bench: into the working copy and rb-bench.json (and
    /// bench.json when `commit`), then into the kernel when the job enforces io.
    pub fn apply_iocost(&mut self, knobs: IoCostKnobs, commit: bool) -> Result<()> {
        self.bench_mut("apply io.cost parameters")?
            .apply_iocost(knobs, commit)?;
        self.write_iocost()
    }

    /// New hashd parameters from a bench, like [`Session::apply_iocost`].
    pub fn apply_hashd(&mut self, knobs: HashdKnobs, commit: bool) -> Result<()> {
        self.bench_mut("apply hashd parameters")?
            .apply_hashd(knobs, commit)
    }

    /// io.cost off on the scratch device until the next job starts (through the journal):
    /// measuring the device itself (`iocost-params`) must not be throttled by it.
    pub fn iocost_off_for_job(&mut self) -> Result<()> {
        let Some(devnr) = self.scratch_devnr() else {
            anyhow::bail!("no scratch device");
        };
        if self.hp.cgroup().join("io.cost.qos").exists()
            && iocost::set_enable(&self.hp, devnr, false, &mut self.journal)?
        {
            log::info!("io.cost off on {} for this job", devnr);
        }
        Ok(())
    }

    /// Writes `value` to the scratch device's `queue/<knob>` through the journal; returns what
    /// it was.
    pub fn set_scratch_queue_knob(&mut self, knob: &str, value: &str) -> Result<String> {
        let Some(dev) = self.scratch_dev() else {
            anyhow::bail!("no scratch device");
        };
        let path = self
            .hp
            .path("sys/block")
            .join(&dev.name)
            .join("queue")
            .join(knob);
        let old = self.journal.set(&path, value)?;
        if old.trim() != value {
            log::info!("{}: {} -> {}", path.display(), old.trim(), value);
        }
        Ok(old.trim().to_string())
    }

    /// Back to the parameters of the current job's start (rb-bench.json and io.cost too).
    pub fn revert_knobs(&mut self) -> Result<()> {
        if let Some(b) = &mut self.knobs.bench {
            b.revert()?;
        }
        self.write_iocost()
    }
}

/// `<dir>/bench.json` for the scratch device (a file for another device is a usage error),
/// with `--iocost-from-sys` and `--iocost-qos` on top. Without a scratch device there are no
/// parameters (and `--iocost-from-sys` is an error).
pub(super) fn load_bench_json(
    hp: &HostPaths,
    opts: &SessionOpts,
    scratch: &std::result::Result<Scratch, String>,
) -> Result<Option<BenchFile>> {
    let s = match scratch {
        Ok(s) => s,
        Err(e) if opts.iocost_from_sys => {
            crate::usage_bail!("--iocost-from-sys needs the scratch device: {}", e)
        }
        Err(_) => return Ok(None),
    };
    let dev = DevIdent {
        model: s.dev.model.clone(),
        fwrev: s.dev.fwrev.clone(),
        size: s.dev.size,
    };
    let mut b = BenchFile::load(&opts.dir, dev)?;
    let devnr = DevNr::new(s.dev.devnr.0, s.dev.devnr.1);
    b.apply_overrides(
        hp,
        devnr,
        opts.iocost_from_sys,
        opts.iocost_qos.as_ref(),
        opts.hashd,
    )?;
    if let Some(size) = opts.hashd.size {
        let st = b.stored();
        log::info!(
            "hashd footprint {} (--hashd-size) over {}",
            crate::units::fmt::format_size(size as f64),
            if st.hashd_seq > 0 {
                format!(
                    "the benchmarked {}",
                    crate::units::fmt::format_size(st.hashd.mem_size as f64 * st.hashd.mem_frac)
                )
            } else {
                "what hashd-params will find".to_string()
            }
        );
    }
    if let Some(fake) = opts.hashd.fake_cpu_load {
        log::info!(
            "hashd {} CPU load (--hashd-cpu-load)",
            if fake { "fake" } else { "real" }
        );
    }
    if b.knobs.iocost_seq > 0 {
        log::info!(
            "io.cost parameters{}: {} / {}",
            if opts.iocost_from_sys {
                " (--iocost-from-sys)"
            } else {
                ""
            },
            iocost::model_line(devnr, &b.knobs.iocost.model),
            b.knobs.iocost.qos.rounded().line()
        );
    } else {
        log::debug!(
            "no benchmarked io.cost parameters in {}",
            BenchFile::bench_path(&opts.dir).display()
        );
    }
    Ok(Some(b))
}
