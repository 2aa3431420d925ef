//! Per-second reports: the data model (`model`), mergeable latency histograms (`hist`), and
//! reading and writing `report.d/<unix_sec>.json`.
//!
//! Files are plain JSON. Upstream's agent prefixes each one with a block of `//` comment
//! lines; the reader skips such a preamble so upstream report directories load too.

pub mod diskstats;
pub mod hist;
pub mod iolat_source;
pub mod model;
pub mod reporter;
pub mod trace_page;
pub mod tracefs;
pub mod usage;

pub use hist::LatHist;
pub use model::{IoLatHists, Report, Timestamp, UsageReport};

use anyhow::{Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Name of the per-second report directory under the bench directory.
pub const REPORT_DIR: &str = "report.d";

/// `<dir>/report.d`.
pub fn reports_dir(dir: &Path) -> PathBuf {
    dir.join(REPORT_DIR)
}

/// `<reports_dir>/<sec>.json`.
pub fn report_path(reports_dir: &Path, sec: u64) -> PathBuf {
    reports_dir.join(format!("{}.json", sec))
}

/// The text after a leading block of `//` comment lines (and blank lines).
fn strip_preamble(text: &str) -> &str {
    let mut rest = text;
    loop {
        let trimmed = rest.trim_start_matches([' ', '\t', '\r', '\n']);
        if !trimmed.starts_with("//") {
            return trimmed;
        }
        match trimmed.find('\n') {
            Some(nl) => rest = &trimmed[nl + 1..],
            None => return "",
        }
    }
}

/// Parses a report file's text (with or without a `//` preamble).
pub fn parse_report(text: &str) -> Result<Report> {
    Ok(serde_json::from_str(strip_preamble(text))?)
}

/// Loads one report file.
pub fn load_report(path: &Path) -> Result<Report> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_report(&text).with_context(|| format!("parsing report {}", path.display()))
}

/// Writes `report` as `<reports_dir>/<sec>.json` atomically: into `.<sec>.json.tmp` first,
/// then renamed, so a reader sees the old file, no file, or the complete new one. There is no
/// fsync: reports live on the device under test, and a per-second flush would disturb what we
/// measure; a host crash may lose the last reports but never leaves a torn one visible
/// after a process kill. Returns the path written.
pub fn write_report(reports_dir: &Path, sec: u64, report: &Report) -> Result<PathBuf> {
    let path = report_path(reports_dir, sec);
    let tmp = reports_dir.join(format!(".{}.json.tmp", sec));
    let mut json = serde_json::to_vec(report).context("serializing report")?;
    json.push(b'\n');
    crate::util::atomic::write_replacing(&path, &tmp, "report", |f| f.write_all(&json))?;
    Ok(path)
}

