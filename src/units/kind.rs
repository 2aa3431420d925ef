//! The vocabulary of values that job specs, benches and reports share: the kinds of property
//! values (`parse` reads each) and the labels of a stored distribution.

/// The type of a property value; [`super::parse`] reads each kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueKind {
    /// `4G`, `1.5M`, `1G+512M`
    Size,
    /// `1m30s`, `90`, `1.5H`
    Duration,
    /// `0.9` or `90%`
    Frac,
    /// bare key = true, else `true`/`false`
    Bool,
    /// non-negative integer
    Int,
    /// non-negative integer or `auto` (iocost-qos `vrate-intvs`)
    IntOrAuto,
    Float,
    /// bare key = true, or a float (iocost-qos `dither`)
    BoolOrFloat,
    /// bare key = true, `true`/`false`, or a fraction (iocost-qos `early-stop`)
    BoolOrFrac,
    Enum(&'static [&'static str]),
    Str,
}

/// The labels of a stored distribution, in order: percentiles, then mean and standard deviation.
pub const PCT_LABELS: &[&str] = &[
    "00", "01", "05", "10", "25", "50", "75", "90", "95", "99", "100", "mean", "stdev",
];
