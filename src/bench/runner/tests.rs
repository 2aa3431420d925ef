use super::*;
use crate::system::bench_json::{read_knobs, HashdKnobs};
use crate::system::session::testhost::{host, needs, opts};
use crate::system::sysreqs::Enforce;

fn knobs() -> HashdKnobs {
    HashdKnobs {
        hash_size: 1258291,
        rps_max: 167,
        mem_size: 4 << 30,
        mem_frac: 0.375,
        chunk_pages: 25,
        fake_cpu_load: true,
        upstream_requests: false,
        upstream_flow: false,
    }
}

/// `run` of `spec` against a result file holding a finished hashd-params entry, with the
/// fake host's session when `with_session`; returns the host paths.
fn rerun_finished_hashd_params(spec: &str, with_session: bool) -> (tempfile::TempDir, HostPaths) {
    let (t, hp) = host();
    let o = opts(&hp);
    let session = Session::start(hp.clone(), &o, &needs()).unwrap();
    let mut host = RunHost {
        reporter: None,
        session,
        _dir_lock: None,
    };
    host.session.prepare_job(Enforce::all(), false).unwrap();
    let path = hp.path("work/r.json");
    let mut file = ResultFile::load(&path).unwrap();
    let raw = to_raw(&knobs()).unwrap();
    let spec = JobSpec::parse(spec).unwrap();
    let idx = file.push(Entry {
        spec: spec.clone(),
        period: (1700000000, 1700001200),
        sysinfo: to_raw(&serde_json::json!({})).unwrap(),
        record: Some(raw.clone()),
        result: Some(raw),
        incomplete: false,
        unknown: Default::default(),
    });
    let cfg = RunConfig {
        result: path,
        dir: hp.path("work"),
        bench_args: None,
        system: Some(o),
        quick: false,
    };
    let job = bench::validate_run(&spec).unwrap();
    let inv = Invocation {
        cfg: &cfg,
        mode: &Mode::Run,
        reports_dir: hp.path("work/report.d"),
        sysinfo: to_raw(&serde_json::json!({})).unwrap(),
    };
    run_job(
        &inv,
        &mut file,
        Job { spec, job, idx },
        with_session.then_some(&mut host),
    )
    .unwrap();
    // Reused as it was.
    assert_eq!(
        file.entries[idx].record.as_ref().unwrap().get(),
        to_raw(&knobs()).unwrap().get()
    );
    host.finish().unwrap();
    (t, hp)
}

#[test]
fn a_reused_record_applies_its_parameters_again() {
    let (_t, hp) = rerun_finished_hashd_params("hashd-params", true);
    let rb = read_knobs(&hp.path("work/rb-bench.json")).unwrap().unwrap();
    assert_eq!((rb.hashd.clone(), rb.hashd_seq), (knobs(), 1));
    // hashd-params commits by default.
    let stored = read_knobs(&hp.path("work/bench.json")).unwrap().unwrap();
    assert_eq!((stored.hashd, stored.hashd_seq), (knobs(), 1));

    let (_t, hp) = rerun_finished_hashd_params("hashd-params:commit=false", true);
    let rb = read_knobs(&hp.path("work/rb-bench.json")).unwrap().unwrap();
    assert_eq!(rb.hashd, knobs());
    assert!(!hp.path("work/bench.json").exists());

    let (_t, hp) = rerun_finished_hashd_params("hashd-params:apply=false", true);
    let rb = read_knobs(&hp.path("work/rb-bench.json")).unwrap().unwrap();
    assert_eq!(rb.hashd_seq, 0);
    assert!(!hp.path("work/bench.json").exists());

    // Without a session (no job of the run touches the host) nothing is written.
    let (_t, hp) = rerun_finished_hashd_params("hashd-params", false);
    let rb = read_knobs(&hp.path("work/rb-bench.json")).unwrap().unwrap();
    assert_eq!(rb.hashd_seq, 0);
    assert!(!hp.path("work/bench.json").exists());
}

/// A job's context over entry `idx` of `file`, with `prev` as its earlier record, not touching
/// the host.
fn ctx_of<'a>(
    spec: JobSpec,
    prev: serde_json::Value,
    dir: &std::path::Path,
    file: &'a mut ResultFile,
    idx: usize,
) -> RunCtx<'a> {
    RunCtx::new(JobStart {
        spec,
        prev_record: Some(to_raw(&prev).unwrap()),
        dir: dir.to_path_buf(),
        file,
        idx,
        period_start: 1,
        sysinfo: SysinfoSrc::Fixed(to_raw(&serde_json::json!({})).unwrap()),
        quick: false,
    })
}

