//! `apply`: an io.cost solution onto the host, now (the kernel's `io.cost.model` and
//! `io.cost.qos` for the device) and at every boot (a hwdb file systemd's own `iocost` tool
//! reads through udev's `90-iocost.rules`), and back off again (`--undo`, from `state`).
//!
//! The solutions arrive as hwdb records whichever the source (iocost-tune's `hwdb` lines of a
//! result, or a community `90-iocost-tune.hwdb`), are looked up for a device as udev does
//! (`system::hwdb`), and read as systemd reads them (`solutions`). The hwdb file `--boot`
//! writes names the device as udev knows it (`udev`), lists the chosen solution alone in
//! `IOCOST_SOLUTIONS` (so systemd applies it whatever `TargetSolution=` says), and sorts after
//! the community's `90-iocost-tune.hwdb`, whose values it overrides for this device.
//! `exec` carries a plan out.

pub mod exec;
pub mod solutions;
pub mod state;
pub mod udev;

#[cfg(test)]
mod tests;

use self::solutions::{Solution, Solutions};
use self::udev::UdevIds;
use crate::error::UsageError;
use crate::system::blockdev::{is_composite_name, DevInfo};
use crate::system::cgroup::DevNr;
use crate::system::hwdb::{self, Record};
use crate::system::HostPaths;
use anyhow::Result;
use std::fmt::Write;
use std::path::PathBuf;

/// The directory `--boot` writes its hwdb file into, relative to the host's root.
pub const HWDB_DIR: &str = "etc/udev/hwdb.d";

/// Where the solutions come from.
#[derive(Debug, Clone)]
pub struct Source {
    /// For messages: `result.json (iocost-tune)`, a hwdb file's path.
    pub what: String,
    pub records: Vec<Record>,
    /// A result's device model and firmware revision as sysfs gave them; `None` for a hwdb
    /// file, whose match lines say which devices it is for.
    pub measured: Option<(String, String)>,
    /// The result's device name (`nvme0n1`), tried first among disks of its model.
    pub measured_dev: Option<String>,
}

/// What the user asked for.
#[derive(Debug, Clone, Default)]
pub struct Wanted {
    pub solution: Option<String>,
    /// `-D`: the disk to apply to.
    pub dev: Option<String>,
    /// The device's firmware revision must be the result's, and the hwdb line names it.
    pub fwrev: bool,
}

/// The device, its solutions, the chosen one and what `--boot` would write.
#[derive(Debug, Clone)]
pub struct Plan {
    pub dev: DevInfo,
    pub udev: Option<UdevIds>,
    pub solutions: Solutions,
    pub chosen: Solution,
    pub fwrev: bool,
    pub source: String,
}

/// `MAJ:MIN` of a disk.
pub fn devnr(d: &DevInfo) -> DevNr {
    DevNr::new(d.devnr.0, d.devnr.1)
}

fn usage(msg: String) -> anyhow::Error {
    UsageError::new(format!("apply: {}", msg)).into()
}

/// RAM disks and loop devices: never what a result was measured on.
fn is_virtual_name(name: &str) -> bool {
    ["loop", "ram", "zram"].iter().any(|p| name.starts_with(p))
}

