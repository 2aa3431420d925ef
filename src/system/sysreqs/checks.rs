//! The requirement checks against the host, each with its fix where one exists.
use super::req::{ByHand, Check, Fix, FixAction, Res, SysReq};
use super::swap::read_swaps;

use super::swap::swap_disk;

use crate::system::blockdev::{self, Scratch};
use crate::system::restore::Remount;
use crate::system::sysinfo::{self};
use crate::system::HostPaths;
use crate::units::format_size;
use std::path::{Path, PathBuf};

/// The OOM killers `NoSysOomd` looks for, by process name.
const OOM_KILLERS: &[&str] = &["systemd-oomd", "earlyoom", "nohang", "oomd"];

/// The units that run OOM killer `name` (the socket first: it would start the service again).
fn oom_killer_units(name: &str) -> &'static [&'static str] {
    match name {
        "systemd-oomd" => &["systemd-oomd.socket", "systemd-oomd.service"],
        "earlyoom" => &["earlyoom.service"],
        "nohang" => &["nohang.service", "nohang-desktop.service"],
        "oomd" => &["oomd.service", "fb-oomd.service"],
        _ => &[],
    }
}

/// The running OOM killers with a pid of each, from `/proc/PID/comm`.
fn oom_killers(hp: &HostPaths) -> Vec<(String, u32)> {
    let mut found: Vec<(String, u32)> = Vec::new();
    let Ok(rd) = std::fs::read_dir(hp.proc()) else {
        return found;
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if OOM_KILLERS.contains(&comm) && !found.iter().any(|(n, _)| n == comm) {
            found.push((comm.to_string(), pid));
        }
    }
    found.sort();
    found
}

/// What checks look at.
pub struct Host<'a> {
    pub hp: &'a HostPaths,
    /// The scratch device, or why there is none.
    pub scratch: std::result::Result<&'a Scratch, String>,
}

const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

pub(super) fn read(p: &Path) -> std::result::Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("can't read {}: {}", p.display(), e))
}

