//! Decoding the binary ring-buffer pages of tracefs `per_cpu/cpuN/trace_pipe_raw`.
//!
//! A page (layout in `events/header_page`) is a header — `u64 timestamp`, `local_t commit`
//! (bytes of event data, with "events were lost before this page" flags in bits 30/31) — and
//! then the events. Each event starts with a 32-bit word: `type_len` in the low 5 bits and a
//! 27-bit time delta above them (layout in `events/header_event`):
//!
//! * `type_len` 1 … 28: a data record of `type_len · 4` bytes follows;
//! * 0: the next word is the record's length (including that word), the record follows it;
//! * 29: padding of `array[0]` bytes after the next word (none when the delta is 0 too: the rest
//!   of the page is empty);
//! * 30: time extend, the next word holds the delta's upper bits (`<< 27`);
//! * 31: absolute time stamp, likewise.
//!
//! An event's time is the page timestamp plus the deltas of every event up to it. Records start
//! with the common fields (`u16 common_type` = the event's ID), then the event's own fields at the
//! offsets of its `format` file.

use crate::report::tracefs::events::{rwbs_type, BlockEvent, EventKind};
use anyhow::{bail, Context, Result};

const TS_SHIFT: u32 = 27;
const COMMIT_MASK: u64 = (1 << 27) - 1;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;

/// Where the page header fields sit (from `events/header_page`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    pub commit_off: usize,
    pub commit_size: usize,
    pub data_off: usize,
}

impl Default for PageLayout {
    /// 64-bit kernels.
    fn default() -> Self {
        Self {
            commit_off: 8,
            commit_size: 8,
            data_off: 16,
        }
    }
}

/// `(offset, size)` of the field `name` in the text of a tracefs `format` or `header_page`
/// file (lines like `field:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;`).
pub fn field_of(format: &str, name: &str) -> Option<(usize, usize)> {
    format.lines().find_map(|l| {
        let decl = l.trim().strip_prefix("field:")?;
        let (decl, rest) = decl.split_once(';')?;
        let fname = decl.trim().rsplit(char::is_whitespace).next()?;
        // `char rwbs[8]` names the field `rwbs`.
        let fname = fname.split('[').next()?;
        if fname != name {
            return None;
        }
        let val = |key: &str| -> Option<usize> {
            rest.split(';')
                .find_map(|kv| kv.trim().strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
        };
        Some((val("offset:")?, val("size:")?))
    })
}

impl PageLayout {
    pub fn parse(header_page: &str) -> Result<Self> {
        let (commit_off, commit_size) =
            field_of(header_page, "commit").context("header_page has no commit field")?;
        let (data_off, _) =
            field_of(header_page, "data").context("header_page has no data field")?;
        if !matches!(commit_size, 4 | 8) {
            bail!("header_page: commit is {} bytes", commit_size);
        }
        Ok(Self {
            commit_off,
            commit_size,
            data_off,
        })
    }
}

/// The fields of one block event's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLayout {
    pub kind: EventKind,
    pub id: u16,
    dev: (usize, usize),
    sector: (usize, usize),
    nr_sector: (usize, usize),
    rwbs: (usize, usize),
}

impl EventLayout {
    /// From the text of the event's `format` file.
    pub fn parse(kind: EventKind, format: &str) -> Result<Self> {
        let id = format
            .lines()
            .find_map(|l| l.strip_prefix("ID:"))
            .and_then(|v| v.trim().parse().ok())
            .context("format has no ID line")?;
        let field = |n: &str, sizes: &[usize]| -> Result<(usize, usize)> {
            let f = field_of(format, n).with_context(|| format!("format has no {} field", n))?;
            if !sizes.contains(&f.1) {
                bail!("format: field {} is {} bytes", n, f.1);
            }
            Ok(f)
        };
        Ok(Self {
            kind,
            id,
            dev: field("dev", &[4])?,
            sector: field("sector", &[8])?,
            nr_sector: field("nr_sector", &[4])?,
            rwbs: field("rwbs", &[8])?,
        })
    }

