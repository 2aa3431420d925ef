//! `resctl-bench doc`: the pages under benches-doc/, compiled into the binary so the docs always
//! match the binary that prints them. Bench pages come from the bench registry.

use crate::error::UsageError;
use anyhow::Result;

/// The pages that are not a bench's: (subject, one-line description, page text). Each bench
/// brings its own page in its descriptor.
const TOPICS: &[(&str, &str, &str)] = &[
    (
        "common",
        "Command line, job specs, system requirements",
        include_str!("../benches-doc/common.md"),
    ),
    (
        "host",
        "Running on a real host: systemd, other OOM killers, long runs, resuming",
        include_str!("../benches-doc/host.md"),
    ),
    (
        "results",
        "Result file, reading the reports, per-second reports, memory profiles",
        include_str!("../benches-doc/results.md"),
    ),
    (
        "vm",
        "The disposable VM test host (`resctl-bench vm`)",
        include_str!("../benches-doc/vm.md"),
    ),
    (
        "merge",
        "Merging the results of many hosts (`merge`)",
        include_str!("../benches-doc/merge.md"),
    ),
    (
        "db",
        "A database of results and the hwdb file systemd reads (`db import`, `db build`)",
        include_str!("../benches-doc/db.md"),
    ),
    (
        "apply",
        "An io.cost solution onto its device, now and at every boot (`apply`)",
        include_str!("../benches-doc/apply.md"),
    ),
    (
        "fleet",
        "Many hosts through Ansible into one database; the Debian package",
        include_str!("../benches-doc/fleet.md"),
    ),
    (
        "fidelity",
        "Our measurements beside upstream's on the same machine",
        include_str!("../benches-doc/fidelity.md"),
    ),
    (
        "hashd",
        "The bundled latency-sensitive workload",
        include_str!("../benches-doc/hashd.md"),
    ),
];

/// Topics listed right before a bench's page rather than at the top: (topic, bench).
const TOPIC_BEFORE: &[(&str, &str)] = &[("hashd", "hashd-params")];

/// Every page: the topics, then the benches in registry order (a topic in [`TOPIC_BEFORE`]
/// goes right before its bench).
pub fn pages() -> Vec<(&'static str, &'static str, &'static str)> {
    let placed = |t: &str| TOPIC_BEFORE.iter().any(|(topic, _)| *topic == t);
    let mut out: Vec<_> = TOPICS.iter().copied().filter(|t| !placed(t.0)).collect();
    for b in crate::bench::BENCHES {
        let d = b.desc();
        let Some(page) = &d.doc else { continue };
        for (topic, bench) in TOPIC_BEFORE {
            if *bench == d.kind {
                out.extend(TOPICS.iter().copied().filter(|t| t.0 == *topic));
            }
        }
        out.push((d.kind, page.title, page.text));
    }
    out
}

pub fn page(subject: &str) -> Option<&'static str> {
    pages().into_iter().find(|p| p.0 == subject).map(|p| p.2)
}

/// The text `doc` prints: the list of subjects without arguments, else the requested pages.
pub fn render(subjects: &[String]) -> Result<String> {
    if subjects.is_empty() {
        let mut out = String::from("Documentation subjects (resctl-bench doc SUBJECT):\n\n");
        for (name, about, _) in pages() {
            out += &format!("  {:<15} {}\n", name, about);
        }
        return Ok(out);
    }
    let mut out = String::new();
    for (i, subject) in subjects.iter().enumerate() {
        let text = page(subject).ok_or_else(|| {
            let known: Vec<&str> = pages().iter().map(|p| p.0).collect();
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
        for (name, _, _) in pages() {
            assert!(list.contains(name));
        }
    }

    /// The hidden subcommands of a test build (none without the `testaid` feature).
    fn test_aids() -> Vec<String> {
        #[cfg(feature = "testaid")]
        {
            use clap::Subcommand;
            let cmd = crate::cli::testaid::TestAid::augment_subcommands(clap::Command::new("x"));
            cmd.get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect()
        }
        #[cfg(not(feature = "testaid"))]
        Vec::new()
    }

    /// The pages are for users: short enough to read, and no measurement logs (they live beside
    /// the pages in `benches-doc/*-measured.md`, which are not compiled in). A commit hash is
    /// the mark of such a log; a test aid is a subcommand the installed binary lacks.
    #[test]
    fn pages_are_short_and_hold_no_logs() {
        const MAX_LINES: usize = 250;
        let aids = test_aids();
        #[cfg(feature = "testaid")]
        assert!(aids.iter().any(|a| a == "__vm-scenario"), "{:?}", aids);
        for (name, _, text) in pages() {
            let lines = text.lines().count();
            assert!(lines <= MAX_LINES, "doc {}: {} lines", name, lines);
            for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
                let hex = word.len() >= 7 && word.chars().all(|c| c.is_ascii_hexdigit());
                let mixed = word.chars().any(|c| c.is_ascii_digit())
                    && word.chars().any(|c| c.is_ascii_alphabetic());
                assert!(
                    !(hex && mixed),
                    "doc {}: {:?} looks like a commit",
                    name,
                    word
                );
            }
            for aid in &aids {
                assert!(
                    !text.contains(aid.as_str()),
                    "doc {} names the test aid {}",
                    name,
                    aid
                );
            }
        }
    }

    #[test]
    fn unknown_subject_is_a_usage_error() {
        let err = render(&["iocost-qso".into()]).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), crate::error::EXIT_USAGE);
        assert!(err.to_string().contains("known: common"));
    }
}
