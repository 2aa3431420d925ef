//! Steady state, as fio's `ss=`: a job may stop before its duration once the last `window`
//! seconds of a metric are flat. `iops`/`bw`/`lat` say every second lies within the limit of
//! the window's mean; `*_slope` that the least-squares slope over the window (per second) is
//! within it. A limit ending in `%` is relative to the window's mean; otherwise it is in the
//! metric's unit (IOs/s, bytes/s, ns of mean latency).

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Iops,
    Bw,
    /// The mean total latency of the IOs completed in the second.
    Lat,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SteadyRule {
    pub metric: Metric,
    /// Judge the slope of the window rather than each second's distance from its mean.
    pub slope: bool,
    pub limit: f64,
    /// `limit` is a percentage of the window's mean.
    pub pct: bool,
    /// Seconds the judgement covers.
    pub window_s: u32,
}

/// The forms `ss=` accepts, for messages.
pub const SS_FORMS: &str = "iops, iops_slope, bw, bw_slope, lat or lat_slope, '/' (or fio's ':', \
     escaped as '\\:' in a job spec), and a limit: a percentage of the mean (iops_slope/2%) or \
     an amount in the metric's unit (iops/50, bw/10M, lat/100us)";

impl SteadyRule {
    /// `iops_slope/2%`, `lat:100us`, … with the window in seconds. `/` separates too, as `:`
    /// separates property groups in a job spec.
    pub fn parse(text: &str, window_s: u32) -> Result<SteadyRule, String> {
        let bad = || format!("ss={:?}: expected {}", text, SS_FORMS);
        let (name, limit) = text.split_once([':', '/']).ok_or_else(bad)?;
        let (base, slope) = match name.strip_suffix("_slope") {
            Some(b) => (b, true),
            None => (name, false),
        };
        let metric = match base {
            "iops" => Metric::Iops,
            "bw" => Metric::Bw,
            "lat" => Metric::Lat,
            _ => return Err(bad()),
        };
        let (limit, pct) = match limit.trim().strip_suffix('%') {
            Some(p) => (p.trim().parse::<f64>().map_err(|_| bad())?, true),
            None => {
                let v = match metric {
                    Metric::Iops => crate::units::parse::parse_float(limit),
                    Metric::Bw => crate::units::parse::parse_size(limit).map(|v| v as f64),
                    Metric::Lat => crate::units::parse::parse_duration(limit).map(|s| s * 1e9),
                };
                (v.map_err(|_| bad())?, false)
            }
        };
        if !limit.is_finite() || limit <= 0.0 {
            return Err(format!("ss={:?}: the limit must be above 0", text));
        }
        if window_s < 2 {
            return Err(format!(
                "ss-dur={}s: the window needs at least 2 seconds",
                window_s
            ));
        }
        Ok(SteadyRule {
            metric,
            slope,
            limit,
            pct,
            window_s,
        })
    }

    /// fio's spelling of the rule, for reports.
    pub fn name(&self) -> String {
        let base = match self.metric {
            Metric::Iops => "iops",
            Metric::Bw => "bw",
            Metric::Lat => "lat",
        };
        let limit = match (self.pct, self.metric) {
            (true, _) => format!("{}%", self.limit),
            (false, Metric::Lat) => format!("{}us", (self.limit).round() / 1e3),
            (false, _) => format!("{}", self.limit),
        };
        format!(
            "{}{}:{} over {}s",
            base,
            if self.slope { "_slope" } else { "" },
            limit,
            self.window_s
        )
    }

    /// The metric's value for one second's totals.
    pub fn value(&self, ios: u64, bytes: u64, lat_sum_ns: u64) -> Option<f64> {
        match self.metric {
            Metric::Iops => Some(ios as f64),
            Metric::Bw => Some(bytes as f64),
            // A second without completions has no latency: not steady.
            Metric::Lat => (ios > 0).then(|| lat_sum_ns as f64 / ios as f64),
        }
    }

    /// Whether the last `window_s` values (oldest first) are steady. `None` values (seconds
    /// without a latency) and a shorter series are not.
    pub fn is_steady(&self, series: &[Option<f64>]) -> bool {
        let w = self.window_s as usize;
        if series.len() < w {
            return false;
        }
        let Some(vals) = series[series.len() - w..]
            .iter()
            .copied()
            .collect::<Option<Vec<f64>>>()
        else {
            return false;
        };
        let mean = vals.iter().sum::<f64>() / w as f64;
        let allowed = if self.pct {
            self.limit / 100.0 * mean.abs()
        } else {
            self.limit
        };
        if self.slope {
            slope(&vals).abs() <= allowed
        } else {
            vals.iter().all(|v| (v - mean).abs() <= allowed)
        }
    }
}

/// Least-squares slope of `ys` against 0, 1, 2, … (units per second).
fn slope(ys: &[f64]) -> f64 {
    let n = ys.len() as f64;
    let mx = (n - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        sxy += dx * (y - my);
        sxx += dx * dx;
    }
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// IOs counted after the ramp: their number, bytes and summed total latency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counted {
    pub ios: u64,
    pub bytes: u64,
    pub lat_sum_ns: u64,
}

/// The job's running totals, added to by every worker as it reaps.
#[derive(Debug, Default)]
pub struct Live {
    ios: AtomicU64,
    bytes: AtomicU64,
    lat_sum_ns: AtomicU64,
}

impl Live {
    pub fn add(&self, c: &Counted) {
        if c.ios > 0 {
            self.ios.fetch_add(c.ios, Ordering::Relaxed);
            self.bytes.fetch_add(c.bytes, Ordering::Relaxed);
            self.lat_sum_ns.fetch_add(c.lat_sum_ns, Ordering::Relaxed);
        }
    }

