//! Parsers for user-supplied sizes, durations and fractions. (Being written.)
