//! The result file: a JSON array of entries `{spec, period, sysinfo, record, result}` in
//! upstream's layout, gzip-compressed when the name ends in `.gz`.
//!
//! `sysinfo`, `record` and `result` are kept as raw JSON so entries we don't touch are written
//! back byte-for-byte equivalent (including fields we don't model), and so loading a large file
//! doesn't build a tree of every value; benches parse them into their own types on demand.

mod entry;
pub mod lock;
pub mod matching;
pub mod pack;
pub mod read;
pub mod save;
pub mod sysinfo;

pub use entry::{
    is_gz, load_entries, load_existing, parse_entries, read_bytes, read_bytes_id, to_raw, Entry,
};
pub use save::{save_entries, write_atomic};

use crate::spec::JobSpec;
use crate::util::create::FileId;
use anyhow::Result;
use matching::TouchOrder;
use std::path::{Path, PathBuf};

/// A loaded result file with the bookkeeping of one invocation: which entries were completed in
/// what order, and which were created by it.
#[derive(Debug)]
pub struct ResultFile {
    pub path: PathBuf,
    pub entries: Vec<Entry>,
    /// The file as read (`None`: there was none) or as last saved: a save replaces only it.
    id: Option<FileId>,
    nr_loaded: usize,
    touched: TouchOrder,
    reorder: bool,
}

impl ResultFile {
    /// Loads `path`; a missing file is an empty result file.
    pub fn load(path: &Path) -> Result<Self> {
        let (entries, id) = match read_bytes_id(path)? {
            Some((bytes, id)) => (parse_entries(path, &bytes)?, Some(id)),
            None => (Vec::new(), None),
        };
        save::remove_stale_temps(path);
        let nr = entries.len();
        Ok(Self {
            path: path.to_path_buf(),
            entries,
            id,
            nr_loaded: nr,
            touched: TouchOrder::new(nr),
            reorder: true,
        })
    }

    /// Whether saves put completed entries first (`run`, the default) or keep the file order
    /// (`study`, `solve`).
    pub fn set_reorder(&mut self, reorder: bool) {
        self.reorder = reorder;
    }

    /// Links each spec to an existing entry (see `matching::link_specs`), appending a placeholder
    /// for every spec that matched none. Returns the entry index of each spec.
    pub fn link(&mut self, specs: &[JobSpec], incremental: impl Fn(&str) -> bool) -> Vec<usize> {
        self.link_where(specs, incremental, |_, _| true)
    }

    /// [`ResultFile::link`] where an entry links to spec `s` only if `fits(s, entry)` too (see
    /// `matching::link_specs_where`).
    pub fn link_where(
        &mut self,
        specs: &[JobSpec],
        incremental: impl Fn(&str) -> bool,
        fits: impl Fn(usize, &Entry) -> bool,
    ) -> Vec<usize> {
        let links = {
            let specs_in_file: Vec<&JobSpec> = self.entries.iter().map(|e| &e.spec).collect();
            matching::link_specs_where(&specs_in_file, specs, incremental, |s, e| {
                fits(s, &self.entries[e])
            })
        };
        links
            .into_iter()
            .zip(specs)
            .map(|(link, spec)| match link {
                Some(i) => i,
                None => self.push(Entry::placeholder(spec.clone())),
            })
            .collect()
    }

    /// Appends an entry, returning its index.
    pub fn push(&mut self, entry: Entry) -> usize {
        self.entries.push(entry);
        self.touched.push()
    }

    /// Marks an entry completed (or checkpointed) now.
    pub fn touch(&mut self, idx: usize) {
        self.touched.touch(idx);
    }

    pub fn is_touched(&self, idx: usize) -> bool {
        self.touched.is_touched(idx)
    }

    /// Entries in the order a save writes them; placeholders that never got data are left out.
    pub fn save_order(&self) -> Vec<usize> {
        let order = if self.reorder {
            self.touched.order(self.entries.len())
        } else {
            (0..self.entries.len()).collect()
        };
        order
            .into_iter()
            .filter(|&i| {
                let e = &self.entries[i];
                i < self.nr_loaded || e.record.is_some() || e.result.is_some()
            })
            .collect()
    }

    /// Saves atomically, replacing only the file this invocation read or last saved; what
    /// can't be saved is kept elsewhere (see `save::save_entries_over`).
    pub fn save(&mut self) -> Result<()> {
        let id = save::save_entries_over(
            &self.path,
            self.id,
            self.save_order().into_iter().map(|i| &self.entries[i]),
        )?;
        self.id = Some(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_raw_indents_nested_lines() {
        let raw = to_raw(&serde_json::json!({"a": [1]})).unwrap();
        assert_eq!(raw.get(), "{\n      \"a\": [\n        1\n      ]\n    }");
    }

    #[test]
    fn placeholders_are_saved_only_with_data_and_touched_entries_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let spec = |kind: &str| JobSpec {
            kind: kind.into(),
            id: None,
            passive: None,
            props: vec![Default::default()],
        };
        let mut f = ResultFile::load(&path).unwrap();
        assert!(f.entries.is_empty());
        let idx = f.link(&[spec("a"), spec("b")], |_| false);
        assert_eq!(idx, vec![0, 1]);
        f.entries[1].record = Some(to_raw(&1).unwrap());
        f.touch(1);
        f.save().unwrap();
        let mut f = ResultFile::load(&path).unwrap();
        assert_eq!(f.entries.len(), 1);
        let idx = f.link(&[spec("c"), spec("b")], |_| false);
        assert_eq!(idx, vec![1, 0]);
        f.entries[1].result = Some(to_raw(&true).unwrap());
        f.touch(1);
        f.save().unwrap();
        let kinds: Vec<String> = load_entries(&path)
            .unwrap()
            .into_iter()
            .map(|e| e.spec.kind)
            .collect();
        assert_eq!(kinds, vec!["c", "b"]);
    }
}
