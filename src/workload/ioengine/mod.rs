//! Our IO engine: jobs of reads and writes on a file or a block device, through io_uring or
//! (where that is unavailable) a pool of threads doing blocking `pread`/`pwrite`, measured like
//! fio measures — per direction and per worker, IOs, bytes, `slat`/`clat`/`lat` in mergeable
//! histograms, per-second samples and CPU time.
//!
//! * `job` — what to run; `pace` — open-loop schedules; `drive` — one worker's loop against
//!   any backend and clock; `hist`, `stats` — what is measured.

pub mod drive;
pub mod hist;
pub mod job;
pub mod pace;
pub mod stats;
