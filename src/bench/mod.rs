//! The benches and their registry. Each bench is one implementation of [`Bench`] in its own
//! module: its descriptor (name, what it accepts, what it needs from the host), its typed
//! properties and their rules, its run/study, and its text report, written against
//! `contract/` alone. Everything else — spec validation, `summary`/`format`, `doc`, `--help`
//! and the runner — goes through [`BENCHES`]. Adding a bench is its module plus one line there.
//! The parts import downwards only: the contract, the benches, this registry, then the runner
//! and `results/` (the commands over result files).

// The bench contract: all a bench uses of `bench/` besides the benches it runs.
pub mod contract;

// The benches, and what several of them share (`hashd_sizing`).
pub mod curve;
pub mod hashd_params;
pub mod hashd_sizing;
pub mod io;
pub mod iocost_params;
pub mod iocost_qos;
pub mod iocost_tune;
pub mod merge;
pub mod protection;
pub mod qos_study;
// The benches only tests drive: not in the binary users install.
#[cfg(any(test, feature = "testaid"))]
pub mod selftest;
pub mod storage;
#[cfg(any(test, feature = "testaid"))]
pub mod systest;

// Above the registry (this file): the runner and the commands over result files.
pub mod results;
pub mod runner;

pub use contract::api::{
    prop, AnyBench, Apply, ApplyCommit, Bench, BenchDesc, BenchJob, DocPage, FormatOpts, Forward,
    JobRecord, PropDesc, Shape, SpecError, ValueKind, APPLY_COMMIT, NO_PROPS, PCT_LABELS,
};
pub use contract::needs::SystemNeeds;

use crate::error::UsageError;
use crate::spec::suggest::suggestion;
use crate::spec::JobSpec;

/// Every bench, in the order `--help` and `doc` list them.
pub static BENCHES: &[&dyn AnyBench] = &[
    &iocost_params::IocostParams,
    &hashd_params::HashdParams,
    &storage::Storage,
    &protection::Protection,
    &iocost_qos::IocostQos,
    &iocost_tune::IocostTune,
    &io::Io,
    &curve::Curve,
    &qos_study::QosStudy,
    &merge::info::MergeInfoBench,
    #[cfg(any(test, feature = "testaid"))]
    &selftest::SelfTest,
    #[cfg(any(test, feature = "testaid"))]
    &systest::SysTest,
];

pub fn find(kind: &str) -> Option<&'static dyn AnyBench> {
    BENCHES.iter().copied().find(|b| b.desc().kind == kind)
}

pub fn visible() -> impl Iterator<Item = &'static BenchDesc> {
    BENCHES.iter().map(|b| b.desc()).filter(|d| !d.hidden)
}

/// The bench list appended to `--help`: which run, and which only format existing results.
pub fn help_list() -> String {
    let mut s =
        String::from("Benches (* runs in this version; the others format existing results):\n");
    for b in visible() {
        let mark = if b.runnable { '*' } else { ' ' };
        s += &format!("  {} {:<15} {}\n", mark, b.kind, b.about);
    }
    s += "\nRun `resctl-bench doc BENCH` for a bench's properties and output.";
    s
}

/// The spec's bench, or the error listing the known ones.
fn lookup(spec: &JobSpec) -> Result<&'static dyn AnyBench, UsageError> {
    find(&spec.kind).ok_or_else(|| {
        let known: Vec<String> = visible().map(|b| b.kind.to_string()).collect();
        let msg = format!(
            "unknown bench {:?}; known: {}{}",
            spec.kind,
            known.join(", "),
            suggestion(&spec.kind, &known)
        );
        if spec.canonical() == spec.kind {
            UsageError::new(msg)
        } else {
            spec.err(0, msg)
        }
    })
}

/// Checks a spec given to `run`/`study`/`solve`: the bench exists, the spec fits its shape,
/// and the bench's own rules hold. Returns the job with its properties read, which the runner
/// carries to the save.
pub fn validate_run(spec: &JobSpec) -> Result<Box<dyn BenchJob>, UsageError> {
    let bench = lookup(spec)?;
    spec.check_run_shape(&bench.desc().shape)?;
    bench.job(spec).map_err(|e| spec.error(e))
}

/// Checks a spec given to `format`/`summary`.
pub fn validate_format(spec: &JobSpec) -> Result<(), UsageError> {
    spec.check_format_shape(&lookup(spec)?.desc().shape)
}

