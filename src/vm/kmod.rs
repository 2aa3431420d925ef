//! Kernel modules for the guest: find them in a modules tree, read their `depends=` from the ELF
//! `.modinfo` section (Debian's package ships no modules.dep) and order them so every module
//! comes after its dependencies.

use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the guest needs: virtio PCI + block + console (the output ports), 9p over virtio, ext4
/// and the crc32c implementation ext4 asks the crypto API for (not a `depends=` of anything).
pub const NEEDED: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "virtio_console",
    "9pnet_virtio",
    "9p",
    "crc32c_generic",
    "ext4",
];

/// Module names use `_` and `-` interchangeably; file names may use either.
pub fn norm(name: &str) -> String {
    name.replace('-', "_")
}

/// Values of the `.modinfo` section of an ELF64 little-endian module.
pub fn modinfo(elf: &[u8]) -> Result<Vec<(String, String)>> {
    let rd16 = |o: usize| -> Option<u64> {
        Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?) as u64)
    };
    let rd32 = |o: usize| -> Option<u64> {
        Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?) as u64)
    };
    let rd64 =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?)) };
    if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
        bail!("not an ELF64 little-endian file (compressed modules are not supported)");
    }
    let section = || -> Option<&[u8]> {
        let shoff = rd64(0x28)? as usize;
        let shentsize = rd16(0x3a)? as usize;
        let shnum = rd16(0x3c)? as usize;
        let shstrndx = rd16(0x3e)? as usize;
        let sh = |i: usize| shoff + i * shentsize;
        let stroff = rd64(sh(shstrndx) + 24)? as usize;
        for i in 0..shnum {
            let name_off = stroff + rd32(sh(i))? as usize;
            let name = elf.get(name_off..)?.split(|&b| b == 0).next()?;
            if name == b".modinfo" {
                let off = rd64(sh(i) + 24)? as usize;
                let size = rd64(sh(i) + 32)? as usize;
                return elf.get(off..off.checked_add(size)?);
            }
        }
        None
    };
    let data = section().context("no readable .modinfo section")?;
    Ok(data
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let kv = std::str::from_utf8(kv).ok()?;
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect())
}

/// The dependencies named by a module's `depends=` field.
pub fn depends(elf: &[u8]) -> Result<Vec<String>> {
    Ok(modinfo(elf)?
        .into_iter()
        .filter(|(k, _)| k == "depends")
        .flat_map(|(_, v)| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(norm)
                .collect::<Vec<_>>()
        })
        .collect())
}

/// A modules tree (`/lib/modules/VERSION`): module name → .ko file, plus the built-in list.
pub struct Tree {
    files: BTreeMap<String, PathBuf>,
    builtin: BTreeSet<String>,
}