#[test]
fn a_nested_sub_bench_checkpoints_into_the_jobs_record() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("r.json");
    let mut file = ResultFile::load(&path).unwrap();
    let spec = JobSpec::parse("iocost-qos").unwrap();
    let empty = to_raw(&serde_json::json!({})).unwrap();
    let idx = file.push(Entry {
        spec: spec.clone(),
        period: (1, 2),
        sysinfo: empty.clone(),
        record: None,
        result: None,
        incomplete: true,
        unknown: Default::default(),
    });
    let outer_prev = serde_json::json!({"outer": true});
    let mut ctx = ctx_of(spec, outer_prev, t.path(), &mut file, idx);
    let outer = serde_json::json!({"base": 1, "inc_runs": [{"done": true}, {"stor": null}]});
    let sub_prev = to_raw(&serde_json::json!({"loops": [1]})).unwrap();
    let seen = ctx
        .nested(outer.clone(), "/inc_runs/1/stor", Some(sub_prev), |c| {
            let prev = c.prev_record::<serde_json::Value>();
            c.checkpoint(&serde_json::json!({"loops": [1, 2]}))?;
            Ok(prev)
        })
        .unwrap();
    assert_eq!(seen, Some(serde_json::json!({"loops": [1]})));
    // The job's own previous record is back, and the file holds the job's record with the
    // sub-bench's checkpoint in its place.
    let back: serde_json::Value = ctx.prev_record().unwrap();
    assert_eq!(back, serde_json::json!({"outer": true}));
    let saved: serde_json::Value = serde_json::from_str(
        crate::result::load_entries(&path).unwrap()[0]
            .record
            .as_ref()
            .unwrap()
            .get(),
    )
    .unwrap();
    assert_eq!(
        saved,
        serde_json::json!({"base": 1, "inc_runs": [{"done": true}, {"stor": {"loops": [1, 2]}}]})
    );
    // A place that isn't in the record is refused up front.
    assert!(ctx
        .nested(outer, "/inc_runs/5/stor", None, |_| Ok(()))
        .is_err());
}

/// Every bench reads its earlier record through one accessor: typed, and a record that doesn't
/// read as the bench's is the same as none (the job starts over, and says so).
#[test]
fn an_earlier_record_reads_typed_or_not_at_all() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Rec {
        loops: Vec<u32>,
    }
    let t = tempfile::tempdir().unwrap();
    let mut file = ResultFile::load(&t.path().join("r.json")).unwrap();
    let spec = JobSpec::parse("storage").unwrap();
    let idx = file.push(Entry::placeholder(spec.clone()));
    let dir = std::path::Path::new("/nonexistent");
    let ctx = ctx_of(
        spec.clone(),
        serde_json::json!({"loops": [1, 2]}),
        dir,
        &mut file,
        idx,
    );
    assert_eq!(ctx.prev_record::<Rec>(), Some(Rec { loops: vec![1, 2] }));
    let ctx = ctx_of(
        spec,
        serde_json::json!({"loops": "three"}),
        dir,
        &mut file,
        idx,
    );
    assert_eq!(ctx.prev_record::<Rec>(), None);
}

fn kinds_to_run(specs: &[&str], stored: &[(&str, bool)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut file = ResultFile::load(&dir.path().join("r.json")).unwrap();
    for (spec, finished) in stored {
        let raw = to_raw(&serde_json::json!({})).unwrap();
        file.push(Entry {
            spec: JobSpec::parse(spec).unwrap(),
            period: (1700000000, 1700001200),
            sysinfo: raw.clone(),
            record: Some(raw.clone()),
            result: finished.then_some(raw),
            incomplete: !finished,
            unknown: Default::default(),
        });
    }
    let jobs = specs
        .iter()
        .map(|s| {
            let spec = JobSpec::parse(s).unwrap();
            let job = bench::validate_run(&spec).unwrap();
            (spec, job)
        })
        .collect();
    with_first_runs(jobs, &file)
        .unwrap()
        .iter()
        .map(|(s, _)| s.canonical())
        .collect()
}

#[test]
fn iocost_tune_without_an_iocost_qos_run_gets_upstreams_first() {
    let dfl = JobSpec::parse(crate::bench::iocost_tune::DFL_QOS_SPEC)
        .unwrap()
        .canonical();
    // Nothing to tune from: the default iocost-qos goes first, as its own job.
    assert_eq!(kinds_to_run(&["iocost-tune"], &[]), [&dfl, "iocost-tune"]);
    // An unfinished one in the file is no run to tune from either (the inserted job resumes
    // it, iocost-qos being incremental).
    assert_eq!(
        kinds_to_run(&["iocost-tune"], &[("iocost-qos:vrate=50", false)]),
        [&dfl, "iocost-tune"]
    );
    // A finished one in the file, or one earlier on the command line, is what it tunes from.
    assert_eq!(
        kinds_to_run(&["iocost-tune"], &[("iocost-qos:vrate=50", true)]),
        ["iocost-tune"]
    );
    let qos = JobSpec::parse("iocost-qos::vrate=50").unwrap().canonical();
    assert_eq!(
        kinds_to_run(&["iocost-qos::vrate=50", "iocost-tune"], &[]),
        [&qos, "iocost-tune"]
    );
    // Other benches are left alone.
    assert_eq!(kinds_to_run(&["storage"], &[]), ["storage"]);
}

/// A job's earlier result is read only from a finished entry: a checkpoint's is stale.
#[test]
fn an_earlier_result_reads_only_from_a_finished_entry() {
    let t = tempfile::tempdir().unwrap();
    let mut file = ResultFile::load(&t.path().join("r.json")).unwrap();
    let spec = JobSpec::parse("iocost-qos").unwrap();
    let idx = file.push(Entry {
        result: Some(to_raw(&serde_json::json!({"runs": [1]})).unwrap()),
        incomplete: false,
        ..Entry::placeholder(spec.clone())
    });
    let dir = std::path::Path::new("/nonexistent");
    let prev = serde_json::json!({"runs": []});
    let ctx = ctx_of(spec.clone(), prev.clone(), dir, &mut file, idx);
    let res: Option<serde_json::Value> = ctx.prev_result();
    assert_eq!(res, Some(serde_json::json!({"runs": [1]})));
    file.entries[idx].incomplete = true;
    let ctx = ctx_of(spec, prev, dir, &mut file, idx);
    assert_eq!(ctx.prev_result::<serde_json::Value>(), None);
}
