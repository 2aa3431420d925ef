//! `iocost-tune` (benches-doc/iocost-tune.md): io.cost QoS solutions derived from iocost-qos
//! results — data series per vrate, the lines fitted to them and the solutions the rules pick.
//! `run` works on the finished iocost-qos run before it in the result file (its series,
//! collected into the record), `study` hands them on and `solve` fits and solves; stored
//! results print as upstream's (`summary`, `format` with its graphs, `:high-level`, `:hwdb`,
//! `:hwdb-fwrev`).

pub mod adaptive;
pub mod fit;
pub mod interval;
pub mod merge;
pub mod model;
pub mod plot;
pub mod report;
pub mod rules;
pub mod sel;
pub mod solve;
pub mod study;

use crate::bench::contract::api::{
    prop, Bench, BenchDesc, DocPage, FormatOpts, Shape, SpecError, Stored, ValueKind,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::bench::contract::headline::Row;
use crate::bench::hashd_sizing::AsUpstream;
use crate::bench::iocost_qos::{IoCostQosResult, QosRecord};
use crate::format::header::HeaderSysInfo;
use crate::spec::JobSpec;
use anyhow::Result;
use model::{IocostTuneRecord, IocostTuneResult};
use rules::QosRule;
use sel::DataSel;
use std::collections::BTreeSet;

pub struct IocostTune;

/// The iocost-qos run iocost-tune wants: fine-grained vrates, dithered.
pub const DFL_QOS_SPEC: &str = "iocost-qos:dither,vrate-max=125,vrate-intvs=25";

pub static DESC: BenchDesc = BenchDesc {
    kind: "iocost-tune",
    about: "Derive io.cost QoS solutions from iocost-qos results",
    hidden: false,
    incremental: true,
    runnable: true,
    runs_first: Some(DFL_QOS_SPEC),
    shape: Shape {
        props: &[
            prop(
                "scale-min",
                ValueKind::Frac,
                "lowest vrate solutions may pick, share of the model (1%)",
            ),
            prop(
                "scale-max",
                ValueKind::Frac,
                "highest vrate solutions may pick, share of the model (100%)",
            ),
        ],
        forward: &[],
        group_props: Some(&RULE_PROPS),
        open_keys: Some(open_key),
        format_props: &[
            prop(
                "high-level",
                ValueKind::Bool,
                "only the points, the base model and each solution's scale",
            ),
            prop(
                "hwdb",
                ValueKind::Bool,
                "the solutions as systemd hwdb lines for the device model",
            ),
            prop(
                "hwdb-fwrev",
                ValueKind::Bool,
                "the hwdb lines for the device model and its firmware revision",
            ),
            prop(
                "intervals",
                ValueKind::Bool,
                "also each solution's 90% intervals and whether it is unstable",
            ),
        ],
    },
    doc: Some(DocPage {
        title: "QoS solutions derived from iocost-qos results",
        text: include_str!("../../../benches-doc/iocost-tune.md"),
    }),
    system: None,
};

/// The iocost-tune properties: the vrate range solutions are searched in (`scale-min`,
/// `scale-max`, fractions of the model; 1 % to 100 %), extra series to collect (selector
/// names given bare, e.g. `isol-01`) and the rules (groups 2+).
#[derive(Debug, Clone, PartialEq)]
pub struct IocostTuneProps {
    /// Percent of the model.
    pub scale: (f64, f64),
    pub sels: BTreeSet<DataSel>,
    pub rules: Vec<QosRule>,
}

impl IocostTuneProps {
    pub fn read(spec: &JobSpec) -> Result<IocostTuneProps, SpecError> {
        let g = spec.group(0);
        let mut scale = solve::DFL_SCALE;
        let mut sels = BTreeSet::new();
        for (k, v) in g.props() {
            match k.as_str() {
                "scale-min" | "scale-max" => {
                    let f = crate::units::parse::parse_frac(v)
                        .map_err(|e| g.err(format!("{}: {}", k, e)))?;
                    if k == "scale-min" {
                        scale.0 = f * 100.0;
                    } else {
                        scale.1 = f * 100.0;
                    }
                }
                "id" | "passive" => {}
                k => {
                    let sel = DataSel::parse(k).map_err(|e| {
                        g.err(format!(
                            "{} (a first-group key is scale-min, scale-max or a data selector)",
                            e
                        ))
                    })?;
                    if !v.is_empty() {
                        return Err(
                            g.err(format!("data selector {} takes no value, not {:?}", k, v))
                        );
                    }
                    sels.insert(sel);
                }
            }
        }
        if !(scale.0 > 0.0 && scale.0 < scale.1) {
            return Err(g.err(format!(
                "scale-min={}% and scale-max={}% don't make a range (accepted: 0 < min < max)",
                scale.0, scale.1
            )));
        }
        let groups = spec.props.get(1..).unwrap_or(&[]);
        let rules = rules::rules(groups).map_err(|(i, e)| SpecError {
            group: i + 1,
            msg: e,
        })?;
        Ok(IocostTuneProps { scale, sels, rules })
    }
}

/// Rule groups: a name and one target (see [`rules`]); the latency targets (`rlat-P`,
/// `wlat-P`) are open keys.
const RULE_PROPS: [crate::bench::contract::api::PropDesc; 8] = [
    prop("name", ValueKind::Str, "the rule's name"),
    prop("vrate", ValueKind::Str, "target: a vrate range A-B"),
    prop(
        "rpct",
        ValueKind::Str,
        "with vrate: read latency percentile (0: none)",
    ),
    prop(
        "wpct",
        ValueKind::Str,
        "with vrate: write latency percentile (0: none)",
    ),
    prop("mof", ValueKind::Str, "target: mof=max"),
    prop("amof", ValueKind::Str, "target: amof=max or amof=max-vrate"),
    prop("amof-delta", ValueKind::Str, "target: amof-delta=min"),
    prop(
        "isolated-bandwidth",
        ValueKind::Bool,
        "target: isolated-bandwidth",
    ),
];

/// Data selectors in the first group, latency targets (`rlat-99=q1`) in rule groups.
fn open_key(group: usize, key: &str) -> bool {
    match (group, DataSel::parse(key)) {
        (0, Ok(_)) => true,
        (_, Ok(DataSel::RLat(..) | DataSel::WLat(..))) => group > 0,
        _ => false,
    }
}

/// The solutions' intervals (see [`interval`]) under the spec's rules and scale.
fn spreads_of(props: &IocostTuneProps, res: &IocostTuneResult) -> SpreadMap {
    interval::spreads(res, &props.rules, props.scale, interval::DFL_BOOT)
}

type SpreadMap = std::collections::BTreeMap<String, interval::SolutionSpread>;

/// A solution's vrate range (% of the measured model) and its intervals as summary cells.
fn interval_cells(s: &model::QosSolution, spread: Option<&interval::SolutionSpread>) -> Row {
    use crate::bench::contract::headline::num;
    use serde_json::{json, Value};
    let vrate = |v: f64| num(v * s.scale_factor);
    let b = |f: fn(&interval::SolutionSpread) -> Option<interval::Bounds>, hi: bool| {
        spread
            .and_then(f)
            .map_or(Value::Null, |b| num(if hi { b.hi } else { b.lo }))
    };
    vec![
        ("vrate_min", vrate(s.qos.min)),
        ("vrate_max", vrate(s.qos.max)),
        ("vrate_min_lo", b(|s| Some(s.vrate_min), false)),
        ("vrate_min_hi", b(|s| Some(s.vrate_min), true)),
        ("vrate_max_lo", b(|s| Some(s.vrate_max), false)),
        ("vrate_max_hi", b(|s| Some(s.vrate_max), true)),
        ("rlat_lo", b(|s| s.rlat, false)),
        ("rlat_hi", b(|s| s.rlat, true)),
        ("wlat_lo", b(|s| s.wlat, false)),
        ("wlat_hi", b(|s| s.wlat, true)),
        (
            "unstable",
            spread.map_or(Value::Null, |s| json!(s.unstable())),
        ),
    ]
}

impl Bench for IocostTune {
    type Props = IocostTuneProps;
    type Record = IocostTuneRecord;
    type Result = IocostTuneResult;
    const RESULT_KEYS: &'static [&'static str] = &["data"];
    const KEY_NUMBERS: &'static [&'static str] = &["amof", "isol", "rlat", "min"];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<IocostTuneProps, SpecError> {
        IocostTuneProps::read(spec)
    }

    /// Collects the series from the finished iocost-qos run before this job, whose sysinfo
    /// (host, device, model) the entry carries.
    fn run(&self, ctx: &mut RunCtx, props: &IocostTuneProps) -> Result<IocostTuneRecord> {
        let Some(qos) = ctx.done_entry("iocost-qos") else {
            crate::usage_bail!(
                "iocost-tune works on a finished iocost-qos run earlier in the result file; run \
                 `{}` first (e.g. `run {} iocost-tune`)",
                DFL_QOS_SPEC,
                DFL_QOS_SPEC
            );
        };
        let rec: QosRecord = crate::format::parse_record(qos)?
            .ok_or_else(|| anyhow::anyhow!("the iocost-qos entry has no record"))?;
        let res: IoCostQosResult = crate::format::parse_result(qos)?;
        if rec.runs.is_empty() {
            crate::usage_bail!("the iocost-qos entry has no configuration to tune from");
        }
        let sels = study::sels(&props.sels, &props.rules);
        let collected = study::collect(&rec, &res, &sels);
        let qos_props = qos.spec.props.clone();
        // The run's host and device; no hashd ran in this job (upstream leaves it out too).
        let mut sysinfo: serde_json::Value = serde_json::from_str(qos.sysinfo.get())?;
        if let Some(o) = sysinfo.as_object_mut() {
            o.insert("hashd".into(), serde_json::Value::Null);
        }
        let sysinfo = serde_json::value::to_raw_value(&sysinfo)?;
        log::info!(
            "iocost-tune: {} configurations of {} pinned to one vrate",
            collected
                .data
                .get(&DataSel::Mof)
                .map_or(0, |s| s.data.len()),
            crate::format::job_name(&qos.spec)
        );
        // Runs of this tool carry their options in sysinfo (`bench_args`); upstream's don't,
        // and they used no time-savers.
        let ours = serde_json::from_str::<serde_json::Value>(qos.sysinfo.get())
            .is_ok_and(|si| !si["bench_args"].is_null());
        let time_savers = match ours {
            true => crate::bench::iocost_qos::props::IocostQosProps::read(&qos.spec)
                .map(|p| p.time_savers().into_iter().map(String::from).collect())
                .unwrap_or_default(),
            false => Vec::new(),
        };
        ctx.forward_sysinfo(sysinfo);
        let dfl_qos = JobSpec::parse(DFL_QOS_SPEC)
            .map(|s| s.props == qos_props)
            .unwrap_or(false);
        Ok(IocostTuneRecord {
            qos_props,
            dfl_qos,
            collected: Some(collected),
            time_savers,
            upstream_model_jobs: rec.upstream_model_jobs,
            fio_model_engine: rec.fio_model_engine,
        })
    }

    /// The series `run` collected (upstream's records don't keep them: run it again).
    fn study(&self, _ctx: &StudyCtx, rec: &IocostTuneRecord) -> Result<IocostTuneResult> {
        rec.collected.clone().ok_or_else(|| {
            crate::error::UsageError::new(
                "this iocost-tune record has no collected series (upstream's records don't); \
                 `run iocost-tune` collects them again from the iocost-qos run",
            )
            .into()
        })
    }

    /// Merged per device model and firmware, as upstream.
    fn merging(&self) -> Option<crate::bench::merge::src::Merging> {
        Some(crate::bench::merge::src::Merging {
            by_storage_model: true,
            by_storage_fwrev: true,
        })
    }

    /// The iocost-qos properties behind the data, but how many vrates were measured
    /// (`vrate-intvs`, an adaptive grid's `auto-budget` and `auto-target`: runs with more
    /// configurations merge with fewer, an adaptive grid's with full ones), written as in a
    /// spec; then the time-savers the data was measured with, whether hashd made lean
    /// requests (this tool's runs without `storage-requests=upstream`), whether it kept them
    /// in flight its own way (without `storage-flow=upstream`), whether the footprint was
    /// found by our memory search (this tool's runs without `storage-search=upstream`),
    /// whether the base model came from our iocost-params jobs (this tool's runs on a model
    /// not measured with `jobs=upstream`) and whether our IO engine measured it (not
    /// `engine=fio`), each unless told to merge them with upstream-faithful runs.
    fn merge_classifier(
        &self,
        entry: &crate::result::Entry,
        opts: &crate::bench::merge::src::MergeOpts,
    ) -> Option<String> {
        let rec: IocostTuneRecord = crate::format::parse_record(entry).ok()??;
        let savers = rec.time_savers;
        let (upstream_jobs, fio_engine) = (rec.upstream_model_jobs, rec.fio_model_engine);
        let mut props = rec.qos_props;
        let mut up = AsUpstream::default();
        if let Some(g) = props.first_mut() {
            for k in ["vrate-intvs", "auto-budget", "auto-target"] {
                g.remove(k);
            }
            let mut upstream = |k: &str| g.remove(k).as_deref() == Some("upstream");
            up.requests = upstream("storage-requests");
            up.flow = upstream("storage-flow");
            up.search = upstream("storage-search");
        }
        // This tool's runs carry their options in sysinfo; upstream's hashd is upstream's.
        let ours = serde_json::from_str::<serde_json::Value>(entry.sysinfo.get())
            .is_ok_and(|si| !si["bench_args"].is_null());
        let groups: Vec<String> = props
            .iter()
            .map(|g| {
                g.iter()
                    .map(|(k, v)| {
                        if v.is_empty() {
                            k.clone()
                        } else {
                            format!("{}={}", k, v)
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        let mut c = groups.join(":");
        if !savers.is_empty() && !opts.merge_time_savers {
            c += &format!(" (time-savers: {})", savers.join(", "));
        }
        let differs: Vec<&str> = [
            (
                !up.requests && !opts.merge_lean_requests,
                "lean hashd requests",
            ),
            (!up.flow && !opts.merge_our_flow, "our request flow"),
            (!up.search && !opts.merge_our_search, "our memory search"),
            (!upstream_jobs && !opts.merge_our_jobs, "our io.cost jobs"),
            (!fio_engine && !opts.merge_our_engine, "our IO engine"),
        ]
        .into_iter()
        .filter_map(|(on, what)| (ours && on).then_some(what))
        .collect();
        if !differs.is_empty() {
            c += &format!(" ({})", differs.join(", "));
        }
        Some(c)
    }

    fn merge(
        &self,
        srcs: &mut [crate::bench::merge::src::MergeSrc],
    ) -> Result<crate::result::Entry> {
        merge::merge(srcs)
    }

    /// One record per solution: the rule, its scale, MOF and aMOF there, the model and QoS.
    fn headline(
        &self,
        stored: &Stored<Self>,
    ) -> Result<Vec<crate::bench::contract::headline::Row>> {
        use crate::bench::contract::headline::num;
        use serde_json::json;
        let res = &stored.result;
        let spreads = spreads_of(&stored.props()?, res);
        Ok(res
            .solutions
            .iter()
            .map(|(name, s)| {
                let mut row = vec![
                    ("solution", json!(name)),
                    ("scale", num(s.scale_factor)),
                    ("mof", num(s.mem_offload_factor)),
                    ("amof", num(s.adjusted_mem_offload_factor)),
                    ("amof_delta", num(s.adjusted_mem_offload_delta)),
                    ("isol", num(s.isol)),
                ];
                row.extend(crate::bench::contract::headline::model_qos_row(
                    &s.model, &s.qos,
                ));
                row.extend(interval_cells(s, spreads.get(name)));
                row
            })
            .collect())
    }

    /// One SVG per series and a page with them all and the solutions.
    fn plot(&self, stored: &Stored<Self>) -> Result<Vec<crate::bench::contract::api::PlotFile>> {
        let props = stored.props()?;
        let sys = HeaderSysInfo::parse(stored.entry)?;
        let device = sys
            .sysreqs_report
            .map(|r| r.scr_dev_model.trim().to_string())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "unknown device".into());
        let spreads = spreads_of(&props, &stored.result);
        plot::files(&stored.result, &props.rules, &spreads, &device)
    }

    /// Refits every series from its points and solves the rules again.
    fn solve(&self, props: &IocostTuneProps, res: IocostTuneResult) -> Result<IocostTuneResult> {
        Ok(solve::solve(res, &props.rules, props.scale))
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, opts: &FormatOpts) -> Result<()> {
        let res = &stored.result;
        let props = stored.props()?;
        let rules = &props.rules;
        let (hwdb, hwdb_fwrev) = (opts.flag("hwdb"), opts.flag("hwdb-fwrev"));
        if hwdb || hwdb_fwrev {
            let sys = HeaderSysInfo::parse(stored.entry)?;
            let rep = sys.sysreqs_report.unwrap_or_default();
            let fwrev = hwdb_fwrev.then_some(rep.scr_dev_fwrev.as_str());
            report::hwdb(out, res, &rep.scr_dev_model, fwrev);
            return Ok(());
        }
        if opts.flag("high-level") {
            report::high_level(out, res, rules);
            return Ok(());
        }
        if opts.full {
            report::graphs(out, res);
        }
        report::solutions(out, res, rules);
        report::remarks(out, res);
        out.push('\n');
        if opts.flag("intervals") {
            let spreads = spreads_of(&props, res);
            report::intervals(out, rules, &spreads, interval::configs(&res.data).len());
        }
        Ok(())
    }
}
