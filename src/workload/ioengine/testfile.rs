//! Test files: written once with random data by the engine itself (sequential 1 MiB writes), then
//! reused while they keep their size and every block is allocated — a sparse file would read
//! back without touching the device.

use super::job::{IoJob, Pattern, Stop};
use anyhow::{Context, Result};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// Makes `path` a fully written file of `size` bytes; returns whether it had to be written.
/// The file is ours: anything else at its name — a symlink, a file with a second name (hard
/// link), a FIFO — is removed (never followed or written through) and the file made anew.
pub fn ensure(path: &Path, size: u64, direct: bool) -> Result<bool> {
    if let Ok(md) = std::fs::symlink_metadata(path) {
        if md.is_file() && md.nlink() == 1 {
            if md.len() == size && md.blocks() * 512 >= size {
                return Ok(false);
            }
        } else if !md.is_dir() {
            log::warn!(
                "{}: not a test file of ours (a link or a file with other names); replacing it",
                path.display()
            );
            std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let held = std::fs::metadata(path).map_or(0, |m| m.blocks() * 512);
    let free = crate::util::fs::free_bytes(dir).unwrap_or(u64::MAX);
    if size > free + held {
        crate::usage_bail!(
            "a test file of {} ({} bytes) doesn't fit in {} ({} free)",
            crate::units::format_size(size as f64),
            size,
            dir.display(),
            crate::units::format_size(free as f64)
        );
    }
    log::info!(
        "writing the test file {} ({})",
        path.display(),
        crate::units::format_size(size as f64)
    );
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.set_len(size)?;
    drop(f);
    let mut fill = IoJob::new(path.to_path_buf());
    fill.read_pct = 0;
    fill.pattern = Pattern::Seq;
    fill.bs = (1 << 20).min(size / 4096 * 4096).max(4096);
    fill.qd = 4;
    fill.stop = Stop::Bytes(size / fill.bs * fill.bs);
    fill.direct = direct;
    super::run::run(&fill, &AtomicBool::new(false))
        .with_context(|| format!("writing the test file {}", path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_once_then_reused_and_rewritten_when_resized() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/t");
        assert!(ensure(&p, 3 << 20, false).unwrap());
        let data = std::fs::read(&p).unwrap();
        assert_eq!(data.len(), 3 << 20);
        // Random, not zeros: a block in the middle and the last one were written.
        assert!(data[1 << 20..(1 << 20) + 4096].iter().any(|&b| b != 0));
        assert!(data[(3 << 20) - 4096..].iter().any(|&b| b != 0));
        assert!(!ensure(&p, 3 << 20, false).unwrap());
        // A link planted at the name is replaced, its target left alone.
        let victim = d.path().join("victim");
        std::fs::write(&victim, vec![1u8; 3 << 20]).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        assert!(ensure(&p, 3 << 20, false).unwrap());
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
        assert!(std::fs::read(&victim).unwrap().iter().all(|&b| b == 1));
        assert!(ensure(&p, 2 << 20, false).unwrap());
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 2 << 20);
        let e = ensure(&d.path().join("huge"), u64::MAX / 2, false).unwrap_err();
        assert!(e.to_string().contains("doesn't fit"), "{}", e);
        // 1E is beyond the size units (INF): the bytes say what was asked.
        let e = ensure(&d.path().join("huge"), 1 << 60, false).unwrap_err();
        assert!(
            e.to_string()
                .contains("a test file of INF (1152921504606846976 bytes) doesn't fit"),
            "{}",
            e
        );
    }
}
