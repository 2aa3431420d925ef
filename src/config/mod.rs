//! Validated global options. `cli` keeps typed values as strings; `Config::from_opts` parses each
//! with the shared parsers in `crate::units::parse` so every bad value gets one line naming the
//! option, the value and what is accepted (a `UsageError`, exit code 2). With `-a/--args FILE`
//! the stored values fill in what the command line leaves out (`args_file`).

pub mod args_file;

use crate::cli::{GlobalOpts, DFL_DIR};
use crate::error::UsageError;
use crate::units::parse::{parse_duration, parse_frac, parse_int, parse_size};
use std::path::PathBuf;

pub const DFL_REP_RETENTION: u64 = 7 * 24 * 3600;
pub use crate::system::mem::DFL_MEM_PROFILE;
pub const DFL_MEM_MARGIN: f64 = 0.25;
/// `--iocost-qos`: the QoS override type shared with the iocost-qos bench.
pub use crate::system::iocost::{QosOverride, QOS_KEYS};

/// The global options after validation.
#[derive(Debug, Clone)]
pub struct Config {
    pub result: Option<PathBuf>,
    pub dir: PathBuf,
    /// Scratch device name without `/dev/` (e.g. `nvme0n1`); `None` = auto-detect.
    pub dev: Option<String>,
    /// Seconds.
    pub rep_retention: u64,
    /// GiB; `None` = `off` (run at the machine's size).
    pub mem_profile: Option<u32>,
    /// Bytes; `None` = estimate.
    pub mem_avail: Option<u64>,
    pub mem_margin: f64,
    pub iocost_qos: Option<QosOverride>,
    pub swappiness: Option<u32>,
    /// `--hashd-size` (bytes), `--hashd-cpu-load` (`None` = keep).
    pub hashd_size: Option<u64>,
    pub hashd_fake_cpu_load: Option<bool>,
    /// The `-a/--args` file, saved once the job specs are known (`ArgsFile::save`).
    pub args_file: Option<args_file::ArgsFile>,
    pub iocost_from_sys: bool,
    pub keep_reports: bool,
    pub clear_reports: bool,
    pub force: bool,
    /// `--quick`: shortened bench phases; results are marked.
    pub quick: bool,
}

use crate::error::option_error as bad;

impl Config {
    /// The validated global options, with the `-a/--args` file's values under the command
    /// line's.
    pub fn from_opts(o: &GlobalOpts) -> anyhow::Result<Config> {
        match &o.args {
            Some(path) => args_file::ArgsFile::load(path)?.into_config(o),
            None => Self::validate(o),
        }
    }

    /// Validates the options exactly as given (no args file).
    pub(crate) fn validate(o: &GlobalOpts) -> anyhow::Result<Config> {
        let dir = dir_of(o.dir.as_deref())?;
        let dev = dev_of(o.dev.as_deref())?;
        let rep_retention = rep_retention_of(o.rep_retention.as_deref())?;
        let mem_profile = mem_profile_of(o.mem_profile.as_deref())?;
        let mem_avail = mem_avail_of(o.mem_avail.as_deref())?;
        let mem_margin = mem_margin_of(o.mem_margin.as_deref())?;
        let iocost_qos = iocost_qos_of(o.iocost_qos.as_deref())?;
        let swappiness = swappiness_of(o.swappiness.as_deref())?;
        let hashd_size = hashd_size_of(o.hashd_size.as_deref())?;
        let hashd_fake_cpu_load = hashd_fake_cpu_load_of(o.hashd_cpu_load.as_deref())?;
        Ok(Config {
            result: o.result.clone(),
            dir,
            dev,
            rep_retention,
            mem_profile,
            mem_avail,
            mem_margin,
            iocost_qos,
            swappiness,
            hashd_size,
            hashd_fake_cpu_load,
            args_file: None,
            iocost_from_sys: o.iocost_from_sys,
            keep_reports: o.keep_reports,
            clear_reports: o.clear_reports,
            force: o.force,
            quick: o.quick,
        })
    }

    /// The validated options that influence results, for a result entry's sysinfo.
    pub fn sysinfo_args(&self) -> serde_json::Value {
        serde_json::json!({
            "dir": self.dir,
            "dev": self.dev,
            "rep_retention": self.rep_retention,
            "mem_profile": self.mem_profile,
            "mem_avail": self.mem_avail.unwrap_or(0),
            "mem_margin": self.mem_margin,
            "iocost_qos": self.iocost_qos,
            "swappiness": self.swappiness,
            "hashd_size": self.hashd_size,
            "hashd_fake_cpu_load": self.hashd_fake_cpu_load,
            "iocost_from_sys": self.iocost_from_sys,
            "force": self.force,
            "quick": self.quick,
        })
    }
}

