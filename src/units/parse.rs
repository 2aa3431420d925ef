//! Parsers for every typed value a user can give us: sizes, durations, fractions, booleans,
//! integers, floats and enumerations. Spec properties (`crate::spec`) and global options
//! (`crate::config`) both use these, so a value means the same everywhere.
//!
//! Every parser returns `Err(String)` with one line of the form
//! `"<input>" is not a <what> (accepted: <grammar>, e.g. <examples>)`; callers prefix it with the
//! option or property name, e.g. `--mem-avail "4Q" is not a size (accepted: ...)`.

use super::ValueKind;

pub const SIZE_ACCEPTED: &str = "a number with an optional unit B/K/M/G/T/P/E (powers of 1024, \
     any case), terms may be summed, e.g. 4096, 4G, 1.5M, 1G+512M";
pub const DURATION_ACCEPTED: &str = "a sum of <number><unit> with units n/ns, u/us, ms, m, s, \
     M/min, h/H, d/D, y/Y, a bare number is seconds, e.g. 90, 1m30s, 1h30m, 1.5H, 150ms";
pub const FRAC_ACCEPTED: &str = "a non-negative number or percentage, e.g. 0.9 or 90%";
pub const BOOL_ACCEPTED: &str = "true/false, 1/0, or the bare key for true";
pub const INT_ACCEPTED: &str = "a non-negative integer, e.g. 3";
pub const FLOAT_ACCEPTED: &str = "a finite number, e.g. 50 or 12.5";

/// A value parsed according to its `ValueKind`.
#[derive(Debug, Clone, PartialEq)]
pub enum ParsedValue {
    /// Bytes.
    Size(u64),
    /// Seconds.
    Duration(f64),
    /// A ratio (`90%` → 0.9).
    Frac(f64),
    Bool(bool),
    Int(u64),
    Float(f64),
    Enum(String),
    Str(String),
}

impl ParsedValue {
    /// The value as a float, for range checks (`Bool` is 0/1; `Enum`/`Str` are `None`).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            ParsedValue::Size(v) | ParsedValue::Int(v) => Some(*v as f64),
            ParsedValue::Duration(v) | ParsedValue::Frac(v) | ParsedValue::Float(v) => Some(*v),
            ParsedValue::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            ParsedValue::Enum(_) | ParsedValue::Str(_) => None,
        }
    }
}

/// Parses `s` as a value of `kind`. The error names the value and what is accepted.
pub fn parse_value(kind: ValueKind, s: &str) -> Result<ParsedValue, String> {
    Ok(match kind {
        ValueKind::Size => ParsedValue::Size(parse_size(s)?),
        ValueKind::Duration => ParsedValue::Duration(parse_duration(s)?),
        ValueKind::Frac => ParsedValue::Frac(parse_frac(s)?),
        ValueKind::Bool => ParsedValue::Bool(parse_bool(s)?),
        ValueKind::Int => ParsedValue::Int(parse_int(s)?),
        ValueKind::IntOrAuto if s.trim() == "auto" => ParsedValue::Enum("auto".into()),
        ValueKind::IntOrAuto => ParsedValue::Int(parse_int(s).map_err(|_| {
            format!(
                "{:?} is not a non-negative integer or auto (accepted: {})",
                s,
                accepted(ValueKind::IntOrAuto)
            )
        })?),
        ValueKind::Float => ParsedValue::Float(parse_float(s)?),
        ValueKind::BoolOrFloat => match parse_bool(s) {
            Ok(b) => ParsedValue::Bool(b),
            Err(_) => ParsedValue::Float(parse_float(s).map_err(|_| {
                format!("{:?} is neither a boolean nor a number (accepted: the bare key, true/false, or a finite number, e.g. 2.5)", s)
            })?),
        },
        ValueKind::BoolOrFrac => match parse_bool(s) {
            Ok(b) => ParsedValue::Bool(b),
            Err(_) => ParsedValue::Frac(parse_frac(s).map_err(|_| {
                format!(
                    "{:?} is neither a boolean nor a fraction (accepted: {})",
                    s,
                    accepted(ValueKind::BoolOrFrac)
                )
            })?),
        },
        ValueKind::Enum(choices) => ParsedValue::Enum(parse_enum(s, choices)?.to_string()),
        ValueKind::Str => ParsedValue::Str(s.to_string()),
    })
}

