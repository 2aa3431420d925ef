//! `io`: one job of our IO engine (`workload::ioengine`) — `io:rw=randread,bs=4k,qd=32,dur=30s`
//! — or the jobs of a TOML job file (`io:jobs=FILE`, `jobfile.rs`), on a test file under
//! `<dir>/scratch` (written once with random data, then reused) or on the file or block device
//! `target=` names. The record is the engine's result document per job (`record.rs`); the
//! report is its fio-style text.

use crate::bench::contract::api::{
    concat_props, prop, Bench, BenchDesc, DocPage, FormatOpts, PropDesc, Shape, SpecError, Stored,
    ValueKind,
};
use crate::bench::contract::ctx::{RunCtx, StudyCtx};
use crate::spec::JobSpec;
use crate::workload::ioengine::result::{text, IoResult};
use anyhow::Result;

pub mod jobfile;
mod props;
mod record;
mod run;

pub use props::{
    job_props, read_props, IoProps, DFL_FILE_SIZE, DFL_SS_WINDOW_S, JOB_PROPS, RATE_PROPS,
};
pub use record::{IoRecord, NamedIo};
pub use run::prepare_target;

pub struct Io;

const JOBS_PROP: [PropDesc; 1] = [prop(
    "jobs",
    ValueKind::Str,
    "run the jobs of this TOML file (`run --generate` writes one); the other properties override the file's",
)];

const ONE_JOB_PROPS: [PropDesc; 31] = concat_props(&JOB_PROPS, &RATE_PROPS);
static PROPS: [PropDesc; 32] = concat_props(&ONE_JOB_PROPS, &JOBS_PROP);

pub static DESC: BenchDesc = BenchDesc {
    kind: "io",
    about: "IO jobs of the built-in engine, one or a job file's (fio-style latency and IOPS)",
    hidden: false,
    incremental: false,
    runnable: true,
    runs_first: None,
    shape: Shape {
        props: &PROPS,
        forward: &[],
        group_props: None,
        open_keys: None,
        format_props: &[],
    },
    doc: Some(DocPage {
        title: "The built-in IO engine",
        text: include_str!("../../../benches-doc/io.md"),
    }),
    system: None,
};

/// What an `io` entry runs: a spec's one job, or the jobs of the file `jobs=` names.
#[derive(Debug, Clone)]
pub struct IoJobs {
    pub jobs: Vec<jobfile::FileJob>,
    pub from_file: bool,
    /// The SHA-1 of the job file's text: part of what makes a stored run this job's.
    pub file_sha1: Option<String>,
}

impl Bench for Io {
    type Props = IoJobs;
    type Record = IoRecord;
    /// The record, once its version is known to be readable.
    type Result = IoRecord;
    /// One job's result is under `io`, a job file's under `jobs`.
    const RESULT_KEYS: &'static [&'static str] = &["period", "testfile_written"];
    const KEY_NUMBERS: &'static [&'static str] = &[
        "read_iops",
        "read_bps",
        "read_clat_p99_us",
        "write_iops",
        "write_bps",
        "write_clat_p99_us",
        "cpu_ns_per_io",
    ];

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, spec: &JobSpec) -> Result<IoJobs, SpecError> {
        let g = spec.group(0);
        let Some(path) = g.text("jobs") else {
            return Ok(IoJobs {
                jobs: vec![jobfile::FileJob {
                    name: "io".into(),
                    together: false,
                    props: job_props(spec)?,
                }],
                from_file: false,
                file_sha1: None,
            });
        };
        let mut cli = spec.props.first().cloned().unwrap_or_default();
        cli.remove("jobs");
        let (jobs, sha1) = jobfile::read(std::path::Path::new(path), &cli).map_err(|e| g.err(e))?;
        Ok(IoJobs {
            jobs,
            from_file: true,
            file_sha1: Some(sha1),
        })
    }

    fn run(&self, ctx: &mut RunCtx, props: &IoJobs) -> Result<IoRecord> {
        run::run_jobs(ctx, &props.jobs, props.from_file, props.file_sha1.clone())
    }

    /// A job file's run is this job's only if the file is as it was then (a record from
    /// before the digest was kept can't tell, and is run again as a new entry).
    fn answers(&self, props: &IoJobs, record: &serde_json::value::RawValue) -> bool {
        #[derive(serde::Deserialize)]
        struct Digest {
            jobs_sha1: Option<String>,
        }
        let stored = serde_json::from_str::<Digest>(record.get()).ok();
        !props.from_file || stored.is_some_and(|d| d.jobs_sha1 == props.file_sha1)
    }

    fn study(&self, _ctx: &StudyCtx, rec: &IoRecord) -> Result<IoRecord> {
        rec.check()?;
        Ok(rec.clone())
    }

    fn format(&self, out: &mut String, stored: &Stored<Self>, _opts: &FormatOpts) -> Result<()> {
        for (i, (named, io)) in stored.result.each().into_iter().enumerate() {
            if let Some(n) = named {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str(&format!(
                    "job {}{}:\n",
                    n.name,
                    if n.together {
                        " (with the job before it)"
                    } else {
                        ""
                    }
                ));
            }
            out.push_str(&text(io));
        }
        Ok(())
    }

    /// Per job, per direction: IOPS, bandwidth and completion-latency percentiles in µs; a job
    /// file's rows lead with the job's name.
    fn headline(
        &self,
        stored: &Stored<Self>,
    ) -> Result<Vec<crate::bench::contract::headline::Row>> {
        Ok(stored
            .result
            .each()
            .into_iter()
            .map(|(named, io)| {
                let mut row = vec![];
                if let Some(n) = named {
                    row.push(("job", serde_json::json!(n.name)));
                }
                row.extend(headline_row(io));
                row
            })
            .collect())
    }
}

