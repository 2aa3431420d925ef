//! What a bench is to the rest of the program, and all a bench may use of `bench/` besides the
//! benches it runs: the `Bench` trait and its object-safe faces (`api`), what it needs from
//! the host (`needs`), the rows its headline fills (`headline`), what its run and study get
//! (`ctx`: `RunCtx`, `StudyCtx`, over the run's host side in `host` and the work directory's
//! claim in `workdir`); what its merge gets is `bench/merge/src.rs`, of the same rank. The
//! lowest part of `bench/`: it imports no bench, nor the registry, the runner or the
//! result-file commands above them.

pub mod api;
pub mod ctx;
pub mod headline;
pub mod host;
pub mod needs;
pub mod workdir;
