//! Disk profiles: QEMU block-throttling limits and an optional per-IO latency (added on the host by
//! nbdkit's delay filter, see [`super::nbd`]) that make the scratch disk behave like a class of
//! device, and how the guest can tell which one it got (virtio-blk serial, rotational flag).

use crate::error::UsageError;
use anyhow::Result;

/// One emulated device class. `None` limits mean "not limited".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub name: &'static str,
    /// Total (read + write) IO operations per second.
    pub iops: Option<u64>,
    /// Total (read + write) bytes per second.
    pub bps: Option<u64>,
    /// Time every read and write (and trim) waits on the host before it is served, in ms.
    pub latency_ms: Option<u32>,
    /// Whether the guest should see a rotational device (`queue/rotational` = 1).
    pub rotational: bool,
    pub about: &'static str,
}

const MIB: u64 = 1 << 20;

pub const PROFILES: &[Profile] = &[
    Profile {
        name: "unthrottled",
        iops: None,
        bps: None,
        latency_ms: None,
        rotational: false,
        about: "no limits: as fast as QEMU and the host file allow",
    },
    Profile {
        name: "nvme",
        iops: Some(100_000),
        bps: Some(2048 * MIB),
        latency_ms: None,
        rotational: false,
        about: "a fast NVMe SSD",
    },
    Profile {
        name: "sata-ssd",
        iops: Some(50_000),
        bps: Some(500 * MIB),
        // A SATA SSD's reads take 0.1-1 ms under a mixed load, and the caps alone never bind
        // in a guest (TCG serves well under 50k IOPS), which would make this profile the same
        // device as `unthrottled`. 1 ms is nbdkit's finest step; against a TCG guest's ~15x
        // slower CPU it is a modest latency.
        latency_ms: Some(1),
        rotational: false,
        about: "a SATA SSD (TCG guests see ~2 ms per IO)",
    },
    Profile {
        name: "slow-ssd",
        iops: Some(5_000),
        bps: Some(150 * MIB),
        latency_ms: None,
        rotational: false,
        about: "an old or cheap SSD",
    },
    Profile {
        name: "hdd",
        iops: Some(150),
        bps: Some(160 * MIB),
        // A 7200 rpm disk averages ~4.2 ms of rotation plus ~8 ms of seek for a random IO, but
        // the IOs a page cache issues (readahead, writeback, swap clusters) mostly land near each
        // other, where seeks are short: 6 ms is a typical mean, and together with the 150 IOPS
        // cap (~6.7 ms per IO when busy) it makes a lone IO as slow as a queued one.
        latency_ms: Some(6),
        rotational: true,
        about: "a 7200 rpm hard disk (6 ms per IO, no seek model: random = sequential)",
    },
];

/// The limits the scratch disk gets: a profile, possibly with custom overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskLimits {
    /// Profile name, or "custom" when `--disk-iops`/`--disk-bps`/`--disk-latency` changed the
    /// profile's limits.
    pub name: String,
    pub iops: Option<u64>,
    pub bps: Option<u64>,
    /// Per-IO latency added on the host (ms); `None` serves the image straight from QEMU.
    pub latency_ms: Option<u32>,
    pub rotational: bool,
}

impl DiskLimits {
    pub fn resolve(
        profile: Option<&str>,
        iops: Option<u64>,
        bps: Option<u64>,
        latency_ms: Option<u32>,
    ) -> Result<Self> {
        let name = profile.unwrap_or("unthrottled");
        let Some(p) = PROFILES.iter().find(|p| p.name == name) else {
            let known: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
            return Err(UsageError::new(format!(
                "--disk-profile {:?} is not a disk profile (accepted: {})",
                name,
                known.join(", ")
            ))
            .into());
        };
        let custom = iops.is_some() || bps.is_some() || latency_ms.is_some();
        Ok(Self {
            name: if custom {
                "custom".into()
            } else {
                p.name.into()
            },
            iops: iops.or(p.iops).filter(|&v| v > 0),
            bps: bps.or(p.bps).filter(|&v| v > 0),
            latency_ms: latency_ms.or(p.latency_ms).filter(|&v| v > 0),
            rotational: p.rotational,
        })
    }

