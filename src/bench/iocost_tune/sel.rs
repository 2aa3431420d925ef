//! The data series iocost-tune fits, each named by a selector: `MOF`, `aMOF`, `aMOF-delta`,
//! `isol` (the percentile the tune judged), `isol-PCT`, `isol-mean`, `lat-imp`, `work-csv`,
//! `missing`, and the IO latency series `rlat-LAT-TIME` / `wlat-LAT-TIME` (latency percentile
//! `LAT` of each second, summarised over the seconds by `TIME`: a percentile or `mean`).
//!
//! Result files key the series by the selector's name; the series are printed in the
//! selectors' own order (below), not the names' alphabetical one.

use crate::report::model::IOLAT_PCTS;
use crate::study::dist::TIME_PCTS;
use crate::units::kind::PCT_LABELS;
use std::cmp::Ordering;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataSel {
    Mof,
    Amof,
    AmofDelta,
    Isol,
    IsolPct(String),
    IsolMean,
    LatImp,
    WorkCsv,
    Missing,
    RLat(String, String),
    WLat(String, String),
}

/// What a selector's fit assumes of its series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitShape {
    Any,
    /// Rises with vrate (or stays flat).
    Inc,
    /// Falls with vrate (or stays flat).
    Dec,
    /// Rises, then falls.
    SinglePeak,
}

/// How a selector's series is fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FitOpts {
    pub shape: FitShape,
    /// Chauvenet's outlier filter on the points' errors.
    pub filter_outliers: bool,
    /// Points beyond the vrate where isolation falls below its threshold are rejected.
    pub filter_by_isol: bool,
}

impl DataSel {
    pub fn fit_opts(&self) -> FitOpts {
        let (shape, filter_outliers, filter_by_isol) = match self {
            DataSel::Mof => (FitShape::Inc, false, false),
            DataSel::Amof => (FitShape::SinglePeak, false, true),
            DataSel::AmofDelta => (FitShape::Inc, false, true),
            DataSel::Isol | DataSel::IsolPct(_) | DataSel::IsolMean => {
                (FitShape::Dec, false, false)
            }
            DataSel::LatImp | DataSel::Missing => (FitShape::Inc, false, false),
            DataSel::WorkCsv => (FitShape::Any, false, false),
            DataSel::RLat(..) | DataSel::WLat(..) => (FitShape::Inc, true, false),
        };
        FitOpts {
            shape,
            filter_outliers,
            filter_by_isol,
        }
    }

    /// Reads a selector (case-insensitive for the fixed names, as upstream).
    pub fn parse(sel: &str) -> Result<DataSel, String> {
        match sel.to_lowercase().as_str() {
            "mof" => return Ok(DataSel::Mof),
            "amof" => return Ok(DataSel::Amof),
            "amof-delta" => return Ok(DataSel::AmofDelta),
            "isol" => return Ok(DataSel::Isol),
            "isol-mean" => return Ok(DataSel::IsolMean),
            "lat-imp" => return Ok(DataSel::LatImp),
            "work-csv" => return Ok(DataSel::WorkCsv),
            "missing" => return Ok(DataSel::Missing),
            _ => {}
        }
        if let Some(pct) = sel.strip_prefix("isol-") {
            if pct == "max" {
                return Ok(DataSel::IsolPct("100".into()));
            }
            if PCT_LABELS.contains(&pct) {
                return Ok(DataSel::IsolPct(pct.into()));
            }
            return Err(format!(
                "isolation percentile {:?} is not one of {} or \"max\"",
                pct,
                PCT_LABELS.join(", ")
            ));
        }
        let (read, rest) = if let Some(r) = sel.strip_prefix("rlat-") {
            (true, r)
        } else if let Some(r) = sel.strip_prefix("wlat-") {
            (false, r)
        } else {
            return Err(format!(
                "unknown data selector {:?} (accepted: mof, amof, amof-delta, isol, isol-PCT, \
                 isol-mean, lat-imp, work-csv, missing, rlat-LAT[-TIME], wlat-LAT[-TIME])",
                sel
            ));
        };
        let parts: Vec<&str> = rest.split('-').collect();
        if parts.len() > 2 {
            return Err(format!("unknown data selector {:?}", sel));
        }
        let lat = match parts[0] {
            "max" => "100",
            p if IOLAT_PCTS.contains(&p) => p,
            p => {
                return Err(format!(
                    "latency percentile {:?} in {:?} is not one of {} or \"max\"",
                    p,
                    sel,
                    IOLAT_PCTS.join(", ")
                ))
            }
        };
        let time = match parts.get(1) {
            None | Some(&"mean") => "mean",
            Some(&"max") => "100",
            Some(p) if TIME_PCTS.contains(p) => p,
            Some(p) => {
                return Err(format!(
                    "time percentile {:?} in {:?} is not one of {}, \"max\" or \"mean\"",
                    p,
                    sel,
                    TIME_PCTS.join(", ")
                ))
            }
        };
        let (lat, time) = (lat.to_string(), time.to_string());
        Ok(if read {
            DataSel::RLat(lat, time)
        } else {
            DataSel::WLat(lat, time)
        })
    }

