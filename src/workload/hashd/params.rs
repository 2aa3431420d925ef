//! hashd's runtime parameters (`params.json`) and their live reload.
//!
//! Field names and defaults are those of upstream's rd-hashd params file, so a params file
//! written for one works for the other. Loading tolerates a `//` or `#` comment preamble and
//! missing fields (defaults); values are validated so a typo can't make hashd spin or divide
//! by zero.

use super::accdist::MAX_SLOTS;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The smallest page-cache share of the footprint (upstream's FILE_FRAC_MIN).
pub const FILE_FRAC_MIN: f64 = 0.001;

/// A PID controller's gains.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PidParams {
    pub kp: f64,
    pub ki: f64,
    pub kd: f64,
}

/// Runtime-tunable hashd parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Params {
    /// Control period, seconds.
    pub control_period: f64,
    /// Hard cap on concurrent requests.
    pub concurrency_max: u32,
    /// The controlled latency percentile (0.95 = p95).
    pub lat_target_pct: f64,
    /// Latency target at that percentile, seconds.
    pub lat_target: f64,
    pub rps_target: u32,
    /// Reference maximum RPS; scales the footprint and the log padding. 0 disables both.
    pub rps_max: u32,
    /// Footprint = size × mem_frac.
    pub mem_frac: f64,
    pub chunk_pages: usize,
    /// Page-cache share of the footprint.
    pub file_frac: f64,
    /// Mean bytes read from testfiles per request.
    pub file_size_mean: usize,
    pub file_size_stdev_ratio: f64,
    pub file_addr_stdev_ratio: f64,
    pub file_addr_rps_base_frac: f64,
    pub file_write_frac: f64,
    pub anon_size_ratio: f64,
    pub anon_size_stdev_ratio: f64,
    pub anon_addr_stdev_ratio: f64,
    pub anon_addr_rps_base_frac: f64,
    pub anon_write_frac: f64,
    /// Mean sleep per request, seconds.
    pub sleep_mean: f64,
    pub sleep_stdev_ratio: f64,
    /// Bytes hashed / bytes accessed.
    pub cpu_ratio: f64,
    /// Log bytes per second at rps_max.
    pub log_bps: u64,
    /// Sleep instead of hashing.
    pub fake_cpu_load: bool,
    /// Ours: make each request as upstream's rd-hashd does (a fresh buffer per request, a
    /// seek and read per file page); left out of the file when off, so it stays upstream's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub upstream_requests: bool,
    /// Ours: keep requests in flight as upstream's rd-hashd does (`floor(concurrency)`, at least
    /// one; the RPS controller integrating all the way, no start climb); left out of the file
    /// when off, so it stays upstream's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub upstream_flow: bool,
    /// Slots of the per-page access histograms in the status file (0 = off; see `accdist`).
    pub acc_dist_slots: usize,
    pub lat_pid: PidParams,
    pub rps_pid: PidParams,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            control_period: 1.0,
            concurrency_max: 65536,
            lat_target_pct: 0.95,
            lat_target: 0.075,
            rps_target: 65536,
            rps_max: 0,
            mem_frac: 0.80,
            chunk_pages: 25,
            file_frac: 0.25,
            file_size_mean: 1258291,
            file_size_stdev_ratio: 0.45,
            file_addr_stdev_ratio: 0.215,
            file_addr_rps_base_frac: 0.5,
            file_write_frac: 0.0,
            anon_size_ratio: 2.3,
            anon_size_stdev_ratio: 0.45,
            anon_addr_stdev_ratio: 0.235,
            anon_addr_rps_base_frac: 0.5,
            anon_write_frac: 0.3,
            sleep_mean: 0.020,
            sleep_stdev_ratio: 0.33,
            cpu_ratio: 0.93,
            log_bps: 1100794,
            fake_cpu_load: false,
            upstream_requests: false,
            upstream_flow: false,
            acc_dist_slots: 0,
            lat_pid: PidParams {
                kp: 0.1,
                ki: 0.01,
                kd: 0.01,
            },
            rps_pid: PidParams {
                kp: 0.25,
                ki: 0.01,
                kd: 0.01,
            },
        }
    }
}

