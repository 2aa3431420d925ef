//! What a bench is to the rest of the program: its descriptor ([`BenchDesc`]), the [`Bench`]
//! trait it implements against its typed properties, the object-safe [`AnyBench`] the registry
//! holds, and the vocabulary of properties and `apply`/`commit` the benches share.

pub use crate::format::FormatOpts;
pub use crate::spec::{prop, Forward, PropDesc, Shape, SpecError};
pub use crate::units::{ValueKind, PCT_LABELS};

use super::headline::Row;
use super::needs::SystemNeeds;
use super::runner::ctx::{RunCtx, StudyCtx};
use crate::spec::JobSpec;

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
    fn run(&self, _ctx: &mut RunCtx, _props: &Self::Props) -> anyhow::Result<serde_json::Value> {
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
        _ctx: &StudyCtx,
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
    fn headline(&self, _entry: &crate::result::Entry) -> anyhow::Result<Vec<Row>> {
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
    fn run(&self, spec: &JobSpec, ctx: &mut RunCtx) -> anyhow::Result<serde_json::Value>;
    /// [`Bench::applies`] with the spec's properties.
    fn applies(
        &self,
        spec: &JobSpec,
        record: &serde_json::value::RawValue,
    ) -> anyhow::Result<Option<Apply>>;
    fn study(
        &self,
        ctx: &StudyCtx,
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
    fn headline(&self, entry: &crate::result::Entry) -> anyhow::Result<Vec<Row>>;
    fn plot(&self, entry: &crate::result::Entry) -> anyhow::Result<Option<String>>;
}

impl<B: Bench> AnyBench for B {
    fn desc(&self) -> &'static BenchDesc {
        Bench::desc(self)
    }

    fn check(&self, spec: &JobSpec) -> Result<(), SpecError> {
        self.props(spec).map(|_| ())
    }

    fn run(&self, spec: &JobSpec, ctx: &mut RunCtx) -> anyhow::Result<serde_json::Value> {
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
        ctx: &StudyCtx,
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

    fn headline(&self, entry: &crate::result::Entry) -> anyhow::Result<Vec<Row>> {
        Bench::headline(self, entry)
    }

    fn plot(&self, entry: &crate::result::Entry) -> anyhow::Result<Option<String>> {
        Bench::plot(self, entry)
    }
}
