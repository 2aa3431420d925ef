//! How `compare` pairs what two result files hold: entries by bench, id and spec, and the
//! records inside a pair of entries by what they are (see `mod.rs`).

use crate::bench::contract::headline::Row;
use serde_json::Value;

/// A record's field, if it has it.
pub(super) fn get<'a>(r: &'a Row, k: &str) -> Option<&'a Value> {
    r.iter().find(|(rk, _)| *rk == k).map(|(_, v)| v)
}

/// A record's text field, or "".
pub(super) fn text(r: &Row, k: &str) -> String {
    match get(r, k) {
        Some(Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => String::new(),
    }
}

/// One entry's records (consecutive rows of the same kind, id, spec and start).
pub(super) struct Entry<'a> {
    pub kind: String,
    pub id: String,
    pub spec: String,
    pub rows: Vec<&'a Row>,
}

pub(super) fn entries(rows: &[Row]) -> Vec<Entry<'_>> {
    let ident = |r: &Row| {
        (
            text(r, "kind"),
            text(r, "id"),
            text(r, "spec"),
            text(r, "start"),
        )
    };
    let mut out: Vec<Entry> = Vec::new();
    let mut last = None;
    for r in rows {
        let id = ident(r);
        if last.as_ref() != Some(&id) {
            out.push(Entry {
                kind: id.0.clone(),
                id: id.1.clone(),
                spec: id.2.clone(),
                rows: Vec::new(),
            });
            last = Some(id);
        }
        out.last_mut().unwrap().rows.push(r);
    }
    out
}

/// Pairs of indices into `a` and `b` (either side `None` for a record only one side has),
/// in `a`'s order, then `b`'s unpaired ones. `dist` is how far apart two items are (`None`:
/// they can't pair); each round pairs the closest first, so the order of either side doesn't
/// matter.
pub(super) fn pair_by<T>(a: &[T], b: &[T], dist: impl Fn(&T, &T) -> Option<f64>) -> Vec<PairIx> {
    let mut cands: Vec<(f64, usize, usize)> = Vec::new();
    for (ia, x) in a.iter().enumerate() {
        for (ib, y) in b.iter().enumerate() {
            if let Some(d) = dist(x, y) {
                cands.push((d, ia, ib));
            }
        }
    }
    cands.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    let (mut of_a, mut used_b) = (vec![None; a.len()], vec![false; b.len()]);
    for (_, ia, ib) in cands {
        if of_a[ia].is_none() && !used_b[ib] {
            of_a[ia] = Some(ib);
            used_b[ib] = true;
        }
    }
    in_a_order(&of_a, &used_b)
}

pub(super) type PairIx = (Option<usize>, Option<usize>);

/// The pairs of `of_a` (each of A's partner in B, if any) in A's order, then B's unpaired ones.
fn in_a_order(of_a: &[Option<usize>], used_b: &[bool]) -> Vec<PairIx> {
    let mut out: Vec<PairIx> = of_a
        .iter()
        .enumerate()
        .map(|(i, b)| (Some(i), *b))
        .collect();
    out.extend(
        (0..used_b.len())
            .filter(|i| !used_b[*i])
            .map(|i| (None, Some(i))),
    );
    out
}

/// The overrides of an iocost-qos configuration's QoS (`[min=120.15] [max=120.15]`), or
/// `None` for the baseline (`iocost=off`).
fn overrides(qos: &str) -> Option<Vec<(String, f64)>> {
    if qos.trim() == "iocost=off" {
        return None;
    }
    Some(
        qos.split_whitespace()
            .filter_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect(),
    )
}

/// The summed relative distance of two override lists of the same keys.
fn override_dist(x: &[(String, f64)], y: &[(String, f64)]) -> f64 {
    x.iter()
        .zip(y)
        .map(|((_, u), (_, v))| (u - v).abs() / u.abs().max(v.abs()).max(1e-9))
        .sum()
}

/// What skipping a configuration costs in the alignment: as much as pairing two vrates half
/// apart, so a grid missing a step skips it instead of shifting every pair after it.
const SKIP: f64 = 0.5;

