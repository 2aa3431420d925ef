//! The study's control profiles, as data: per service a reservation, a weight and a limit
//! (the columns of Ceph's mClock profile tables), the cgroup2 controller that carries them,
//! and the knob values they turn into. Pure: the run writes what `knobs` returns.

use serde::{Deserialize, Serialize};

/// The study's services, in the order every per-service array here uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    /// Latency-sensitive foreground IO (the seed's external client).
    Client,
    /// A fixed amount of work with a completion time (the seed's recovery).
    Background,
    /// An optional third competitor (the seed's background best effort).
    BestEffort,
}

impl Service {
    pub const ALL: [Service; 3] = [Service::Client, Service::Background, Service::BestEffort];

    pub fn name(self) -> &'static str {
        match self {
            Service::Client => "client",
            Service::Background => "background",
            Service::BestEffort => "best-effort",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The cgroup2 controller a profile uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Control {
    /// No control: io.cost off, no io.max, no io.latency (WPQ's role in the seed).
    None,
    /// io.cost on with the measured model: `io.weight` from the shares, `io.max` from limits.
    Iocost,
    /// `io.max` from the limits only, io.cost off.
    Iomax,
    /// `io.latency` on the services with a latency factor, io.cost off.
    Iolatency,
}

impl Control {
    pub fn name(self) -> &'static str {
        match self {
            Control::None => "none",
            Control::Iocost => "iocost",
            Control::Iomax => "iomax",
            Control::Iolatency => "iolatency",
        }
    }

    fn parse(s: &str) -> Option<Control> {
        [
            Control::None,
            Control::Iocost,
            Control::Iomax,
            Control::Iolatency,
        ]
        .into_iter()
        .find(|c| c.name() == s)
    }
}

/// One service's row of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Alloc {
    /// Reservation: the share of the device it gets first, 0–1.
    pub res: f64,
    /// Weight: how the rest is split (unitless, > 0).
    pub weight: f64,
    /// Limit: the most it may use, as a share of the device; `None` is no limit (MAX).
    pub limit: Option<f64>,
    /// `io.latency` target as a factor of the service's latency alone (iolatency profiles).
    pub lat: Option<f64>,
}

impl Alloc {
    const fn new(res: f64, weight: f64, limit: Option<f64>) -> Alloc {
        Alloc {
            res,
            weight,
            limit,
            lat: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    pub control: Control,
    /// Client, background, best effort.
    pub allocs: [Alloc; 3],
}

const MAX: Option<f64> = None;
const EVEN: Alloc = Alloc::new(0.0, 1.0, MAX);

/// The profiles `profile=` names, in the order a study runs them.
pub fn builtin() -> Vec<Profile> {
    let p = |name: &str, control, allocs| Profile {
        name: name.to_string(),
        control,
        allocs,
    };
    vec![
        p("none", Control::None, [EVEN; 3]),
        // The seed's high_client_ops, balanced and high_recovery_ops.
        p(
            "iocost-high-client",
            Control::Iocost,
            [
                Alloc::new(0.50, 2.0, MAX),
                Alloc::new(0.25, 1.0, Some(1.0)),
                Alloc::new(0.25, 2.0, MAX),
            ],
        ),
        p(
            "iocost-balanced",
            Control::Iocost,
            [
                Alloc::new(0.40, 1.0, Some(1.0)),
                Alloc::new(0.40, 1.0, Some(1.5)),
                Alloc::new(0.20, 2.0, MAX),
            ],
        ),
        p(
            "iocost-high-background",
            Control::Iocost,
            [
                Alloc::new(0.30, 1.0, Some(0.8)),
                Alloc::new(0.60, 2.0, Some(2.0)),
                // The seed's "1 (MIN)": one IOPS, nothing on any device worth measuring.
                Alloc::new(0.0, 2.0, MAX),
            ],
        ),
        // The background and best effort capped at what high-client gives them when all are
        // busy; the client uncapped.
        p(
            "iomax-high-client",
            Control::Iomax,
            [
                EVEN,
                Alloc::new(0.0, 1.0, Some(0.25)),
                Alloc::new(0.0, 1.0, Some(0.25)),
            ],
        ),
        // The client's io.latency target at 1.5× its latency alone; the others without one,
        // so they are the ones throttled when it misses.
        p(
            "iolatency-client",
            Control::Iolatency,
            [
                Alloc {
                    lat: Some(1.5),
                    ..EVEN
                },
                EVEN,
                EVEN,
            ],
        ),
    ]
}

/// The built-in profile `name`.
pub fn find(name: &str) -> Option<Profile> {
    builtin().into_iter().find(|p| p.name == name)
}

/// Each present service's share of the device with all of them busy, as mClock allocates:
/// reservations first (scaled down together when they add up to more than the device), the
/// rest by weight, no share above its limit (what a limit leaves goes to the others, by
/// weight). Absent services get 0.
pub fn shares(p: &Profile, present: [bool; 3]) -> [f64; 3] {
    let mut share = [0.0; 3];
    let res_sum: f64 = (0..3)
        .filter(|&i| present[i])
        .map(|i| p.allocs[i].res)
        .sum();
    let scale = if res_sum > 1.0 { 1.0 / res_sum } else { 1.0 };
    for i in (0..3).filter(|&i| present[i]) {
        share[i] = (p.allocs[i].res * scale).min(cap(&p.allocs[i]));
    }
    // Hand out what is left by weight among the services below their limits, until nothing
    // is left or everyone is capped (at most three rounds: each caps one more service).
    for _ in 0..3 {
        let left = 1.0 - share.iter().sum::<f64>();
        let open: Vec<usize> = (0..3)
            .filter(|&i| present[i] && share[i] < cap(&p.allocs[i]) - 1e-12)
            .collect();
        let w: f64 = open.iter().map(|&i| p.allocs[i].weight).sum();
        if left <= 1e-12 || open.is_empty() || w <= 0.0 {
            break;
        }
        for &i in &open {
            let give = left * p.allocs[i].weight / w;
            share[i] = (share[i] + give).min(cap(&p.allocs[i]));
        }
    }
    share
}

fn cap(a: &Alloc) -> f64 {
    a.limit.unwrap_or(f64::INFINITY).min(1.0)
}

/// What the device can do, measured by the study's baselines: the client's IOPS alone and the
/// background's bytes/s alone (the "device capacity" the seed's percentages are of).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    pub iops: f64,
    pub bps: f64,
}

/// `io.max` limits of one service on the device, each a cap; `None` is `max` (no cap), for a
/// direction the service doesn't use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoMax {
    pub riops: Option<u64>,
    pub wiops: Option<u64>,
    pub rbps: Option<u64>,
    pub wbps: Option<u64>,
}

