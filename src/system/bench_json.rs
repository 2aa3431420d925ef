//! The persisted benchmark parameters: `<dir>/bench.json` (shared with resctl-demo) and the
//! working copy `<dir>/rb-bench.json` the runs use.
//!
//! At start the stored parameters are loaded (a missing file gives defaults; a file written for
//! another device is refused), then `--iocost-from-sys`, `--iocost-qos`, `--hashd-size` and
//! `--hashd-cpu-load` go on top of an in-memory copy (the hashd ones again over every hashd
//! parameters a bench applies later, so they hold for the whole invocation). Benches *apply* new parameters (in memory and rb-bench.json) and may
//! *commit* them (bench.json too). bench.json only ever receives stored parameters plus
//! committed ones, never the command-line overrides. Every save is atomic.

use super::cgroup::DevNr;
use super::iocost::{knobs_from_sys, IoCostKnobs, QosOverride};
use super::HostPaths;
use crate::error::UsageError;
use crate::util::atomic::write_atomic;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const BENCH_FILENAME: &str = "bench.json";
pub const RB_BENCH_FILENAME: &str = "rb-bench.json";

/// hashd parameters found by hashd-params.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HashdKnobs {
    pub hash_size: u64,
    pub rps_max: u64,
    pub mem_size: u64,
    pub mem_frac: f64,
    pub chunk_pages: u64,
    pub fake_cpu_load: bool,
    /// Ours: hashd made its requests as upstream's rd-hashd does (`requests=upstream`); left
    /// out when off, so the section reads as upstream's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub upstream_requests: bool,
    /// Ours: hashd kept its requests in flight as upstream's rd-hashd does (`flow=upstream`);
    /// left out when off.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub upstream_flow: bool,
}

/// `--hashd-size` and `--hashd-cpu-load`: hashd parameters fixed by the user over the
/// benchmarked ones.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct HashdOverride {
    /// hashd's footprint in bytes: raises `mem_size` to it if needed, then sets `mem_frac` so
    /// that `mem_size × mem_frac` is this size.
    pub size: Option<u64>,
    /// `fake_cpu_load` (`fake` = true, `real` = false).
    pub fake_cpu_load: Option<bool>,
}

impl HashdOverride {
    pub fn is_empty(&self) -> bool {
        self.size.is_none() && self.fake_cpu_load.is_none()
    }

    pub fn apply(&self, k: &mut HashdKnobs) {
        if let Some(size) = self.size {
            k.mem_size = k.mem_size.max(size);
            k.mem_frac = size as f64 / k.mem_size as f64;
        }
        if let Some(fake) = self.fake_cpu_load {
            k.fake_cpu_load = fake;
        }
    }
}

/// The content of bench.json. A `*_seq` of 0 means "never benchmarked".
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BenchKnobs {
    /// RFC 3339 time of the last save.
    pub timestamp: String,
    pub hashd_seq: u64,
    pub iocost_seq: u64,
    pub hashd: HashdKnobs,
    pub iocost: IoCostKnobs,
    pub iocost_dev_model: String,
    pub iocost_dev_fwrev: String,
    pub iocost_dev_size: u64,
}

/// The scratch device the parameters belong to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DevIdent {
    pub model: String,
    pub fwrev: String,
    pub size: u64,
}