    /// Position in the printed order, and the percentiles that order selectors of one kind.
    fn pos(&self) -> (u32, Option<(&str, &str)>) {
        match self {
            DataSel::Mof => (0, None),
            // Isolation is solved first: aMOF's fit rejects points by it.
            DataSel::Isol => (1, Some(("NONE", "NONE"))),
            DataSel::Amof => (2, None),
            DataSel::AmofDelta => (3, None),
            DataSel::IsolPct(p) => (4, Some((p, "NONE"))),
            DataSel::IsolMean => (5, None),
            DataSel::LatImp => (6, None),
            DataSel::WorkCsv => (7, None),
            DataSel::Missing => (8, None),
            DataSel::RLat(l, t) => (9, Some((l, t))),
            DataSel::WLat(l, t) => (10, Some((l, t))),
        }
    }
}

/// `mean` first, then by value.
fn cmp_pct(a: &str, b: &str) -> Ordering {
    match (a, b) {
        _ if a == b => Ordering::Equal,
        ("mean", _) => Ordering::Less,
        (_, "mean") => Ordering::Greater,
        _ => {
            let (x, y) = (a.parse::<f64>(), b.parse::<f64>());
            match (x, y) {
                (Ok(x), Ok(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
                _ => a.cmp(b),
            }
        }
    }
}

impl Ord for DataSel {
    /// By kind; latency series by their time percentile, then their latency percentile.
    fn cmp(&self, other: &Self) -> Ordering {
        let ((pa, qa), (pb, qb)) = (self.pos(), other.pos());
        match (pa == pb, qa, qb) {
            (true, Some((la, ta)), Some((lb, tb))) => cmp_pct(ta, tb).then(cmp_pct(la, lb)),
            _ => pa.cmp(&pb),
        }
    }
}

impl PartialOrd for DataSel {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for DataSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataSel::Mof => write!(f, "MOF"),
            DataSel::Amof => write!(f, "aMOF"),
            DataSel::AmofDelta => write!(f, "aMOF-delta"),
            DataSel::Isol => write!(f, "isol"),
            DataSel::IsolPct(p) => write!(f, "isol-{}", p),
            DataSel::IsolMean => write!(f, "isol-mean"),
            DataSel::LatImp => write!(f, "lat-imp"),
            DataSel::WorkCsv => write!(f, "work-csv"),
            DataSel::Missing => write!(f, "missing"),
            DataSel::RLat(l, t) => write!(f, "rlat-{}-{}", l, t),
            DataSel::WLat(l, t) => write!(f, "wlat-{}-{}", l, t),
        }
    }
}

/// Stored as its name (a map key in result files).
impl serde::Serialize for DataSel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for DataSel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        DataSel::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &str) -> DataSel {
        DataSel::parse(s).unwrap()
    }

    #[test]
    fn names_read_back_and_sort_by_kind_then_time_then_latency() {
        let names = [
            "wlat-99-99",
            "rlat-50-100",
            "MOF",
            "rlat-99-mean",
            "work-csv",
            "aMOF",
            "rlat-50-mean",
            "isol",
            "lat-imp",
            "aMOF-delta",
            "rlat-100-100",
            "isol-01",
        ];
        let mut sels: Vec<DataSel> = names.iter().map(|n| sel(n)).collect();
        for (s, n) in sels.iter().zip(names) {
            assert_eq!(s.to_string(), n);
        }
        sels.sort();
        let order: Vec<String> = sels.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            order,
            [
                "MOF",
                "isol",
                "aMOF",
                "aMOF-delta",
                "isol-01",
                "lat-imp",
                "work-csv",
                "rlat-50-mean",
                "rlat-99-mean",
                "rlat-50-100",
                "rlat-100-100",
                "wlat-99-99"
            ]
        );
    }

    #[test]
    fn shorthands_and_bad_selectors() {
        assert_eq!(sel("rlat-99"), DataSel::RLat("99".into(), "mean".into()));
        assert_eq!(
            sel("wlat-max-max"),
            DataSel::WLat("100".into(), "100".into())
        );
        assert_eq!(sel("isol-max"), DataSel::IsolPct("100".into()));
        assert_eq!(sel("LAT-IMP"), DataSel::LatImp);
        for bad in ["rlat-98", "rlat-99-98", "isol-07", "foo", "rlat-50-99-1"] {
            assert!(DataSel::parse(bad).is_err(), "{}", bad);
        }
    }
}
