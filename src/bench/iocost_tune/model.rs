//! iocost-tune's record and result as result files store them (upstream's field names): the
//! data series per selector with their fitted lines, the solutions per rule name, the remarks.
//!
//! Two layouts are read. 2.2 files store a series' points as `data` and its fitted line as
//! `lines.points` (any number of segments); 2.1 files store `points` and a line of three
//! segments as `lines.left`/`lines.right` (flat, slope, flat), which is read into the same
//! form.

use super::sel::DataSel;
use crate::system::iocost::{model_params, qos_params, IoCostModel, IoCostQos};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One measurement: vrate (x, percent) and the series' value there (y).
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd, Serialize, Deserialize)]
pub struct DataPoint {
    pub x: f64,
    pub y: f64,
}

impl DataPoint {
    pub fn new(x: f64, y: f64) -> DataPoint {
        DataPoint { x, y }
    }
}

/// A fitted piecewise-linear line: its vertices, left to right, over the vrate `range`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DataLines {
    pub points: Vec<DataPoint>,
    pub range: (f64, f64),
}

/// Either layout of a stored line.
#[derive(Deserialize)]
struct StoredLines {
    #[serde(default)]
    points: Option<Vec<DataPoint>>,
    #[serde(default)]
    range: (f64, f64),
    #[serde(default)]
    left: Option<DataPoint>,
    #[serde(default)]
    right: Option<DataPoint>,
}

impl<'de> Deserialize<'de> for DataLines {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = StoredLines::deserialize(d)?;
        let points = match (s.points, s.left, s.right) {
            (Some(p), _, _) => p,
            // 2.1: flat from the range's start to `left`, a slope to `right`, flat to the end.
            (None, Some(l), Some(r)) if s.range != (0.0, 0.0) => {
                let mut p = vec![DataPoint::new(s.range.0, l.y), l, r];
                p.push(DataPoint::new(s.range.1, r.y));
                p.dedup_by(|b, a| a.x == b.x);
                p
            }
            _ => Vec::new(),
        };
        Ok(DataLines {
            points,
            range: s.range,
        })
    }
}

impl DataLines {
    /// The value at `x` on the line through the segment that holds it; beyond the vertices the
    /// first or last segment is extended. Flat segments and vertices give their stored y
    /// exactly (fits compare values for equality).
    pub fn eval_extrapolate(&self, x: f64) -> f64 {
        let mut seg = None;
        for w in self.points.windows(2) {
            seg = Some((w[0], w[1]));
            if x <= w[1].x {
                break;
            }
        }
        match seg {
            Some((a, b)) => {
                if x == a.x || a.y == b.y {
                    a.y
                } else if x == b.x {
                    b.y
                } else {
                    a.y + (x - a.x) * (b.y - a.y) / (b.x - a.x)
                }
            }
            None => self.points.first().map_or(0.0, |p| p.y),
        }
    }

    /// The value at `x` held within the line's range.
    pub fn eval(&self, x: f64) -> f64 {
        let (lo, hi) = self.range;
        // `clamp` would panic on a reversed or NaN range from a damaged file.
        let x = if x < lo {
            lo
        } else if x > hi {
            hi
        } else {
            x
        };
        self.eval_extrapolate(x)
    }

    /// The lowest and highest vertex values ((0, 0) for an empty line).
    pub fn min_max(&self) -> (f64, f64) {
        if self.points.is_empty() {
            return (0.0, 0.0);
        }
        self.points
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), p| {
                (
                    if p.y < lo { p.y } else { lo },
                    if p.y > hi { p.y } else { hi },
                )
            })
    }
}

/// One selector's series: the points used, those rejected, the fitted line and its error.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DataSeries {
    #[serde(default, alias = "points")]
    pub data: Vec<DataPoint>,
    #[serde(default)]
    pub outliers: Vec<DataPoint>,
    #[serde(default)]
    pub lines: DataLines,
    #[serde(default)]
    pub error: f64,
}

/// The solutions' latencies, in print order: (latency percentile, time percentile).
pub const LAT_PCTS: [(&str, &str); 6] = [
    ("50", "mean"),
    ("50", "99"),
    ("50", "100"),
    ("99", "mean"),
    ("99", "99"),
    ("100", "100"),
];

/// Latency percentile → time percentile → seconds.
pub type TimePctsMap = BTreeMap<String, BTreeMap<String, f64>>;