/// Parses bench.json text: leading `//` and `#` comment lines (resctl-demo writes a preamble)
/// are skipped; QoS floats come back rounded to 2 decimals.
pub fn parse_knobs(path: &Path, text: &str) -> anyhow::Result<BenchKnobs> {
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start();
        if trimmed.starts_with("//") || trimmed.starts_with('#') {
            rest = trimmed.split_once('\n').map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    serde_json::from_str(rest).map_err(|e| {
        UsageError::new(format!(
            "{} is not a valid parameter file: {} (fix it, or remove it to start without \
             benchmarked parameters)",
            path.display(),
            e
        ))
        .into()
    })
}

/// Reads a parameter file; `None` if it doesn't exist.
pub fn read_knobs(path: &Path) -> anyhow::Result<Option<BenchKnobs>> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_knobs(path, &text).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Writes `knobs` to `path` atomically, stamping the time.
pub fn write_knobs(path: &Path, knobs: &BenchKnobs) -> anyhow::Result<()> {
    let mut knobs = knobs.clone();
    knobs.timestamp = chrono::Local::now().to_rfc3339();
    let mut json = serde_json::to_vec_pretty(&knobs).context("serializing parameters")?;
    json.push(b'\n');
    write_atomic(path, |w| w.write_all(&json))
        .with_context(|| format!("saving parameters to {}", path.display()))
}

/// Refuses parameters stored for another device (only fields stored non-empty count).
pub fn check_device(path: &Path, knobs: &BenchKnobs, dev: &DevIdent) -> anyhow::Result<()> {
    let differs = (!knobs.iocost_dev_model.is_empty() && knobs.iocost_dev_model != dev.model)
        || (!knobs.iocost_dev_fwrev.is_empty() && knobs.iocost_dev_fwrev != dev.fwrev)
        || (knobs.iocost_dev_size != 0 && knobs.iocost_dev_size != dev.size);
    if differs {
        crate::usage_bail!(
            "{} holds parameters for device model={:?} firmware={:?} size={} but the scratch \
             device is model={:?} firmware={:?} size={}; try removing {} so the parameters are \
             benchmarked again for this device",
            path.display(),
            knobs.iocost_dev_model,
            knobs.iocost_dev_fwrev,
            knobs.iocost_dev_size,
            dev.model,
            dev.fwrev,
            dev.size,
            path.display()
        );
    }
    Ok(())
}

/// The parameters of a run: what bench.json holds, the working copy with overrides, and the
/// snapshot a job can revert to.
#[derive(Debug, Clone)]
pub struct BenchFile {
    dir: PathBuf,
    dev: DevIdent,
    /// What bench.json holds (loaded, plus commits).
    stored: BenchKnobs,
    /// The parameters runs use: stored + command-line overrides + applies.
    pub knobs: BenchKnobs,
    job_start: BenchKnobs,
    hashd_ovr: HashdOverride,
}

impl BenchFile {
    pub fn bench_path(dir: &Path) -> PathBuf {
        dir.join(BENCH_FILENAME)
    }

    pub fn rb_bench_path(dir: &Path) -> PathBuf {
        dir.join(RB_BENCH_FILENAME)
    }

    /// Loads `<dir>/bench.json` (defaults if missing) for scratch device `dev`.
    pub fn load(dir: &Path, dev: DevIdent) -> anyhow::Result<Self> {
        let path = Self::bench_path(dir);
        let stored = read_knobs(&path)?.unwrap_or_default();
        check_device(&path, &stored, &dev)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            dev,
            knobs: stored.clone(),
            job_start: stored.clone(),
            stored,
            hashd_ovr: HashdOverride::default(),
        })
    }

    /// Puts the command-line overrides on the working copy: `--iocost-from-sys` takes model and
    /// QoS of `devnr` from the kernel (iocost must be on there), then `--iocost-qos` goes on top
    /// of the QoS.
    pub fn apply_overrides(
        &mut self,
        paths: &HostPaths,
        devnr: DevNr,
        from_sys: bool,
        qos_ovr: Option<&QosOverride>,
        hashd_ovr: HashdOverride,
    ) -> anyhow::Result<()> {
        if from_sys {
            self.knobs.iocost = knobs_from_sys(paths, devnr)?;
            self.knobs.iocost_seq = self.knobs.iocost_seq.max(1);
        }
        if let Some(ovr) = qos_ovr {
            // Parameters only: whether iocost is on is not the override's business here.
            let mut qos = ovr.apply(&self.knobs.iocost.qos);
            qos.enable = self.knobs.iocost.qos.enable;
            self.knobs.iocost.qos = qos;
        }
        self.hashd_ovr = hashd_ovr;
        hashd_ovr.apply(&mut self.knobs.hashd);
        self.job_start = self.knobs.clone();
        Ok(())
    }

    /// Start of a job: writes the working copy to rb-bench.json and remembers it for
    /// [`BenchFile::revert`].
    pub fn start_job(&mut self) -> anyhow::Result<()> {
        self.job_start = self.knobs.clone();
        write_knobs(&Self::rb_bench_path(&self.dir), &self.knobs)
    }

    fn save(&self, commit: bool) -> anyhow::Result<()> {
        write_knobs(&Self::rb_bench_path(&self.dir), &self.knobs)?;
        if commit {
            write_knobs(&Self::bench_path(&self.dir), &self.stored)?;
        }
        Ok(())
    }

    /// New io.cost parameters from a bench: replaces them in the working copy (bumping
    /// `iocost_seq` and recording the device) and rb-bench.json; `commit` also stores them in
    /// bench.json.
    pub fn apply_iocost(&mut self, iocost: IoCostKnobs, commit: bool) -> anyhow::Result<()> {
        let set = |k: &mut BenchKnobs, dev: &DevIdent| {
            k.iocost = iocost.clone();
            k.iocost.qos = k.iocost.qos.rounded();
            k.iocost_seq += 1;
            k.iocost_dev_model = dev.model.clone();
            k.iocost_dev_fwrev = dev.fwrev.clone();
            k.iocost_dev_size = dev.size;
        };
        set(&mut self.knobs, &self.dev);
        if commit {
            set(&mut self.stored, &self.dev);
        }
        self.save(commit)
    }

    /// New hashd parameters, like [`BenchFile::apply_iocost`].
    /// The working copy keeps the `--hashd-*` overrides; bench.json gets what was measured.
    pub fn apply_hashd(&mut self, hashd: HashdKnobs, commit: bool) -> anyhow::Result<()> {
        self.knobs.hashd = hashd.clone();
        self.hashd_ovr.apply(&mut self.knobs.hashd);
        self.knobs.hashd_seq += 1;
        if commit {
            self.stored.hashd = hashd;
            self.stored.hashd_seq += 1;
        }
        self.save(commit)
    }

    /// Back to the parameters at the start of the current job (rb-bench.json too).
    pub fn revert(&mut self) -> anyhow::Result<()> {
        self.knobs = self.job_start.clone();
        write_knobs(&Self::rb_bench_path(&self.dir), &self.knobs)
    }

    /// What bench.json holds.
    pub fn stored(&self) -> &BenchKnobs {
        &self.stored
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::iocost::IoCostQos;
    use std::fs;

    /// Shaped like a resctl-demo bench.json: comment preamble, then the parameters.
    const UPSTREAM: &str = r#"// Benchmark results
//
// The iocost parameters are for the scratch device.
# another comment style
{
  "timestamp": "2021-06-05T10:11:12.123456789-04:00",
  "hashd_seq": 3,
  "iocost_seq": 2,
  "hashd": {
    "hash_size": 1180,
    "rps_max": 1005,
    "mem_size": 10402988032,
    "mem_frac": 0.5791,
    "chunk_pages": 25,
    "fake_cpu_load": false
  },
  "iocost": {
    "devnr": "259:0",
    "model": {
      "rbps": 3235739592,
      "rseqiops": 343800,
      "rrandiops": 376893,
      "wbps": 2219232034,
      "wseqiops": 239923,
      "wrandiops": 241421
    },
    "qos": {
      "rpct": 95.0,
      "rlat": 12042,
      "wpct": 95.0,
      "wlat": 13664,
      "min": 60.004,
      "max": 100.0
    }
  },
  "iocost_dev_model": "Samsung SSD 970 PRO 512GB",
  "iocost_dev_fwrev": "1B2QEXP7",
  "iocost_dev_size": 512110190592
}
"#;

    fn samsung() -> DevIdent {
        DevIdent {
            model: "Samsung SSD 970 PRO 512GB".into(),
            fwrev: "1B2QEXP7".into(),
            size: 512110190592,
        }
    }

    #[test]
    fn parses_upstream_file_with_preamble() {
        let k = parse_knobs(Path::new("bench.json"), UPSTREAM).unwrap();
        assert_eq!((k.hashd_seq, k.iocost_seq), (3, 2));
        assert_eq!(k.hashd.mem_size, 10402988032);
        assert_eq!(k.hashd.mem_frac, 0.5791);
        assert_eq!(k.iocost.devnr, "259:0");
        assert_eq!(k.iocost.model.wrandiops, 241421);
        assert_eq!(k.iocost.qos.min, 60.0); // rounded on load
        assert_eq!(k.iocost.qos.wlat, 13664);
        assert_eq!(k.iocost_dev_size, 512110190592);
        assert_eq!(k.timestamp, "2021-06-05T10:11:12.123456789-04:00");
    }

    #[test]
    fn malformed_and_missing_files() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join(BENCH_FILENAME);
        assert_eq!(read_knobs(&p).unwrap(), None);
        fs::write(&p, "// only a comment\n{\"iocost_seq\": \"two\"}").unwrap();
        let e = read_knobs(&p).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        assert!(e
            .to_string()
            .contains("bench.json is not a valid parameter file"));
        fs::write(&p, "// all comments\n").unwrap();
        assert!(read_knobs(&p).is_err());
        // Empty object: all defaults.
        fs::write(&p, "{}").unwrap();
        assert_eq!(read_knobs(&p).unwrap(), Some(BenchKnobs::default()));
    }

    #[test]
    fn round_trip_keeps_layout() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join(BENCH_FILENAME);
        let k = parse_knobs(&p, UPSTREAM).unwrap();
        write_knobs(&p, &k).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 8);
        assert_eq!(
            v["iocost"]["qos"],
            serde_json::json!({"rpct": 95.0, "rlat": 12042, "wpct": 95.0, "wlat": 13664,
                               "min": 60.0, "max": 100.0})
        );
        assert!(v["iocost"]["model"].get("ctrl").is_none());
        let back = read_knobs(&p).unwrap().unwrap();
        assert_eq!(
            BenchKnobs {
                timestamp: k.timestamp.clone(),
                ..back
            },
            k
        );
        // No temp files left behind.
        assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
    }

    #[test]
    fn device_mismatch_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(BENCH_FILENAME), UPSTREAM).unwrap();
        assert!(BenchFile::load(tmp.path(), samsung()).is_ok());
        let other = DevIdent {
            fwrev: "2B2QEXP7".into(),
            ..samsung()
        };
        let e = BenchFile::load(tmp.path(), other).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        let msg = e.to_string();
        assert!(
            msg.contains("try removing") && msg.contains("bench.json"),
            "{}",
            msg
        );
        // Stored identity empty: any device is fine.
        let mut k = parse_knobs(Path::new("x"), UPSTREAM).unwrap();
        k.iocost_dev_model.clear();
        k.iocost_dev_fwrev.clear();
        k.iocost_dev_size = 0;
        assert!(check_device(Path::new("x"), &k, &DevIdent::default()).is_ok());
        // Missing file: defaults.
        let empty = tempfile::tempdir().unwrap();
        let bf = BenchFile::load(empty.path(), samsung()).unwrap();
        assert_eq!(bf.knobs, BenchKnobs::default());
    }

    #[test]
    fn overrides_apply_and_commit() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(dir.join(BENCH_FILENAME), UPSTREAM).unwrap();
        let hp = HostPaths::under(dir.join("root"));
        fs::create_dir_all(hp.cgroup()).unwrap();
        fs::write(
            hp.cgroup().join("io.cost.model"),
            "259:0 ctrl=auto model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6\n",
        )
        .unwrap();
        fs::write(
            hp.cgroup().join("io.cost.qos"),
            "259:0 enable=1 ctrl=auto rpct=90.00 rlat=250 wpct=90.00 wlat=250 min=50.00 max=150.00\n",
        )
        .unwrap();
        let dev = DevNr::new(259, 0);

        let mut bf = BenchFile::load(dir, samsung()).unwrap();
        let ovr = QosOverride::parse("vrate=70.555,rlat=9000").unwrap();
        bf.apply_overrides(&hp, dev, true, Some(&ovr), HashdOverride::default())
            .unwrap();
        assert_eq!(bf.knobs.iocost.model.rbps, 1);
        let q = &bf.knobs.iocost.qos;
        assert_eq!((q.rpct, q.rlat, q.min, q.max), (90.0, 9000, 70.56, 70.56));
        assert_eq!(bf.knobs.iocost_seq, 2);

        // A job starts: rb-bench.json gets the working copy, bench.json is untouched.
        bf.start_job().unwrap();
        let rb = read_knobs(&dir.join(RB_BENCH_FILENAME)).unwrap().unwrap();
        assert_eq!(rb.iocost.qos.min, 70.56);
        let stored = read_knobs(&dir.join(BENCH_FILENAME)).unwrap().unwrap();
        assert_eq!(stored.iocost.qos.min, 60.0);

        // Apply without commit: rb-bench.json only; revert goes back to the job start.
        let new = IoCostKnobs {
            devnr: "259:0".into(),
            qos: IoCostQos {
                rpct: 99.0,
                max: 100.0,
                ..Default::default()
            },
            ..Default::default()
        };
        bf.apply_iocost(new.clone(), false).unwrap();
        assert_eq!(bf.knobs.iocost_seq, 3);
        let rb = read_knobs(&dir.join(RB_BENCH_FILENAME)).unwrap().unwrap();
        assert_eq!(rb.iocost.qos.rpct, 99.0);
        assert_eq!(
            read_knobs(&dir.join(BENCH_FILENAME))
                .unwrap()
                .unwrap()
                .iocost_seq,
            2
        );
        bf.revert().unwrap();
        assert_eq!(bf.knobs.iocost.qos.min, 70.56);
        let rb = read_knobs(&dir.join(RB_BENCH_FILENAME)).unwrap().unwrap();
        assert_eq!(rb.iocost.qos.rpct, 90.0);

        // Commit: bench.json gets the new parameters, not the command-line overrides, and
        // how the model was measured (what iocost-qos records and merge keeps apart).
        let new = IoCostKnobs {
            upstream_jobs: true,
            ..new
        };
        bf.apply_iocost(new, true).unwrap();
        let stored = read_knobs(&dir.join(BENCH_FILENAME)).unwrap().unwrap();
        assert_eq!((stored.iocost.qos.rpct, stored.iocost_seq), (99.0, 3));
        assert!(stored.iocost.upstream_jobs);
        assert_eq!(stored.iocost_dev_model, "Samsung SSD 970 PRO 512GB");
        assert_eq!(stored.hashd.mem_size, 10402988032);
        bf.apply_hashd(
            HashdKnobs {
                rps_max: 2000,
                ..stored.hashd.clone()
            },
            true,
        )
        .unwrap();
        let stored = read_knobs(&dir.join(BENCH_FILENAME)).unwrap().unwrap();
        assert_eq!((stored.hashd.rps_max, stored.hashd_seq), (2000, 4));
        assert_eq!(bf.stored().hashd_seq, 4);
    }

    #[test]
    fn from_sys_with_iocost_off_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(tmp.path());
        fs::create_dir_all(hp.cgroup()).unwrap();
        fs::write(hp.cgroup().join("io.cost.model"), "").unwrap();
        fs::write(hp.cgroup().join("io.cost.qos"), "").unwrap();
        let mut bf = BenchFile::load(tmp.path(), DevIdent::default()).unwrap();
        let e = bf
            .apply_overrides(&hp, DevNr::new(8, 0), true, None, HashdOverride::default())
            .unwrap_err();
        assert!(e.to_string().contains("--iocost-from-sys"), "{}", e);
        // Without from-sys, an override alone works on the stored QoS.
        let ovr = QosOverride::parse("rpct=50").unwrap();
        bf.apply_overrides(
            &hp,
            DevNr::new(8, 0),
            false,
            Some(&ovr),
            HashdOverride::default(),
        )
        .unwrap();
        assert_eq!(bf.knobs.iocost.qos.rpct, 50.0);
    }

    #[test]
    fn hashd_overrides_hold_over_applied_parameters_and_stay_out_of_bench_json() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(dir.join(BENCH_FILENAME), UPSTREAM).unwrap();
        let hp = HostPaths::under(dir.join("root"));
        let mut bf = BenchFile::load(dir, samsung()).unwrap();
        let stored = bf.stored().hashd.clone();
        let g = 1u64 << 30;
        // Below mem_size: mem_frac goes down.
        let ovr = HashdOverride {
            size: Some(2 * g),
            fake_cpu_load: Some(true),
        };
        bf.apply_overrides(&hp, DevNr::new(8, 0), false, None, ovr)
            .unwrap();
        let k = &bf.knobs.hashd;
        assert_eq!(k.mem_size, stored.mem_size);
        assert!((k.mem_size as f64 * k.mem_frac - 2.0 * g as f64).abs() < 1.0);
        assert!(k.fake_cpu_load && !stored.fake_cpu_load);
        // Above mem_size: mem_size goes up, all of it used.
        let mut big = stored.clone();
        HashdOverride {
            size: Some(stored.mem_size * 2),
            fake_cpu_load: None,
        }
        .apply(&mut big);
        assert_eq!((big.mem_size, big.mem_frac), (stored.mem_size * 2, 1.0));
        // A bench's new parameters: the working copy keeps the overrides, bench.json gets the
        // measured ones.
        let measured = HashdKnobs {
            rps_max: 777,
            mem_size: 8 * g,
            mem_frac: 0.9,
            ..stored.clone()
        };
        bf.apply_hashd(measured.clone(), true).unwrap();
        let k = &bf.knobs.hashd;
        assert_eq!((k.rps_max, k.mem_size, k.mem_frac), (777, 8 * g, 0.25));
        assert!(k.fake_cpu_load);
        let on_disk = read_knobs(&dir.join(BENCH_FILENAME)).unwrap().unwrap();
        assert_eq!(on_disk.hashd, measured);
    }
}
