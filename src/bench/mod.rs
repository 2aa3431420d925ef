//! The benches and their registry. Each bench is one implementation of [`Bench`] in its own
//! module: its descriptor (name, what it accepts, what it needs from the host), its typed
//! properties and their rules, its run/study, and its text report. Everything else — spec
//! validation, `summary`/`format`, `doc`, `--help` and the runner — goes through [`BENCHES`].
//! Adding a bench is its module plus one line there.

pub mod compare;
pub mod export;
pub mod hashd_bench;
pub mod hashd_params;
pub mod io;
pub mod iocost_params;
pub mod iocost_qos;
pub mod iocost_tune;
pub mod needs;
pub mod protection;
pub mod runner;
pub mod selftest;
pub mod show;
pub mod storage;
pub mod systest;

pub use crate::format::FormatOpts;
pub use crate::spec::{prop, Forward, PropDesc, Shape, SpecError};
pub use crate::units::{ValueKind, PCT_LABELS};

use crate::error::UsageError;
use crate::spec::suggest::suggestion;
use crate::spec::JobSpec;
use crate::system::sysreqs::SysReq;

/// Every bench, in the order `--help` and `doc` list them.
pub static BENCHES: &[&dyn AnyBench] = &[
    &iocost_params::IocostParams,
    &hashd_params::HashdParams,
    &storage::Storage,
    &protection::Protection,
    &iocost_qos::IocostQos,
    &iocost_tune::IocostTune,
    &io::Io,
    &selftest::SelfTest,
    &systest::SysTest,
];

/// What a bench is and accepts.
#[derive(Debug)]
pub struct BenchDesc {
    pub kind: &'static str,
    pub about: &'static str,
    /// Hidden from `--help` and `doc` listings (internal test benches).
    pub hidden: bool,
    /// A re-run links to an existing entry of the same kind+id regardless of props and resumes it.
    pub incremental: bool,
    /// Whether `run` (and `study`/`solve`) are available in this version; the others only
    /// format existing results.
    pub runnable: bool,
    /// The keys and values its specs take.
    pub shape: Shape,
    /// Its `doc` page (hidden benches have none).
    pub doc: Option<DocPage>,
    /// What the bench needs from the host when it runs; `None` = it doesn't touch the system
    /// (no systemd check, journal, sysreqs or memory profile).
    pub system: Option<&'static SystemNeeds>,
}

/// A `doc` page: the line the listing shows and the text (`benches-doc/<name>.md`, compiled in).
#[derive(Debug)]
pub struct DocPage {
    pub title: &'static str,
    pub text: &'static str,
}

/// The host setup a bench runs on (see `system::session`).
#[derive(Debug)]
pub struct SystemNeeds {
    /// Requirements whose miss aborts the run unless `--force`, listed in the header.
    pub sysreqs: &'static [SysReq],
    /// Whether it runs under the memory profile (balloon of `avail − share`).
    pub mem_profile: bool,
    /// Whether it measures the profile's `avail` itself when that is only estimated (hashd
    /// benches): no balloon is set up for it before it runs then.
    pub measures_avail: bool,
}

/// A shape without properties.
pub const NO_PROPS: Shape = Shape {
    props: &[],
    forward: &[],
    group_props: None,
    format_props: &[],
};

/// `apply` and `commit`, taken by the benches whose result parameterizes later ones.
pub const APPLY_COMMIT: [PropDesc; 2] = [
    prop(
        "apply",
        ValueKind::Bool,
        "apply the result to later benches",
    ),
    prop(
        "commit",
        ValueKind::Bool,
        "also save the result to bench.json (implies apply)",
    ),
];

/// What a bench whose result parameterizes later ones does with it, both on by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplyCommit {
    pub apply: bool,
    pub commit: bool,
}

