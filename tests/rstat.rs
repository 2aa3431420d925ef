//! `format --rstat`: the resource-stat tables of a real upstream result at the detail levels
//! upstream has no fixture for (level 2 is compared byte for byte in `conformance.rs`).

use assert_cmd::Command;

const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/results/");
const MODEL: &str = "Samsung_SSD_970_PRO_512GB";

fn format(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .current_dir(FIXTURES)
        .env("TZ", "UTC")
        .arg("-r")
        .arg(format!("{}.json.gz", MODEL))
        .arg("format")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The lines of every `[TITLE…]` table: header up to the blank line after it.
fn tables(text: &str) -> Vec<Vec<&str>> {
    let mut tables = Vec::new();
    let mut cur: Option<Vec<&str>> = None;
    for line in text.lines() {
        if line.starts_with('[') && line.contains("]  ") && line.ends_with("stdev") {
            cur = Some(vec![line]);
        } else if line.is_empty() {
            if let Some(t) = cur.take() {
                tables.push(t);
            }
        } else if let Some(t) = cur.as_mut() {
            t.push(line);
        }
    }
    tables
}

/// Width of the label column: the header's `min` is right-aligned in 5 columns after it and
/// two separating spaces.
fn header_width(header: &str) -> usize {
    header.find("min").unwrap() - 4
}

#[test]
fn rstat1_hides_hidden_keys() {
    let text = format(&["--rstat", "iocost-qos:sub-full"]);
    let tables = tables(&text);
    // 25 runs × (ALL, FINAL: 4 tables each; ROOT: 4; WORKLOAD, SYSTEM: 3 each).
    assert_eq!(tables.len(), 25 * (4 + 4 + 4 + 3 + 3));
    for t in &tables {
        assert_eq!(header_width(t[0]), 24, "{}", t[0]);
        let title = t[0].split(']').next().unwrap();
        let rows = t.len() - 1;
        if title.ends_with("memory.stat") {
            assert_eq!(rows, 20, "{}", title);
        } else if title.ends_with("io.stat") {
            assert_eq!(rows, 11, "{}", title);
        } else if title.ends_with("vmstat") {
            assert_eq!(rows, 47, "{}", title);
            assert!(!t.iter().any(|l| l.starts_with("slabs_scanned")));
        } else {
            assert_eq!(rows, 12, "{}", title);
        }
        assert!(!t.iter().any(|l| l.starts_with("kernel_stack ")));
    }
}

#[test]
fn rstat0_subfull_prints_only_main_tables() {
    let text = format(&["iocost-qos:sub-full"]);
    let tables = tables(&text);
    assert_eq!(tables.len(), 25 * 5);
    for t in &tables {
        assert_eq!(header_width(t[0]), 10, "{}", t[0]);
        assert_eq!(t.len(), 13);
        assert!(!t[0].contains(" - "));
    }
    assert!(text.contains("\nResource stat:\n\n[ALL]         min"));
    assert!(text.contains("\nSlice resource stat:\n\n[ROOT]        min"));
}