impl Host<'_> {
    fn cgroup_mount(&self) -> std::result::Result<blockdev::MountEntry, String> {
        let mounts = blockdev::read_mountinfo(self.hp).map_err(|e| format!("{:#}", e))?;
        let m = mounts
            .into_iter()
            .rev()
            .find(|m| m.mount_point == Path::new(CGROUP_MOUNT))
            .ok_or_else(|| format!("nothing is mounted at {}", CGROUP_MOUNT))?;
        if m.fstype != "cgroup2" {
            return Err(format!("{} is {}, not cgroup2", CGROUP_MOUNT, m.fstype));
        }
        Ok(m)
    }

    fn dev(&self) -> std::result::Result<&Scratch, String> {
        match &self.scratch {
            Ok(s) => Ok(s),
            Err(e) => Err(format!("no scratch device: {}", e)),
        }
    }

    fn devnr_str(&self) -> std::result::Result<String, String> {
        self.dev()
            .map(|s| format!("{}:{}", s.dev.devnr.0, s.dev.devnr.1))
    }

    fn queue_file(&self, name: &str) -> std::result::Result<PathBuf, String> {
        Ok(self.dev()?.dev.sys_dir(self.hp).join("queue").join(name))
    }

    /// `enable` of the scratch device's io.cost.qos line (0 without a line).
    fn iocost_enabled(&self) -> std::result::Result<bool, String> {
        let dev = self.devnr_str()?;
        let qos = read(&self.hp.cgroup().join("io.cost.qos"))?;
        Ok(qos
            .lines()
            .find(|l| l.split_whitespace().next() == Some(dev.as_str()))
            .is_some_and(|l| l.split_whitespace().any(|kv| kv == "enable=1")))
    }

    pub fn check(&self, req: SysReq) -> Check {
        let c = Check::new(req);
        match self.check_inner(c.clone()) {
            Ok(c) => c,
            Err(msg) => c.miss(msg),
        }
    }

    fn check_inner(&self, c: Check) -> std::result::Result<Check, String> {
        match c.req {
            SysReq::Controllers => self.check_controllers(c),
            SysReq::MemCgRecursiveProt => self.check_mem_cg_recursive_prot(c),
            SysReq::IoCost => self.check_io_cost(c),
            SysReq::IoCostVer => self.check_io_cost_ver(c),
            SysReq::NoOtherIoControllers => self.check_no_other_io_controllers(c),
            SysReq::AnonBalance => self.check_anon_balance(c),
            SysReq::NoCompositeStorage => self.check_no_composite_storage(c),
            SysReq::IoSched => self.check_io_sched(c),
            SysReq::NoWbt => self.check_no_wbt(c),
            SysReq::SwapOnScratch => self.check_swap_on_scratch(c),
            SysReq::Swap => self.check_swap(c),
            SysReq::NoZswap => self.check_no_zswap(c),
            SysReq::Psi => self.check_psi(c),
            SysReq::NoSysOomd => self.check_no_sys_oomd(c),
        }
    }

    /// Other OOM killers act on the memory hog and hashd by their own rules, so a run would
    /// study their kills as the kernel's. On a systemd host the fix stops their units for the
    /// run; elsewhere the user stops them.
    fn check_no_sys_oomd(&self, mut c: Check) -> std::result::Result<Check, String> {
        let running = oom_killers(self.hp);
        if running.is_empty() {
            return Ok(c);
        }
        let mut units = Vec::new();
        for (name, pid) in &running {
            c = c.miss(format!("{} is running (pid {})", name, pid));
            if let Some(sd) = self.hp.systemd() {
                for u in oom_killer_units(name) {
                    let st = crate::system::systemd::unit_state(sd.as_ref(), u)
                        .map_err(|e| format!("{:#}", e))?;
                    if st.active && !units.iter().any(|x| x == u) {
                        units.push(u.to_string());
                    }
                }
            }
        }
        if units.is_empty() {
            c = c.miss("stop it for the run (no systemd unit of it is active to stop)");
        } else {
            c.fix = Some(Fix {
                res: Res::Oomd,
                action: FixAction::StopUnits { units },
            });
        }
        Ok(c)
    }

    fn check_controllers(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        self.cgroup_mount()?;
        let p = hp.cgroup().join("cgroup.controllers");
        let text = read(&p)?;
        let have: Vec<&str> = text.split_whitespace().collect();
        let lacking: Vec<&str> = ["cpu", "memory", "io"]
            .into_iter()
            .filter(|c| !have.contains(c))
            .collect();
        if !lacking.is_empty() {
            c = c.miss(format!(
                "controllers missing from {}: {}",
                p.display(),
                lacking.join(", ")
            ));
        }

        Ok(c)
    }

    fn check_mem_cg_recursive_prot(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let m = self.cgroup_mount()?;
        if !m.has_super_opt("memory_recursiveprot") {
            let new = if m.super_opts.is_empty() {
                "memory_recursiveprot".to_string()
            } else {
                format!("{},memory_recursiveprot", m.super_opts)
            };
            c.fix = Some(Fix {
                res: Res::Mem,
                action: FixAction::Remount {
                    remount: Remount {
                        target: hp.path(&m.mount_point),
                        source: m.source.clone(),
                        fstype: m.fstype.clone(),
                        mount_opts: m.mount_opts.clone(),
                        old: m.super_opts.clone(),
                    },
                    new,
                },
            });
            c = c.miss(format!(
                "cgroup2 at {} is mounted without memory_recursiveprot ({})",
                CGROUP_MOUNT, m.super_opts
            ));
        }

        Ok(c)
    }

    fn check_io_cost(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let qos = hp.cgroup().join("io.cost.qos");
        if !qos.exists() {
            return Err(format!(
                "{} doesn't exist: the kernel lacks io.cost (CONFIG_BLK_CGROUP_IOCOST)",
                qos.display()
            ));
        }
        let dev = self.devnr_str()?;
        if !self.iocost_enabled()? {
            c.fix = Some(Fix {
                res: Res::Io,
                action: FixAction::Write {
                    path: qos,
                    value: format!("{} enable=1", dev),
                },
            });
            c = c.miss(format!(
                "io.cost is off on the scratch device {} ({})",
                self.dev()?.dev.name,
                dev
            ));
        }

        Ok(c)
    }

    fn check_io_cost_ver(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let p = hp.cgroup().join("io.stat");
        let stat = read(&p)?;
        let dev = self.devnr_str()?;
        if !self.iocost_enabled()? {
            return Err(format!(
                "can't tell: io.cost is off on {} (enabling it is part of IoCost)",
                dev
            ));
        }
        let has = stat
            .lines()
            .filter(|l| l.split_whitespace().next() == Some(dev.as_str()))
            .any(|l| l.split_whitespace().any(|kv| kv.starts_with("cost.usage=")));
        if !has {
            c = c.miss(format!(
                "{} has no cost.usage for {}: the kernel's io.cost is too old (or the \
                 device has seen no IO yet)",
                p.display(),
                dev
            ));
        }

        Ok(c)
    }

    fn check_no_other_io_controllers(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let mut found = Vec::new();
        walk_io_controls(&hp.cgroup(), &hp.cgroup(), &mut found, 0);
        if found.len() > 8 {
            let more = found.len() - 8;
            found.truncate(8);
            found.push(format!("and {} more", more));
        }
        c.missed.extend(found);

        Ok(c)
    }

    fn check_anon_balance(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let p = hp.path("proc/vmstat");
        let text = read(&p)?;
        if !text
            .lines()
            .any(|l| l.split_whitespace().next() == Some("pgscan_anon"))
        {
            c = c.miss(format!(
                "{} has no pgscan_anon: the kernel predates anon/file reclaim balancing (5.8)",
                p.display()
            ));
        }

        Ok(c)
    }

    fn check_no_composite_storage(&self, mut c: Check) -> std::result::Result<Check, String> {
        let s = self.dev()?;
        if s.dev.is_composite() {
            let msg = format!(
                "scratch device {} is md RAID or device-mapper; IO control applies to \
                 the disks beneath it",
                s.dev.name
            );
            if s.given {
                c.warnings.push(msg);
            } else {
                c = c.miss(format!("{}; name a disk with --dev", msg));
            }
        }

        Ok(c)
    }

    fn check_io_sched(&self, mut c: Check) -> std::result::Result<Check, String> {
        let p = self.queue_file("scheduler")?;
        let text = read(&p)?;
        let cur =
            crate::system::restore::bracketed(&text).unwrap_or_else(|| text.trim().to_string());
        if cur != "none" {
            c.fix = Some(Fix {
                res: Res::Io,
                action: FixAction::Write {
                    path: p,
                    value: "none".into(),
                },
            });
            c = c.miss(format!(
                "IO scheduler of {} is {:?}, needs \"none\"",
                self.dev()?.dev.name,
                cur
            ));
        }

        Ok(c)
    }

    fn check_no_wbt(&self, mut c: Check) -> std::result::Result<Check, String> {
        let p = self.queue_file("wbt_lat_usec")?;
        if p.exists() {
            let text = read(&p)?;
            let v: i64 = text
                .trim()
                .parse()
                .map_err(|_| format!("{}: not a number: {:?}", p.display(), text.trim()))?;
            if v != 0 {
                c.fix = Some(Fix {
                    res: Res::Io,
                    action: FixAction::Write {
                        path: p,
                        value: "0".into(),
                    },
                });
                c = c.miss(format!(
                    "writeback throttling is on for {} (wbt_lat_usec={})",
                    self.dev()?.dev.name,
                    v
                ));
            }
        }

        Ok(c)
    }

    fn check_swap_on_scratch(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let s = self.dev()?;
        for (file, kind) in read_swaps(hp)? {
            match swap_disk(hp, &file, &kind) {
                Ok(disk) if disk == s.dev.name => {}
                Ok(disk) => {
                    c = c.miss(format!(
                        "swap {} is on {}, not on the scratch device {}",
                        file, disk, s.dev.name
                    ))
                }
                Err(e) => c = c.miss(format!("swap {}: can't find its device: {:#}", file, e)),
            }
        }

        Ok(c)
    }

    fn check_swap(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let mem = sysinfo::read_meminfo(hp).map_err(|e| format!("{:#}", e))?;
        let total_mem = mem.get("MemTotal").copied().unwrap_or(0);
        let total = mem.get("SwapTotal").copied().unwrap_or(0);
        let free = mem.get("SwapFree").copied().unwrap_or(0);
        let need_total = (total_mem as f64 * 0.3) as u64;
        let need_free = need_total.min(31 << 30);
        if total < need_total {
            c.by_hand = Some(ByHand::AddSwap {
                bytes: need_total - total,
            });
            c = c.miss(format!(
                "swap is {}, needs at least 30% of memory ({})",
                format_size(total as f64),
                format_size(need_total as f64)
            ));
        }
        if free < need_free {
            c = c.miss(format!(
                "free swap is {}, needs at least {} (30% of memory, at most 31G)",
                format_size(free as f64),
                format_size(need_free as f64)
            ));
        }
        let p = hp.path("proc/sys/vm/swappiness");
        let text = read(&p)?;
        let sw: u32 = text
            .trim()
            .parse()
            .map_err(|_| format!("{}: not a number: {:?}", p.display(), text.trim()))?;
        if sw < 60 {
            c.fix = Some(Fix {
                res: Res::Mem,
                action: FixAction::Write {
                    path: p,
                    value: "60".into(),
                },
            });
            c = c.miss(format!("vm.swappiness is {}, needs at least 60", sw));
        }

        Ok(c)
    }

    fn check_no_zswap(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        let p = hp.path("sys/module/zswap/parameters/enabled");
        if sysinfo::zswap_enabled(hp) {
            c.fix = Some(Fix {
                res: Res::Mem,
                action: FixAction::Write {
                    path: p,
                    value: "N".into(),
                },
            });
            c = c.miss("zswap is enabled");
        }

        Ok(c)
    }

    fn check_psi(&self, mut c: Check) -> std::result::Result<Check, String> {
        let hp = self.hp;
        for what in ["cpu", "memory", "io"] {
            let p = hp.path("proc/pressure").join(what);
            if let Err(e) = std::fs::read_to_string(&p) {
                c = c.miss(format!(
                    "can't read {} ({}): the kernel needs CONFIG_PSI and psi=1",
                    p.display(),
                    e
                ));
            }
        }

        Ok(c)
    }

    pub fn check_all(&self) -> Vec<Check> {
        SysReq::ALL.iter().map(|r| self.check(*r)).collect()
    }
}

/// Collects non-empty io.latency/io.max/io.low files below `dir`.
fn walk_io_controls(root: &Path, dir: &Path, found: &mut Vec<String>, depth: usize) {
    if depth > 64 {
        return;
    }
    for knob in ["io.latency", "io.max", "io.low"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(knob)) {
            if !text.trim().is_empty() {
                let rel = dir.strip_prefix(root).unwrap_or(dir);
                found.push(format!(
                    "/{}{}{}: {}",
                    rel.display(),
                    if rel.as_os_str().is_empty() { "" } else { "/" },
                    knob,
                    text.trim().replace('\n', "; ")
                ));
            }
        }
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subs: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subs.sort();
    for s in subs {
        walk_io_controls(root, &s, found, depth + 1);
    }
}
