use super::*;
use crate::system::bench_json::{read_knobs, HashdKnobs};
use crate::system::session::testhost::{host, needs, opts};

fn knobs() -> HashdKnobs {
    HashdKnobs {
        hash_size: 1258291,
        rps_max: 167,
        mem_size: 4 << 30,
        mem_frac: 0.375,
        chunk_pages: 25,
        fake_cpu_load: true,
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
    });
    let cfg = RunConfig {
        result: path,
        dir: hp.path("work"),
        bench_args: None,
        system: Some(o),
        quick: false,
    };
    let bench = bench::find("hashd-params").unwrap();
    let sysinfo = to_raw(&serde_json::json!({})).unwrap();
    let file = run_job(
        &cfg,
        &Mode::Run,
        file,
        spec,
        bench,
        idx,
        &hp.path("work/report.d"),
        &sysinfo,
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
