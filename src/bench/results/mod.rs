//! The commands over result files, which reach the benches through the registry: what
//! `summary`/`format` print per entry and `format --plot` draws (`show`), the records of
//! `summary -o json|yaml|csv` (`export`) and `compare` (`compare/`). The `merge` procedure is
//! `bench/merge/`, with what a bench's own merge gets and the record it writes first.

pub mod compare;
pub mod export;
pub mod show;
