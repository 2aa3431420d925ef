//! The QoS rules iocost-tune solves, each a name and a target, from the spec's groups 2+
//! (`:name=NAME,TARGET=VALUE`), or upstream's eight defaults when none is given.
//!
//! Targets: `vrate=A-B[,rpct=P][,wpct=P]` (a vrate range with latency targets at the given
//! read/write percentiles, 99 by default, 0 for none), `mof=max`, `amof=max`,
//! `amof=max-vrate`, `amof-delta=min`, `isolated-bandwidth`, and
//! `rlat-P=q1..q4|F-F` / `wlat-P=…` (a quarter or fraction of the latency range). A group with
//! only a name is the default vrate range (`naive`).

use super::sel::DataSel;
use crate::spec::PropSet;
use crate::units::parse::parse_frac;
use serde::{Deserialize, Serialize};
use std::fmt;

/// What a rule asks of the fitted series; serialized as upstream stores it in solutions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum QosTarget {
    VrateRange((f64, f64), (Option<String>, Option<String>)),
    #[serde(rename = "MOFMax")]
    MofMax,
    #[serde(rename = "AMOFMax")]
    AmofMax,
    #[serde(rename = "AMOFMaxVrate")]
    AmofMaxVrate,
    #[serde(rename = "AMOFDeltaMin")]
    AmofDeltaMin,
    IsolatedBandwidth,
    LatRange(DataSel, (f64, f64)),
}

impl Default for QosTarget {
    fn default() -> Self {
        QosTarget::VrateRange((75.0, 100.0), (Some("99".into()), Some("99".into())))
    }
}

impl fmt::Display for QosTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QosTarget::VrateRange((lo, hi), (rpct, wpct)) => {
                write!(f, "vrate={}-{}", lo, hi)?;
                if let Some(p) = rpct {
                    write!(f, ", rpct={}", p)?;
                }
                if let Some(p) = wpct {
                    write!(f, ", wpct={}", p)?;
                }
                Ok(())
            }
            QosTarget::MofMax => write!(f, "MOF=max"),
            QosTarget::AmofMax => write!(f, "aMOF=max"),
            QosTarget::AmofMaxVrate => write!(f, "aMOF=max-vrate"),
            QosTarget::AmofDeltaMin => write!(f, "aMOF-delta=min"),
            QosTarget::IsolatedBandwidth => {
                write!(f, "(aMOF=right-max).clamp(isolation, bandwidth)")
            }
            QosTarget::LatRange(sel, (lo, hi)) => {
                let (rw, pct) = match sel {
                    DataSel::RLat(p, _) => ("rlat", p),
                    DataSel::WLat(p, _) => ("wlat", p),
                    _ => ("?", &String::new()),
                };
                write!(f, "{}-{}={}-{}", rw, pct, lo, hi)
            }
        }
    }
}

/// `A-B` with 0 < A <= B.
fn vrate_range(v: &str) -> Result<(f64, f64), String> {
    let bad = || {
        format!(
            "vrate={:?} is not a vrate range (accepted: A-B with 0 < A <= B)",
            v
        )
    };
    let (a, b) = v.split_once('-').ok_or_else(bad)?;
    let (a, b) = (
        a.parse::<f64>().map_err(|_| bad())?,
        b.parse::<f64>().map_err(|_| bad())?,
    );
    if !(a > 0.0 && a <= b && b.is_finite()) {
        return Err(bad());
    }
    Ok((a, b))
}

/// `F-F` fractions with 0 <= low <= high <= 1.
fn frac_range(key: &str, v: &str) -> Result<(f64, f64), String> {
    let bad = || {
        format!(
            "{}={:?} is not a latency range (accepted: q1, q2, q3, q4, or LOW-HIGH fractions \
             with 0 <= LOW <= HIGH <= 1)",
            key, v
        )
    };
    let (a, b) = v.split_once('-').ok_or_else(bad)?;
    let (a, b) = (
        parse_frac(a).map_err(|_| bad())?,
        parse_frac(b).map_err(|_| bad())?,
    );
    if !(0.0..=1.0).contains(&a) || !(a..=1.0).contains(&b) {
        return Err(bad());
    }
    Ok((a, b))
}

