//! Linking the job specs of a `run`/`study`/`solve` to the entries already in the result file,
//! and the order entries are saved in afterwards.
//!
//! A spec links to the first entry not yet linked that has the same kind and id, and either
//! belongs to an incremental bench (which resumes whatever it finds) or has an equal spec once
//! `apply`/`commit` are dropped from the first group. `passive` takes part in the comparison.

use crate::spec::JobSpec;

/// Whether two specs describe the same job for re-run purposes: everything equal except
/// `apply`/`commit` in the first group, which only decide what happens to the result.
pub fn specs_equivalent(a: &JobSpec, b: &JobSpec) -> bool {
    a.eq_ignoring_apply_commit(b)
}

/// For each spec, the index of the entry (among `entry_specs`) it links to, or `None` when a
/// fresh entry must be created. Each entry is linked at most once, specs in order.
pub fn link_specs(
    entry_specs: &[&JobSpec],
    specs: &[JobSpec],
    incremental: impl Fn(&str) -> bool,
) -> Vec<Option<usize>> {
    link_specs_where(entry_specs, specs, incremental, |_, _| true)
}

/// [`link_specs`] where entry `e` may link to spec `s` only if `fits(s, e)` too: what the spec
/// doesn't hold but the job is made of (an io job file's contents) must also be the same.
pub fn link_specs_where(
    entry_specs: &[&JobSpec],
    specs: &[JobSpec],
    incremental: impl Fn(&str) -> bool,
    fits: impl Fn(usize, usize) -> bool,
) -> Vec<Option<usize>> {
    let mut used = vec![false; entry_specs.len()];
    specs
        .iter()
        .enumerate()
        .map(|(s, spec)| {
            let found = entry_specs.iter().enumerate().position(|(i, e)| {
                !used[i]
                    && e.kind == spec.kind
                    && e.id == spec.id
                    && (incremental(&spec.kind) || specs_equivalent(e, spec))
                    && fits(s, i)
            });
            if let Some(i) = found {
                used[i] = true;
            }
            found
        })
        .collect()
}

/// Tracks which entries were touched in this invocation and in what order, so that a save writes
/// touched entries first in completion order followed by the untouched ones in their original
/// order (a stable sort on the touch sequence, untouched = last).
#[derive(Debug, Clone, Default)]
pub struct TouchOrder {
    seqs: Vec<u64>,
    next: u64,
}

impl TouchOrder {
    pub fn new(nr_entries: usize) -> Self {
        Self {
            seqs: vec![u64::MAX; nr_entries],
            next: 0,
        }
    }

    /// Registers a newly appended entry (untouched until `touch`).
    pub fn push(&mut self) -> usize {
        self.seqs.push(u64::MAX);
        self.seqs.len() - 1
    }

    /// Marks entry `idx` as completed now. Touching again moves it behind later completions.
    pub fn touch(&mut self, idx: usize) {
        if idx >= self.seqs.len() {
            self.seqs.resize(idx + 1, u64::MAX);
        }
        self.seqs[idx] = self.next;
        self.next += 1;
    }

    pub fn is_touched(&self, idx: usize) -> bool {
        self.seqs.get(idx).is_some_and(|&s| s != u64::MAX)
    }

    /// Entry indices in save order.
    pub fn order(&self, nr_entries: usize) -> Vec<usize> {
        let mut idxs: Vec<usize> = (0..nr_entries).collect();
        idxs.sort_by_key(|&i| self.seqs.get(i).copied().unwrap_or(u64::MAX));
        idxs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::PropSet;

    fn spec(kind: &str, id: Option<&str>, props: &[(&str, &str)]) -> JobSpec {
        let set: PropSet = props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        JobSpec {
            kind: kind.into(),
            id: id.map(Into::into),
            passive: None,
            props: vec![set],
        }
    }

    fn incr(kind: &str) -> bool {
        kind == "iocost-qos" || kind == "selftest"
    }

    #[test]
    fn non_incremental_needs_equal_props() {
        let entries = [spec("storage", None, &[("loops", "3")])];
        let refs: Vec<&JobSpec> = entries.iter().collect();
        let same = spec("storage", None, &[("loops", "3")]);
        let other = spec("storage", None, &[("loops", "4")]);
        assert_eq!(link_specs(&refs, &[same], incr), vec![Some(0)]);
        assert_eq!(link_specs(&refs, &[other], incr), vec![None]);
    }

    #[test]
    fn incremental_ignores_props() {
        let entries = [spec("iocost-qos", None, &[("vrate-max", "100")])];
        let refs: Vec<&JobSpec> = entries.iter().collect();
        let other = spec("iocost-qos", None, &[("vrate-max", "125"), ("dither", "")]);
        assert_eq!(link_specs(&refs, &[other], incr), vec![Some(0)]);
    }

    #[test]
    fn apply_and_commit_are_ignored() {
        let entries = [spec("storage", None, &[("apply", ""), ("loops", "2")])];
        let refs: Vec<&JobSpec> = entries.iter().collect();
        let s = spec("storage", None, &[("commit", "true"), ("loops", "2")]);
        assert_eq!(link_specs(&refs, &[s], incr), vec![Some(0)]);
        // ... but only in the first group.
        let mut a = spec("protection", None, &[]);
        a.props.push(
            [("scenario", "mem-hog"), ("apply", "")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let mut b = a.clone();
        b.props[1].remove("apply");
        assert!(!specs_equivalent(&a, &b));
    }

    #[test]
    fn passive_counts() {
        let mut a = spec("storage", None, &[]);
        let b = a.clone();
        a.passive = Some("io".into());
        assert!(!specs_equivalent(&a, &b));
    }

    #[test]
    fn id_must_match_even_for_incremental() {
        let entries = [
            spec("selftest", Some("x"), &[]),
            spec("selftest", None, &[]),
        ];
        let refs: Vec<&JobSpec> = entries.iter().collect();
        assert_eq!(
            link_specs(
                &refs,
                &[
                    spec("selftest", None, &[]),
                    spec("selftest", Some("y"), &[]),
                    spec("selftest", Some("x"), &[])
                ],
                incr
            ),
            vec![Some(1), None, Some(0)]
        );
    }

    #[test]
    fn each_entry_links_once_in_order() {
        let entries = [
            spec("storage", None, &[]),
            spec("iocost-params", None, &[]),
            spec("storage", None, &[]),
        ];
        let refs: Vec<&JobSpec> = entries.iter().collect();
        let s = spec("storage", None, &[]);
        assert_eq!(
            link_specs(&refs, &[s.clone(), s.clone(), s], incr),
            vec![Some(0), Some(2), None]
        );
    }

    #[test]
    fn touched_entries_move_to_front_in_completion_order() {
        let mut t = TouchOrder::new(4);
        let new = t.push();
        assert_eq!(new, 4);
        t.touch(2);
        t.touch(new);
        t.touch(0);
        assert_eq!(t.order(5), vec![2, 4, 0, 1, 3]);
        assert!(t.is_touched(2) && !t.is_touched(1));
        // Re-touching moves behind later completions.
        t.touch(2);
        assert_eq!(t.order(5), vec![4, 0, 2, 1, 3]);
    }
}