impl IoMax {
    /// The `io.max` line for device `dev` (`MAJ:MIN`), all four keys (the kernel keeps a key
    /// a line leaves out, so every line says all of them).
    pub fn line(&self, dev: &str) -> String {
        let v = |x: Option<u64>| x.map_or("max".to_string(), |n| n.to_string());
        format!(
            "{} rbps={} wbps={} riops={} wiops={}",
            dev,
            v(self.rbps),
            v(self.wbps),
            v(self.riops),
            v(self.wiops)
        )
    }
}

/// The knobs of one service's cgroup under a profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Knobs {
    /// `io.weight` (1–10000), with io.cost on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_weight: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_max: Option<IoMax>,
    /// `io.latency` target, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_latency_us: Option<u64>,
}

/// What a study measured before its mixed runs, which sizes the knobs: the device's capacity,
/// each service's latency alone (for io.latency targets) and the share of its IO that reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Baseline {
    pub cap: Capacity,
    pub alone_lat_us: [f64; 3],
    pub read_frac: [f64; 3],
}

/// Each service's knobs under `p` with the services `present`.
pub fn knobs(p: &Profile, present: [bool; 3], base: &Baseline) -> [Knobs; 3] {
    let mut k = [Knobs::default(); 3];
    let share = shares(p, present);
    for i in (0..3).filter(|&i| present[i]) {
        let a = &p.allocs[i];
        if p.control == Control::Iocost {
            // io.weight's range, shares in 1/10000: 50 % is 5000.
            k[i].io_weight = Some((share[i] * 10_000.0).round().clamp(1.0, 10_000.0) as u32);
        }
        if matches!(p.control, Control::Iocost | Control::Iomax) {
            k[i].io_max = a
                .limit
                .filter(|&l| l < 1.0)
                .map(|l| io_max(l, base.cap, base.read_frac[i]));
        }
        if p.control == Control::Iolatency {
            k[i].io_latency_us = a
                .lat
                .map(|f| (f * base.alone_lat_us[i]).round().max(1.0) as u64);
        }
    }
    k
}

/// A limit of `l` of the device for a service that reads `read_frac` of its IO: io.max caps
/// reads and writes apart, so the limit is split between them by the service's own mix (or a
/// half-reading service would get twice its limit); a direction it never uses stays `max`.
fn io_max(l: f64, cap: Capacity, read_frac: f64) -> IoMax {
    let part = |total: f64, f: f64| (f > 0.0).then(|| (l * total * f).round().max(1.0) as u64);
    let r = read_frac.clamp(0.0, 1.0);
    IoMax {
        riops: part(cap.iops, r),
        wiops: part(cap.iops, 1.0 - r),
        rbps: part(cap.bps, r),
        wbps: part(cap.bps, 1.0 - r),
    }
}