/// A latency percentile of the vrate target: one the reports keep, or 0 for none.
fn pct_or_none(key: &str, v: &str) -> Result<Option<String>, String> {
    match v.parse::<f64>() {
        Ok(0.0) => Ok(None),
        _ if crate::report::model::IOLAT_PCTS.contains(&v) => Ok(Some(v.to_string())),
        _ => Err(format!(
            "{}={:?} is not a latency percentile (accepted: 0 for none, {})",
            key,
            v,
            crate::report::model::IOLAT_PCTS.join(", ")
        )),
    }
}

impl QosTarget {
    /// Reads a rule's target from its group (without `name`).
    pub fn parse(props: &PropSet) -> Result<QosTarget, String> {
        if props.is_empty() {
            return Ok(QosTarget::default());
        }
        if let Some(v) = props.get("vrate") {
            let range = vrate_range(v)?;
            let QosTarget::VrateRange(_, mut pcts) = QosTarget::default() else {
                unreachable!()
            };
            for (k, v) in props.iter().filter(|(k, _)| *k != "vrate") {
                match k.as_str() {
                    "rpct" => pcts.0 = pct_or_none(k, v)?,
                    "wpct" => pcts.1 = pct_or_none(k, v)?,
                    k => {
                        return Err(format!(
                            "{:?} can't go with a vrate target (accepted: rpct, wpct)",
                            k
                        ))
                    }
                }
            }
            return Ok(QosTarget::VrateRange(range, pcts));
        }
        let mut it = props.iter();
        let (Some((k, v)), None) = (it.next(), it.next()) else {
            return Err(format!(
                "a rule has one target besides its name, not {} (keys: {})",
                props.len(),
                props.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        };
        let (k, v) = (k.to_lowercase(), v.to_lowercase());
        if k == "isolated-bandwidth" {
            return Ok(QosTarget::IsolatedBandwidth);
        }
        let sel = DataSel::parse(&k)?;
        let bad =
            |accepted: &str| format!("{}={:?} is not a target (accepted: {})", k, v, accepted);
        match (&sel, v.as_str()) {
            (DataSel::Mof, "max") => Ok(QosTarget::MofMax),
            (DataSel::Mof, _) => Err(bad("mof=max")),
            (DataSel::Amof, "max") => Ok(QosTarget::AmofMax),
            (DataSel::Amof, "max-vrate") => Ok(QosTarget::AmofMaxVrate),
            (DataSel::Amof, _) => Err(bad("amof=max, amof=max-vrate")),
            (DataSel::AmofDelta, "min") => Ok(QosTarget::AmofDeltaMin),
            (DataSel::AmofDelta, _) => Err(bad("amof-delta=min")),
            (DataSel::RLat(_, t) | DataSel::WLat(_, t), v) => {
                if t != "mean" {
                    return Err(format!(
                        "{}: a latency range target takes the mean over time (e.g. rlat-99=q1)",
                        k
                    ));
                }
                let range = match v {
                    "q1" => (0.75, 1.0),
                    "q2" => (0.5, 0.75),
                    "q3" => (0.25, 0.5),
                    "q4" => (0.0, 0.25),
                    v => frac_range(&k, v)?,
                };
                Ok(QosTarget::LatRange(sel.clone(), range))
            }
            _ => Err(format!(
                "{:?} can't be a rule's target (accepted: vrate, mof, amof, amof-delta, \
                 isolated-bandwidth, rlat-P, wlat-P)",
                k
            )),
        }
    }

    /// The series the target's solution reads.
    pub fn sels(&self) -> Vec<DataSel> {
        let lat = |rw: fn(String, String) -> DataSel, p: &Option<String>| {
            p.as_ref().map(|p| rw(p.clone(), "mean".into()))
        };
        match self {
            QosTarget::VrateRange(_, (r, w)) => lat(DataSel::RLat, r)
                .into_iter()
                .chain(lat(DataSel::WLat, w))
                .collect(),
            QosTarget::MofMax => vec![DataSel::Mof, DataSel::LatImp],
            QosTarget::AmofMax => vec![DataSel::Amof, DataSel::LatImp],
            QosTarget::AmofMaxVrate => vec![DataSel::Amof],
            QosTarget::AmofDeltaMin => vec![DataSel::AmofDelta],
            QosTarget::IsolatedBandwidth => {
                vec![DataSel::LatImp, DataSel::Amof, DataSel::AmofDelta]
            }
            QosTarget::LatRange(sel, _) => vec![sel.clone()],
        }
    }
}

/// A named rule.
#[derive(Debug, Clone, PartialEq)]
pub struct QosRule {
    pub name: String,
    pub target: QosTarget,
}

/// Upstream's default rules, in order.
const DEFAULT_RULES: &[(&str, &str, &str)] = &[
    ("naive", "", ""),
    ("bandwidth", "amof", "max-vrate"),
    ("isolated-bandwidth", "isolated-bandwidth", ""),
    ("isolation", "amof-delta", "min"),
    ("rlat-99-q1", "rlat-99", "q1"),
    ("rlat-99-q2", "rlat-99", "q2"),
    ("rlat-99-q3", "rlat-99", "q3"),
    ("rlat-99-q4", "rlat-99", "q4"),
];

/// The rules of a spec's groups 2+ (index, message on the group that is wrong), or the
/// defaults.
pub fn rules(groups: &[PropSet]) -> Result<Vec<QosRule>, (usize, String)> {
    if groups.is_empty() {
        let defaults: Vec<PropSet> = DEFAULT_RULES
            .iter()
            .map(|(name, k, v)| {
                let mut p = PropSet::new();
                p.insert("name".into(), name.to_string());
                if !k.is_empty() {
                    p.insert(k.to_string(), v.to_string());
                }
                p
            })
            .collect();
        return rules(&defaults);
    }
    groups
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let mut g = g.clone();
            let name = g
                .remove("name")
                .ok_or_else(|| (i, "each rule needs a name (name=NAME)".to_string()))?;
            let target = QosTarget::parse(&g).map_err(|e| (i, e))?;
            Ok(QosRule { name, target })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(kv: &[(&str, &str)]) -> PropSet {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_print_as_upstream() {
        let r = rules(&[]).unwrap();
        let shown: Vec<String> = r
            .iter()
            .map(|r| format!("{}: {}", r.name, r.target))
            .collect();
        assert_eq!(
            shown,
            [
                "naive: vrate=75-100, rpct=99, wpct=99",
                "bandwidth: aMOF=max-vrate",
                "isolated-bandwidth: (aMOF=right-max).clamp(isolation, bandwidth)",
                "isolation: aMOF-delta=min",
                "rlat-99-q1: rlat-99=0.75-1",
                "rlat-99-q2: rlat-99=0.5-0.75",
                "rlat-99-q3: rlat-99=0.25-0.5",
                "rlat-99-q4: rlat-99=0-0.25",
            ]
        );
    }

    #[test]
    fn targets_and_their_errors() {
        let t = QosTarget::parse(&group(&[("vrate", "50-80"), ("wpct", "0")])).unwrap();
        assert_eq!(t.to_string(), "vrate=50-80, rpct=99");
        assert_eq!(t.sels(), vec![DataSel::RLat("99".into(), "mean".into())]);
        let t = QosTarget::parse(&group(&[("wlat-95", "0.1-0.3")])).unwrap();
        assert_eq!(t.to_string(), "wlat-95=0.1-0.3");
        assert_eq!(
            QosTarget::parse(&group(&[("MOF", "MAX")])).unwrap(),
            QosTarget::MofMax
        );
        for bad in [
            group(&[("vrate", "80-50")]),
            group(&[("vrate", "0-50")]),
            group(&[("vrate", "50-80"), ("foo", "1")]),
            group(&[("vrate", "50-80"), ("rpct", "98")]),
            group(&[("mof", "min")]),
            group(&[("rlat-99-99", "q1")]),
            group(&[("rlat-99", "0.8-0.2")]),
            group(&[("lat-imp", "min")]),
            group(&[("mof", "max"), ("amof", "max")]),
        ] {
            assert!(QosTarget::parse(&bad).is_err(), "{:?}", bad);
        }
        let e = rules(&[group(&[("mof", "max")])]).unwrap_err();
        assert_eq!(e.0, 0);
    }

    #[test]
    fn stored_targets_keep_upstream_names() {
        let t: QosTarget = serde_json::from_str(r#""AMOFMaxVrate""#).unwrap();
        assert_eq!(t, QosTarget::AmofMaxVrate);
        let t: QosTarget =
            serde_json::from_str(r#"{"LatRange": ["rlat-99-mean", [0.5, 0.75]]}"#).unwrap();
        assert_eq!(t.to_string(), "rlat-99=0.5-0.75");
        assert_eq!(
            serde_json::to_string(&QosTarget::default()).unwrap(),
            r#"{"VrateRange":[[75.0,100.0],["99","99"]]}"#
        );
    }
}