/// Parses and validates the specs of a `format`/`summary` invocation.
pub fn parse_format_specs(specs: &[String]) -> Result<Vec<JobSpec>, UsageError> {
    specs
        .iter()
        .map(|s| {
            let spec = JobSpec::parse(s)?;
            validate_format(&spec)?;
            Ok(spec)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_err(text: &str) -> String {
        match JobSpec::parse(text).and_then(|s| validate_run(&s)) {
            Ok(_) => panic!("{} should be rejected", text),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn kinds_are_unique_and_descriptors_their_own() {
        let mut kinds: Vec<&str> = BENCHES.iter().map(|b| b.desc().kind).collect();
        let n = kinds.len();
        kinds.sort();
        kinds.dedup();
        assert_eq!(kinds.len(), n);
        for b in BENCHES {
            assert!(std::ptr::eq(find(b.desc().kind).unwrap().desc(), b.desc()));
        }
    }

    #[test]
    fn validation_messages() {
        assert_eq!(
            run_err("iocost-qso"),
            "unknown bench \"iocost-qso\"; known: iocost-params, hashd-params, storage, protection, iocost-qos, iocost-tune, io, curve, qos-study; did you mean iocost-qos?"
        );
        let e = run_err("iocost-qos:vrate-mn=5");
        assert!(e.starts_with("job spec \"iocost-qos:vrate-mn=5\": unknown property \"vrate-mn\" for iocost-qos; valid: vrate-min, vrate-max,"), "{}", e);
        assert!(e.ends_with("did you mean vrate-min?"), "{}", e);
        assert_eq!(
            run_err("iocost-qos:vrate-max=abc"),
            "job spec \"iocost-qos:vrate-max=abc\": vrate-max=\"abc\" is not a number (accepted: a finite number, e.g. 50 or 12.5)"
        );
        assert!(run_err("iocost-qos::min=x").contains(": group 2: min=\"x\" is not a number"));
        assert!(run_err("iocost-qos:storage-rps-mx=5").contains("did you mean storage-rps-max?"));
    }

    #[test]
    fn validation_accepts() {
        for text in [
            "iocost-qos",
            "iocost-qos:allow-fail",
            "iocost-qos:storage-rps-max=1000,storage-commit,storage-loops=2",
            "iocost-qos:vrate-min=10,vrate-max=90,dither=2.5::vrate=50:rpct=95,rlat=5000",
            "protection::scenario=mem-hog-tune,size-max=16G,size-min=4G",
            "storage:passive=ALL",
            "storage:passive=io/mem",
        ] {
            let s = JobSpec::parse(text).unwrap();
            validate_run(&s).unwrap_or_else(|e| panic!("{}: {}", text, e));
        }
        validate_format(&JobSpec::parse("iocost-qos:sub-full,id=a").unwrap()).unwrap();
        assert!(validate_format(&JobSpec::parse("iocost-qos:vrate-min=5").unwrap()).is_err());
    }

    #[test]
    fn benches_receive_their_typed_props() {
        let spec = JobSpec::parse(
            "protection::scenario=mem-hog,loops=3:scenario=mem-hog-tune,size-max=16G,isol-pct=10",
        )
        .unwrap();
        let p = Bench::props(&protection::Protection, &spec).unwrap();
        let [protection::props::Scenario::MemHog(hog), protection::props::Scenario::MemHogTune(tune)] =
            &p.scenarios[..]
        else {
            panic!("{:?}", p);
        };
        assert_eq!((hog.loops, hog.speed.as_str()), (3, "2x"));
        assert_eq!(
            (tune.size_max, tune.isol_pct.as_str()),
            (16.0 * (1u64 << 30) as f64, "10")
        );
        assert_eq!(tune.isol_thr, 0.9);
        assert_eq!(tune.search, protection::search::Search::Linear);
        // No scenario: mem-hog at load 1.0, then 0.8.
        let p = Bench::props(
            &protection::Protection,
            &JobSpec::parse("protection").unwrap(),
        )
        .unwrap();
        let loads: Vec<f64> = p
            .scenarios
            .iter()
            .map(|s| match s {
                protection::props::Scenario::MemHog(h) => h.load,
                _ => panic!("{:?}", s),
            })
            .collect();
        assert_eq!(loads, vec![1.0, 0.8]);

        let ac = |text: &str| {
            let spec = JobSpec::parse(text).unwrap();
            Bench::props(&iocost_params::IocostParams, &spec).map_err(|e| spec.error(e).to_string())
        };
        use iocost_params::measure::{Engine, Jobs};
        let ours = iocost_params::run::How::default();
        assert_eq!(
            ac("iocost-params"),
            Ok(iocost_params::IocostParamsProps {
                ac: ApplyCommit {
                    apply: true,
                    commit: true
                },
                how: ours
            })
        );
        assert_eq!(
            ac("iocost-params:commit=false"),
            Ok(iocost_params::IocostParamsProps {
                ac: ApplyCommit {
                    apply: true,
                    commit: false
                },
                how: ours
            })
        );
        assert_eq!(
            ac("iocost-params:jobs=upstream").map(|p| p.how.jobs),
            Ok(Jobs::Upstream)
        );
        assert_eq!(ac("iocost-params:jobs=ours").map(|p| p.how), Ok(ours));
        assert_eq!(
            ac("iocost-params:engine=fio").map(|p| p.how),
            Ok(iocost_params::run::How {
                jobs: Jobs::Ours,
                engine: Engine::Fio,
                file_size: None,
            })
        );
        assert_eq!(
            ac("iocost-params:jobs=upstream,engine=ours").map(|p| p.how.engine),
            Ok(Engine::Ours)
        );
        assert_eq!(
            ac("iocost-params:file-size=16G").map(|p| p.how.file_size),
            Ok(Some(16 << 30))
        );
        assert!(ac("iocost-params:file-size=100M")
            .unwrap_err()
            .contains("file-size=100M: the test file needs at least 256M"));
        assert!(ac("iocost-params:engine=libaio")
            .unwrap_err()
            .contains("engine=\"libaio\" is not one of ours, fio"));
        assert!(ac("iocost-params:jobs=fio")
            .unwrap_err()
            .contains("jobs=\"fio\" is not one of ours, upstream"));
        assert!(ac("iocost-params:apply=false,commit")
            .unwrap_err()
            .contains("committing implies applying"));
    }
}