/// Pairs configurations by QoS: the baselines with each other and, per set of overridden keys
/// (the vrate range, latency targets), the two sides sorted by their override values and
/// aligned — each side's order kept, the summed distance least — so the same QoS pairs with
/// itself and two dithered grids pair step by step, whatever order the records come in.
fn pair_qos(a: &[&Row], b: &[&Row]) -> Vec<PairIx> {
    let ov = |r: &Row| overrides(&text(r, "qos"));
    let (oa, ob): (Vec<_>, Vec<_>) = (
        a.iter().map(|r| ov(r)).collect(),
        b.iter().map(|r| ov(r)).collect(),
    );
    let keys = |o: &Option<Vec<(String, f64)>>| {
        o.as_ref()
            .map(|o| o.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>())
    };
    let mut groups: Vec<Option<Vec<String>>> = Vec::new();
    for o in oa.iter().chain(&ob) {
        if !groups.contains(&keys(o)) {
            groups.push(keys(o));
        }
    }
    let mut of_a = vec![None; a.len()];
    let mut used_b = vec![false; b.len()];
    for g in &groups {
        let sorted = |os: &[Option<Vec<(String, f64)>>]| {
            let mut ix: Vec<usize> = (0..os.len()).filter(|i| &keys(&os[*i]) == g).collect();
            let vals = |i: usize| {
                os[i]
                    .iter()
                    .flatten()
                    .map(|(_, v)| *v)
                    .collect::<Vec<f64>>()
            };
            ix.sort_by(|x, y| {
                let (p, q) = (vals(*x), vals(*y));
                p.iter()
                    .zip(&q)
                    .map(|(u, v)| u.total_cmp(v))
                    .find(|o| o.is_ne())
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(x.cmp(y))
            });
            ix
        };
        let (ia, ib) = (sorted(&oa), sorted(&ob));
        let dist = |i: usize, j: usize| match (&oa[ia[i]], &ob[ib[j]]) {
            (Some(x), Some(y)) => override_dist(x, y),
            _ => 0.0,
        };
        for (i, j) in align(ia.len(), ib.len(), dist) {
            of_a[ia[i]] = Some(ib[j]);
            used_b[ib[j]] = true;
        }
    }
    in_a_order(&of_a, &used_b)
}

/// The order-keeping alignment of `n` and `m` items with the least summed `dist` of the pairs
/// plus [`SKIP`] per unpaired item: the pairs `(i, j)`.
fn align(n: usize, m: usize, dist: impl Fn(usize, usize) -> f64) -> Vec<(usize, usize)> {
    let mut cost = vec![vec![0.0f64; m + 1]; n + 1];
    for i in 0..=n {
        for j in 0..=m {
            cost[i][j] = match (i, j) {
                (0, _) | (_, 0) => (i + j) as f64 * SKIP,
                _ => (cost[i - 1][j - 1] + dist(i - 1, j - 1))
                    .min(cost[i - 1][j] + SKIP)
                    .min(cost[i][j - 1] + SKIP),
            };
        }
    }
    let (mut i, mut j, mut pairs) = (n, m, Vec::new());
    while i > 0 && j > 0 {
        if cost[i][j] == cost[i - 1][j - 1] + dist(i - 1, j - 1) {
            pairs.push((i - 1, j - 1));
            (i, j) = (i - 1, j - 1);
        } else if cost[i][j] == cost[i - 1][j] + SKIP {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    pairs.reverse();
    pairs
}

/// What names a record inside its entry, and how records pair: by name, by QoS, or in order.
pub(super) enum Naming {
    Field(&'static str),
    Qos,
    Order,
}

pub(super) fn naming(rows: &[&Row]) -> Naming {
    for f in ["solution", "scenario", "point", "profile", "job"] {
        if rows.iter().any(|r| get(r, f).is_some()) {
            return Naming::Field(f);
        }
    }
    if rows.iter().any(|r| get(r, "qos").is_some()) {
        Naming::Qos
    } else {
        Naming::Order
    }
}

/// A record's name in the table: the solution or scenario, the configuration's overrides.
pub(super) fn name(r: &Row, naming: &Naming) -> String {
    match naming {
        Naming::Field(f) => text(r, f),
        Naming::Qos => match overrides(&text(r, "qos")) {
            None => "off".to_string(),
            Some(o) if o.is_empty() => "base QoS".to_string(),
            Some(o) => {
                let v = |k: &str| o.iter().find(|(ok, _)| ok == k).map(|(_, v)| *v);
                match (v("min"), v("max")) {
                    (Some(lo), Some(hi)) if lo == hi && o.len() == 2 => format!("vrate {}", lo),
                    _ => o
                        .iter()
                        .map(|(k, v)| format!("{}={}", k, v))
                        .collect::<Vec<_>>()
                        .join(" "),
                }
            }
        },
        Naming::Order => String::new(),
    }
}

pub(super) fn pair_rows(a: &[&Row], b: &[&Row], naming: &Naming) -> Vec<PairIx> {
    match naming {
        Naming::Field(f) => pair_by(a, b, |x, y| (text(x, f) == text(y, f)).then_some(0.0)),
        Naming::Qos => pair_qos(a, b),
        Naming::Order => {
            let n = a.len().max(b.len());
            (0..n)
                .map(|i| ((i < a.len()).then_some(i), (i < b.len()).then_some(i)))
                .collect()
        }
    }
}