/// A rule's answer: the model and QoS to set and what the fitted series say at its vrate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QosSolution {
    /// The rule's target as upstream serializes it (kept as stored).
    #[serde(default)]
    pub target: Value,
    #[serde(default, with = "model_params")]
    pub model: IoCostModel,
    #[serde(default, with = "qos_params")]
    pub qos: IoCostQos,
    #[serde(default)]
    pub scale_factor: f64,
    #[serde(default)]
    pub mem_profile: u32,
    #[serde(default)]
    pub mem_offload_factor: f64,
    #[serde(default)]
    pub adjusted_mem_offload_factor: f64,
    #[serde(default)]
    pub adjusted_mem_offload_delta: f64,
    #[serde(default)]
    pub isol: f64,
    #[serde(default)]
    pub rlat: TimePctsMap,
    #[serde(default)]
    pub wlat: TimePctsMap,
}

impl QosSolution {
    /// The same answer, whichever rule found it: rules sharing one print it once.
    pub fn same_answer(&self, other: &QosSolution) -> bool {
        let strip = |s: &QosSolution| QosSolution {
            target: Value::Null,
            ..s.clone()
        };
        strip(self) == strip(other)
    }

    /// A latency from the solution's table, 0 when the table lacks it.
    pub fn lat(map: &TimePctsMap, lat: &str, time: &str) -> f64 {
        map.get(lat)
            .and_then(|m| m.get(time))
            .copied()
            .unwrap_or(0.0)
    }
}

/// The record: the iocost-qos spec properties the data came from (upstream's), and ours: the
/// series collected from that run, which `study` turns into the result.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IocostTuneRecord {
    #[serde(default)]
    pub qos_props: Vec<BTreeMap<String, String>>,
    #[serde(default)]
    pub dfl_qos: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collected: Option<IocostTuneResult>,
    /// Ours: the iocost-qos time-savers the data was measured with (none for upstream's runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_savers: Vec<String>,
    /// Ours: the iocost-qos base model was measured with upstream's fio job shapes
    /// (`iocost-params:jobs=upstream`); left out when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub upstream_model_jobs: bool,
    /// Ours: fio's engine measured that model (`iocost-params:engine=fio`); left out when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fio_model_engine: bool,
}

/// The result: the base model and QoS, the series and what was solved from them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IocostTuneResult {
    #[serde(default, with = "model_params")]
    pub base_model: IoCostModel,
    #[serde(default, with = "qos_params")]
    pub base_qos: IoCostQos,
    #[serde(default)]
    pub mem_profile: u32,
    #[serde(default)]
    pub isol_pct: String,
    #[serde(default)]
    pub isol_thr: f64,
    #[serde(default)]
    pub data: BTreeMap<DataSel, DataSeries>,
    #[serde(default)]
    pub solutions: BTreeMap<String, QosSolution>,
    #[serde(default)]
    pub remarks: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(f64, f64)]) -> Vec<DataPoint> {
        v.iter().map(|&(x, y)| DataPoint::new(x, y)).collect()
    }

    #[test]
    fn eval_holds_ends_and_interpolates_segments() {
        let l = DataLines {
            points: pts(&[(10.0, 1.0), (50.0, 2.0), (100.0, 2.0)]),
            range: (10.0, 100.0),
        };
        assert_eq!(l.eval(0.0), 1.0);
        assert_eq!(l.eval(30.0), 1.5);
        assert_eq!(l.eval(75.0), 2.0);
        assert_eq!(l.eval(200.0), 2.0);
        assert_eq!(l.eval_extrapolate(0.0), 0.75);
        assert_eq!(l.min_max(), (1.0, 2.0));
        assert_eq!(DataLines::default().eval(5.0), 0.0);
        let odd = DataLines {
            points: pts(&[(10.0, 1.0)]),
            range: (50.0, 10.0),
        };
        assert_eq!(odd.eval(20.0), 1.0);
    }

    #[test]
    fn both_layouts_of_a_series_are_read() {
        let v22 = r#"{"data":[{"x":10,"y":1}],"outliers":[],"error":0.5,
            "lines":{"points":[{"x":10,"y":1},{"x":20,"y":2}],"range":[10,20]}}"#;
        let s: DataSeries = serde_json::from_str(v22).unwrap();
        assert_eq!((s.data.len(), s.lines.points.len(), s.error), (1, 2, 0.5));
        let v21 = r#"{"points":[{"x":10,"y":1},{"x":90,"y":3}],"outliers":[],"error":0.1,
            "lines":{"range":[10,90],"left":{"x":30,"y":1},"right":{"x":60,"y":3}}}"#;
        let s: DataSeries = serde_json::from_str(v21).unwrap();
        assert_eq!(s.data.len(), 2);
        assert_eq!(
            s.lines.points,
            pts(&[(10.0, 1.0), (30.0, 1.0), (60.0, 3.0), (90.0, 3.0)])
        );
        assert_eq!(s.lines.eval(45.0), 2.0);
    }
}