/// The text after leading lines starting with `//` or `#` (upstream's JSON preamble).
fn strip_comments(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with("//") && !t.starts_with('#')
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl Params {
    /// Parses params text (with or without a comment preamble), then validates and normalises.
    pub fn parse(text: &str) -> Result<Params> {
        let mut p: Params = serde_json::from_str(&strip_comments(text))?;
        p.normalize()?;
        Ok(p)
    }

    pub fn load(path: &Path) -> Result<Params> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("parsing hashd params {}", path.display()))
    }

    /// Writes the params atomically (temp file + rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string_pretty(self).context("serializing hashd params")?;
        crate::util::atomic::write_atomic(path, |w| {
            w.write_all(json.as_bytes())?;
            w.write_all(b"\n")
        })
    }

    /// Loads `path`, creating it with the defaults if it doesn't exist.
    pub fn load_or_create(path: &Path) -> Result<Params> {
        match std::fs::metadata(path) {
            Ok(_) => Self::load(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let p = Params::default();
                p.save(path)
                    .with_context(|| format!("creating default params {}", path.display()))?;
                Ok(p)
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Rejects values that would make hashd misbehave; floors file_frac at FILE_FRAC_MIN.
    fn normalize(&mut self) -> Result<()> {
        let finite_nonneg = [
            ("control_period", self.control_period),
            ("lat_target", self.lat_target),
            ("mem_frac", self.mem_frac),
            ("file_frac", self.file_frac),
            ("file_size_stdev_ratio", self.file_size_stdev_ratio),
            ("file_addr_stdev_ratio", self.file_addr_stdev_ratio),
            ("file_addr_rps_base_frac", self.file_addr_rps_base_frac),
            ("file_write_frac", self.file_write_frac),
            ("anon_size_ratio", self.anon_size_ratio),
            ("anon_size_stdev_ratio", self.anon_size_stdev_ratio),
            ("anon_addr_stdev_ratio", self.anon_addr_stdev_ratio),
            ("anon_addr_rps_base_frac", self.anon_addr_rps_base_frac),
            ("anon_write_frac", self.anon_write_frac),
            ("sleep_mean", self.sleep_mean),
            ("sleep_stdev_ratio", self.sleep_stdev_ratio),
            ("cpu_ratio", self.cpu_ratio),
        ];
        for (name, v) in finite_nonneg {
            if !v.is_finite() || v < 0.0 {
                bail!("{} = {} is not a finite non-negative number", name, v);
            }
        }
        if self.control_period < 0.01 {
            bail!(
                "control_period = {} is too short (accepted: >= 0.01 s)",
                self.control_period
            );
        }
        if !(self.lat_target_pct > 0.0 && self.lat_target_pct <= 1.0) {
            bail!(
                "lat_target_pct = {} is not a fraction in (0, 1]",
                self.lat_target_pct
            );
        }
        if self.lat_target <= 0.0 {
            bail!("lat_target must be positive");
        }
        for (name, v) in [
            ("mem_frac", self.mem_frac),
            ("file_frac", self.file_frac),
            ("file_write_frac", self.file_write_frac),
            ("anon_write_frac", self.anon_write_frac),
            ("file_addr_rps_base_frac", self.file_addr_rps_base_frac),
            ("anon_addr_rps_base_frac", self.anon_addr_rps_base_frac),
        ] {
            if v > 1.0 {
                bail!("{} = {} is not a fraction in [0, 1]", name, v);
            }
        }
        if self.concurrency_max == 0 || self.rps_target == 0 {
            bail!("concurrency_max and rps_target must be at least 1");
        }
        if self.chunk_pages == 0 {
            bail!("chunk_pages must be at least 1");
        }
        if self.acc_dist_slots > MAX_SLOTS {
            bail!(
                "acc_dist_slots = {} is too many (accepted: 0 to {}, 0 turns the histograms off)",
                self.acc_dist_slots,
                MAX_SLOTS
            );
        }
        if self.file_size_mean == 0 {
            bail!("file_size_mean must be at least 1");
        }
        for (name, pid) in [("lat_pid", self.lat_pid), ("rps_pid", self.rps_pid)] {
            if ![pid.kp, pid.ki, pid.kd].iter().all(|v| v.is_finite()) {
                bail!("{} gains must be finite", name);
            }
        }
        self.file_frac = self.file_frac.max(FILE_FRAC_MIN);
        Ok(())
    }

    /// Bytes each log line is padded to: `round(log_bps / rps_max)`, 0 without rps_max.
    pub fn log_padding(&self) -> usize {
        if self.rps_max == 0 {
            0
        } else {
            (self.log_bps as f64 / self.rps_max as f64).round() as usize
        }
    }
}

/// Watches a params file and reloads it when its mtime changes (and the new mtime is at least
/// 10 ms old, so a writer that doesn't replace the file atomically has finished).
#[derive(Debug)]
pub struct ParamsWatcher {
    path: PathBuf,
    mtime: Option<SystemTime>,
}

/// How old a new mtime must be before the file is read.
const SETTLE: Duration = Duration::from_millis(10);

impl ParamsWatcher {
    /// Loads (or creates) the file and remembers its mtime.
    pub fn open(path: &Path) -> Result<(ParamsWatcher, Params)> {
        let p = Params::load_or_create(path)?;
        let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        Ok((
            ParamsWatcher {
                path: path.to_path_buf(),
                mtime,
            },
            p,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `Ok(Some(params))` when the file changed and loaded; `Ok(None)` when unchanged (or
    /// changed too recently, or gone); an error when the new content is invalid — the error
    /// is reported once per mtime, and the caller keeps the old params.
    pub fn check(&mut self) -> Result<Option<Params>> {
        let Ok(mtime) = std::fs::metadata(&self.path).and_then(|m| m.modified()) else {
            return Ok(None);
        };
        if Some(mtime) == self.mtime {
            return Ok(None);
        }
        let age = SystemTime::now()
            .duration_since(mtime)
            .unwrap_or(Duration::ZERO);
        if age < SETTLE {
            return Ok(None);
        }
        self.mtime = Some(mtime);
        Params::load(&self.path).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_upstream() {
        let p = Params::default();
        assert_eq!(p.lat_target, 0.075);
        assert_eq!(p.lat_target_pct, 0.95);
        assert_eq!(p.file_size_mean, 1258291);
        assert_eq!(p.log_bps, 1100794);
        assert_eq!(p.log_padding(), 0);
        let p = Params {
            rps_max: 1000,
            ..Params::default()
        };
        assert_eq!(p.log_padding(), 1101);
    }

    #[test]
    fn parse_with_preamble_and_missing_fields() {
        let text = "// hashd params\n#  rps_target: target\n{\n  \"rps_target\": 100,\n  \
                    \"lat_pid\": {\"kp\": 0.2, \"ki\": 0.0, \"kd\": 0.0},\n  \
                    \"file_frac\": 0.0\n}\n";
        let p = Params::parse(text).unwrap();
        assert_eq!(p.rps_target, 100);
        assert_eq!(p.lat_pid.kp, 0.2);
        assert_eq!(p.file_frac, FILE_FRAC_MIN);
        assert_eq!(p.mem_frac, 0.8);
        assert!(!p.upstream_requests);
    }

    #[test]
    fn upstream_requests_and_flow_are_written_only_when_on() {
        let off = serde_json::to_string(&Params::default()).unwrap();
        let requests = Params {
            upstream_requests: true,
            ..Params::default()
        };
        let flow = Params {
            upstream_flow: true,
            ..Params::default()
        };
        for (key, on) in [("upstream_requests", requests), ("upstream_flow", flow)] {
            assert!(!off.contains(key), "{off}");
            let text = serde_json::to_string(&on).unwrap();
            assert!(text.contains(&format!("\"{key}\":true")), "{text}");
            assert_eq!(Params::parse(&text).unwrap(), on);
        }
    }

    #[test]
    fn bad_values_are_rejected_with_the_field_name() {
        for (text, what) in [
            ("{\"lat_target_pct\": 1.5}", "lat_target_pct"),
            ("{\"chunk_pages\": 0}", "chunk_pages"),
            ("{\"mem_frac\": -0.1}", "mem_frac"),
            ("{\"control_period\": 0}", "control_period"),
            ("{\"rps_target\": \"fast\"}", "invalid type"),
            (
                "{\"acc_dist_slots\": 1000000}",
                "acc_dist_slots = 1000000 is too many",
            ),
        ] {
            let e = format!("{:#}", Params::parse(text).unwrap_err());
            assert!(e.contains(what), "{text}: {e}");
        }
    }

    #[test]
    fn round_trip_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("params.json");
        let (_, p) = ParamsWatcher::open(&path).unwrap();
        assert_eq!(p, Params::default());
        assert!(
            path.exists(),
            "defaults are written when the file is missing"
        );
        let q = Params {
            rps_target: 42,
            fake_cpu_load: true,
            ..p
        };
        q.save(&path).unwrap();
        assert_eq!(Params::load(&path).unwrap(), q);
    }

    #[test]
    fn watcher_reloads_on_mtime_change_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("params.json");
        let (mut w, _) = ParamsWatcher::open(&path).unwrap();
        assert!(w.check().unwrap().is_none(), "unchanged file");

        let set_mtime = |secs_ago: u64| {
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
                .unwrap();
        };
        Params {
            rps_target: 7,
            ..Params::default()
        }
        .save(&path)
        .unwrap();
        set_mtime(5);
        assert_eq!(w.check().unwrap().map(|p| p.rps_target), Some(7));
        assert!(w.check().unwrap().is_none(), "same mtime: no reload");

        // Invalid content: an error once, then nothing until the file changes again.
        std::fs::write(&path, "{\"chunk_pages\": 0}").unwrap();
        set_mtime(3);
        assert!(w.check().is_err());
        assert!(w.check().unwrap().is_none());

        // A brand-new mtime is left alone until it is 10 ms old.
        std::fs::write(&path, "{\"rps_target\": 9}").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() + Duration::from_secs(60))
            .unwrap();
        assert!(w.check().unwrap().is_none());
        set_mtime(1);
        assert_eq!(w.check().unwrap().map(|p| p.rps_target), Some(9));
    }
}