/// Deletes report files of seconds before `before_sec` (retention). Returns how many were
/// removed; files that aren't reports are left alone.
pub fn remove_reports_before(reports_dir: &Path, before_sec: u64) -> Result<usize> {
    let rd = std::fs::read_dir(reports_dir)
        .with_context(|| format!("listing {}", reports_dir.display()))?;
    let mut removed = 0;
    for ent in rd.flatten() {
        let name = ent.file_name();
        let Some(sec) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        if sec < before_sec {
            match std::fs::remove_file(ent.path()) {
                Ok(()) => removed += 1,
                Err(e) => log::debug!("can't remove {}: {}", ent.path().display(), e),
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{RunnerState, SvcState};

    #[test]
    fn upstream_preamble_and_missing_fields() {
        let text = "//\n// rd-agent summary report\n//  timestamp: when\n//\n\n{\n  \
            \"timestamp\": \"2021-05-10T12:34:56.250-07:00\",\n  \"seq\": 3,\n  \
            \"state\": \"BenchHashd\",\n  \"usages\": {\"workload.slice\": {\"cpu_usage\": 1.5, \
            \"mem_bytes\": 4096, \"cpu_pressures\": [0.25, 0.0], \"unknown\": 1}},\n  \
            \"hashd\": [{\"svc\": {\"name\": \"rd-hashd-A.service\", \"state\": \"Running\"}, \
            \"rps\": 10.5, \"mem_probe_at\": \"1970-01-01T00:00:00Z\"}, {}],\n  \
            \"iolat\": {\"read\": {\"50\": 0.000135, \"100\": 0.002}},\n  \
            \"iocost\": {\"vrate\": 87.5, \"model\": {\"ctrl\": \"user\", \"model\": \"linear\", \
            \"rbps\": 1000}, \"qos\": {\"enable\": 1, \"rpct\": 95.0, \"rlat\": 5000}},\n  \
            \"something_new\": {\"x\": 1}\n}\n";
        let rep = parse_report(text).unwrap();
        assert_eq!(rep.seq, 3);
        assert_eq!(rep.state, RunnerState::BenchHashd);
        assert_eq!(rep.timestamp.unix_millis(), 1_620_675_296_250);
        let u = &rep.usages["workload.slice"];
        assert_eq!(u.cpu_usage, 1.5);
        assert_eq!(u.mem_bytes, 4096);
        assert_eq!(u.cpu_pressures, (0.25, 0.0));
        assert_eq!(rep.hashd[0].svc.state, SvcState::Running);
        assert_eq!(rep.hashd[0].rps, 10.5);
        assert_eq!(rep.hashd[1].svc.state, SvcState::Other);
        assert_eq!(rep.iolat_at("read", "50"), Some(0.000135));
        assert!(rep.iolat_hist.is_none());
        assert!(!rep.iolat_unavailable);
        assert_eq!(rep.iocost.vrate, 87.5);
        assert_eq!(rep.iocost.model.ctrl, "user");
        assert_eq!(rep.iocost.model.rbps, 1000);
        assert_eq!((rep.iocost.qos.enable, rep.iocost.qos.rlat), (1, 5000));
    }

    #[test]
    fn unknown_enum_names_load() {
        let rep = parse_report("{\"state\": \"Sleeping\"}").unwrap();
        assert_eq!(rep.state, RunnerState::Unknown("Sleeping".into()));
        assert_eq!(serde_json::to_string(&rep.state).unwrap(), "\"Sleeping\"");
    }

    #[test]
    fn bad_reports_are_errors() {
        for bad in [
            "",
            "// only a comment",
            "{\"timestamp\": \"yesterday\"}",
            "{\"usages\": 3}",
            "{\"seq\": 1",
        ] {
            assert!(parse_report(bad).is_err(), "{:?}", bad);
        }
    }

    #[test]
    fn write_then_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let mut rep = Report::new(7, RunnerState::Running);
        rep.timestamp = Timestamp::from_unix(1_700_000_000.512_3);
        rep.usages.insert(
            "-.slice".into(),
            UsageReport {
                cpu_util: 0.5,
                io_rbytes: 1 << 40,
                io_stalls: (1.25, 0.5),
                ..Default::default()
            },
        );
        let mut hists = IoLatHists::default();
        hists.read.record_ns(120_000);
        hists.write.record_n(2_000_000, 4);
        rep.iolat = hists.pct_maps();
        rep.iolat_hist = Some(hists);
        rep.vmstat.insert("pgfault".into(), 123.0);
        let path = write_report(dir.path(), 1_700_000_000, &rep).unwrap();
        assert_eq!(path, dir.path().join("1700000000.json"));
        let back = load_report(&path).unwrap();
        assert_eq!(back, rep);
        assert!((back.timestamp.unix_secs() - 1_700_000_000.512_3).abs() < 1e-6);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap();
        assert_eq!(names, vec!["1700000000.json".to_string()]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains("\"timestamp\":\"2023-11-14T22:13:20.512300"),
            "{}",
            text
        );
        assert!(text.contains("\"iolat_hist\":{\"layout\":\"ns-log2-16\""));
        assert!(!text.contains("iolat_unavailable"));
    }

    #[test]
    fn retention_removes_only_old_reports() {
        let dir = tempfile::tempdir().unwrap();
        for sec in [10, 11, 12] {
            std::fs::write(report_path(dir.path(), sec), "{}").unwrap();
        }
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        assert_eq!(remove_reports_before(dir.path(), 12).unwrap(), 2);
        assert!(report_path(dir.path(), 12).exists());
        assert!(dir.path().join("notes.txt").exists());
    }
}
