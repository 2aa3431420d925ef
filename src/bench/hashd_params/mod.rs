//! `hashd-params` (benches-doc/hashd-params.md): sizes hashd for this machine — the request rate
//! the CPUs sustain (`rps_max`, by CPU saturation unless given or faked) and the footprint the
//! memory and storage hold at that rate (`mem_frac` of `mem_size`) — and applies/commits the result
//! as the hashd parameters later benches run with.
//!
//! HashdParamsRecord and result are bench.json's hashd knobs with upstream's field names; the record also
//! keeps the memory profile and the sizing run (every probe, timings, thresholds) as our own
//! additions.

use crate::bench::contract::api::{
    prop, Apply, ApplyCommit, Bench, BenchDesc, DocPage, FormatOpts, Shape, SpecError, Stored,
    ValueKind, APPLY_COMMIT,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::bench::contract::needs;
use crate::bench::hashd_sizing::{
    self, dfl_rps_max, positive_knob, AsUpstream, HashdBenchCfg, HASHD_KNOBS, SEARCH,
};
use crate::result::sysinfo::MemProfile;
use crate::spec::JobSpec;
use crate::system::bench_json::HashdKnobs;
use crate::units::{format_duration, format_size};
use crate::util::now;
use crate::workload::hashd::sizing::{SizingResult, Tick, Watch};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

pub struct HashdParams;

const WHAT: &str = "hashd-params";

pub static DESC: BenchDesc = BenchDesc {
    kind: WHAT,
    about: "Benchmark the parameters of the hashd workload",
    hidden: false,
    incremental: false,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &[
            APPLY_COMMIT[0],
            APPLY_COMMIT[1],
            prop(
                "fake-cpu-load",
                ValueKind::Bool,
                "simulate CPU load instead of hashing",
            ),
            HASHD_KNOBS[0],
            prop(
                "mem-frac",
                ValueKind::Frac,
                "footprint fraction to use instead of searching for it",
            ),
            HASHD_KNOBS[1],
            HASHD_KNOBS[2],
            HASHD_KNOBS[3],
            HASHD_KNOBS[4],
            HASHD_KNOBS[5],
            SEARCH,
        ],
        forward: &[],
        group_props: None,
        open_keys: None,
        format_props: &[],
    },
    doc: Some(DocPage {
        title: "Parameters of the hashd workload",
        text: include_str!("../../../benches-doc/hashd-params.md"),
    }),
    system: Some(&needs::MEM),
};

/// The hashd-params properties (benches-doc/hashd-params.md).
#[derive(Debug, Clone, PartialEq)]
pub struct HashdParamsProps {
    pub apply: bool,
    pub commit: bool,
    pub fake_cpu_load: bool,
    pub rps_max: Option<u32>,
    /// Given footprint fraction: no memory search.
    pub mem_frac: Option<f64>,
    pub hash_size: Option<u64>,
    pub chunk_pages: Option<u32>,
    pub log_bps: Option<u64>,
    /// `requests`, `flow` and `search`: which of hashd's behaviours are upstream's.
    pub upstream: AsUpstream,
}

impl HashdParamsProps {
    /// `apply` and `commit` default to true. `apply=false` alone turns both off (a commit
    /// implies an apply); `apply=false,commit` contradicts itself and is refused. A hashd knob
    /// given as 0 is refused.
    pub fn check(spec: &JobSpec) -> Result<HashdParamsProps, SpecError> {
        let g = spec.group(0);
        let positive = |k: &str, kind: ValueKind| {
            let otherwise = if k == "rps-max" {
                "measure it"
            } else {
                "use the default"
            };
            positive_knob(&g, k, kind, otherwise)
        };
        let ApplyCommit { apply, commit } = ApplyCommit::check(&g)?;
        let clamp = |v: u64| v.min(u32::MAX as u64) as u32;
        Ok(HashdParamsProps {
            apply,
            commit,
            fake_cpu_load: g.flag("fake-cpu-load")?.unwrap_or(false),
            rps_max: positive("rps-max", ValueKind::Int)?.map(clamp),
            mem_frac: mem_frac(&g)?,
            hash_size: positive("hash-size", ValueKind::Size)?,
            chunk_pages: positive("chunk-pages", ValueKind::Int)?.map(clamp),
            log_bps: g.u64("log-bps", ValueKind::Size)?,
            upstream: AsUpstream::read(&g, "")?,
        })
    }

    /// rps_max for the bench: the property; with fake CPU load the storage bench's rate for
    /// the memory share (benches-doc/hashd-params.md); otherwise `None`, measured by CPU
    /// saturation.
    pub fn bench_rps_max(&self, share: u64) -> Option<u32> {
        match (self.rps_max, self.fake_cpu_load) {
            (Some(r), _) => Some(r),
            (None, true) => Some(dfl_rps_max(share)),
            (None, false) => None,
        }
    }