impl ApplyCommit {
    /// `apply=false` alone turns both off (a commit implies an apply); `apply=false,commit`
    /// contradicts itself and is refused.
    pub fn check(g: &crate::spec::Group) -> Result<Self, SpecError> {
        match (g.flag("apply")?, g.flag("commit")?) {
            (Some(false), Some(true)) => Err(g.err(
                "apply=false with commit: committing implies applying (accepted: \
                 apply=false alone, commit=false, or both left out)",
            )),
            (apply, commit) => {
                let apply = apply.unwrap_or(true);
                let commit = commit.unwrap_or(apply);
                Ok(Self {
                    apply: apply || commit,
                    commit,
                })
            }
        }
    }
}

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
/// and the bench's own rules hold.
pub fn validate_run(spec: &JobSpec) -> Result<(), UsageError> {
    let bench = lookup(spec)?;
    spec.check_run_shape(&bench.desc().shape)?;
    bench.check(spec).map_err(|e| spec.error(e))
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

/// Benchmark parameters a finished record hands to the jobs after it (`apply`); `commit`
/// also writes them to bench.json.
#[derive(Debug, Clone, PartialEq)]
pub enum Apply {
    Hashd {
        knobs: crate::system::bench_json::HashdKnobs,
        commit: bool,
    },
    IoCost {
        knobs: crate::system::iocost::IoCostKnobs,
        commit: bool,
    },
}

/// A bench implementation, written against its own typed properties: the registry reads them
/// from the spec once, under the rules of a new run, and every stage that needs them gets the
/// struct, never the spec's strings. `run` touches the system and returns the record; `study`
/// turns a record plus per-second reports into the result; `solve` post-processes a result;
/// `format` renders an entry's result (after the common header).
pub trait Bench: Sync {
    /// What the bench's spec says, typed, with the defaults filled in.
    type Props;

    fn desc(&self) -> &'static BenchDesc;

    /// Reads the spec's properties under the rules of a new run: the bench's own rules beyond
    /// the keys and value kinds of its shape (which `validate_run` checks first). Called before
    /// anything runs, so a bad value is reported as itself (exit 2) rather than after the host
    /// setup or hours of earlier jobs.
    fn props(&self, spec: &JobSpec) -> Result<Self::Props, SpecError>;

    /// Runs the bench and returns its record. Only called when the descriptor says it is
    /// `runnable`.
    fn run(
        &self,
        _ctx: &mut crate::bench::runner::RunCtx,
        _props: &Self::Props,
    ) -> anyhow::Result<serde_json::Value> {
        crate::usage_bail!("{} can't run in this version", self.desc().kind)
    }

    /// What a finished record applies for the later jobs, as the spec's `apply`/`commit` ask.
    /// `run` calls it after the bench ran and again when it reuses the finished record, so the
    /// parameters reach later jobs either way (upstream applies in its study stage, which a
    /// reused record goes through too).
    fn applies(
        &self,
        _props: &Self::Props,
        _record: &serde_json::value::RawValue,
    ) -> anyhow::Result<Option<Apply>> {
        Ok(None)
    }

    /// Turns a record plus the per-second reports into the result (runnable benches).
    fn study(
        &self,
        _ctx: &crate::bench::runner::StudyCtx,
        _record: &serde_json::value::RawValue,
    ) -> anyhow::Result<serde_json::Value> {
        crate::usage_bail!("{} can't study in this version", self.desc().kind)
    }

    fn solve(&self, result: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        Ok(result)
    }

    /// How far the checkpointed `record` of an unfinished run got, e.g. "1 of 3 loops done";
    /// `None` when the bench can't tell.
    fn progress(
        &self,
        _props: &Self::Props,
        _record: &serde_json::value::RawValue,
    ) -> Option<String> {
        None
    }

    /// Renders the body of an entry that has a result (after the common header). `Ok(false)`:
    /// this version can't render this bench's results.
    fn format(
        &self,
        out: &mut String,
        entry: &crate::result::Entry,
        opts: &FormatOpts,
    ) -> anyhow::Result<bool>;

    /// The headline numbers of an entry that has a result, for `summary --output-format
    /// json|csv` (see [`export`]): one row, or one per configuration; none: nothing to add to
    /// the entry's identity.
    fn headline(&self, _entry: &crate::result::Entry) -> anyhow::Result<Vec<export::Row>> {
        Ok(Vec::new())
    }

    /// An SVG picture of the entry for `format --plot`; `None`: nothing to draw.
    fn plot(&self, _entry: &crate::result::Entry) -> anyhow::Result<Option<String>> {
        Ok(None)
    }
}

/// A [`Bench`] as the registry holds it: handed a spec, it reads the bench's typed properties
/// and passes them on. Implemented for every [`Bench`]; nothing implements it directly.
pub trait AnyBench: Sync {
    fn desc(&self) -> &'static BenchDesc;
    /// [`Bench::props`] without the value: whether a new run may take this spec.
    fn check(&self, spec: &JobSpec) -> Result<(), SpecError>;
    /// [`Bench::run`] with the spec's properties.
    fn run(
        &self,
        spec: &JobSpec,
        ctx: &mut crate::bench::runner::RunCtx,
    ) -> anyhow::Result<serde_json::Value>;
    /// [`Bench::applies`] with the spec's properties.
    fn applies(
        &self,
        spec: &JobSpec,
        record: &serde_json::value::RawValue,
    ) -> anyhow::Result<Option<Apply>>;
    fn study(
        &self,
        ctx: &crate::bench::runner::StudyCtx,
        record: &serde_json::value::RawValue,
    ) -> anyhow::Result<serde_json::Value>;
    fn solve(&self, result: serde_json::Value) -> anyhow::Result<serde_json::Value>;
    /// [`Bench::progress`]; `None` also when a stored spec no longer reads.
    fn progress(&self, spec: &JobSpec, record: &serde_json::value::RawValue) -> Option<String>;
    fn format(
        &self,
        out: &mut String,
        entry: &crate::result::Entry,
        opts: &FormatOpts,
    ) -> anyhow::Result<bool>;
    fn headline(&self, entry: &crate::result::Entry) -> anyhow::Result<Vec<export::Row>>;
    fn plot(&self, entry: &crate::result::Entry) -> anyhow::Result<Option<String>>;
}

impl<B: Bench> AnyBench for B {
    fn desc(&self) -> &'static BenchDesc {
        Bench::desc(self)
    }

    fn check(&self, spec: &JobSpec) -> Result<(), SpecError> {
        self.props(spec).map(|_| ())
    }

    fn run(
        &self,
        spec: &JobSpec,
        ctx: &mut crate::bench::runner::RunCtx,
    ) -> anyhow::Result<serde_json::Value> {
        let props = self.props(spec).map_err(|e| spec.error(e))?;
        Bench::run(self, ctx, &props)
    }

    fn applies(
        &self,
        spec: &JobSpec,
        record: &serde_json::value::RawValue,
    ) -> anyhow::Result<Option<Apply>> {
        let props = self.props(spec).map_err(|e| spec.error(e))?;
        Bench::applies(self, &props, record)
    }

    fn study(
        &self,
        ctx: &crate::bench::runner::StudyCtx,
        record: &serde_json::value::RawValue,
    ) -> anyhow::Result<serde_json::Value> {
        Bench::study(self, ctx, record)
    }

    fn solve(&self, result: serde_json::Value) -> anyhow::Result<serde_json::Value> {
        Bench::solve(self, result)
    }

    fn progress(&self, spec: &JobSpec, record: &serde_json::value::RawValue) -> Option<String> {
        Bench::progress(self, &self.props(spec).ok()?, record)
    }

    fn format(
        &self,
        out: &mut String,
        entry: &crate::result::Entry,
        opts: &FormatOpts,
    ) -> anyhow::Result<bool> {
        Bench::format(self, out, entry, opts)
    }

    fn headline(&self, entry: &crate::result::Entry) -> anyhow::Result<Vec<export::Row>> {
        Bench::headline(self, entry)
    }

    fn plot(&self, entry: &crate::result::Entry) -> anyhow::Result<Option<String>> {
        Bench::plot(self, entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_err(text: &str) -> String {
        match JobSpec::parse(text).and_then(|s| validate_run(&s)) {
            Ok(()) => panic!("{} should be rejected", text),
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
            "unknown bench \"iocost-qso\"; known: iocost-params, hashd-params, storage, protection, iocost-qos, iocost-tune, io; did you mean iocost-qos?"
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
        assert_eq!(
            ac("iocost-params"),
            Ok(ApplyCommit {
                apply: true,
                commit: true
            })
        );
        assert_eq!(
            ac("iocost-params:commit=false"),
            Ok(ApplyCommit {
                apply: true,
                commit: false
            })
        );
        assert!(ac("iocost-params:apply=false,commit")
            .unwrap_err()
            .contains("committing implies applying"));
    }
}
