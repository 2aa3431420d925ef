//! What a bench is to the rest of the program: its descriptor ([`BenchDesc`]), the [`Bench`]
//! trait it implements against its typed properties, record and result, the object-safe
//! [`AnyBench`] the registry holds and the [`BenchJob`] the runner carries (where the typed
//! model meets the result file's JSON), and the vocabulary of properties and `apply`/`commit`
//! the benches share.

pub use crate::format::FormatOpts;
pub use crate::spec::{concat_props, prop, Forward, PropDesc, Shape, SpecError};
pub use crate::units::{ValueKind, PCT_LABELS};

use super::ctx::{RunCtx, StudyCtx};
use super::headline::Row;
use super::needs::SystemNeeds;
use crate::bench::merge::src::{MergeOpts, MergeSrc, Merging};
use crate::result::Entry;
use crate::spec::JobSpec;
use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;

/// What a bench is and accepts.
#[derive(Debug)]
pub struct BenchDesc {
    pub kind: &'static str,
    pub about: &'static str,
    /// Hidden from `--help` and `doc` listings (internal test benches).
    pub hidden: bool,
    /// A re-run links to an existing entry of the same kind+id regardless of props and resumes it.
    pub incremental: bool,
    /// Whether `run` and `study` are available in this version; the others format (and
    /// `solve`) existing results.
    pub runnable: bool,
    /// A job `run` puts before this one, as its own entry, when neither an earlier job of the
    /// invocation nor a finished entry of the result file is of that job's kind (iocost-tune
    /// works on an iocost-qos run, which upstream runs first the same way).
    pub runs_first: Option<&'static str>,
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
    open_keys: None,
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

/// Whether the enum property `key` (accepting `values`) is given as `upstream`: the
/// properties that restore upstream's behaviour (`requests`, `search`, `jobs`).
pub fn chose_upstream(
    g: &crate::spec::Group,
    key: &str,
    values: &'static [&'static str],
) -> Result<bool, SpecError> {
    let v = g.value(key, ValueKind::Enum(values))?;
    Ok(matches!(v, Some(crate::units::parse::ParsedValue::Enum(v)) if v == "upstream"))
}

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

