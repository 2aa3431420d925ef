//! The run path: spec → match → run → checkpoint → study → save → summary. (Being written.)

/// What a bench's `run` gets: config, the matched previous record, and checkpointing.
pub struct RunCtx {}

/// What a bench's `study` gets: where per-second reports live.
pub struct StudyCtx {}