/// The whole disks of the host (`/sys/block`), md, device-mapper, loop and RAM disks left out.
fn disks(hp: &HostPaths) -> Vec<DevInfo> {
    let mut names: Vec<String> = std::fs::read_dir(hp.path("sys/block"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !is_composite_name(n) && !is_virtual_name(n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
        .iter()
        .filter_map(|n| DevInfo::read(hp, n).ok())
        .collect()
}

fn describe_disks(all: &[DevInfo]) -> String {
    if all.is_empty() {
        return "none".into();
    }
    all.iter()
        .map(|d| format!("{} ({:?})", d.name, d.model))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The disk `-D` names (`sda`, `/dev/sda`).
fn named_disk(hp: &HostPaths, name: &str) -> Result<DevInfo> {
    let n = name.trim_start_matches("/dev/");
    DevInfo::read(hp, n).map_err(|_| {
        usage(format!(
            "-D {}: no such whole disk (disks: {})",
            name,
            describe_disks(&disks(hp))
        ))
    })
}

/// The solutions `d` gets from the source: looked up under udev's spelling of its model first
/// (what systemd looks up), then sysfs's (what results and the community's files use). A
/// matching record whose values don't read is an error naming the key.
fn lookup(hp: &HostPaths, src: &Source, d: &DevInfo) -> Result<Option<Solutions>> {
    let ids = udev::properties(hp, devnr(d)).and_then(|p| UdevIds::of(&p));
    let keys = ids
        .iter()
        .map(|i| i.key())
        .chain([udev::sysfs_key(&d.model, &d.fwrev)]);
    for key in keys {
        let found = Solutions::from_props(&hwdb::lookup(&src.records, &key))
            .map_err(|e| usage(format!("{}: {}", src.what, e)))?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The device a result's solutions are for: `-D`'s, else the result's own, else the one disk of
/// its model (and firmware with `fwrev`).
fn measured_disk(hp: &HostPaths, src: &Source, w: &Wanted) -> Result<DevInfo> {
    let (model, fwrev) = src.measured.clone().unwrap_or_default();
    let fits = |d: &DevInfo| d.model == model && (!w.fwrev || d.fwrev == fwrev);
    let what = if w.fwrev {
        format!("model {:?} with firmware {:?}", model, fwrev)
    } else {
        format!("model {:?}", model)
    };
    if let Some(name) = &w.dev {
        let d = named_disk(hp, name)?;
        if !fits(&d) {
            return Err(usage(format!(
                "-D {}: it is model {:?} with firmware {:?}, and {} is for {}; apply it to a disk of that model",
                name, d.model, d.fwrev, src.what, what
            )));
        }
        return Ok(d);
    }
    let all = disks(hp);
    if let Some(d) = all
        .iter()
        .find(|d| Some(&d.name) == src.measured_dev.as_ref() && fits(d))
    {
        return Ok(d.clone());
    }
    let found: Vec<&DevInfo> = all.iter().filter(|d| fits(d)).collect();
    match found[..] {
        [d] => Ok(d.clone()),
        [] => Err(usage(format!(
            "no disk here is {}, which {} was measured on (disks: {})",
            what,
            src.what,
            describe_disks(&all)
        ))),
        _ => Err(usage(format!(
            "several disks are {} ({}): name one with -D",
            what,
            found
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The device a hwdb file's solutions are for: `-D`'s, else the one disk they match.
fn matching_disk(hp: &HostPaths, src: &Source, w: &Wanted) -> Result<DevInfo> {
    if let Some(name) = &w.dev {
        let d = named_disk(hp, name)?;
        if lookup(hp, src, &d)?.is_none() {
            return Err(usage(format!(
                "-D {}: {} has no solutions for its model {:?} (firmware {:?})",
                name, src.what, d.model, d.fwrev
            )));
        }
        return Ok(d);
    }
    let all = disks(hp);
    let mut found: Vec<&DevInfo> = Vec::new();
    for d in &all {
        if lookup(hp, src, d)?.is_some() {
            found.push(d);
        }
    }
    match found[..] {
        [d] => Ok(d.clone()),
        [] => Err(usage(format!(
            "{} has no solutions for any disk here (disks: {})",
            src.what,
            describe_disks(&all)
        ))),
        _ => Err(usage(format!(
            "{} has solutions for several disks here ({}): name one with -D",
            src.what,
            found
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The plan for `src` on this host: the device, its solutions and the chosen one. Nothing is
/// changed. A result's solution name is checked before its device is looked for.
pub fn plan(hp: &HostPaths, src: &Source, w: &Wanted) -> Result<Plan> {
    if let Some((model, fwrev)) = &src.measured {
        // The result's own lines: its solutions whatever device this host has.
        let key = udev::sysfs_key(model, fwrev);
        let sols = Solutions::from_props(&hwdb::lookup(&src.records, &key))
            .map_err(|e| usage(format!("{}: {}", src.what, e)))?
            .ok_or_else(|| usage(format!("{} has no solutions", src.what)))?;
        sols.choose(w.solution.as_deref()).map_err(usage)?;
    }
    let dev = match src.measured {
        Some(_) => measured_disk(hp, src, w)?,
        None => matching_disk(hp, src, w)?,
    };
    let solutions = lookup(hp, src, &dev)?
        .ok_or_else(|| usage(format!("{} has no solutions for {}", src.what, dev.name)))?;
    let chosen = solutions
        .choose(w.solution.as_deref())
        .map_err(usage)?
        .clone();
    Ok(Plan {
        udev: udev::properties(hp, devnr(&dev)).and_then(|p| UdevIds::of(&p)),
        dev,
        solutions,
        chosen,
        fwrev: w.fwrev,
        source: src.what.clone(),
    })
}

impl Plan {
    /// Where `--boot` puts its hwdb file: named for the model, sorting after the community's
    /// `90-iocost-tune.hwdb` so that its values win for this device.
    pub fn hwdb_path(&self, hp: &HostPaths) -> PathBuf {
        let model = self.udev.as_ref().map_or(&self.dev.model, |u| &u.model);
        let safe: String = model
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        hp.path(HWDB_DIR)
            .join(format!("91-iocost-tune-{}.hwdb", safe))
    }

    /// The hwdb file `--boot` writes, or why it can't be written for this device.
    pub fn hwdb_text(&self) -> Result<String, String> {
        let Some(u) = &self.udev else {
            return Err(format!(
                "udev has no model for {} (no ID_MODEL in its database), so systemd's rule \
                 looks nothing up for it",
                self.dev.name
            ));
        };
        let bad = |s: &str| s.contains(['*', '?', '[', '\\', ':', '\n']);
        if bad(&u.model) || bad(&u.revision) {
            return Err(format!(
                "udev's model {:?} or firmware {:?} of {} holds a character a hwdb match line \
                 can't carry literally",
                u.model, u.revision, self.dev.name
            ));
        }
        let rev = if self.fwrev { u.revision.as_str() } else { "*" };
        let mut t = String::new();
        let _ = writeln!(
            t,
            "# Written by `resctl-bench apply --boot` from {}; `resctl-bench apply --undo` removes it.",
            self.source
        );
        let _ = writeln!(t, "block:*:name:{}:fwrev:{}:", u.model, rev);
        let _ = writeln!(t, "  IOCOST_SOLUTIONS={}", self.chosen.name);
        for s in &self.solutions.all {
            let (r, w) = s.model.lines();
            let _ = writeln!(t, "  IOCOST_MODEL_{}={} {}", s.key(), r, w);
            let _ = writeln!(t, "  IOCOST_QOS_{}={}", s.key(), s.qos.line());
        }
        Ok(t)
    }

    /// What `--now` writes: `io.cost.qos`'s line, then `io.cost.model`'s, as systemd's tool
    /// writes them.
    pub fn knob_lines(&self) -> (String, String) {
        let (r, w) = self.chosen.model.lines();
        let n = devnr(&self.dev);
        (
            format!("{} enable=1 ctrl=user {}", n, self.chosen.qos.line()),
            format!("{} ctrl=user model=linear {} {}", n, r, w),
        )
    }

    /// The plan in words: the device, the solution, what `--now` and `--boot` would do.
    pub fn describe(&self, hp: &HostPaths) -> String {
        let mut t = String::new();
        let d = &self.dev;
        let udev = match &self.udev {
            Some(u) if u.model != d.model => format!(", udev names it {:?}", u.model),
            _ => String::new(),
        };
        let _ = writeln!(
            t,
            "device:   {} ({}), model {:?}, firmware {:?}{}",
            d.name,
            devnr(d),
            d.model,
            d.fwrev,
            udev
        );
        let _ = writeln!(t, "source:   {}", self.source);
        let names: Vec<&str> = self.solutions.all.iter().map(|s| s.name.as_str()).collect();
        let _ = writeln!(
            t,
            "solution: {} (of {})",
            self.chosen.name,
            names.join(", ")
        );
        let (qos, model) = self.knob_lines();
        let _ = writeln!(
            t,
            "--now writes:\n  io.cost.qos:   {}\n  io.cost.model: {}",
            qos, model
        );
        match self.hwdb_text() {
            Ok(text) => {
                let _ = writeln!(t, "--boot installs {}:", self.hwdb_path(hp).display());
                for l in text.lines() {
                    let _ = writeln!(t, "  {}", l);
                }
                let _ = writeln!(
                    t,
                    "  then runs systemd-hwdb update and re-triggers {} so that systemd's iocost applies it",
                    d.name
                );
            }
            Err(why) => {
                let _ = writeln!(t, "--boot can't: {}", why);
            }
        }
        t
    }
}