/// What `kind` accepts, for help and error texts.
pub fn accepted(kind: ValueKind) -> String {
    match kind {
        ValueKind::Size => SIZE_ACCEPTED.into(),
        ValueKind::Duration => DURATION_ACCEPTED.into(),
        ValueKind::Frac => FRAC_ACCEPTED.into(),
        ValueKind::Bool => BOOL_ACCEPTED.into(),
        ValueKind::Int => INT_ACCEPTED.into(),
        ValueKind::IntOrAuto => "a non-negative integer or auto, e.g. 25 or auto".into(),
        ValueKind::Float => FLOAT_ACCEPTED.into(),
        ValueKind::BoolOrFloat => "the bare key, true/false, or a finite number".into(),
        ValueKind::BoolOrFrac => "the bare key, true/false, or a fraction, e.g. 0.1 or 10%".into(),
        ValueKind::Enum(choices) => format!("one of {}", choices.join(", ")),
        ValueKind::Str => "any text".into(),
    }
}

/// One `<number><unit>` term of a size or duration. `unit` may be empty.
struct Term<'a> {
    num: f64,
    unit: &'a str,
}

/// Splits `s` (with `_` already removed) into `<number><letters>` terms separated by `+`
/// (which `need_plus == false` makes optional). Numbers are plain decimals (`12`, `1.5`, `.5`);
/// no signs or exponents.
fn split_terms(s: &str, need_plus: bool) -> Option<Vec<Term<'_>>> {
    let mut terms = Vec::new();
    let mut rest = s;
    loop {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num_str = &rest[..num_len];
        if !num_str.chars().any(|c| c.is_ascii_digit()) || num_str.matches('.').count() > 1 {
            return None;
        }
        let num: f64 = num_str.parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| !(c.is_alphabetic()))
            .unwrap_or(rest.len());
        terms.push(Term {
            num,
            unit: &rest[..unit_len],
        });
        rest = &rest[unit_len..];
        if rest.is_empty() {
            return Some(terms);
        }
        match rest.strip_prefix('+') {
            Some(r) => rest = r,
            None if need_plus => return None,
            None => {}
        }
    }
}

/// Removes digit-group underscores and surrounding blanks; rejects empty and negative input.
fn prepare(s: &str, what: &str, accepted: &str) -> Result<String, String> {
    let t: String = s.trim().chars().filter(|&c| c != '_').collect();
    if t.is_empty() {
        return Err(format!("empty {} (accepted: {})", what, accepted));
    }
    if t.starts_with('-') {
        return Err(format!(
            "{:?} is negative; a {} must not be (accepted: {})",
            s, what, accepted
        ));
    }
    Ok(t)
}

/// Size in bytes: `<number>[unit]` terms summed with `+` (`1G+512M`). Units B, K, M, G, T,
/// P, E (also `KB`/`KiB` style), any case, powers of 1024; a bare number is bytes; `_` is
/// ignored; decimals are allowed and the total is rounded to whole bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("{:?} is not a size (accepted: {})", s, SIZE_ACCEPTED);
    let t = prepare(s, "size", SIZE_ACCEPTED)?;
    let terms = split_terms(&t, true).ok_or_else(bad)?;
    let mut total = 0f64;
    for term in terms {
        let u = term.unit.to_ascii_lowercase();
        let letter = match u.as_str() {
            "" | "b" => "",
            _ => {
                // By characters: a unit may be any text (`0𖬀`), and a byte index could split one.
                let first = u.chars().next().map_or(0, char::len_utf8);
                let (l, suffix) = u.split_at(first);
                if !(suffix.is_empty() || suffix == "b" || suffix == "ib") {
                    return Err(bad());
                }
                l
            }
        };
        let shift = match letter {
            "" => 0,
            "k" => 10,
            "m" => 20,
            "g" => 30,
            "t" => 40,
            "p" => 50,
            "e" => 60,
            _ => return Err(bad()),
        };
        total += term.num * 2f64.powi(shift);
    }
    let total = total.round();
    if !total.is_finite() || total >= 18446744073709551615.0 {
        return Err(format!("{:?} is too large a size (at most 16E)", s));
    }
    Ok(total as u64)
}

