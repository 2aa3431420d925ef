//! The guest's initramfs: an uncompressed cpio archive in the "newc" format the kernel unpacks
//! into its rootfs, plus helpers to add host programs with the shared libraries they need.

use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// Streaming newc writer. Parent directories are created on demand, each once.
pub struct Cpio<W: Write> {
    out: W,
    ino: u32,
    dirs: BTreeSet<String>,
}

impl<W: Write> Cpio<W> {
    pub fn new(out: W) -> Self {
        Self {
            out,
            ino: 1,
            dirs: BTreeSet::new(),
        }
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) -> Result<()> {
        self.entry_rdev(name, mode, data, (0, 0))
    }

    fn entry_rdev(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) -> Result<()> {
        let name = name.trim_start_matches('/');
        let namesize = name.len() + 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0, // uid
            0, // gid
            if mode & S_IFDIR != 0 { 2 } else { 1 },
            0, // mtime
            data.len(),
            0,
            0, // dev major/minor
            rdev.0,
            rdev.1, // rdev major/minor
            namesize,
            0, // check
        );
        self.ino += 1;
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.pad(header.len() + namesize)?;
        self.out.write_all(data)?;
        self.pad(data.len())?;
        Ok(())
    }

    fn pad(&mut self, len: usize) -> Result<()> {
        let pad = (4 - len % 4) % 4;
        self.out.write_all(&[0u8; 3][..pad])?;
        Ok(())
    }

    /// Creates `path` and its missing parents (mode 0755).
    pub fn dir(&mut self, path: &str) -> Result<()> {
        let path = path.trim_matches('/');
        if path.is_empty() || self.dirs.contains(path) {
            return Ok(());
        }
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent)?;
        }
        self.dirs.insert(path.to_string());
        self.entry(path, S_IFDIR | 0o755, &[])
    }

    fn parent(&mut self, path: &str) -> Result<()> {
        match path.trim_matches('/').rsplit_once('/') {
            Some((parent, _)) => self.dir(parent),
            None => Ok(()),
        }
    }

    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> Result<()> {
        self.parent(path)?;
        self.entry(path, S_IFREG | (mode & 0o7777), data)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<()> {
        self.parent(path)?;
        self.entry(path, S_IFLNK | 0o777, target.as_bytes())
    }

    /// A character device node (e.g. /dev/console, which the kernel opens for init's stdio
    /// before anything is mounted).
    pub fn chardev(&mut self, path: &str, mode: u32, major: u32, minor: u32) -> Result<()> {
        self.parent(path)?;
        self.entry_rdev(path, S_IFCHR | (mode & 0o7777), &[], (major, minor))
    }

    pub fn finish(mut self) -> Result<W> {
        self.entry("TRAILER!!!", 0, &[])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Builds an initramfs file from host files.
pub struct Builder {
    cpio: Cpio<BufWriter<std::fs::File>>,
    files: BTreeSet<String>,
}

impl Builder {
    pub fn create(path: &Path) -> Result<Self> {
        let f = std::fs::File::create(path)
            .with_context(|| format!("creating initramfs {}", path.display()))?;
        Ok(Self {
            cpio: Cpio::new(BufWriter::with_capacity(1 << 20, f)),
            files: BTreeSet::new(),
        })
    }

    pub fn dir(&mut self, path: &str) -> Result<()> {
        self.cpio.dir(path)
    }

    pub fn data(&mut self, path: &str, mode: u32, data: &[u8]) -> Result<()> {
        if self.files.insert(path.to_string()) {
            self.cpio.file(path, mode, data)?;
        }
        Ok(())
    }

    pub fn chardev(&mut self, path: &str, major: u32, minor: u32) -> Result<()> {
        self.cpio.chardev(path, 0o600, major, minor)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<()> {
        if self.files.insert(path.to_string()) {
            self.cpio.symlink(path, target)?;
        }
        Ok(())
    }

    /// Copies host file `src` (following symlinks) to `dst` in the archive.
    pub fn host_file(&mut self, src: &Path, dst: &str, mode: u32) -> Result<()> {
        if self.files.contains(dst) {
            return Ok(());
        }
        let data = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
        self.data(dst, mode, &data)
    }

    /// Copies host program `src` to `dst` plus the shared libraries and ELF interpreter `ldd`
    /// lists for it, each at the path `ldd` names; returns those paths.
    pub fn program(&mut self, src: &Path, dst: &str) -> Result<Vec<String>> {
        self.host_file(src, dst, 0o755)?;
        let mut libs = Vec::new();
        for lib in shared_libs(src)? {
            let dst = lib.to_string_lossy().into_owned();
            self.host_file(&lib, &dst, 0o755)?;
            libs.push(dst);
        }
        Ok(libs)
    }

    pub fn finish(self) -> Result<()> {
        self.cpio.finish()?;
        Ok(())
    }
}

/// The libraries (and interpreter) `ldd` lists for a program; empty for a static one.
pub fn shared_libs(prog: &Path) -> Result<Vec<PathBuf>> {
    let out = std::process::Command::new("ldd")
        .arg(prog)
        .output()
        .with_context(|| format!("running ldd {}", prog.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        if text.contains("not a dynamic executable")
            || String::from_utf8_lossy(&out.stderr).contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        bail!(
            "ldd {} failed: {}",
            prog.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_ldd(&text)
}

fn parse_ldd(text: &str) -> Result<Vec<PathBuf>> {
    let mut libs = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.contains("not found") {
            bail!("ldd: a library is missing: {}", line);
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_entries_are_aligned_and_terminated() {
        let mut c = Cpio::new(Vec::new());
        c.file("a/b/init", 0o755, b"hello").unwrap();
        c.symlink("bin/x", "/init").unwrap();
        let out = c.finish().unwrap();
        assert_eq!(out.len() % 4, 0);
        let text = String::from_utf8_lossy(&out);
        // a, a/b, a/b/init, bin, bin/x, trailer
        assert_eq!(text.matches("070701").count(), 6);
        assert!(text.contains("a/b/init\0"));
        assert!(text.contains("TRAILER!!!\0"));
        // The file's header: mode 0100755, size 5, name size 9.
        let at = text.find("a/b/init").unwrap();
        let hdr = &text[at - 110..at];
        assert_eq!(&hdr[14..22], "000081ed");
        assert_eq!(&hdr[54..62], "00000005");
        assert_eq!(&hdr[94..102], "00000009");
    }

    #[test]
    fn ldd_output_is_parsed() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        let libs = parse_ldd(text).unwrap();
        assert_eq!(
            libs,
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        assert!(parse_ldd("\tlibfoo.so => not found\n").is_err());
    }
}