/// A bench implementation, written against its own typed model: its properties (read from the
/// spec once, when the job is validated), its record (what `run` returns and checkpoints) and
/// its result (what `study` makes of the record and the reports render). Only [`AnyBench`], at
/// the runner's edge, turns them into the JSON of the result file and back.
///
/// `run` touches the system and returns the record; `study` turns a record plus per-second
/// reports into the result; `solve` post-processes a result; `format` renders an entry's result
/// (after the common header).
pub trait Bench: Sync + 'static {
    /// What the bench's spec says, typed, with the defaults filled in.
    type Props: Send + 'static;
    /// What a run records: checkpointed while it runs, read back to resume, to report progress,
    /// to apply and to study. Reads the records of every version the reports accept.
    type Record: Serialize + DeserializeOwned;
    /// What the study makes of a record: what `format`, `headline` and `plot` read.
    type Result: Serialize + DeserializeOwned;

    /// Keys every stored result of this bench has, in every layout the reports read (when the
    /// result is an object): a result without one is another bench's under a changed kind,
    /// which the lenient models would otherwise print as zeros.
    const RESULT_KEYS: &'static [&'static str] = &[];

    /// The headline fields `compare` shows by default, its key numbers (`--full` shows every
    /// one); empty: all of them.
    const KEY_NUMBERS: &'static [&'static str] = &[];

    fn desc(&self) -> &'static BenchDesc;

    /// Reads the spec's properties under the rules of a new run: the bench's own rules beyond
    /// the keys and value kinds of its shape (which `validate_run` checks first). Called before
    /// anything runs, so a bad value is reported as itself (exit 2) rather than after the host
    /// setup or hours of earlier jobs.
    fn props(&self, spec: &JobSpec) -> Result<Self::Props, SpecError>;

    /// Reads a stored entry's properties for the reports ([`Stored::props`]), as leniently as
    /// the stored specs of every version need; by default as a new run reads them.
    fn stored_props(&self, spec: &JobSpec) -> Result<Self::Props, SpecError> {
        self.props(spec)
    }

    /// Runs the bench and returns its record. Only called when the descriptor says it is
    /// `runnable`.
    fn run(&self, _ctx: &mut RunCtx, _props: &Self::Props) -> anyhow::Result<Self::Record> {
        crate::usage_bail!("{} can't run in this version", self.desc().kind)
    }

    /// What a finished record applies for the later jobs, as the spec's `apply`/`commit` ask.
    /// The runner calls it after the bench ran and again when it reuses the finished record,
    /// so the parameters reach later jobs either way (upstream applies in its study stage,
    /// which a reused record goes through too).
    fn applies(
        &self,
        _props: &Self::Props,
        _record: &Self::Record,
    ) -> anyhow::Result<Option<Apply>> {
        Ok(None)
    }

    /// Whether a stored record is of the job these props describe in what the spec doesn't
    /// say (an io job file's contents): a record that isn't makes the run a new entry, as a
    /// changed property would. The spec's own properties are compared before. It gets the
    /// stored JSON, not the model: linking asks it of every candidate entry, and most benches
    /// (whose records can be tens of MB) have nothing to check.
    fn answers(&self, _props: &Self::Props, _record: &RawValue) -> bool {
        true
    }

    /// Turns a record plus the per-second reports into the result (runnable benches).
    fn study(&self, _ctx: &StudyCtx, _record: &Self::Record) -> anyhow::Result<Self::Result> {
        crate::usage_bail!("{} can't study in this version", self.desc().kind)
    }

    /// How this bench's results merge across hosts (`merge`); `None`: they don't.
    fn merging(&self) -> Option<Merging> {
        None
    }

    /// What besides kind, versions, memory profile and device keeps results apart in a
    /// merge (e.g. the properties of the runs behind them).
    fn merge_classifier(&self, _entry: &Entry, _opts: &MergeOpts) -> Option<String> {
        None
    }

    /// Merges one group's sources into one entry, marking those it can't use as rejected.
    fn merge(&self, _srcs: &mut [MergeSrc]) -> anyhow::Result<Entry> {
        crate::usage_bail!("{} results don't merge", self.desc().kind)
    }

    /// Derives what the result's own data implies (iocost-tune's fitted lines and
    /// solutions), under the spec's properties; most benches have nothing to derive.
    fn solve(&self, _props: &Self::Props, result: Self::Result) -> anyhow::Result<Self::Result> {
        Ok(result)
    }

    /// How far the checkpointed `record` of an unfinished run got, e.g. "1 of 3 loops done";
    /// `None` when the bench can't tell.
    fn progress(&self, _props: &Self::Props, _record: &Self::Record) -> Option<String> {
        None
    }

    /// Renders the body of an entry that has a result (after the common header).
    fn format(
        &self,
        out: &mut String,
        stored: &Stored<Self>,
        opts: &FormatOpts,
    ) -> anyhow::Result<()>;

    /// The headline numbers of an entry that has a result, for `summary --output-format
    /// json|csv` and `compare`: one row, or one per configuration; none: nothing to add to the
    /// entry's identity.
    fn headline(&self, _stored: &Stored<Self>) -> anyhow::Result<Vec<Row>> {
        Ok(Vec::new())
    }

    /// The pictures of the entry for `format --plot` (SVGs, an HTML page); none: nothing to
    /// draw.
    fn plot(&self, _stored: &Stored<Self>) -> anyhow::Result<Vec<PlotFile>> {
        Ok(Vec::new())
    }
}

/// One file `format --plot` writes for an entry: `<stem>-<kind>[-<id>]<suffix>.<ext>`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotFile {
    /// Added to the entry's name, e.g. `-MOF` (empty for its only picture).
    pub suffix: String,
    pub ext: &'static str,
    pub text: String,
}

impl PlotFile {
    pub fn svg(suffix: impl Into<String>, text: String) -> PlotFile {
        PlotFile {
            suffix: suffix.into(),
            ext: "svg",
            text,
        }
    }
}

/// An entry of a bench as the reports see it: the typed result, and the record read when a
/// report asks for it (a summary rarely needs it, and records can be large).
pub struct Stored<'a, B: Bench + ?Sized> {
    pub entry: &'a Entry,
    pub result: B::Result,
    bench: &'a B,
}

impl<B: Bench + ?Sized> Stored<'_, B> {
    /// The entry's record; `None` when it has none.
    pub fn record(&self) -> anyhow::Result<Option<B::Record>> {
        crate::format::parse_record(self.entry)
    }

    /// The entry's properties, read from its stored spec ([`Bench::stored_props`]).
    pub fn props(&self) -> anyhow::Result<B::Props> {
        let spec = &self.entry.spec;
        Ok(self.bench.stored_props(spec).map_err(|e| spec.error(e))?)
    }
}