    /// The virtio-blk serial number the guest sees in /sys/block/vda/serial (at most 20 bytes).
    pub fn serial(&self) -> String {
        let mut s = format!("resctl-{}", self.name);
        s.truncate(20);
        s
    }

    /// QEMU `-drive` throttling options (without a leading comma).
    pub fn qemu_throttling(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(iops) = self.iops {
            v.push(format!("throttling.iops-total={}", iops));
        }
        if let Some(bps) = self.bps {
            v.push(format!("throttling.bps-total={}", bps));
        }
        v
    }
}

/// Text table of the profiles for help and docs.
pub fn table() -> String {
    let fmt = |v: Option<u64>, unit: &str| match v {
        Some(v) if unit == "MiB/s" => format!("{} {}", v / MIB, unit),
        Some(v) => format!("{} {}", v, unit),
        None => "-".into(),
    };
    let mut out = String::new();
    for p in PROFILES {
        let lat = match p.latency_ms {
            Some(ms) => format!("{} ms/IO", ms),
            None => "-".into(),
        };
        out += &format!(
            "  {:<12} {:>12} {:>11} {:>8}  {}\n",
            p.name,
            fmt(p.iops, "IOPS"),
            fmt(p.bps, "MiB/s"),
            lat,
            p.about
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_resolve_with_overrides() {
        let hdd = DiskLimits::resolve(Some("hdd"), None, None, None).unwrap();
        assert_eq!(hdd.serial(), "resctl-hdd");
        assert!(hdd.rotational);
        assert_eq!(
            hdd.qemu_throttling(),
            vec![
                "throttling.iops-total=150",
                "throttling.bps-total=167772160"
            ]
        );
        let un = DiskLimits::resolve(None, None, None, None).unwrap();
        assert!(un.qemu_throttling().is_empty());
        assert_eq!(un.serial(), "resctl-unthrottled");
        let c = DiskLimits::resolve(Some("nvme"), Some(1000), None, None).unwrap();
        assert_eq!(c.name, "custom");
        assert_eq!(c.iops, Some(1000));
        assert_eq!(c.bps, Some(2048 * MIB));
        assert_eq!(c.latency_ms, None);
    }

    #[test]
    fn hdd_and_sata_ssd_have_a_per_io_latency_that_overrides_replace() {
        assert_eq!(
            DiskLimits::resolve(Some("hdd"), None, None, None)
                .unwrap()
                .latency_ms,
            Some(6)
        );
        for p in PROFILES {
            let want = match p.name {
                "hdd" => Some(6),
                "sata-ssd" => Some(1),
                _ => None,
            };
            assert_eq!(p.latency_ms, want, "{}", p.name);
        }
        let off = DiskLimits::resolve(Some("hdd"), None, None, Some(0)).unwrap();
        assert_eq!((off.name.as_str(), off.latency_ms), ("custom", None));
        assert_eq!(off.iops, Some(150));
        let on = DiskLimits::resolve(None, None, None, Some(2)).unwrap();
        assert_eq!((on.name.as_str(), on.latency_ms), ("custom", Some(2)));
        assert!(!on.rotational);
    }

    #[test]
    fn unknown_profile_is_a_usage_error() {
        let e = DiskLimits::resolve(Some("floppy"), None, None, None).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
        assert!(e.to_string().contains("accepted: unthrottled, nvme"));
    }

    #[test]
    fn table_lists_every_profile() {
        let t = table();
        for p in PROFILES {
            assert!(t.contains(p.name));
        }
        assert!(t.contains("150 IOPS"));
        assert!(t.contains("6 ms/IO"));
    }
}