/// Duration in seconds: a sum of `<number><unit>` terms (`+` between terms optional).
///
/// Units: `n`/`ns` nanoseconds, `u`/`us`/`µs` microseconds, `ms` milliseconds, `s`/`sec`
/// seconds, `M`/`min` minutes, `h`/`H` hours, `d`/`D` days, `y`/`Y` years (365 days); a bare
/// number is seconds. Upstream uses a lone lowercase `m` for milliseconds (its formatter prints
/// 0.15 s as `150m`), but people write `1m30s` and `1h30m` meaning minutes. So `m` means
/// **minutes** when the same value has an hour-or-longer term before it or a seconds term
/// (`s` or a bare number) after it (`1m30s`, `1h30m`, `2h5m10s`), and **milliseconds**
/// otherwise (`150m`, `1s500m`). Write `ms` or `min` to be explicit.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let bad = || {
        format!(
            "{:?} is not a duration (accepted: {})",
            s, DURATION_ACCEPTED
        )
    };
    let t = prepare(s, "duration", DURATION_ACCEPTED)?;
    let terms = split_terms(&t, false).ok_or_else(bad)?;
    const MIN: f64 = 60.0;
    const HOUR: f64 = 3600.0;
    const DAY: f64 = 24.0 * HOUR;
    let scale = |u: &str| -> Option<f64> {
        Some(match u {
            "n" | "ns" => 1e-9,
            "u" | "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "" | "s" | "S" | "sec" => 1.0,
            "M" | "min" => MIN,
            "h" | "H" => HOUR,
            "d" | "D" => DAY,
            "y" | "Y" => 365.0 * DAY,
            _ => return None,
        })
    };
    let mut total = 0f64;
    for (i, term) in terms.iter().enumerate() {
        let mult = if term.unit == "m" {
            let longer_before = terms[..i]
                .iter()
                .any(|t| scale(t.unit).is_some_and(|v| v >= HOUR));
            let secs_after = terms[i + 1..].iter().any(|t| scale(t.unit) == Some(1.0));
            if longer_before || secs_after {
                MIN
            } else {
                1e-3
            }
        } else {
            scale(term.unit).ok_or_else(bad)?
        };
        total += term.num * mult;
    }
    if total.is_nan() || total > MAX_DURATION_SECS {
        return Err(format!(
            "{:?} is longer than 100Y, the longest duration accepted",
            s
        ));
    }
    Ok(total)
}

/// The longest duration any option or property takes (100 years): every accepted duration
/// fits a `std::time::Duration` and can be added to the clock.
pub const MAX_DURATION_SECS: f64 = 100.0 * 365.0 * 24.0 * 3600.0;

/// Fraction: a number (`0.9`) or a percentage (`90%`); finite and ≥ 0. `90%` yields 0.9.
pub fn parse_frac(s: &str) -> Result<f64, String> {
    let bad = || format!("{:?} is not a fraction (accepted: {})", s, FRAC_ACCEPTED);
    let t = s.trim();
    let (num, div) = match t.strip_suffix('%') {
        Some(n) => (n.trim_end(), 100.0),
        None => (t, 1.0),
    };
    if num.is_empty() {
        return Err(format!("empty fraction (accepted: {})", FRAC_ACCEPTED));
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    if !v.is_finite() {
        return Err(bad());
    }
    if v < 0.0 {
        return Err(format!(
            "{:?} is negative; a fraction must not be (accepted: {})",
            s, FRAC_ACCEPTED
        ));
    }
    Ok(v / div)
}

/// Boolean: `""` (a bare key) and `true`/`1` are true, `false`/`0` false.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim() {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!(
            "{:?} is not a boolean (accepted: {})",
            s, BOOL_ACCEPTED
        )),
    }
}

/// Non-negative integer (`_` allowed as a digit separator).
pub fn parse_int(s: &str) -> Result<u64, String> {
    let t: String = s.trim().chars().filter(|&c| c != '_').collect();
    if t.is_empty() {
        return Err(format!("empty integer (accepted: {})", INT_ACCEPTED));
    }
    if !t.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "{:?} is not a non-negative integer (accepted: {})",
            s, INT_ACCEPTED
        ));
    }
    t.parse()
        .map_err(|_| format!("{:?} is too large (at most {})", s, u64::MAX))
}

