//! Our IO engine: jobs of reads and writes on a file or a block device, through io_uring or
//! (where that is unavailable) a pool of threads doing blocking `pread`/`pwrite`, measured like
//! fio measures — per direction and per worker, IOs, bytes, `slat`/`clat`/`lat` in mergeable
//! histograms, per-second samples and CPU time.
//!
//! * `job` — what to run; `target` — the file or device, opened safely; `run` — workers on
//!   threads, the engine picked, results added up;
//! * `pace` — open-loop schedules; `drive` — one worker's loop against any backend and clock;
//!   `uring`, `psync` — the backends; `buf` — their aligned buffers;
//! * `hist`, `stats` — what is measured; `result` — the stored document and its text;
//!   `testfile` — files written once with random data for jobs to run on; `steady` — fio's
//!   steady-state stop (`ss=`), the running totals it watches and the rule it judges them by;
//!   `sim` (tests only) — a one-server device on a simulated clock for what stands on the engine;
//!   `devtime` — the disk's own time per IO, from the block layer's trace events.

pub mod buf;
pub mod devtime;
pub mod drive;
pub mod hist;
pub mod job;
pub mod pace;
pub mod psync;
pub mod result;
pub mod run;
#[cfg(test)]
pub mod sim;
pub mod stats;
pub mod steady;
pub mod target;
pub mod testfile;
pub mod uring;
