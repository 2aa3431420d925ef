//! One line of the trace: block request events (issue, complete, requeue) parsed from
//! tracefs text or the raw ring buffer's fields.

/// What a block event line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Issue,
    Complete,
    Requeue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEvent {
    pub kind: EventKind,
    /// Trace clock timestamp in nanoseconds (microsecond resolution in text).
    pub ts_ns: u64,
    pub dev: (u32, u32),
    /// Index into [`IO_TYPES`], `None` for operations we don't classify.
    pub io_type: Option<usize>,
    pub sector: u64,
    pub nr_sector: u32,
}

/// One line of `trace_pipe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceLine {
    Event(BlockEvent),
    /// `CPU:N [LOST M EVENTS]`: the ring buffer overran.
    Lost(u64),
    /// Anything else (other events, blank lines).
    Other,
    /// A block event line we couldn't parse.
    Malformed,
}

/// The IO type of an `rwbs` string: an optional leading `F` (preflush) and then the operation
/// letter `R`, `W`, `D` (discard; `DE` secure erase), `F` (flush), `N` (other). Index into
/// [`IO_TYPES`].
pub fn rwbs_type(rwbs: &str) -> Option<usize> {
    let b = rwbs.as_bytes();
    let op = match (b.first(), b.get(1)) {
        (Some(b'F'), Some(c)) if b"RWDEFN".contains(c) => *c,
        (Some(c), _) => *c,
        (None, _) => return None,
    };
    match op {
        b'R' => Some(0),
        b'W' => Some(1),
        b'D' => Some(2),
        b'F' => Some(3),
        _ => None,
    }
}

/// `SECS.FRACTION` (any number of fraction digits up to 9) in nanoseconds.
pub(super) fn parse_ts(tok: &str) -> Option<u64> {
    let (secs, frac) = tok.split_once('.')?;
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = secs.parse().ok()?;
    let mut frac_ns: u64 = frac.parse().ok()?;
    for _ in frac.len()..9 {
        frac_ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Parses one `trace_pipe` line.
pub fn parse_line(line: &str) -> TraceLine {
    let line = line.trim_end_matches(['\n', '\r']);
    let Some(at) = line.find(" block_rq_") else {
        if let Some(rest) = line.split_once("[LOST ").map(|(_, r)| r) {
            if let Some(n) = rest.split_whitespace().next().and_then(|n| n.parse().ok()) {
                return TraceLine::Lost(n);
            }
        }
        return TraceLine::Other;
    };
    let (head, rest) = (&line[..at], &line[at + 1..]);
    let Some((name, body)) = rest.split_once(": ") else {
        return TraceLine::Other;
    };
    let kind = match name {
        "block_rq_issue" => EventKind::Issue,
        "block_rq_complete" => EventKind::Complete,
        "block_rq_requeue" => EventKind::Requeue,
        _ => return TraceLine::Other,
    };
    parse_body(kind, head, body).map_or(TraceLine::Malformed, TraceLine::Event)
}

pub(super) fn parse_body(kind: EventKind, head: &str, body: &str) -> Option<BlockEvent> {
    let ts_ns = parse_ts(
        head.trim_end()
            .strip_suffix(':')?
            .rsplit(char::is_whitespace)
            .next()?,
    )?;
    let mut toks = body.splitn(3, ' ');
    let (maj, min) = toks.next()?.split_once(',')?;
    let dev = (maj.parse().ok()?, min.parse().ok()?);
    let rwbs = toks.next()?;
    let mut rest = toks.next()?;
    if kind == EventKind::Issue {
        // The byte count precedes the command.
        let (bytes, r) = rest.split_once(' ')?;
        bytes.parse::<u64>().ok()?;
        rest = r;
    }
    // `(cmd)`: hex bytes of passthrough commands, empty otherwise.
    let rest = rest.strip_prefix('(')?;
    let rest = &rest[rest.find(')')? + 1..];
    let mut t = rest.split_whitespace();
    let sector = t.next()?.parse().ok()?;
    if t.next()? != "+" {
        return None;
    }
    let nr_sector = t.next()?.parse().ok()?;
    Some(BlockEvent {
        kind,
        ts_ns,
        dev,
        io_type: rwbs_type(rwbs),
        sector,
        nr_sector,
    })
}
