//! The commands over result files, which reach the benches through the registry: what
//! `summary`/`format` print per entry and `format --plot` draws (`show`), the records of
//! `summary -o json|yaml|csv` (`export`), `compare` (`compare/`) and the `merge` procedure
//! (`merge`: grouping by merge id, one merged entry per group; what a bench's own merge gets
//! is the contract's `merge_src`, and the record it writes first the `merge-info` bench's).

pub mod compare;
pub mod export;
pub mod merge;
pub mod show;
