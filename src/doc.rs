//! `resctl-bench doc`: the pages under benches-doc/, compiled into the binary so the docs always
//! match the binary that prints them.

use crate::error::UsageError;
use anyhow::Result;

/// (subject, one-line description, page text)
pub const PAGES: &[(&str, &str, &str)] = &[
    (
        "common",
        "Command line, job specs, result file and report conventions",
        include_str!("../benches-doc/common.md"),
    ),
    (
        "vm",
        "The disposable VM test host (`resctl-bench vm`)",
        include_str!("../benches-doc/vm.md"),
    ),
    (
        "iocost-params",
        "io.cost model and QoS parameters of the scratch device",
        include_str!("../benches-doc/iocost-params.md"),
    ),
    (
        "hashd",
        "The bundled latency-sensitive workload",
        include_str!("../benches-doc/hashd.md"),
    ),
    (
        "hashd-params",
        "Parameters of the hashd workload",
        include_str!("../benches-doc/hashd-params.md"),
    ),
    (
        "storage",
        "Memory offloading factor (MOF) of the storage",
        include_str!("../benches-doc/storage.md"),
    ),
    (
        "protection",
        "Workload protection against a memory hog",
        include_str!("../benches-doc/protection.md"),
    ),
    (
        "iocost-qos",
        "MOF and protection per io.cost QoS setting",
        include_str!("../benches-doc/iocost-qos.md"),
    ),
    (
        "iocost-tune",
        "QoS solutions derived from iocost-qos results",
        include_str!("../benches-doc/iocost-tune.md"),
    ),
];

pub fn page(subject: &str) -> Option<&'static str> {
    PAGES.iter().find(|p| p.0 == subject).map(|p| p.2)
}

/// The text `doc` prints: the list of subjects without arguments, else the requested pages.
pub fn render(subjects: &[String]) -> Result<String> {
    if subjects.is_empty() {
        let mut out = String::from("Documentation subjects (resctl-bench doc SUBJECT):\n\n");
        for (name, about, _) in PAGES {
            out += &format!("  {:<15} {}\n", name, about);
        }
        return Ok(out);
    }
    let mut out = String::new();
    for (i, subject) in subjects.iter().enumerate() {
        let text = page(subject).ok_or_else(|| {
            let known: Vec<&str> = PAGES.iter().map(|p| p.0).collect();
            UsageError::new(format!(
                "unknown doc subject \"{}\"; known: {}",
                subject,
                known.join(", ")
            ))
        })?;
        if i > 0 {
            out.push('\n');
        }
        out += text;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_bench_has_a_page() {
        for b in crate::bench::visible() {
            assert!(page(b.kind).is_some(), "no doc page for {}", b.kind);
        }
    }

    #[test]
    fn listing_names_every_page() {
        let list = render(&[]).unwrap();
        for (name, _, _) in PAGES {
            assert!(list.contains(name));
        }
    }

    #[test]
    fn unknown_subject_is_a_usage_error() {
        let err = render(&["iocost-qso".into()]).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_USAGE);
        assert!(err.to_string().contains("known: common"));
    }
}