/// A direction's headline keys, in the order of `headline_row`'s values.
const READ_KEYS: [&str; 9] = [
    "read_iops",
    "read_bps",
    "read_clat_p50_us",
    "read_clat_p99_us",
    "read_lat_mean_us",
    "read_slat_mean_us",
    "read_clat_mean_us",
    "read_dev_mean_us",
    "read_dev_alloc_mean_us",
];
const WRITE_KEYS: [&str; 9] = [
    "write_iops",
    "write_bps",
    "write_clat_p50_us",
    "write_clat_p99_us",
    "write_lat_mean_us",
    "write_slat_mean_us",
    "write_clat_mean_us",
    "write_dev_mean_us",
    "write_dev_alloc_mean_us",
];

/// One job's headline numbers.
fn headline_row(io: &IoResult) -> crate::bench::contract::headline::Row {
    use serde_json::json;
    // From the buckets, whatever percentiles the job listed.
    let p = |d: &crate::workload::ioengine::stats::DirOut, pct: f64| {
        crate::workload::ioengine::hist::LatHist::from_out(&d.clat)
            .ok()
            .filter(|h| h.count() > 0)
            .map_or(serde_json::Value::Null, |h| {
                json!(h.percentile(pct) as f64 / 1e3)
            })
    };
    // Means in µs; `null` without IOs in that direction, as the percentiles.
    let mean = |d: &crate::workload::ioengine::stats::DirOut, ns: f64| {
        if d.ios == 0 {
            serde_json::Value::Null
        } else {
            json!(ns / 1e3)
        }
    };
    let mut row = vec![
        ("engine", json!(io.engine)),
        ("rw", json!(io.job.rw_name())),
        ("bs", json!(io.job.bs)),
        ("qd", json!(io.job.qd)),
        ("workers", json!(io.job.workers)),
    ];
    let dev = io.dev.as_ref();
    let kernel = dev.and_then(|d| d.kernel);
    for (keys, d, traced, counted) in [
        (
            &READ_KEYS,
            &io.read,
            dev.map(|d| d.read),
            kernel.map(|k| k.read),
        ),
        (
            &WRITE_KEYS,
            &io.write,
            dev.map(|d| d.write),
            kernel.map(|k| k.write),
        ),
    ] {
        // The disk's time: traced (dispatch to completion), and the kernel's count (from
        // allocation); `null` without `devtime`, without a trace, or without IOs of ours or
        // the disk's in that direction.
        let ours = d.ios > 0;
        let traced = traced
            .filter(|t| ours && t.n > 0)
            .map_or(serde_json::Value::Null, |t| json!(t.mean_ns / 1e3));
        let counted = counted
            .filter(|k| ours && k.n > 0)
            .map_or(serde_json::Value::Null, |k| json!(k.mean_ns / 1e3));
        let values = [
            json!(d.iops),
            json!(d.bw_bytes),
            p(d, 50.0),
            p(d, 99.0),
            mean(d, d.lat.mean_ns),
            mean(d, d.slat.mean_ns),
            mean(d, d.clat.mean_ns),
            traced,
            counted,
        ];
        row.extend(keys.iter().copied().zip(values));
    }
    row.push(("cpu_ns_per_io", json!(io.cpu_per_io())));
    if io.workers.len() > 1 {
        let per: Vec<serde_json::Value> = io
            .workers
            .iter()
            .map(|w| {
                let mut m = serde_json::Map::new();
                m.insert("worker".into(), json!(w.index));
                for (name, d) in [("read", &w.read), ("write", &w.write)] {
                    m.insert(format!("{}_iops", name), json!(d.iops));
                    m.insert(format!("{}_bps", name), json!(d.bw_bytes));
                    m.insert(format!("{}_clat_p50_us", name), p(d, 50.0));
                    m.insert(format!("{}_clat_p99_us", name), p(d, 99.0));
                    m.insert(format!("{}_lat_mean_us", name), mean(d, d.lat.mean_ns));
                    m.insert(format!("{}_slat_mean_us", name), mean(d, d.slat.mean_ns));
                    m.insert(format!("{}_clat_mean_us", name), mean(d, d.clat.mean_ns));
                }
                let ios = w.read.ios + w.write.ios;
                let cpu = (w.cpu.usr_ns + w.cpu.sys_ns) as f64 / ios.max(1) as f64;
                m.insert("cpu_ns_per_io".into(), json!(cpu));
                serde_json::Value::Object(m)
            })
            .collect();
        row.push(("per_worker", json!(per)));
    }
    row
}