/// The model of a bench this version only lists: whatever is stored, left unread.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unread;

impl Serialize for Unread {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_unit()
    }
}

impl<'de> Deserialize<'de> for Unread {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Unread)
    }
}

/// A [`Bench`] as the registry holds it: the typed model erased to the result file's JSON.
/// Implemented for every [`Bench`]; nothing implements it directly.
pub trait AnyBench: Sync {
    fn desc(&self) -> &'static BenchDesc;
    /// Reads the spec's properties ([`Bench::props`]) into the job the runner carries.
    fn job(&'static self, spec: &JobSpec) -> Result<Box<dyn BenchJob>, SpecError>;
    /// [`Bench::progress`]; `None` also when a stored spec or record no longer reads.
    fn progress(&self, spec: &JobSpec, record: &RawValue) -> Option<String>;
    /// [`Bench::merging`].
    fn merging(&self) -> Option<Merging>;
    /// [`Bench::merge_classifier`].
    fn merge_classifier(&self, entry: &Entry, opts: &MergeOpts) -> Option<String>;
    /// [`Bench::merge`].
    fn merge(&self, srcs: &mut [MergeSrc]) -> anyhow::Result<Entry>;
    /// [`Bench::format`] of an entry that has a result.
    fn format(&self, out: &mut String, entry: &Entry, opts: &FormatOpts) -> anyhow::Result<()>;
    /// [`Bench::headline`] of an entry that has a result.
    fn headline(&self, entry: &Entry) -> anyhow::Result<Vec<Row>>;
    /// [`Bench::plot`] of an entry that has a result.
    fn plot(&self, entry: &Entry) -> anyhow::Result<Vec<PlotFile>>;
    /// [`Bench::KEY_NUMBERS`].
    fn key_numbers(&self) -> &'static [&'static str];
}

/// A job whose properties are read: what the runner carries from validation to the save.
pub trait BenchJob: Send {
    fn bench(&self) -> &'static dyn AnyBench;
    /// [`Bench::run`]: the record, kept in the bench's model until the runner saves it.
    fn run(&self, ctx: &mut RunCtx) -> anyhow::Result<Box<dyn JobRecord + '_>>;
    /// A stored record read into the bench's model, once, for the study and the applies.
    fn stored(&self, record: &RawValue) -> anyhow::Result<Box<dyn JobRecord + '_>>;
    /// [`Bench::answers`] of a stored record.
    fn answers(&self, record: &RawValue) -> bool;
    /// [`Bench::solve`] of a stored result; `None` when it changes nothing, so the stored
    /// JSON (with any fields this version doesn't model) stays as it is.
    fn solve(&self, result: &RawValue) -> anyhow::Result<Option<Value>>;
}

/// A job's record in its bench's model, fresh from the run or read from the result file:
/// studied, applied and turned into the result file's JSON from the one typed value.
pub trait JobRecord {
    /// The record as the result file stores it.
    fn to_raw(&self) -> anyhow::Result<Box<RawValue>>;
    /// [`Bench::applies`].
    fn applies(&self) -> anyhow::Result<Option<Apply>>;
    /// [`Bench::study`] then [`Bench::solve`]: the result as the result file stores it.
    fn study(&self, ctx: &StudyCtx) -> anyhow::Result<Box<RawValue>>;
}

/// A stored record or result read into a bench's model; `what` names it in the error.
fn read<T: DeserializeOwned>(kind: &str, what: &str, raw: &RawValue) -> anyhow::Result<T> {
    serde_json::from_str(raw.get()).with_context(|| format!("parsing the {} {}", kind, what))
}

/// The entry's result in the bench's model, as the reports read it.
fn stored<'a, B: Bench>(bench: &'a B, entry: &'a Entry) -> anyhow::Result<Stored<'a, B>> {
    if let Some(raw) = entry.result.as_deref() {
        check_result_keys(entry, raw, B::RESULT_KEYS)?;
    }
    Ok(Stored {
        entry,
        result: crate::format::parse_result(entry)?,
        bench,
    })
}

