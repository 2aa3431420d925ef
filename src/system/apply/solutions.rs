//! The io.cost solutions a device gets from hwdb properties (`IOCOST_SOLUTIONS`,
//! `IOCOST_MODEL_<NAME>`, `IOCOST_QOS_<NAME>`), read as systemd's `iocost` tool reads them, and
//! which one it picks: the named one, else `naive` when listed (its default `TargetSolution=`),
//! else the first listed.

use crate::system::cgroup::DevNr;
use crate::system::iocost::{parse_model, parse_qos, IoCostModel, IoCostQos};
use std::collections::BTreeMap;
use std::path::Path;

/// systemd's `TargetSolution=` when `/etc/udev/iocost.conf` sets none.
pub const SYSTEMD_DEFAULT: &str = "naive";

const QOS_KEYS: [&str; 6] = ["rpct", "rlat", "wpct", "wlat", "min", "max"];

/// One named solution with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    pub name: String,
    pub model: IoCostModel,
    pub qos: IoCostQos,
}

impl Solution {
    /// The name as the property keys carry it: upper case, `-` as `_`.
    pub fn key(&self) -> String {
        key_of(&self.name)
    }
}

fn key_of(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

/// A device's solutions: `listed` in `IOCOST_SOLUTIONS` order, then any others the properties
/// hold a model and QoS for (the `rlat-*` ones of iocost-tune's hwdb lines).
#[derive(Debug, Clone, PartialEq)]
pub struct Solutions {
    pub listed: Vec<String>,
    pub all: Vec<Solution>,
}

impl Solutions {
    /// Reads the properties; an error names the key and what was wrong with its value.
    /// `Ok(None)`: the properties hold no `IOCOST_SOLUTIONS`.
    pub fn from_props(props: &BTreeMap<String, String>) -> Result<Option<Self>, String> {
        let Some(list) = props.get("IOCOST_SOLUTIONS") else {
            return Ok(None);
        };
        let listed: Vec<String> = list.split_whitespace().map(str::to_string).collect();
        if listed.is_empty() {
            return Err("IOCOST_SOLUTIONS is empty".into());
        }
        let mut names = listed.clone();
        for k in props.keys() {
            if let Some(key) = k.strip_prefix("IOCOST_MODEL_") {
                let name = key.to_ascii_lowercase().replace('_', "-");
                if !names.iter().any(|n| key_of(n) == key) {
                    names.push(name);
                }
            }
        }
        let mut all = Vec::new();
        for name in names {
            let get = |what: &str| {
                let key = format!("IOCOST_{}_{}", what, key_of(&name));
                props
                    .get(&key)
                    .map(|v| (key.clone(), v.clone()))
                    .ok_or_else(|| format!("solution {} has no {}", name, key))
            };
            let (mk, mv) = get("MODEL")?;
            let (qk, qv) = get("QOS")?;
            all.push(Solution {
                model: parse_model_value(&mv).map_err(|e| format!("{}: {}", mk, e))?,
                qos: parse_qos_value(&qv).map_err(|e| format!("{}: {}", qk, e))?,
                name,
            });
        }
        Ok(Some(Self { listed, all }))
    }

    /// The solution `name` (any case, `-` or `_`), else the one systemd picks: `naive` when
    /// listed, else the first listed.
    pub fn choose(&self, name: Option<&str>) -> Result<&Solution, String> {
        let want = match name {
            Some(n) => key_of(n),
            None => {
                let dfl = self
                    .listed
                    .iter()
                    .find(|n| key_of(n) == key_of(SYSTEMD_DEFAULT))
                    .unwrap_or(&self.listed[0]);
                key_of(dfl)
            }
        };
        self.all.iter().find(|s| s.key() == want).ok_or_else(|| {
            format!(
                "no solution {:?} (accepted: {})",
                name.unwrap_or_default(),
                self.all
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

/// The words of a hwdb value, each `key=value` with a key of `keys`, every key once.
fn check_words(value: &str, keys: &[&str]) -> Result<(), String> {
    let mut seen = Vec::new();
    for w in value.split_whitespace() {
        let (k, _) = w
            .split_once('=')
            .ok_or_else(|| format!("{:?} is not key=value", w))?;
        if !keys.contains(&k) {
            return Err(format!(
                "unknown key {:?} (accepted: {})",
                k,
                keys.join(" ")
            ));
        }
        if seen.contains(&k) {
            return Err(format!("{} given twice", k));
        }
        seen.push(k);
    }
    match keys.iter().find(|k| !seen.contains(k)) {
        Some(k) => Err(format!("{}= is missing", k)),
        None => Ok(()),
    }
}

/// `rbps=… rseqiops=… rrandiops=… wbps=… wseqiops=… wrandiops=…`, as the kernel will take it.
pub fn parse_model_value(value: &str) -> Result<IoCostModel, String> {
    let keys = IoCostModel::default().params().map(|(k, _)| k);
    check_words(value, &keys)?;
    let line = format!("0:0 ctrl=user model=linear {}", value);
    let m = parse_model(Path::new("hwdb"), &line, DevNr::default()).map_err(|e| e.to_string())?;
    if m.params().iter().any(|(_, v)| *v == 0) {
        return Err("a model parameter is 0".into());
    }
    Ok(m)
}

/// `rpct=… rlat=… wpct=… wlat=… min=… max=…`, within the kernel's ranges.
pub fn parse_qos_value(value: &str) -> Result<IoCostQos, String> {
    check_words(value, &QOS_KEYS)?;
    let line = format!("0:0 enable=1 ctrl=user {}", value);
    let q = parse_qos(Path::new("hwdb"), &line, DevNr::default()).map_err(|e| e.to_string())?;
    let pct = |v: f64| (0.0..=100.0).contains(&v);
    if !(pct(q.rpct) && pct(q.wpct)) {
        return Err("rpct and wpct must be 0 to 100".into());
    }
    if !(q.min > 0.0 && q.min <= q.max && q.max <= 10000.0) {
        return Err("min and max must satisfy 0 < min <= max <= 10000".into());
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const M: &str = "rbps=100 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6";
    const Q: &str = "rpct=99.00 rlat=1415 wpct=99.00 wlat=1618 min=75.00 max=100.00";

    #[test]
    fn systemd_picks_naive_when_listed_else_the_first() {
        let p = props(&[
            ("IOCOST_SOLUTIONS", "isolation naive"),
            ("IOCOST_MODEL_ISOLATION", M),
            ("IOCOST_QOS_ISOLATION", Q),
            ("IOCOST_MODEL_NAIVE", M),
            ("IOCOST_QOS_NAIVE", Q),
            ("IOCOST_MODEL_RLAT_99_Q1", M),
            ("IOCOST_QOS_RLAT_99_Q1", Q),
        ]);
        let s = Solutions::from_props(&p).unwrap().unwrap();
        assert_eq!(s.all.len(), 3);
        assert_eq!(s.choose(None).unwrap().name, "naive");
        assert_eq!(s.choose(Some("rlat-99-q1")).unwrap().name, "rlat-99-q1");
        assert_eq!(s.choose(Some("ISOLATION")).unwrap().name, "isolation");
        let err = s.choose(Some("bandwidth")).unwrap_err();
        assert!(err.contains("isolation, naive, rlat-99-q1"), "{}", err);
        let only = props(&[
            ("IOCOST_SOLUTIONS", "bandwidth"),
            ("IOCOST_MODEL_BANDWIDTH", M),
            ("IOCOST_QOS_BANDWIDTH", Q),
        ]);
        let s = Solutions::from_props(&only).unwrap().unwrap();
        assert_eq!(s.choose(None).unwrap().name, "bandwidth");
        assert_eq!(s.choose(None).unwrap().qos.rlat, 1415);
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        assert_eq!(Solutions::from_props(&props(&[])).unwrap(), None);
        let bad = |m: &str, q: &str| {
            Solutions::from_props(&props(&[
                ("IOCOST_SOLUTIONS", "naive"),
                ("IOCOST_MODEL_NAIVE", m),
                ("IOCOST_QOS_NAIVE", q),
            ]))
            .unwrap_err()
        };
        assert!(bad("rbps=1", Q).starts_with("IOCOST_MODEL_NAIVE: rseqiops= is missing"));
        assert!(bad(&format!("{} x=1", M), Q).contains("unknown key \"x\""));
        assert!(bad(M, "rpct=x rlat=1 wpct=0 wlat=0 min=1 max=1").starts_with("IOCOST_QOS_NAIVE"));
        assert!(bad(M, "rpct=101 rlat=1 wpct=0 wlat=0 min=1 max=1").contains("0 to 100"));
        assert!(bad(M, "rpct=1 rlat=1 wpct=0 wlat=0 min=90 max=50").contains("min <= max"));
        let missing = Solutions::from_props(&props(&[("IOCOST_SOLUTIONS", "naive")]));
        assert_eq!(
            missing.unwrap_err(),
            "solution naive has no IOCOST_MODEL_NAIVE"
        );
    }
}