    pub fn totals(&self) -> Counted {
        Counted {
            ios: self.ios.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            lat_sum_ns: self.lat_sum_ns.load(Ordering::Relaxed),
        }
    }
}

/// Turns running totals read once a second into the rule's per-second series and judges it.
#[derive(Debug)]
pub struct Watch {
    rule: SteadyRule,
    last: Counted,
    series: Vec<Option<f64>>,
}

impl Watch {
    pub fn new(rule: SteadyRule) -> Watch {
        Watch {
            rule,
            last: Counted::default(),
            series: vec![],
        }
    }

    /// One more second ended with `totals`; whether the window is now steady.
    pub fn second(&mut self, totals: Counted) -> bool {
        let d = Counted {
            ios: totals.ios - self.last.ios,
            bytes: totals.bytes - self.last.bytes,
            lat_sum_ns: totals.lat_sum_ns - self.last.lat_sum_ns,
        };
        self.last = totals;
        self.series
            .push(self.rule.value(d.ios, d.bytes, d.lat_sum_ns));
        self.rule.is_steady(&self.series)
    }

    pub fn seconds(&self) -> u32 {
        self.series.len() as u32
    }
}

/// What the steady-state watch found, stored with the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyOut {
    pub rule: SteadyRule,
    /// The job stopped because the window was steady (rather than at its duration).
    pub reached: bool,
    /// Seconds after the ramp when it stopped.
    pub at_s: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(v: &[f64]) -> Vec<Option<f64>> {
        v.iter().map(|&x| Some(x)).collect()
    }

    #[test]
    fn parses_fio_forms_and_refuses_the_rest() {
        let r = SteadyRule::parse("iops_slope:2%", 10).unwrap();
        assert_eq!(
            (r.metric, r.slope, r.limit, r.pct),
            (Metric::Iops, true, 2.0, true)
        );
        let r = SteadyRule::parse("lat:100us", 5).unwrap();
        assert_eq!((r.metric, r.slope, r.pct), (Metric::Lat, false, false));
        assert!((r.limit - 100_000.0).abs() < 1e-6);
        assert_eq!(r.name(), "lat:100us over 5s");
        let r = SteadyRule::parse("bw:10M", 5).unwrap();
        assert_eq!(r.limit, 10.0 * 1024.0 * 1024.0);
        for bad in ["iops", "qd:2%", "iops:x%", "iops:-1", "lat_slope:abc"] {
            let e = SteadyRule::parse(bad, 10).unwrap_err();
            assert!(
                e.contains("expected") || e.contains("above 0"),
                "{}: {}",
                bad,
                e
            );
        }
        assert!(SteadyRule::parse("iops:2%", 1)
            .unwrap_err()
            .contains("at least 2 seconds"));
    }

    #[test]
    fn a_flat_series_is_steady_and_a_ramp_is_not() {
        let dev = SteadyRule::parse("iops:2%", 5).unwrap();
        let slope = SteadyRule::parse("iops_slope:1%", 5).unwrap();
        // Noise of ±1 % around 1000, after a warm-up.
        let flat = some(&[300.0, 700.0, 1005.0, 995.0, 1010.0, 990.0, 1002.0]);
        assert!(dev.is_steady(&flat) && slope.is_steady(&flat));
        // Climbing 3 % of the mean a second, every second within ±6 %.
        let ramp = some(&[940.0, 970.0, 1000.0, 1030.0, 1060.0]);
        assert!(!dev.is_steady(&ramp) && !slope.is_steady(&ramp));
        // Too short, or a second without a latency.
        assert!(!dev.is_steady(&flat[..4]));
        let lat = SteadyRule::parse("lat:5%", 3).unwrap();
        assert!(!lat.is_steady(&[Some(1.0), None, Some(1.0)]));
        assert!(lat.is_steady(&[None, Some(1.0), Some(1.01), Some(0.99)]));
        assert_eq!(lat.value(0, 0, 0), None);
        assert_eq!(lat.value(4, 0, 400), Some(100.0));
    }

    #[test]
    fn the_watch_judges_per_second_differences_of_the_totals() {
        let mut w = Watch::new(SteadyRule::parse("iops:1%", 3).unwrap());
        let mut t = Counted::default();
        let mut steady_at = None;
        for (sec, ios) in [500u64, 900, 1000, 1000, 1000, 1000].iter().enumerate() {
            t.ios += ios;
            t.bytes += ios * 4096;
            if w.second(t) && steady_at.is_none() {
                steady_at = Some(sec);
            }
        }
        // Seconds 2, 3, 4 are the first window of three flat ones.
        assert_eq!(steady_at, Some(4));
        assert_eq!(w.seconds(), 6);
        let live = Live::default();
        live.add(&Counted {
            ios: 2,
            bytes: 8192,
            lat_sum_ns: 10,
        });
        live.add(&Counted::default());
        assert_eq!(live.totals().bytes, 8192);
    }

    #[test]
    fn slope_is_per_second() {
        assert!((slope(&[1.0, 3.0, 5.0, 7.0]) - 2.0).abs() < 1e-12);
        assert_eq!(slope(&[4.0]), 0.0);
        // A slope limit in absolute units: 2 IOs/s per second passes 1.5, not 2.5.
        let r = SteadyRule::parse("iops_slope:2", 4).unwrap();
        assert!(r.is_steady(&some(&[100.0, 101.5, 103.0, 104.5])));
        assert!(!r.is_steady(&some(&[100.0, 102.5, 105.0, 107.5])));
    }
}