impl crate::system::session::SessionOpts {
    /// What the host session needs of the validated options.
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            dir: cfg.dir.clone(),
            dev: cfg.dev.clone(),
            force: cfg.force,
            mem_profile: cfg.mem_profile,
            mem_avail: cfg.mem_avail,
            mem_margin: cfg.mem_margin,
            swappiness: cfg.swappiness,
            rep_retention: cfg.rep_retention,
            keep_reports: cfg.keep_reports,
            clear_reports: cfg.clear_reports,
            iocost_from_sys: cfg.iocost_from_sys,
            iocost_qos: cfg.iocost_qos,
            hashd: crate::system::bench_json::HashdOverride {
                size: cfg.hashd_size,
                fake_cpu_load: cfg.hashd_fake_cpu_load,
            },
        }
    }
}

/// `--dir`.
fn dir_of(v: Option<&str>) -> anyhow::Result<PathBuf> {
    Ok(match v {
        None | Some("") => PathBuf::from(DFL_DIR),
        Some(d) => PathBuf::from(d),
    })
}

/// `--dev`.
fn dev_of(v: Option<&str>) -> anyhow::Result<Option<String>> {
    Ok(match v {
        None => None,
        Some(d) => {
            let name = d.trim().strip_prefix("/dev/").unwrap_or(d.trim());
            if name.is_empty() || name.contains('/') || name.contains(char::is_whitespace) {
                return Err(bad(
                    "dev",
                    format!("{:?} is not a block device name (accepted: a name like nvme0n1 or sda, optionally with /dev/)", d),
                ));
            }
            Some(name.to_string())
        }
    })
}

/// `--rep-retention`.
fn rep_retention_of(v: Option<&str>) -> anyhow::Result<u64> {
    Ok(match v {
        None => DFL_REP_RETENTION,
        Some(s) => {
            let secs = parse_duration(s).map_err(|e| bad("rep-retention", e))?;
            if secs < 1.0 {
                return Err(bad("rep-retention", format!("{:?} is shorter than 1s", s)));
            }
            secs.round() as u64
        }
    })
}

/// `--mem-profile`.
fn mem_profile_of(v: Option<&str>) -> anyhow::Result<Option<u32>> {
    Ok(match v {
        None => Some(DFL_MEM_PROFILE),
        Some("off") => None,
        Some(s) => {
            let accepted = "accepted: a power of two like 4, 8, 16, 32, or off";
            let n = parse_int(s)
                .ok()
                .filter(|n| n.is_power_of_two() && *n <= 1 << 20)
                .ok_or_else(|| {
                    bad(
                        "mem-profile",
                        format!("{:?} is not a power of two ({})", s, accepted),
                    )
                })?;
            Some(n as u32)
        }
    })
}

/// `--mem-avail`.
fn mem_avail_of(v: Option<&str>) -> anyhow::Result<Option<u64>> {
    Ok(match v {
        None => None,
        Some(s) => Some(parse_size(s).map_err(|e| bad("mem-avail", e))?).filter(|v| *v > 0),
    })
}

/// `--mem-margin`.
fn mem_margin_of(v: Option<&str>) -> anyhow::Result<f64> {
    Ok(match v {
        None => DFL_MEM_MARGIN,
        Some(s) => {
            let v = parse_frac(s).map_err(|e| bad("mem-margin", e))?;
            if v > 1.0 {
                return Err(bad(
                    "mem-margin",
                    format!("{:?} is above 100% (accepted: 0 to 1, or 0% to 100%)", s),
                ));
            }
            v
        }
    })
}

/// `--iocost-qos`.
fn iocost_qos_of(v: Option<&str>) -> anyhow::Result<Option<QosOverride>> {
    Ok(match v {
        None => None,
        Some(s) => Some(
            QosOverride::parse(s)
                .map_err(|e| UsageError::new(format!("--iocost-qos {:?}: {}", s, e)))?,
        ),
    })
}

/// `--swappiness`.
fn swappiness_of(v: Option<&str>) -> anyhow::Result<Option<u32>> {
    Ok(match v {
        None => None,
        Some(s) => {
            let v = parse_int(s).ok().filter(|v| *v <= 200).ok_or_else(|| {
                bad(
                    "swappiness",
                    format!("{:?} is not an integer from 0 to 200", s),
                )
            })?;
            Some(v as u32)
        }
    })
}