    /// The sizing run for memory share `share`. Unlike upstream, the real-CPU bench sizes the
    /// footprint against 4 × the share too (upstream: 4 × the machine's memory), so both
    /// modes measure the same emulated machine.
    pub fn bench_cfg(&self, share: u64, quick: bool) -> HashdBenchCfg {
        HashdBenchCfg {
            size: 4 * share,
            rps_max: self.bench_rps_max(share),
            fake_cpu: self.fake_cpu_load,
            hash_size: self.hash_size,
            chunk_pages: self.chunk_pages,
            log_bps: self.log_bps,
            upstream: self.upstream,
            preload: share / 2,
            total_memory: Some(share),
            quick,
            mem_prior: Default::default(),
            mem_frac: self.mem_frac,
        }
    }
}

/// `mem-frac` is a share of hashd's 100 % footprint: above 0, at most 1.
fn mem_frac(g: &crate::spec::Group) -> Result<Option<f64>, SpecError> {
    match g.f64("mem-frac", ValueKind::Frac)? {
        Some(f) if !(f > 0.0 && f <= 1.0) => Err(g.err(format!(
            "mem-frac={} is not a footprint fraction: give one above 0 and at most 1 \
             (e.g. 0.3 or 30%), or leave it out to search for it",
            g.text("mem-frac").unwrap_or_default()
        ))),
        f => Ok(f),
    }
}

/// The record: bench.json's hashd knobs with upstream's field names at the top level, plus
/// our additions — when it ran, the memory profile, and the sizing run behind the knobs
/// (upstream's records have the knobs alone).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HashdParamsRecord {
    #[serde(flatten)]
    pub knobs: HashdKnobs,
    #[serde(default)]
    pub period: (u64, u64),
    #[serde(default)]
    pub mem: MemProfile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizing: Option<SizingResult>,
}

/// The stored result: the knobs (ours), or upstream 2.2's `true`, whose knobs are in the record
/// alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum HashdParamsResult {
    Knobs(HashdKnobs),
    InRecord(bool),
}

/// The knobs of a stored entry, wherever its layout keeps them.
pub fn stored_knobs(stored: &Stored<HashdParams>) -> Result<HashdKnobs> {
    match &stored.result {
        HashdParamsResult::Knobs(k) => Ok(k.clone()),
        HashdParamsResult::InRecord(_) => Ok(stored
            .record()?
            .with_context(|| {
                format!(
                    "{}: the result keeps hashd's parameters in the record (upstream's layout), \
                     and there is no record",
                    crate::format::job_name(&stored.entry.spec)
                )
            })?
            .knobs),
    }
}

/// The once-a-second status of the probe running: throughput and latency.
fn watch() -> Watch {
    Box::new(move |t: &Tick| {
        t.show("");
        Ok(())
    })
}

impl Bench for HashdParams {
    type Props = HashdParamsProps;
    type Record = HashdParamsRecord;
    /// The knobs (upstream's own results say `true` and keep them in the record).
    type Result = HashdParamsResult;
    const RESULT_KEYS: &'static [&'static str] = &["hash_size", "rps_max"];
    const KEY_NUMBERS: &'static [&'static str] = &["rps_max", "mem_actual", "hash_size"];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<HashdParamsProps, SpecError> {
        HashdParamsProps::check(spec)
    }

    fn run(&self, ctx: &mut RunCtx, props: &HashdParamsProps) -> Result<HashdParamsRecord> {
        let quick = ctx.quick();
        let dir = ctx.dir().to_path_buf();
        let start = now();
        let (mut session, reporter) = ctx.host().context("hashd-params needs the host session")?;
        hashd_sizing::ensure_mem_avail(&mut session)?;
        let mem = session
            .mem()
            .cloned()
            .context("hashd-params runs under the memory profile")?;
        let cfg = props.bench_cfg(mem.share, quick);
        log::info!(
            "hashd-params: sizing hashd for {} of memory (footprint up to {}), rps_max {}, \
             mem_frac {}{}",
            format_size(mem.share as f64),
            format_size(cfg.size as f64),
            cfg.rps_max
                .map_or("by CPU saturation".to_string(), |r| r.to_string()),
            cfg.mem_frac
                .map_or("by memory search".to_string(), |f| format!("{:.3}", f)),
            if cfg.fake_cpu { ", fake CPU load" } else { "" }
        );
        if let Some(knobs) = hashd_sizing::given_knobs(&cfg) {
            // Nothing to measure: rps_max and mem_frac are both given.
            log::info!("hashd-params: rps_max and mem_frac are given; nothing to measure");
            log::info!("hashd-params: {}", result_line(&knobs));
            return Ok(HashdParamsRecord {
                knobs,
                period: (start, now()),
                mem,
                sizing: None,
            });
        }
        session.set_balloon(crate::system::mem::hashd_balloon_size(&mem))?;
        crate::logging::progress::phase("sizing hashd");
        let run = hashd_sizing::run_sizing(&mut session, reporter, &dir, &cfg, Some(watch()))?;
        log::info!("hashd-params: {}", result_line(&run.knobs));
        Ok(HashdParamsRecord {
            knobs: run.knobs,
            period: (start, now()),
            mem,
            sizing: Some(run.sizing),
        })
    }

    fn applies(&self, props: &HashdParamsProps, rec: &HashdParamsRecord) -> Result<Option<Apply>> {
        if !props.apply {
            return Ok(None);
        }
        let knobs = rec.knobs.clone();
        if knobs.hash_size == 0 || knobs.rps_max == 0 || knobs.mem_size == 0 {
            anyhow::bail!(
                "the hashd-params record holds no hashd parameters: {:?}",
                knobs
            );
        }
        Ok(Some(Apply::Hashd {
            knobs,
            commit: props.commit,
        }))
    }

    fn study(&self, _ctx: &StudyCtx, rec: &HashdParamsRecord) -> Result<HashdParamsResult> {
        Ok(HashdParamsResult::Knobs(rec.knobs.clone()))
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, opts: &FormatOpts) -> Result<()> {
        format(out, stored, opts)?;
        Ok(())
    }

    /// hashd's parameters: what the result line shows, sizes in bytes.
    fn headline(
        &self,
        stored: &Stored<Self>,
    ) -> Result<Vec<crate::bench::contract::headline::Row>> {
        use serde_json::json;
        let k = &stored_knobs(stored)?;
        Ok(vec![vec![
            ("hash_size", json!(k.hash_size)),
            ("rps_max", json!(k.rps_max)),
            ("mem_actual", json!(mem_actual(k))),
            ("chunk_pages", json!(k.chunk_pages)),
            ("fake_cpu_load", json!(k.fake_cpu_load)),
        ]])
    }
}