/// Finite floating-point number (may be negative; range checks are up to the caller).
pub fn parse_float(s: &str) -> Result<f64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err(format!("empty number (accepted: {})", FLOAT_ACCEPTED));
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!(
            "{:?} is not a number (accepted: {})",
            s, FLOAT_ACCEPTED
        )),
    }
}

/// One of `choices`, exactly.
pub fn parse_enum<'a>(s: &str, choices: &[&'a str]) -> Result<&'a str, String> {
    let t = s.trim();
    choices
        .iter()
        .find(|c| **c == t)
        .copied()
        .ok_or_else(|| format!("{:?} is not one of {}", s, choices.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1 << 10;
    const M: u64 = 1 << 20;
    const G: u64 = 1 << 30;

    #[test]
    fn size_accepts_units_sums_and_decimals() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("4096", 4096),
            ("512b", 512),
            ("512B", 512),
            ("4k", 4 * K),
            ("4K", 4 * K),
            ("4KB", 4 * K),
            ("4KiB", 4 * K),
            ("1.5M", 3 * M / 2),
            ("4G", 4 * G),
            ("1T", 1 << 40),
            ("1P", 1 << 50),
            ("1E", 1 << 60),
            ("1G+512M", G + 512 * M),
            ("1_000", 1000),
            ("1_024M", 1024 * M),
            ("  2G  ", 2 * G),
            (".5K", 512),
            ("1.0001", 1),
            ("0.6", 1),
        ];
        for (s, want) in cases {
            assert_eq!(parse_size(s), Ok(*want), "{}", s);
        }
    }

    #[test]
    fn size_rejects_garbage_with_accepted_forms() {
        for s in [
            "", " ", "abc", "-1G", "1Q", "1GG", "G", "1..5M", "1G+", "+1G", "1e3", "4 G", "1G512M",
        ] {
            let e = parse_size(s).unwrap_err();
            assert!(e.contains("accepted"), "{}: {}", s, e);
        }
        assert!(parse_size("-4K").unwrap_err().contains("negative"));
        assert!(parse_size("20E").unwrap_err().contains("too large"));
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn duration_units_and_sums() {
        let cases: &[(&str, f64)] = &[
            ("90", 90.0),
            ("1.5", 1.5),
            ("30s", 30.0),
            ("1m30s", 90.0),
            ("1m30", 90.0),
            ("1M30s", 90.0),
            ("2min", 120.0),
            ("1h30m", 5400.0),
            ("2h5m10s", 7510.0),
            ("1.5H", 5400.0),
            ("1h", 3600.0),
            ("7D", 604800.0),
            ("7d", 604800.0),
            ("1Y", 365.0 * 86400.0),
            ("150m", 0.15),
            ("150ms", 0.15),
            ("1s500m", 1.5),
            ("1s+500ms", 1.5),
            ("343u", 343e-6),
            ("343us", 343e-6),
            ("10n", 10e-9),
            ("10ns", 10e-9),
            ("2M", 120.0),
            ("1_000s", 1000.0),
            ("0", 0.0),
        ];
        for (s, want) in cases {
            let got = parse_duration(s).unwrap_or_else(|e| panic!("{}: {}", s, e));
            assert!(close(got, *want), "{}: got {} want {}", s, got, want);
        }
    }

    #[test]
    fn duration_rejects_garbage() {
        for s in ["", "abc", "-5s", "5x", "5 s", "s", "1m30q", "1e3s"] {
            let e = parse_duration(s).unwrap_err();
            assert!(
                e.contains("accepted") || e.contains("negative"),
                "{}: {}",
                s,
                e
            );
        }
    }

    #[test]
    fn frac_and_percent() {
        assert_eq!(parse_frac("0.9"), Ok(0.9));
        assert_eq!(parse_frac("90%"), Ok(0.9));
        assert_eq!(parse_frac("0"), Ok(0.0));
        assert_eq!(parse_frac("150%"), Ok(1.5));
        assert_eq!(parse_frac("2.5"), Ok(2.5));
        for s in ["", "%", "abc", "-0.1", "-5%", "inf", "NaN", "9 0%"] {
            assert!(parse_frac(s).is_err(), "{}", s);
        }
        assert!(parse_frac("-0.1").unwrap_err().contains("negative"));
    }

    #[test]
    fn bool_forms() {
        for (s, want) in [
            ("", true),
            ("true", true),
            ("1", true),
            ("false", false),
            ("0", false),
        ] {
            assert_eq!(parse_bool(s), Ok(want), "{:?}", s);
        }
        for s in ["yes", "no", "TRUE", "2", "on"] {
            assert!(
                parse_bool(s).unwrap_err().contains("not a boolean"),
                "{}",
                s
            );
        }
    }

    #[test]
    fn int_forms() {
        assert_eq!(parse_int("42"), Ok(42));
        assert_eq!(parse_int("1_000"), Ok(1000));
        for s in ["", "-1", "1.5", "abc", "0x10", "99999999999999999999999"] {
            assert!(parse_int(s).is_err(), "{}", s);
        }
    }

    #[test]
    fn float_forms() {
        assert_eq!(parse_float("12.5"), Ok(12.5));
        assert_eq!(parse_float("-3"), Ok(-3.0));
        assert_eq!(parse_float("1e2"), Ok(100.0));
        for s in ["", "abc", "inf", "NaN", "1,5"] {
            assert!(parse_float(s).unwrap_err().contains("number"), "{}", s);
        }
    }

    #[test]
    fn enum_forms() {
        assert_eq!(parse_enum("b", &["a", "b"]), Ok("b"));
        let e = parse_enum("c", &["a", "b"]).unwrap_err();
        assert_eq!(e, "\"c\" is not one of a, b");
    }

    #[test]
    fn parse_value_dispatches_every_kind() {
        use ParsedValue as P;
        assert_eq!(parse_value(ValueKind::Size, "4K"), Ok(P::Size(4096)));
        assert_eq!(
            parse_value(ValueKind::Duration, "2M"),
            Ok(P::Duration(120.0))
        );
        assert_eq!(parse_value(ValueKind::Frac, "50%"), Ok(P::Frac(0.5)));
        assert_eq!(parse_value(ValueKind::Bool, ""), Ok(P::Bool(true)));
        assert_eq!(parse_value(ValueKind::Int, "7"), Ok(P::Int(7)));
        assert_eq!(parse_value(ValueKind::Float, "7.5"), Ok(P::Float(7.5)));
        assert_eq!(parse_value(ValueKind::IntOrAuto, "25"), Ok(P::Int(25)));
        assert_eq!(
            parse_value(ValueKind::IntOrAuto, "auto"),
            Ok(P::Enum("auto".into()))
        );
        let e = parse_value(ValueKind::IntOrAuto, "sometimes").unwrap_err();
        assert!(e.contains("is not a non-negative integer or auto"), "{}", e);
        assert_eq!(parse_value(ValueKind::BoolOrFloat, ""), Ok(P::Bool(true)));
        assert_eq!(
            parse_value(ValueKind::BoolOrFloat, "2.5"),
            Ok(P::Float(2.5))
        );
        assert!(parse_value(ValueKind::BoolOrFloat, "x")
            .unwrap_err()
            .contains("neither a boolean nor a number"));
        assert_eq!(
            parse_value(ValueKind::BoolOrFrac, "false"),
            Ok(P::Bool(false))
        );
        assert_eq!(parse_value(ValueKind::BoolOrFrac, "10%"), Ok(P::Frac(0.1)));
        assert_eq!(
            parse_value(ValueKind::BoolOrFrac, "0.07"),
            Ok(P::Frac(0.07))
        );
        assert!(parse_value(ValueKind::BoolOrFrac, "-5%")
            .unwrap_err()
            .contains("neither a boolean nor a fraction (accepted: the bare key"));
        assert_eq!(
            parse_value(ValueKind::Enum(&["x", "y"]), "y"),
            Ok(P::Enum("y".into()))
        );
        assert_eq!(parse_value(ValueKind::Str, "2x"), Ok(P::Str("2x".into())));
        assert_eq!(P::Size(4).as_f64(), Some(4.0));
        assert_eq!(P::Str("a".into()).as_f64(), None);
    }
}
