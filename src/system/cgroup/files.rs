//! Readers and writers of cgroup2 kernel files: errors that name the file, device numbers,
//! flat and nested keyed files, pressure and io.stat.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// What went wrong reading or writing a kernel file; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum KernelFileError {
    #[error("can't read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("can't write {value:?} to {}: {source}", path.display())]
    Write {
        path: PathBuf,
        value: String,
        source: std::io::Error,
    },
    #[error("can't create cgroup {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: line {line}: {msg}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{}: {msg}", path.display())]
    Missing { path: PathBuf, msg: String },
    #[error(
        "the cgroup2 controller {ctrl:?} is not available in {} (it lists: {avail}); \
         enable it in the kernel or the parent cgroup",
        path.display()
    )]
    ControllerUnavailable {
        path: PathBuf,
        ctrl: String,
        avail: String,
    },
}

pub(super) fn parse_err(path: &Path, line: usize, msg: impl Into<String>) -> KernelFileError {
    KernelFileError::Parse {
        path: path.to_path_buf(),
        line,
        msg: msg.into(),
    }
}

/// Reads a whole kernel file.
pub fn read_file(path: &Path) -> Result<String, KernelFileError> {
    std::fs::read_to_string(path).map_err(|source| KernelFileError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `value` to a kernel file in one write (the kernel parses each write on its own).
pub fn write_file(path: &Path, value: &str) -> Result<(), KernelFileError> {
    use std::io::Write;
    // O_TRUNC is what a shell `echo >` does; kernfs ignores it, plain files (tests) need it.
    let res = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()));
    res.map_err(|source| KernelFileError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

/// `MAJ:MIN` of a block device, as io.stat and io.cost.* key their lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DevNr {
    pub maj: u32,
    pub min: u32,
}

impl DevNr {
    pub fn new(maj: u32, min: u32) -> Self {
        Self { maj, min }
    }
}

impl fmt::Display for DevNr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.maj, self.min)
    }
}

impl FromStr for DevNr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "{:?} is not a device number (accepted: MAJ:MIN like 259:0)",
                s
            )
        };
        let (maj, min) = s.split_once(':').ok_or_else(bad)?;
        Ok(Self {
            maj: maj.parse().map_err(|_| bad())?,
            min: min.parse().map_err(|_| bad())?,
        })
    }
}

/// A flat keyed file (`key value` per line: cpu.stat, memory.stat) as a map.
pub fn parse_flat_keyed(path: &Path, text: &str) -> Result<BTreeMap<String, u64>, KernelFileError> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut toks = line.split_whitespace();
        let (Some(key), Some(val), None) = (toks.next(), toks.next(), toks.next()) else {
            return Err(parse_err(
                path,
                i + 1,
                format!("{:?} is not \"KEY VALUE\"", line),
            ));
        };
        let v = val
            .parse::<u64>()
            .map_err(|_| parse_err(path, i + 1, format!("{}: {:?} is not a count", key, val)))?;
        map.insert(key.to_string(), v);
    }
    Ok(map)
}

/// A nested keyed file (`KEY k=v k=v …` per line: io.stat, io.cost.*, *.pressure) as
/// `KEY → {k → v}`, values left as text.
pub fn parse_nested_keyed(
    path: &Path,
    text: &str,
) -> Result<BTreeMap<String, BTreeMap<String, String>>, KernelFileError> {
    let mut map = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut toks = line.split_whitespace();
        let Some(key) = toks.next() else { continue };
        let mut kv = BTreeMap::new();
        for tok in toks {
            let (k, v) = tok.split_once('=').ok_or_else(|| {
                parse_err(path, i + 1, format!("{:?} after {} is not k=v", tok, key))
            })?;
            kv.insert(k.to_string(), v.to_string());
        }
        map.insert(key.to_string(), kv);
    }
    Ok(map)
}

/// A nested-keyed value as a number, or an error naming the file, the line key and the field.
pub fn nested_num<T: FromStr>(
    path: &Path,
    key: &str,
    kv: &BTreeMap<String, String>,
    field: &str,
) -> Result<T, KernelFileError> {
    let Some(v) = kv.get(field) else {
        return Err(KernelFileError::Missing {
            path: path.to_path_buf(),
            msg: format!("the {} line has no {}=", key, field),
        });
    };
    v.parse().map_err(|_| KernelFileError::Missing {
        path: path.to_path_buf(),
        msg: format!("{} {}={:?} is not a number", key, field, v),
    })
}

/// A single-number file (memory.current, memory.swap.current).
pub fn parse_single_u64(path: &Path, text: &str) -> Result<u64, KernelFileError> {
    let t = text.trim();
    t.parse()
        .map_err(|_| parse_err(path, 1, format!("{:?} is not a count", t)))
}

/// The cgroup2 controllers we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Controller {
    Cpu,
    Io,
    Memory,
}

impl Controller {
    pub const ALL: [Controller; 3] = [Controller::Cpu, Controller::Io, Controller::Memory];

    pub fn name(self) -> &'static str {
        match self {
            Controller::Cpu => "cpu",
            Controller::Io => "io",
            Controller::Memory => "memory",
        }
    }
}

/// Which `*.pressure` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PressureKind {
    Cpu,
    Memory,
    Io,
}

impl PressureKind {
    pub fn file(self) -> &'static str {
        match self {
            PressureKind::Cpu => "cpu.pressure",
            PressureKind::Memory => "memory.pressure",
            PressureKind::Io => "io.pressure",
        }
    }
}

/// One line of a pressure file; `total` is cumulative stall time in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PressureLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    pub total: u64,
}

/// A `*.pressure` file; `full` is `None` where the kernel doesn't report it (cpu on old
/// kernels).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Pressure {
    pub some: PressureLine,
    pub full: Option<PressureLine>,
}

pub fn parse_pressure(path: &Path, text: &str) -> Result<Pressure, KernelFileError> {
    let map = parse_nested_keyed(path, text)?;
    let line = |key: &str| -> Result<Option<PressureLine>, KernelFileError> {
        let Some(kv) = map.get(key) else {
            return Ok(None);
        };
        Ok(Some(PressureLine {
            avg10: nested_num(path, key, kv, "avg10")?,
            avg60: nested_num(path, key, kv, "avg60")?,
            avg300: nested_num(path, key, kv, "avg300")?,
            total: nested_num(path, key, kv, "total")?,
        }))
    };
    let some = line("some")?.ok_or_else(|| KernelFileError::Missing {
        path: path.to_path_buf(),
        msg: "no \"some\" line".into(),
    })?;
    Ok(Pressure {
        some,
        full: line("full")?,
    })
}

/// The cpu.stat values the reports use (microseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuStat {
    pub usage_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
}

/// io.stat: per device, every `k=v` as a number (`rbytes`, `wios`, `cost.vrate`, …).
pub type IoStat = BTreeMap<DevNr, BTreeMap<String, f64>>;

pub fn parse_io_stat(path: &Path, text: &str) -> Result<IoStat, KernelFileError> {
    let mut out = IoStat::new();
    for (key, kv) in parse_nested_keyed(path, text)? {
        let dev: DevNr = key.parse().map_err(|e: String| KernelFileError::Missing {
            path: path.to_path_buf(),
            msg: e,
        })?;
        let mut vals = BTreeMap::new();
        for k in kv.keys() {
            vals.insert(k.clone(), nested_num::<f64>(path, &key, &kv, k)?);
        }
        out.insert(dev, vals);
    }
    Ok(out)
}
