//! The Debian release a guest is made of (`vm --debian`): its kernel, which `vm --setup`
//! fetches from the release's own archive whatever the host runs, and its root file system for
//! `--init systemd`. Debian 13 is the default (kernel 6.12, systemd 257, whose udev applies
//! io.cost solutions from the hwdb); Debian 12 (kernel 6.1, systemd 252) stays for what was
//! measured on it.

use crate::error::UsageError;

/// Where Debian's packages come from; `RESCTL_BENCH_DEBIAN_MIRROR` overrides it.
const MIRROR: &str = "http://deb.debian.org/debian";

/// The Debian mirror the kernel and the root file system are fetched from.
pub fn mirror() -> String {
    std::env::var("RESCTL_BENCH_DEBIAN_MIRROR")
        .ok()
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| MIRROR.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    Bookworm,
    Trixie,
}

impl Release {
    pub const DEFAULT: Release = Release::Trixie;

    /// The codename, as the archive and debootstrap know it.
    pub fn suite(self) -> &'static str {
        match self {
            Release::Bookworm => "bookworm",
            Release::Trixie => "trixie",
        }
    }

    pub fn number(self) -> u32 {
        match self {
            Release::Bookworm => 12,
            Release::Trixie => 13,
        }
    }

    /// `--debian`'s value: the number or the codename.
    pub fn parse(s: &str) -> Result<Self, UsageError> {
        match s {
            "12" | "bookworm" => Ok(Release::Bookworm),
            "13" | "trixie" => Ok(Release::Trixie),
            _ => Err(UsageError::new(format!(
                "vm: --debian {:?}: accepted are 13 (trixie, the default) and 12 (bookworm)",
                s
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_codenames() {
        assert_eq!(Release::parse("13").unwrap(), Release::DEFAULT);
        assert_eq!(Release::parse("bookworm").unwrap().number(), 12);
        assert_eq!(Release::parse("trixie").unwrap().suite(), "trixie");
        assert!(Release::parse("11")
            .unwrap_err()
            .to_string()
            .contains("accepted are 13 (trixie, the default) and 12"));
    }
}
