//! What udev knows of a disk and how systemd's `90-iocost.rules` looks it up in the hwdb:
//! the key `block::name:MODEL:fwrev:REV:` with MODEL udev's `ID_MODEL_FROM_DATABASE`, else its
//! `ID_MODEL`, and REV its `ID_REVISION`. udev's names are not always sysfs's: for SATA and SCSI
//! disks `ID_MODEL` comes from `ata_id`/`scsi_id` with blanks turned into `_`
//! (`Samsung_SSD_860_EVO_500GB` for sysfs's `Samsung SSD 860 EVO 500GB`); NVMe disks keep
//! sysfs's. Read from udev's database (`/run/udev/data/bMAJ:MIN`), as `udevadm info` shows it.

use crate::system::cgroup::DevNr;
use crate::system::HostPaths;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The udev properties (`E:` lines) of a block device; `None` when udev has no record of it.
pub fn properties(hp: &HostPaths, devnr: DevNr) -> Option<BTreeMap<String, String>> {
    let path = hp.path(format!("run/udev/data/b{}:{}", devnr.maj, devnr.min));
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.strip_prefix("E:")?.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// The model and firmware revision systemd's rule builds the key from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdevIds {
    pub model: String,
    pub revision: String,
}

impl UdevIds {
    /// From the properties; `None` when udev has no model for the device (the rule then does
    /// no lookup at all).
    pub fn of(props: &BTreeMap<String, String>) -> Option<Self> {
        let get = |k: &str| props.get(k).filter(|v| !v.is_empty()).cloned();
        let model = get("ID_MODEL_FROM_DATABASE").or_else(|| get("ID_MODEL"))?;
        Some(Self {
            model,
            revision: get("ID_REVISION").unwrap_or_default(),
        })
    }

    /// The key the rule looks the device up by.
    pub fn key(&self) -> String {
        format!("block::name:{}:fwrev:{}:", self.model, self.revision)
    }
}

/// The key a device would have if udev named it as sysfs does: how the hwdb lines of results
/// and of the community database name models.
pub fn sysfs_key(model: &str, fwrev: &str) -> String {
    format!("block::name:{}:fwrev:{}:", model, fwrev)
}

/// systemd's iocost tool and the rule that runs it (systemd 254 on), where this host has them.
pub fn iocost_tool(hp: &HostPaths) -> Option<PathBuf> {
    let has_rule = ["usr/lib/udev/rules.d", "lib/udev/rules.d"]
        .iter()
        .any(|d| hp.path(d).join("90-iocost.rules").is_file());
    let tool = ["usr/lib/udev/iocost", "lib/udev/iocost"]
        .iter()
        .map(|p| hp.path(p))
        .find(|p| p.is_file())?;
    has_rule.then_some(tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_prefers_the_database_model_and_keeps_udevs_spelling() {
        let d = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(d.path());
        std::fs::create_dir_all(d.path().join("run/udev/data")).unwrap();
        std::fs::write(
            d.path().join("run/udev/data/b8:0"),
            "S:disk/by-id/x\nE:ID_MODEL=RB_Test_HDD\nE:ID_REVISION=2.5+\nE:ID_BUS=scsi\nG:systemd\n",
        )
        .unwrap();
        let p = properties(&hp, DevNr::new(8, 0)).unwrap();
        let ids = UdevIds::of(&p).unwrap();
        assert_eq!(ids.key(), "block::name:RB_Test_HDD:fwrev:2.5+:");
        let mut db = p.clone();
        db.insert("ID_MODEL_FROM_DATABASE".into(), "Fancy Disk".into());
        assert_eq!(UdevIds::of(&db).unwrap().model, "Fancy Disk");
        assert!(properties(&hp, DevNr::new(8, 16)).is_none());
        assert!(UdevIds::of(&BTreeMap::new()).is_none());
    }

    #[test]
    fn the_tool_needs_its_rule() {
        let d = tempfile::tempdir().unwrap();
        let hp = HostPaths::under(d.path());
        std::fs::create_dir_all(d.path().join("usr/lib/udev/rules.d")).unwrap();
        std::fs::write(d.path().join("usr/lib/udev/iocost"), "").unwrap();
        assert!(iocost_tool(&hp).is_none());
        std::fs::write(d.path().join("usr/lib/udev/rules.d/90-iocost.rules"), "").unwrap();
        assert!(iocost_tool(&hp).unwrap().ends_with("usr/lib/udev/iocost"));
    }
}
