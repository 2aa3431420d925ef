//! The result file. (Being written.)