/// Profiles from a file: one row per service, `PROFILE CONTROL SERVICE RESERVATION WEIGHT
/// LIMIT [LATENCY]` separated by blanks (`#` starts a comment), like
/// `mine iocost client 50% 2 max`; reservations and limits in % of the device, `max` for no
/// limit, the latency a factor of the service's latency alone (`1.5x`). A service a profile
/// leaves out gets reservation 0, weight 1, no limit.
pub fn parse_file(text: &str) -> Result<Vec<Profile>, String> {
    let mut out: Vec<Profile> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |what: &str| {
            format!(
                "line {}: {} (expected: PROFILE CONTROL SERVICE RESERVATION WEIGHT LIMIT \
                 [LATENCY], like \"mine iocost client 50% 2 max\"; controls: none, iocost, \
                 iomax, iolatency; services: client, background, best-effort)",
                n + 1,
                what
            )
        };
        let f: Vec<&str> = line.split_whitespace().collect();
        if !(6..=7).contains(&f.len()) {
            return Err(bad(&format!("{} columns", f.len())));
        }
        let control = Control::parse(f[1]).ok_or_else(|| bad(&format!("control {:?}", f[1])))?;
        let svc = Service::ALL
            .into_iter()
            .find(|s| s.name() == f[2])
            .ok_or_else(|| bad(&format!("service {:?}", f[2])))?;
        let res = pct(f[3]).ok_or_else(|| bad(&format!("reservation {:?}", f[3])))?;
        let weight = f[4]
            .parse::<f64>()
            .ok()
            .filter(|w| *w > 0.0 && w.is_finite())
            .ok_or_else(|| bad(&format!("weight {:?}", f[4])))?;
        let limit = match f[5] {
            "max" | "MAX" => None,
            l => Some(
                pct(l)
                    .filter(|v| *v > 0.0)
                    .ok_or_else(|| bad(&format!("limit {:?}", l)))?,
            ),
        };
        let lat = match f.get(6) {
            None => None,
            Some(l) => Some(
                l.strip_suffix('x')
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|v| *v > 0.0 && v.is_finite())
                    .ok_or_else(|| bad(&format!("latency {:?}", l)))?,
            ),
        };
        if res > 1.0 {
            return Err(bad(&format!("reservation {} above 100%", f[3])));
        }
        let at = match out.iter().position(|p| p.name == f[0]) {
            Some(i) if out[i].control != control => {
                return Err(bad(&format!("profile {} has two controls", f[0])))
            }
            Some(i) => i,
            None => {
                out.push(Profile {
                    name: f[0].to_string(),
                    control,
                    allocs: [EVEN; 3],
                });
                out.len() - 1
            }
        };
        out[at].allocs[svc.index()] = Alloc {
            res,
            weight,
            limit,
            lat,
        };
    }
    if out.is_empty() {
        return Err(
            "no profile rows (expected: PROFILE CONTROL SERVICE RESERVATION WEIGHT \
                    LIMIT [LATENCY] per line)"
                .to_string(),
        );
    }
    Ok(out)
}