/// A usage error when `raw` is an object without one of `keys` (see [`Bench::RESULT_KEYS`]).
/// Only the top level is read; the values are skipped over, not parsed (the benches that
/// declare keys store small results).
fn check_result_keys(entry: &Entry, raw: &RawValue, keys: &[&str]) -> anyhow::Result<()> {
    if keys.is_empty() || !raw.get().trim_start().starts_with('{') {
        return Ok(());
    }
    let present: BTreeMap<std::borrow::Cow<str>, &RawValue> = serde_json::from_str(raw.get())
        .map_err(|e| {
            crate::error::UsageError::new(format!(
                "{}: the stored result doesn't read ({})",
                crate::format::job_name(&entry.spec),
                e
            ))
        })?;
    if let Some(missing) = keys.iter().find(|k| !present.contains_key(**k)) {
        crate::usage_bail!(
            "{}: the stored result is not what a {} run stores (it has no {:?}); is the \
             entry's kind right?",
            crate::format::job_name(&entry.spec),
            entry.spec.kind,
            missing
        );
    }
    Ok(())
}

impl<B: Bench> AnyBench for B {
    fn desc(&self) -> &'static BenchDesc {
        Bench::desc(self)
    }

    fn key_numbers(&self) -> &'static [&'static str] {
        B::KEY_NUMBERS
    }

    fn job(&'static self, spec: &JobSpec) -> Result<Box<dyn BenchJob>, SpecError> {
        Ok(Box::new(TypedJob {
            bench: self,
            props: self.props(spec)?,
        }))
    }

    fn progress(&self, spec: &JobSpec, record: &RawValue) -> Option<String> {
        let record: B::Record = serde_json::from_str(record.get()).ok()?;
        Bench::progress(self, &self.props(spec).ok()?, &record)
    }

    fn format(&self, out: &mut String, entry: &Entry, opts: &FormatOpts) -> anyhow::Result<()> {
        Bench::format(self, out, &stored(self, entry)?, opts)
    }

    fn headline(&self, entry: &Entry) -> anyhow::Result<Vec<Row>> {
        Bench::headline(self, &stored(self, entry)?)
    }

    fn merging(&self) -> Option<Merging> {
        Bench::merging(self)
    }

    fn merge_classifier(&self, entry: &Entry, opts: &MergeOpts) -> Option<String> {
        Bench::merge_classifier(self, entry, opts)
    }

    fn merge(&self, srcs: &mut [MergeSrc]) -> anyhow::Result<Entry> {
        Bench::merge(self, srcs)
    }

    fn plot(&self, entry: &Entry) -> anyhow::Result<Vec<PlotFile>> {
        Bench::plot(self, &stored(self, entry)?)
    }
}

/// A bench with its properties read.
struct TypedJob<B: Bench> {
    bench: &'static B,
    props: B::Props,
}

impl<B: Bench> BenchJob for TypedJob<B> {
    fn bench(&self) -> &'static dyn AnyBench {
        self.bench
    }

    fn run(&self, ctx: &mut RunCtx) -> anyhow::Result<Box<dyn JobRecord + '_>> {
        let record = Bench::run(self.bench, ctx, &self.props)?;
        Ok(Box::new(TypedRecord { job: self, record }))
    }

    fn stored(&self, record: &RawValue) -> anyhow::Result<Box<dyn JobRecord + '_>> {
        let record = read(self.bench.desc().kind, "record", record)?;
        Ok(Box::new(TypedRecord { job: self, record }))
    }

    fn answers(&self, record: &RawValue) -> bool {
        Bench::answers(self.bench, &self.props, record)
    }

    fn solve(&self, result: &RawValue) -> anyhow::Result<Option<Value>> {
        let result: B::Result = read(self.bench.desc().kind, "result", result)?;
        let before = serde_json::to_value(&result)?;
        let after = serde_json::to_value(Bench::solve(self.bench, &self.props, result)?)?;
        Ok((after != before).then_some(after))
    }
}

/// A record of a [`TypedJob`].
struct TypedRecord<'a, B: Bench> {
    job: &'a TypedJob<B>,
    record: B::Record,
}

impl<B: Bench> JobRecord for TypedRecord<'_, B> {
    fn to_raw(&self) -> anyhow::Result<Box<RawValue>> {
        crate::result::to_raw(&self.record)
    }

    fn applies(&self) -> anyhow::Result<Option<Apply>> {
        Bench::applies(self.job.bench, &self.job.props, &self.record)
    }

    fn study(&self, ctx: &StudyCtx) -> anyhow::Result<Box<RawValue>> {
        let (bench, props) = (self.job.bench, &self.job.props);
        let result = Bench::study(bench, ctx, &self.record)?;
        crate::result::to_raw(&Bench::solve(bench, props, result)?)
    }
}
