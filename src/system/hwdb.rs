//! The systemd hwdb text that io.cost solutions travel in (`format iocost-tune:hwdb`, the
//! community's `90-iocost-tune.hwdb`): records of match lines (`block:*:name:MODEL:fwrev:FW:`)
//! followed by indented `KEY=value` properties, separated by blank lines; `#` starts a comment.
//! Read back into records, and looked up for a device the way udev's hwdb builtin does: every
//! record with a match line that globs the device's key contributes its properties, a later
//! record's value for a key replacing an earlier one's (a firmware's own record follows its
//! model's in the files we and the community write).

use std::collections::BTreeMap;

/// One record: its match lines and its properties in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub matches: Vec<String>,
    pub props: Vec<(String, String)>,
}

/// Parses hwdb text; an error names the line and what was wrong with it.
pub fn parse(text: &str) -> Result<Vec<Record>, String> {
    let mut out: Vec<Record> = Vec::new();
    // Whether the record being read has had a property line yet.
    let mut open: Option<(Record, bool)> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            if let Some((r, _)) = open.take() {
                out.push(r);
            }
            continue;
        }
        if line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            let Some((rec, props)) = open.as_mut() else {
                return Err(format!("line {}: a property before any match line", n));
            };
            let Some((k, v)) = line.trim().split_once('=') else {
                return Err(format!(
                    "line {}: expected KEY=value, got {:?}",
                    n,
                    line.trim()
                ));
            };
            if k.is_empty() || k.contains(char::is_whitespace) {
                return Err(format!("line {}: the key {:?} is not one word", n, k));
            }
            rec.props.push((k.to_string(), v.to_string()));
            *props = true;
            continue;
        }
        match open.as_mut() {
            Some((_, true)) => {
                return Err(format!(
                    "line {}: a match line after properties without a blank line between",
                    n
                ))
            }
            Some((rec, false)) => rec.matches.push(line.to_string()),
            None => {
                open = Some((
                    Record {
                        matches: vec![line.to_string()],
                        props: Vec::new(),
                    },
                    false,
                ))
            }
        }
    }
    if let Some((r, _)) = open {
        out.push(r);
    }
    if let Some(r) = out.iter().find(|r| r.props.is_empty()) {
        return Err(format!("{}: a match without properties", r.matches[0]));
    }
    Ok(out)
}

/// The key udev's `90-iocost.rules` looks a block device up by.
pub fn device_key(devpath: &str, model: &str, fwrev: &str) -> String {
    format!("block:{}:name:{}:fwrev:{}:", devpath, model, fwrev)
}

/// fnmatch(3) without flags, as hwdb match lines are globbed: `*`, `?` and `[...]` sets.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        let step = match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
                continue;
            }
            Some('?') => Some(pi + 1),
            Some('[') => set_match(&p, pi, t[ti]),
            Some(c) if *c == t[ti] => Some(pi + 1),
            _ => None,
        };
        match (step, star) {
            (Some(next), _) => {
                pi = next;
                ti += 1;
            }
            (None, Some((sp, st))) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            (None, None) => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A `[...]` set at `p[at]` against `c`: the index after the set when `c` is in it.
fn set_match(p: &[char], at: usize, c: char) -> Option<usize> {
    let mut i = at + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while let Some(&x) = p.get(i) {
        if x == ']' && !first {
            return (hit != negate).then_some(i + 1);
        }
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|e| *e != ']') {
            hit |= x <= c && c <= p[i + 2];
            i += 3;
        } else {
            hit |= x == c;
            i += 1;
        }
        first = false;
    }
    // No closing bracket: the `[` is a plain character.
    (c == '[').then_some(at + 1)
}

/// The properties a device with `key` gets from `records`: every matching record's, later
/// ones replacing earlier values.
pub fn lookup(records: &[Record], key: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in records {
        if r.matches.iter().any(|m| glob_match(m, key)) {
            for (k, v) in &r.props {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# 47 points\n\
        block:*:name:KINGSTON SA2000M8250G:fwrev:*:\n  IOCOST_SOLUTIONS=naive\n  \
        IOCOST_MODEL_NAIVE=rbps=1 rseqiops=2\n  IOCOST_QOS_NAIVE=rpct=99.00 min=75.00\n\n\
        block:*:name:KINGSTON SA2000M8250G:fwrev:S5Z42106:\n  IOCOST_SOLUTIONS=naive bandwidth\n  \
        IOCOST_QOS_NAIVE=rpct=95.00 min=50.00\n";

    #[test]
    fn records_read_back_and_a_firmwares_own_record_wins() {
        let recs = parse(TEXT).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].props[1].1, "rbps=1 rseqiops=2");
        let generic = lookup(
            &recs,
            &device_key("/devices/x/nvme0n1", "KINGSTON SA2000M8250G", "S5Z42105"),
        );
        assert_eq!(generic["IOCOST_SOLUTIONS"], "naive");
        assert_eq!(generic["IOCOST_QOS_NAIVE"], "rpct=99.00 min=75.00");
        let newer = lookup(
            &recs,
            &device_key("/devices/x/nvme0n1", "KINGSTON SA2000M8250G", "S5Z42106"),
        );
        assert_eq!(newer["IOCOST_SOLUTIONS"], "naive bandwidth");
        assert_eq!(newer["IOCOST_QOS_NAIVE"], "rpct=95.00 min=50.00");
        assert_eq!(newer["IOCOST_MODEL_NAIVE"], "rbps=1 rseqiops=2");
        assert!(lookup(&recs, &device_key("/d", "OTHER", "1")).is_empty());
    }

    #[test]
    fn malformed_text_is_refused_naming_the_line() {
        assert!(parse("  KEY=v\n").unwrap_err().starts_with("line 1:"));
        assert!(parse("block:*:\n  novalue\n")
            .unwrap_err()
            .starts_with("line 2:"));
        assert!(parse("block:*:\n  K=v\nblock:x:\n")
            .unwrap_err()
            .starts_with("line 3:"));
        assert!(parse("block:*:\n\nblock:y:\n  K=v\n")
            .unwrap_err()
            .contains("without properties"));
    }

    #[test]
    fn globs_as_fnmatch() {
        assert!(glob_match(
            "block:*:name:A B:fwrev:*:",
            "block:/dev/x:name:A B:fwrev:12:"
        ));
        assert!(!glob_match(
            "block:*:name:A B:fwrev:*:",
            "block:/dev/x:name:A C:fwrev:12:"
        ));
        assert!(glob_match("a?c", "abc") && !glob_match("a?c", "ac"));
        assert!(glob_match("v[0-9]x", "v5x") && !glob_match("v[!0-9]x", "v5x"));
        assert!(glob_match("*", "") && glob_match("a*b*c", "aXbYc") && !glob_match("a*b", "aXc"));
    }
}