    fn decode(&self, rec: &[u8], ts_ns: u64) -> Option<BlockEvent> {
        let dev = rd_u32(rec, self.dev.0)?;
        let rwbs = rec.get(self.rwbs.0..self.rwbs.0 + self.rwbs.1)?;
        let len = rwbs.iter().position(|&c| c == 0).unwrap_or(rwbs.len());
        Some(BlockEvent {
            kind: self.kind,
            ts_ns,
            dev: (dev >> 20, dev & ((1 << 20) - 1)),
            io_type: rwbs_type(std::str::from_utf8(&rwbs[..len]).ok()?),
            sector: rd_u64(rec, self.sector.0)?,
            nr_sector: rd_u32(rec, self.nr_sector.0)?,
        })
    }
}

fn rd_u16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn rd_u32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn rd_u64(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// What a page held besides the block events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Data records, ours or not.
    pub records: u64,
    /// Records of other event IDs.
    pub foreign: u64,
    /// Events the kernel reports lost before this page (at least 1 when it only says "some").
    pub lost: u64,
    /// The page ended in a way that doesn't fit the format (the rest was skipped).
    pub truncated: bool,
}

/// Decodes one page, handing every block event of `layouts` to `f`. Pages are little-endian
/// (the host's byte order on every architecture we build for).
pub fn decode_page(
    page: &[u8],
    pl: &PageLayout,
    layouts: &[EventLayout],
    mut f: impl FnMut(BlockEvent),
) -> PageStats {
    let mut st = PageStats::default();
    let Some(mut ts) = rd_u64(page, 0) else {
        st.truncated = true;
        return st;
    };
    let commit = match pl.commit_size {
        4 => rd_u32(page, pl.commit_off).map(u64::from),
        _ => rd_u64(page, pl.commit_off),
    };
    let Some(commit) = commit else {
        st.truncated = true;
        return st;
    };
    let size = (commit & COMMIT_MASK) as usize;
    let end = pl.data_off + size;
    if commit & MISSED_EVENTS != 0 {
        st.lost = 1;
        if commit & MISSED_STORED != 0 {
            let n = match pl.commit_size {
                4 => rd_u32(page, end).map(u64::from),
                _ => rd_u64(page, end),
            };
            st.lost = n.unwrap_or(1).max(1);
        }
    }
    if end > page.len() {
        st.truncated = true;
        return st;
    }
    let mut pos = pl.data_off;
    while pos + 4 <= end {
        let Some(hdr) = rd_u32(page, pos) else { break };
        let type_len = hdr & 0x1f;
        let delta = (hdr >> 5) as u64;
        let arr0 = rd_u32(page, pos + 4);
        let (next, rec) = match type_len {
            29 => {
                if delta == 0 {
                    // Null padding: nothing else on this page.
                    break;
                }
                ts += delta;
                let Some(len) = arr0 else { break };
                (pos + 4 + len as usize, None)
            }
            30 | 31 => {
                let Some(hi) = arr0 else { break };
                let v = ((hi as u64) << TS_SHIFT) + delta;
                if type_len == 30 {
                    ts += v;
                } else {
                    // Absolute: the lower 59 bits; the upper ones are the page's.
                    ts = v | (ts & !((1u64 << 59) - 1));
                }
                (pos + 8, None)
            }
            0 => {
                ts += delta;
                let Some(len) = arr0 else { break };
                let len = len as usize;
                if len < 4 {
                    st.truncated = true;
                    break;
                }
                (pos + 4 + len, Some((pos + 8, len - 4)))
            }
            n => {
                ts += delta;
                let len = n as usize * 4;
                (pos + 4 + len, Some((pos + 4, len)))
            }
        };
        if next > end {
            st.truncated = true;
            break;
        }
        if let Some((off, len)) = rec {
            st.records += 1;
            let rec = &page[off..off + len];
            let ev = rd_u16(rec, 0)
                .and_then(|id| layouts.iter().find(|l| l.id == id))
                .and_then(|l| l.decode(rec, ts));
            match ev {
                Some(ev) => f(ev),
                None => st.foreign += 1,
            }
        }
        pos = next;
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formats of Debian's 6.1 kernel (as the VM guest prints them).
    pub const ISSUE_FORMAT: &str = "name: block_rq_issue
ID: 1061
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;
\tfield:char rwbs[8];\toffset:32;\tsize:8;\tsigned:1;
\tfield:char comm[16];\toffset:40;\tsize:16;\tsigned:1;
\tfield:__data_loc char[] cmd;\toffset:56;\tsize:4;\tsigned:1;

print fmt: \"%d,%d %s %u (%s) %llu + %u [%s]\", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->rwbs, REC->bytes, __get_str(cmd), (unsigned long long)REC->sector, REC->nr_sector, REC->comm
";

    pub const COMPLETE_FORMAT: &str = "name: block_rq_complete
ID: 1064
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;
\tfield:int error;\toffset:28;\tsize:4;\tsigned:1;
\tfield:char rwbs[8];\toffset:32;\tsize:8;\tsigned:1;
\tfield:__data_loc char[] cmd;\toffset:40;\tsize:4;\tsigned:1;

print fmt: \"%d,%d %s (%s) %llu + %u [%d]\", ((unsigned int) ((REC->dev) >> 20)), ((unsigned int) ((REC->dev) & ((1U << 20) - 1))), REC->rwbs, __get_str(cmd), (unsigned long long)REC->sector, REC->nr_sector, REC->error
";

    const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;
";

    fn layouts() -> Vec<EventLayout> {
        vec![
            EventLayout::parse(EventKind::Issue, ISSUE_FORMAT).unwrap(),
            EventLayout::parse(EventKind::Complete, COMPLETE_FORMAT).unwrap(),
        ]
    }

    /// A block record as the kernel lays it out (issue: 60 bytes, complete: 44).
    fn record(id: u16, dev: u32, sector: u64, nr: u32, rwbs: &str, len: usize) -> Vec<u8> {
        let mut r = vec![0u8; len];
        r[0..2].copy_from_slice(&id.to_le_bytes());
        r[8..12].copy_from_slice(&dev.to_le_bytes());
        r[16..24].copy_from_slice(&sector.to_le_bytes());
        r[24..28].copy_from_slice(&nr.to_le_bytes());
        r[32..32 + rwbs.len()].copy_from_slice(rwbs.as_bytes());
        r
    }

    struct Page(Vec<u8>);
    impl Page {
        fn new(ts: u64) -> Self {
            let mut p = vec![0u8; 16];
            p[0..8].copy_from_slice(&ts.to_le_bytes());
            Page(p)
        }
        fn word(&mut self, w: u32) {
            self.0.extend_from_slice(&w.to_le_bytes());
        }
        fn small(&mut self, delta: u32, rec: &[u8]) {
            let mut rec = rec.to_vec();
            rec.resize(rec.len().div_ceil(4) * 4, 0);
            self.word(((rec.len() / 4) as u32) | (delta << 5));
            self.0.extend_from_slice(&rec);
        }
        fn big(&mut self, delta: u32, rec: &[u8]) {
            self.word(delta << 5);
            self.word(rec.len() as u32 + 4);
            self.0.extend_from_slice(rec);
        }
        fn finish(mut self, flags: u64, missed: Option<u64>) -> Vec<u8> {
            let commit = (self.0.len() - 16) as u64 | flags;
            self.0[8..16].copy_from_slice(&commit.to_le_bytes());
            if let Some(m) = missed {
                self.0.extend_from_slice(&m.to_le_bytes());
            }
            self.0.resize(4096, 0);
            self.0
        }
    }

    #[test]
    fn format_fields_and_header_page() {
        assert_eq!(field_of(ISSUE_FORMAT, "rwbs"), Some((32, 8)));
        assert_eq!(field_of(ISSUE_FORMAT, "cmd"), Some((56, 4)));
        assert_eq!(field_of(COMPLETE_FORMAT, "error"), Some((28, 4)));
        assert_eq!(field_of(ISSUE_FORMAT, "nope"), None);
        let l = layouts();
        assert_eq!((l[0].id, l[1].id), (1061, 1064));
        assert_eq!(
            PageLayout::parse(HEADER_PAGE).unwrap(),
            PageLayout::default()
        );
        assert!(EventLayout::parse(EventKind::Issue, "ID: 5\n").is_err());
        assert!(
            EventLayout::parse(EventKind::Issue, &ISSUE_FORMAT.replace("ID: 1061\n", "")).is_err()
        );
        assert!(EventLayout::parse(
            EventKind::Issue,
            &ISSUE_FORMAT.replace("sector;\toffset:16;\tsize:8", "sector;\toffset:16;\tsize:4")
        )
        .is_err());
        assert!(PageLayout::parse("").is_err());
    }

    #[test]
    fn decodes_records_with_time_deltas_extends_and_padding() {
        let dev = (254 << 20) as u32;
        let mut p = Page::new(1_000_000);
        p.small(100, &record(1061, dev, 800, 8, "R", 60));
        p.big(50, &record(1064, dev, 800, 8, "R", 128));
        // A time extend of 3 << 27 + 7, then a discarded event (padding with a delta).
        p.word(30 | (7 << 5));
        p.word(3);
        // (Padding is 4 + array[0] bytes long, the length word included.)
        p.word(29 | (1 << 5));
        p.word(12);
        p.0.extend_from_slice(&[0xee; 8]);
        p.small(0, &record(9999, dev, 1, 1, "R", 44));
        p.small(10, &record(1061, dev + 1, 16, 16, "WS", 60));
        let page = p.finish(0, None);
        let mut evs = Vec::new();
        let st = decode_page(&page, &PageLayout::default(), &layouts(), |e| evs.push(e));
        assert_eq!(
            st,
            PageStats {
                records: 4,
                foreign: 1,
                lost: 0,
                truncated: false
            }
        );
        assert_eq!(evs.len(), 3);
        assert_eq!(evs[0].kind, EventKind::Issue);
        assert_eq!(evs[0].ts_ns, 1_000_100);
        assert_eq!(
            (evs[0].dev, evs[0].sector, evs[0].nr_sector),
            ((254, 0), 800, 8)
        );
        assert_eq!(evs[0].io_type, Some(0));
        assert_eq!(evs[1].kind, EventKind::Complete);
        assert_eq!(evs[1].ts_ns, 1_000_150);
        let t = 1_000_150 + (3u64 << 27) + 7 + 1 + 10;
        assert_eq!(evs[2].ts_ns, t);
        assert_eq!((evs[2].dev, evs[2].io_type), ((254, 1), Some(1)));
    }

    #[test]
    fn lost_events_flags_and_bad_pages() {
        let dev = (254 << 20) as u32;
        let mut p = Page::new(5);
        p.small(1, &record(1061, dev, 8, 8, "R", 60));
        let page = p.finish(MISSED_EVENTS | MISSED_STORED, Some(1234));
        let st = decode_page(&page, &PageLayout::default(), &layouts(), |_| {});
        assert_eq!((st.records, st.lost), (1, 1234));
        let mut p = Page::new(5);
        p.small(1, &record(1061, dev, 8, 8, "R", 60));
        let page = p.finish(MISSED_EVENTS, None);
        assert_eq!(
            decode_page(&page, &PageLayout::default(), &layouts(), |_| {}).lost,
            1
        );
        // A commit size beyond the page, a record running past the commit, short input.
        let mut bad = Page::new(5).finish(0, None);
        bad[8..16].copy_from_slice(&5000u64.to_le_bytes());
        assert!(decode_page(&bad, &PageLayout::default(), &layouts(), |_| {}).truncated);
        let mut p = Page::new(5);
        p.word(20);
        p.0.extend_from_slice(&[0; 8]);
        let page = p.finish(0, None);
        let st = decode_page(&page, &PageLayout::default(), &layouts(), |_| {});
        assert!(st.truncated && st.records == 0);
        assert!(decode_page(&[1, 2, 3], &PageLayout::default(), &layouts(), |_| {}).truncated);
        // A record of length 0 in the big form.
        let mut p = Page::new(5);
        p.word(0);
        p.word(0);
        let page = p.finish(0, None);
        assert!(decode_page(&page, &PageLayout::default(), &layouts(), |_| {}).truncated);
    }
}