/// `ceil(mem_size × mem_frac)`: the footprint hashd runs with.
pub fn mem_actual(k: &HashdKnobs) -> f64 {
    (k.mem_size as f64 * k.mem_frac).ceil()
}

/// `Result: hash_size=… rps_max=… mem_actual=… chunk_pages=…[ fake_cpu_load]`, and ours
/// ` upstream_requests` and ` upstream_flow` when hashd made its requests and kept them in flight
/// as upstream's does.
pub fn result_line(k: &HashdKnobs) -> String {
    let ours = |on: bool, word: &'static str| if on { word } else { "" };
    format!(
        "Result: hash_size={} rps_max={} mem_actual={} chunk_pages={}{}{}{}",
        format_size(k.hash_size as f64),
        k.rps_max,
        format_size(mem_actual(k)),
        k.chunk_pages,
        if k.fake_cpu_load {
            " fake_cpu_load"
        } else {
            ""
        },
        ours(k.upstream_requests, " upstream_requests"),
        ours(k.upstream_flow, " upstream_flow"),
    )
}

/// A hashd-params entry: the result line; `format` adds how the sizing went when the record
/// has it (ours; upstream records have only the knobs).
pub fn format(out: &mut String, stored: &Stored<HashdParams>, opts: &FormatOpts) -> Result<()> {
    let knobs = &stored_knobs(stored)?;
    let _ = writeln!(out, "{}", result_line(knobs));
    if opts.full {
        let extra = stored.record()?.unwrap_or_default();
        if let Some(s) = &extra.sizing {
            let rps = if s.rps_max_measured {
                // No round at the latency target: rps_max is where the last round stopped
                // (`doc fidelity`), not a saturated CPU's rate. Records before `pass` say nothing.
                let unsettled = !s.cpu_history.is_empty()
                    && s.cpu_history.iter().all(|r| r.pass == Some(false));
                format!(
                    "measured ({} probes{})",
                    s.cpu_history.len(),
                    if unsettled {
                        ", none at the latency target: the last one's rate"
                    } else {
                        ""
                    }
                )
            } else {
                "given".to_string()
            };
            let size = if s.size > 0 {
                s.size as f64
            } else {
                knobs.mem_size as f64
            };
            let _ = writeln!(
                out,
                "\nSizing: rps_max={} mem_frac={:.3} of size={} ({} probes) time={}{}",
                rps,
                knobs.mem_frac,
                format_size(size),
                s.mem_history.len(),
                format_duration(s.measured_secs as f64),
                if s.quick { " quick" } else { "" }
            );
        }
        if extra.mem.profile > 0 {
            let _ = writeln!(
                out,
                "Memory: profile={} share={} target={}",
                extra.mem.profile,
                format_size(extra.mem.share as f64),
                format_size(extra.mem.target as f64)
            );
        }
    }
    out.push('\n');
    Ok(())
}

#[cfg(test)]
mod tests;
