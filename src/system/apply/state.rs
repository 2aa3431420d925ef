//! What `apply` changed on the host, kept in `/var/lib/resctl-bench/apply.json` until `apply
//! --undo` puts it back: the files it wrote (with what it wrote, so a file someone changed
//! since is left alone), the io.cost knob writes that restore the values from before the first
//! apply (the first record per file and device wins, as in the restore journal), and the disks
//! to re-trigger once the files are gone. One `apply` at a time (a lock beside it).

use crate::system::HostPaths;
use crate::util::lockfile::{Busy, LockFile};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The state file, relative to the host's root.
pub const STATE_FILE: &str = "var/lib/resctl-bench/apply.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WrittenFile {
    pub path: PathBuf,
    pub content: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KnobUndo {
    pub path: PathBuf,
    /// Written back to `path` on undo (`MAJ:MIN …`).
    pub old: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Applied {
    pub files: Vec<WrittenFile>,
    pub knobs: Vec<KnobUndo>,
    /// Disks (sysfs names) whose udev properties came from our files.
    pub devices: Vec<String>,
}

impl Applied {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.knobs.is_empty()
    }

    /// Records a knob's old value unless the same file and device already has one.
    pub fn add_knob(&mut self, path: &Path, old: &str) {
        let dev = |s: &str| s.split_whitespace().next().unwrap_or("").to_string();
        if !self
            .knobs
            .iter()
            .any(|k| k.path == path && dev(&k.old) == dev(old))
        {
            self.knobs.push(KnobUndo {
                path: path.to_path_buf(),
                old: old.to_string(),
            });
        }
    }

    /// Records a file we wrote (replacing the record of an earlier write of it).
    pub fn add_file(&mut self, path: &Path, content: &str) {
        self.files.retain(|f| f.path != path);
        self.files.push(WrittenFile {
            path: path.to_path_buf(),
            content: content.to_string(),
        });
    }

    pub fn add_device(&mut self, name: &str) {
        if !self.devices.iter().any(|d| d == name) {
            self.devices.push(name.to_string());
        }
    }

    /// The file we wrote at `path`, if we did.
    pub fn file(&self, path: &Path) -> Option<&WrittenFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// The state file and its lock, held while `apply` runs.
pub struct State {
    path: PathBuf,
    _lock: LockFile,
    pub applied: Applied,
}

impl State {
    /// Locks and reads the state (none yet: empty).
    pub fn open(hp: &HostPaths) -> Result<Self> {
        let path = hp.path(STATE_FILE);
        let dir = path.parent().expect("a file under a directory");
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let lock_path = path.with_extension("lock");
        let lock = match LockFile::acquire(&lock_path, "apply")? {
            Ok(l) => l,
            Err(Busy::HeldBy(who)) => bail!("another apply is running: {}", who),
            Err(Busy::CantCreate(e)) => {
                bail!("can't create {}: {}", lock_path.display(), e)
            }
        };
        let applied = match std::fs::read_to_string(&path) {
            Ok(t) => serde_json::from_str(&t).with_context(|| {
                format!(
                    "{} is not apply's state (remove it to start over)",
                    path.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Applied::default(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        Ok(Self {
            path,
            _lock: lock,
            applied,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Saves the state atomically, or removes the file when nothing is left to undo.
    pub fn save(&self) -> Result<()> {
        if self.applied.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("removing {}", self.path.display()))
                }
                _ => Ok(()),
            };
        }
        let text = serde_json::to_string_pretty(&self.applied)? + "\n";
        crate::util::atomic::write_atomic(&self.path, |w| w.write_all(text.as_bytes()))
            .with_context(|| format!("saving {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_old_value_per_device_wins_and_the_state_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(d.path());
        let q = Path::new("/sys/fs/cgroup/io.cost.qos");
        {
            let mut s = State::open(&hp).unwrap();
            s.applied.add_knob(q, "8:0 enable=0 ctrl=auto");
            s.applied.add_knob(q, "8:0 enable=1 ctrl=user rpct=1");
            s.applied.add_knob(q, "8:16 enable=0 ctrl=auto");
            s.applied.add_file(Path::new("/etc/x.hwdb"), "a");
            s.applied.add_file(Path::new("/etc/x.hwdb"), "b");
            s.applied.add_device("sda");
            s.applied.add_device("sda");
            s.save().unwrap();
        }
        let s = State::open(&hp).unwrap();
        assert_eq!(s.applied.knobs.len(), 2);
        assert_eq!(s.applied.knobs[0].old, "8:0 enable=0 ctrl=auto");
        assert_eq!(s.applied.files.len(), 1);
        assert_eq!(
            s.applied.file(Path::new("/etc/x.hwdb")).unwrap().content,
            "b"
        );
        assert_eq!(s.applied.devices, ["sda"]);
        assert!(
            State::open(&hp).is_err(),
            "a second apply waits for none: it is refused"
        );
        let mut s = s;
        s.applied = Applied::default();
        s.save().unwrap();
        assert!(!d.path().join(STATE_FILE).exists());
    }
}
