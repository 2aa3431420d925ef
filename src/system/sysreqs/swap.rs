//! Swap devices and whether they sit on a rotational disk (hashd's sizing needs to know).

use crate::system::blockdev::{self};
use crate::system::HostPaths;
use anyhow::Result;

/// `(file name, type)` of each /proc/swaps entry.
pub fn read_swaps(hp: &HostPaths) -> std::result::Result<Vec<(String, String)>, String> {
    let p = hp.path("proc/swaps");
    let text =
        std::fs::read_to_string(&p).map_err(|e| format!("can't read {}: {}", p.display(), e))?;
    let mut out = Vec::new();
    for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let mut it = line.split_whitespace();
        match (it.next(), it.next()) {
            (Some(f), Some(t)) => out.push((f.replace("\\040", " "), t.to_string())),
            _ => return Err(format!("{}: malformed line {:?}", p.display(), line)),
        }
    }
    Ok(out)
}

/// Whether any active swap area lives on a rotational disk (hashd's rotational mode counts the
/// swap device as well as the testfiles'). Swaps whose disk can't be found don't count.
pub fn swap_rotational(hp: &HostPaths) -> bool {
    read_swaps(hp)
        .unwrap_or_default()
        .iter()
        .any(|(file, kind)| {
            swap_disk(hp, file, kind)
                .and_then(|disk| blockdev::DevInfo::read(hp, &disk))
                .is_ok_and(|d| d.rotational)
        })
}

/// The whole disk a swap area lives on: a partition's disk, or for a swap file the disk of the
/// filesystem holding it.
pub(super) fn swap_disk(hp: &HostPaths, file: &str, kind: &str) -> Result<String> {
    if kind == "file" {
        return Ok(blockdev::device_of_path(hp, &hp.path(file))?.disk);
    }
    let name = blockdev::resolve_dev_name(hp, file);
    blockdev::whole_disk_of_name(hp, &name)
}