impl Tree {
    pub fn scan(dir: &Path) -> Result<Self> {
        let mut files = BTreeMap::new();
        let mut stack = vec![dir.join("kernel")];
        if !stack[0].is_dir() {
            stack[0] = dir.to_path_buf();
        }
        while let Some(d) = stack.pop() {
            let rd = std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?;
            for ent in rd {
                let ent = ent?;
                let path = ent.path();
                let ft = ent.file_type()?;
                if ft.is_dir() {
                    stack.push(path);
                    continue;
                }
                let fname = ent.file_name().to_string_lossy().into_owned();
                if let Some(stem) = fname.strip_suffix(".ko") {
                    files.insert(norm(stem), path);
                } else if let Some(stem) = [".ko.xz", ".ko.zst", ".ko.gz"]
                    .iter()
                    .find_map(|ext| fname.strip_suffix(ext))
                {
                    // Kept so a needed module gets a clear error instead of "not found".
                    files.entry(norm(stem)).or_insert(path);
                }
            }
        }
        let builtin = std::fs::read_to_string(dir.join("modules.builtin"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.rsplit('/').next())
            .filter_map(|f| f.strip_suffix(".ko"))
            .map(norm)
            .collect();
        Ok(Self { files, builtin })
    }

    /// The .ko files to load, dependencies first; built-in modules are left out.
    pub fn load_order(&self, needed: &[&str]) -> Result<Vec<(String, PathBuf)>> {
        let mut order = Vec::new();
        let mut done = BTreeSet::new();
        for name in needed {
            self.visit(&norm(name), &mut Vec::new(), &mut done, &mut order)?;
        }
        Ok(order)
    }

    fn visit(
        &self,
        name: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        order: &mut Vec<(String, PathBuf)>,
    ) -> Result<()> {
        if done.contains(name) {
            return Ok(());
        }
        if path.iter().any(|p| p == name) {
            bail!("module dependency cycle: {} -> {}", path.join(" -> "), name);
        }
        let Some(file) = self.files.get(name) else {
            if self.builtin.contains(name) {
                done.insert(name.to_string());
                return Ok(());
            }
            bail!(
                "kernel module {} not found in the modules tree (and not listed as built-in)",
                name
            );
        };
        let elf = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let deps = depends(&elf).with_context(|| format!("module {}", file.display()))?;
        path.push(name.to_string());
        for d in deps {
            self.visit(&d, path, done, order)?;
        }
        path.pop();
        done.insert(name.to_string());
        order.push((name.to_string(), file.clone()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 file with a section-name table and a .modinfo section.
    fn fake_ko(modinfo: &[u8]) -> Vec<u8> {
        let shstr = b"\0.shstrtab\0.modinfo\0";
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let shstr_off = f.len();
        f.extend_from_slice(shstr);
        let mi_off = f.len();
        f.extend_from_slice(modinfo);
        while f.len() % 8 != 0 {
            f.push(0);
        }
        let shoff = f.len();
        let mut sh = |name: u32, off: usize, size: usize| {
            let mut h = vec![0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[24..32].copy_from_slice(&(off as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            f.extend_from_slice(&h);
        };
        sh(0, 0, 0);
        sh(1, shstr_off, shstr.len());
        sh(11, mi_off, modinfo.len());
        f[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        f[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        f[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        f[0x3e..0x40].copy_from_slice(&1u16.to_le_bytes());
        f
    }

    #[test]
    fn depends_is_read_from_modinfo() {
        let ko = fake_ko(b"license=GPL\0depends=jbd2,mbcache,crc16\0name=ext4\0");
        assert_eq!(depends(&ko).unwrap(), vec!["jbd2", "mbcache", "crc16"]);
        let none = fake_ko(b"depends=\0name=crc16\0");
        assert!(depends(&none).unwrap().is_empty());
        assert!(depends(b"\x28\xb5\x2f\xfd").is_err());
    }

    #[test]
    fn load_order_puts_dependencies_first() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kernel/fs");
        std::fs::create_dir_all(&k).unwrap();
        let put = |name: &str, deps: &str| {
            let mi = format!("depends={}\0name={}\0", deps, name);
            std::fs::write(k.join(format!("{}.ko", name)), fake_ko(mi.as_bytes())).unwrap();
        };
        put("ext4", "jbd2,mbcache,crc16");
        put("jbd2", "");
        put("mbcache", "");
        put("9p", "9pnet,netfs,fscache");
        put("9pnet", "");
        put("netfs", "");
        put("fscache", "netfs");
        std::fs::write(dir.path().join("modules.builtin"), "kernel/lib/crc16.ko\n").unwrap();
        let tree = Tree::scan(dir.path()).unwrap();
        let order: Vec<String> = tree
            .load_order(&["9p", "ext4"])
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let pos = |n: &str| order.iter().position(|o| o == n).unwrap();
        assert!(pos("netfs") < pos("fscache") && pos("fscache") < pos("9p"));
        assert!(pos("9pnet") < pos("9p"));
        assert!(pos("jbd2") < pos("ext4") && pos("mbcache") < pos("ext4"));
        assert!(!order.contains(&"crc16".to_string()));
        let e = tree.load_order(&["virtio_blk"]).unwrap_err();
        assert!(e.to_string().contains("virtio_blk not found"));
    }
}