/// `50%` → 0.5.
fn pct(s: &str) -> Option<f64> {
    s.strip_suffix('%')
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| *v >= 0.0 && v.is_finite())
        .map(|v| v / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [bool; 3] = [true; 3];
    const TWO: [bool; 3] = [true, true, false];

    fn close(a: [f64; 3], b: [f64; 3]) {
        for i in 0..3 {
            assert!((a[i] - b[i]).abs() < 1e-9, "{:?} vs {:?}", a, b);
        }
    }

    #[test]
    fn seed_profiles_share_the_device_as_their_tables_say() {
        // Reservations that add up to 100 % are the shares.
        close(
            shares(&find("iocost-high-client").unwrap(), ALL),
            [0.5, 0.25, 0.25],
        );
        close(
            shares(&find("iocost-balanced").unwrap(), ALL),
            [0.4, 0.4, 0.2],
        );
        // high-background: 30 + 60 reserved, the 10 % left by weight 1:2:2.
        close(
            shares(&find("iocost-high-background").unwrap(), ALL),
            [0.32, 0.64, 0.04],
        );
        // Without best effort, high-client's 25 % left goes 2:1 to client and background.
        close(
            shares(&find("iocost-high-client").unwrap(), TWO),
            [0.5 + 0.25 * 2.0 / 3.0, 0.25 + 0.25 / 3.0, 0.0],
        );
        // high-background's client is capped at 80 %: with 30/60 reserved and the 10 % split
        // 1:2, nobody reaches a cap.
        close(
            shares(&find("iocost-high-background").unwrap(), TWO),
            [0.30 + 0.1 / 3.0, 0.60 + 0.2 / 3.0, 0.0],
        );
        close(shares(&find("none").unwrap(), ALL), [1.0 / 3.0; 3]);
    }

    #[test]
    fn limits_cap_shares_and_what_they_leave_goes_to_the_others() {
        let p = Profile {
            name: "t".into(),
            control: Control::Iocost,
            allocs: [
                Alloc::new(0.0, 1.0, Some(0.2)),
                Alloc::new(0.0, 1.0, MAX),
                Alloc::new(0.0, 2.0, MAX),
            ],
        };
        // 1:1:2 would give the client 25 %; its cap holds it at 20 %, the 5 % goes 1:2.
        close(shares(&p, ALL), [0.2, 0.8 / 3.0, 1.6 / 3.0]);
        // Reservations over 100 % scale down together: 80:80 is 50:50.
        let q = Profile {
            allocs: [Alloc::new(0.8, 1.0, MAX), Alloc::new(0.8, 5.0, MAX), EVEN],
            ..p
        };
        close(shares(&q, TWO), [0.5, 0.5, 0.0]);
    }

    #[test]
    fn knobs_follow_the_control() {
        // A writing client, a half-reading background, a reading best effort.
        let base = Baseline {
            cap: Capacity {
                iops: 20_000.0,
                bps: 400e6,
            },
            alone_lat_us: [800.0, 20_000.0, 5_000.0],
            read_frac: [0.0, 0.5, 1.0],
        };
        let hc = knobs(&find("iocost-high-client").unwrap(), ALL, &base);
        assert_eq!(
            hc.map(|k| k.io_weight),
            [Some(5000), Some(2500), Some(2500)]
        );
        // The background's 100 % limit is no limit; nothing else is capped.
        assert!(hc
            .iter()
            .all(|k| k.io_max.is_none() && k.io_latency_us.is_none()));
        let hb = knobs(&find("iocost-high-background").unwrap(), TWO, &base);
        // The client's 80 %: of 20k IOPS and of 400 MB/s, all of it on writes.
        assert_eq!(
            hb[0].io_max,
            Some(IoMax {
                riops: None,
                wiops: Some(16_000),
                rbps: None,
                wbps: Some(320_000_000)
            })
        );
        assert_eq!(hb[0].io_weight, Some(3333));
        assert_eq!(hb[2], Knobs::default());
        let im = knobs(&find("iomax-high-client").unwrap(), ALL, &base);
        assert_eq!(im[0], Knobs::default());
        // The background's 25 % (100 MB/s, 5000 IOPS) split half and half.
        assert_eq!(
            im[1].io_max,
            Some(IoMax {
                riops: Some(2500),
                wiops: Some(2500),
                rbps: Some(50_000_000),
                wbps: Some(50_000_000)
            })
        );
        assert_eq!(
            im[2].io_max.map(|m| (m.rbps, m.wbps)),
            Some((Some(100_000_000), None))
        );
        assert_eq!(im[1].io_weight, None);
        let il = knobs(&find("iolatency-client").unwrap(), ALL, &base);
        assert_eq!(il.map(|k| k.io_latency_us), [Some(1200), None, None]);
        assert!(knobs(&find("none").unwrap(), ALL, &base)
            .iter()
            .all(|k| *k == Knobs::default()));
        assert_eq!(
            hb[0].io_max.unwrap().line("254:0"),
            "254:0 rbps=max wbps=320000000 riops=max wiops=16000"
        );
    }

    #[test]
    fn profile_files_parse_or_say_what_is_accepted() {
        let p = parse_file(
            "# mine: the client first\n\
             mine iocost client 60% 3 max\n\
             mine iocost background 20% 1 50%   # half the device at most\n\
             lat iolatency client 0% 1 max 2x\n",
        )
        .unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].allocs[0], Alloc::new(0.6, 3.0, MAX));
        assert_eq!(p[0].allocs[1], Alloc::new(0.2, 1.0, Some(0.5)));
        assert_eq!(p[0].allocs[2], EVEN);
        assert_eq!(p[1].control, Control::Iolatency);
        assert_eq!(p[1].allocs[0].lat, Some(2.0));
        for (text, want) in [
            ("a iocost client 50%", "line 1: 4 columns"),
            ("a cfq client 50% 1 max", "control \"cfq\""),
            ("a iocost server 50% 1 max", "service \"server\""),
            ("a iocost client 50 1 max", "reservation \"50\""),
            ("a iocost client 150% 1 max", "above 100%"),
            ("a iocost client 50% 0 max", "weight \"0\""),
            ("a iocost client 50% 1 none", "limit \"none\""),
            ("a iocost client 50% 1 max 2", "latency \"2\""),
            (
                "a iocost client 5% 1 max\na iomax background 5% 1 max",
                "two controls",
            ),
            ("# nothing\n", "no profile rows"),
        ] {
            let e = parse_file(text).unwrap_err();
            assert!(e.contains(want), "{}: {}", text, e);
        }
    }
}
