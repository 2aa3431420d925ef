//! Validated global options. (Being written.)
