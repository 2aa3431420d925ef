//! The study's answer: per profile, over its repetitions, the mean and spread of what the seed
//! compares — the client's IOPS and latency (mean, p95, p99, p99.5), the
//! background's throughput and completion time, best effort's throughput.

use super::profiles::{Capacity, Service};
use super::record::{MixedRun, QosStudyRecord, ServiceOut};
use crate::study::dist::mean_stdev;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Mean, standard deviation and range over the repetitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    pub fn of(v: &[f64]) -> Stat {
        let (mean, stdev) = mean_stdev(v);
        Stat {
            mean,
            stdev,
            min: v.iter().copied().fold(f64::INFINITY, f64::min).min(mean),
            max: v
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
                .max(mean),
        }
    }
}

/// One profile's row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileRow {
    pub profile: String,
    pub control: String,
    pub runs: u32,
    pub client_iops: Stat,
    pub client_lat_mean_us: Stat,
    pub client_lat_p95_us: Stat,
    pub client_lat_p99_us: Stat,
    pub client_lat_p99_5_us: Stat,
    /// Bytes/s.
    pub bg_bps: Stat,
    pub bg_secs: Stat,
    /// Runs whose background finished before the cap.
    pub bg_done: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub be_bps: Option<Stat>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QosStudyResult {
    pub dev: String,
    pub rotational: bool,
    pub capacity: Option<Capacity>,
    pub alone: BTreeMap<Service, ServiceOut>,
    pub rows: Vec<ProfileRow>,
}

fn stat(runs: &[&MixedRun], f: impl Fn(&MixedRun) -> Option<f64>) -> Stat {
    let v: Vec<f64> = runs.iter().filter_map(|r| f(r)).collect();
    Stat::of(&v)
}

fn svc(r: &MixedRun, s: Service) -> Option<&ServiceOut> {
    r.services.get(&s)
}

pub fn study(rec: &QosStudyRecord) -> QosStudyResult {
    let rows = rec
        .profiles
        .iter()
        .filter_map(|p| {
            let runs: Vec<&MixedRun> = rec.runs.iter().filter(|r| r.profile == p.name).collect();
            if runs.is_empty() {
                return None;
            }
            let client = |pct: Option<f64>| {
                stat(&runs, |r| svc(r, Service::Client).and_then(|o| o.lat(pct)))
            };
            let has_be = runs
                .iter()
                .any(|r| r.services.contains_key(&Service::BestEffort));
            Some(ProfileRow {
                profile: p.name.clone(),
                control: p.control.name().to_string(),
                runs: runs.len() as u32,
                client_iops: stat(&runs, |r| svc(r, Service::Client).map(|o| o.iops)),
                client_lat_mean_us: client(None),
                client_lat_p95_us: client(Some(95.0)),
                client_lat_p99_us: client(Some(99.0)),
                client_lat_p99_5_us: client(Some(99.5)),
                bg_bps: stat(&runs, |r| svc(r, Service::Background).map(|o| o.bps)),
                bg_secs: stat(&runs, |r| Some(r.bg_secs)),
                bg_done: runs.iter().filter(|r| r.bg_done).count() as u32,
                be_bps: has_be.then(|| stat(&runs, |r| svc(r, Service::BestEffort).map(|o| o.bps))),
            })
        })
        .collect();
    QosStudyResult {
        dev: rec.dev.clone(),
        rotational: rec.rotational,
        capacity: rec.capacity,
        alone: rec.alone.clone(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::qos_study::profiles;

    fn out(iops: f64, bps: f64, p99: f64) -> ServiceOut {
        ServiceOut {
            iops,
            bps,
            lat_mean_us: p99 / 4.0,
            lat_pcts_us: vec![(95.0, p99 / 2.0), (99.0, p99), (99.5, p99 * 1.5)],
            ..Default::default()
        }
    }

    fn run(profile: &str, rep: u32, client: f64, bg_secs: f64, done: bool) -> MixedRun {
        let mut services = BTreeMap::new();
        services.insert(Service::Client, out(client, client * 4096.0, 1e6 / client));
        services.insert(Service::Background, out(100.0, 1e8, 5e4));
        MixedRun {
            profile: profile.into(),
            rep,
            services,
            bg_secs,
            bg_done: done,
            ..Default::default()
        }
    }

    #[test]
    fn rows_hold_each_profiles_mean_and_spread_in_profile_order() {
        let rec = QosStudyRecord {
            profiles: vec![
                profiles::find("none").unwrap(),
                profiles::find("iocost-high-client").unwrap(),
                profiles::find("iocost-balanced").unwrap(),
            ],
            runs: vec![
                run("iocost-high-client", 0, 1000.0, 30.0, true),
                run("none", 0, 200.0, 10.0, true),
                run("iocost-high-client", 1, 3000.0, 50.0, false),
                run("none", 1, 400.0, 12.0, true),
            ],
            ..Default::default()
        };
        let r = study(&rec);
        // balanced has no runs: no row.
        let names: Vec<&str> = r.rows.iter().map(|r| r.profile.as_str()).collect();
        assert_eq!(names, ["none", "iocost-high-client"]);
        let hc = &r.rows[1];
        assert_eq!(hc.runs, 2);
        assert_eq!(hc.control, "iocost");
        // The sample standard deviation of 1000 and 3000: √2 × 1000.
        assert_eq!(
            (hc.client_iops.mean, hc.client_iops.min, hc.client_iops.max),
            (2000.0, 1000.0, 3000.0)
        );
        assert!((hc.client_iops.stdev - 2f64.sqrt() * 1000.0).abs() < 1e-9);
        assert_eq!(hc.bg_secs.mean, 40.0);
        assert_eq!(hc.bg_done, 1);
        // p99 of 1000 and 333.3 µs, p99.5 half as much again, p95 half.
        assert!((hc.client_lat_p99_us.mean - (1000.0 + 1e6 / 3000.0) / 2.0).abs() < 1e-6);
        assert!((hc.client_lat_p99_5_us.mean - hc.client_lat_p99_us.mean * 1.5).abs() < 1e-6);
        assert!((hc.client_lat_p95_us.mean - hc.client_lat_p99_us.mean / 2.0).abs() < 1e-6);
        assert_eq!(r.rows[0].client_iops.mean, 300.0);
        assert!(hc.be_bps.is_none());
    }
}