/// `--hashd-size`.
fn hashd_size_of(v: Option<&str>) -> anyhow::Result<Option<u64>> {
    Ok(match v {
        None => None,
        Some(s) => {
            let v = parse_size(s).map_err(|e| bad("hashd-size", e))?;
            if v < 4096 {
                return Err(bad(
                    "hashd-size",
                    format!(
                        "{:?} is smaller than a page (accepted: a size of 4K or more, like 2G)",
                        s
                    ),
                ));
            }
            Some(v)
        }
    })
}

/// `--hashd-cpu-load`.
fn hashd_fake_cpu_load_of(v: Option<&str>) -> anyhow::Result<Option<bool>> {
    Ok(match v {
        None | Some("keep") => None,
        Some("fake") => Some(true),
        Some("real") => Some(false),
        Some(s) => {
            return Err(bad(
                "hashd-cpu-load",
                format!("{:?} is not a choice (accepted: keep, fake, real)", s),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(args: &[&str]) -> anyhow::Result<Config> {
        Config::from_opts(&GlobalOpts::parse_alone(args)?)
    }

    fn err(args: &[&str]) -> String {
        let e = cfg(args).expect_err("should fail");
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        format!("{:#}", e)
    }

    #[test]
    fn defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.dir, PathBuf::from(DFL_DIR));
        assert_eq!(c.rep_retention, 604800);
        assert_eq!(c.mem_profile, Some(16));
        assert_eq!(c.mem_margin, 0.25);
        assert!(c.iocost_qos.is_none() && c.swappiness.is_none() && c.mem_avail.is_none());
        assert_eq!(cfg(&["-d", ""]).unwrap().dir, PathBuf::from(DFL_DIR));
    }

    #[test]
    fn parses_values() {
        let c = cfg(&[
            "-d",
            "/tmp/x",
            "-D",
            "/dev/nvme0n1",
            "--rep-retention",
            "1D",
            "-M",
            "off",
            "-m",
            "8G",
            "--mem-margin",
            "10%",
            "--iocost-qos",
            "rpct=95.123,rlat=5000,vrate=60",
            "--swappiness",
            "200",
        ])
        .unwrap();
        assert_eq!(c.dev.as_deref(), Some("nvme0n1"));
        assert_eq!(c.rep_retention, 86400);
        assert_eq!(c.mem_profile, None);
        assert_eq!(c.mem_avail, Some(8 << 30));
        assert_eq!(c.mem_margin, 0.1);
        let q = c.iocost_qos.unwrap();
        assert_eq!(
            (q.rpct, q.rlat, q.min, q.max),
            (Some(95.12), Some(5000), Some(60.0), Some(60.0))
        );
        assert_eq!(c.swappiness, Some(200));
        assert_eq!(cfg(&["-M", "32"]).unwrap().mem_profile, Some(32));
        assert_eq!(c.sysinfo_args()["iocost_qos"]["rpct"], 95.12);
    }

    #[test]
    fn rejects_bad_values() {
        assert!(err(&["-M", "3"]).contains("--mem-profile \"3\" is not a power of two"));
        assert!(err(&["-M", "0"]).contains("power of two"));
        assert!(err(&["--swappiness", "300"]).contains("from 0 to 200"));
        assert!(err(&["--iocost-qos", "rpct=abc"]).contains("rpct=\"abc\" is not a number"));
        assert!(err(&["--iocost-qos", "foo=1"]).contains("unknown QoS key \"foo\""));
        assert!(err(&["--iocost-qos", "rpct"]).contains("not KEY=VALUE"));
        assert!(err(&["--iocost-qos", "min=50,max=40"]).contains("must not be above"));
        assert!(err(&["--iocost-qos", "vrate=50,min=40"]).contains("don't combine"));
        assert!(err(&["--iocost-qos", "rpct=101"]).contains("between 0 and 100"));
        assert!(err(&["--mem-margin=-1"]).contains("negative"));
        assert!(err(&["--mem-margin", "150%"]).contains("above 100%"));
        assert!(err(&["-m", "lots"]).contains("--mem-avail \"lots\" is not a size"));
        assert!(err(&["-D", "a b"]).contains("not a block device name"));
        assert!(err(&["--rep-retention", "0"]).contains("shorter than 1s"));
    }
}
