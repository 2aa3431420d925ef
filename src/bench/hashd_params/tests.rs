use super::*;
use crate::result::Entry;

fn props(spec: &str) -> Result<HashdParamsProps> {
    let spec = JobSpec::parse(spec).unwrap();
    HashdParamsProps::check(&spec).map_err(|e| spec.error(e).into())
}

#[test]
fn mem_frac_is_a_fraction_above_zero_up_to_one() {
    assert_eq!(
        props("hashd-params:mem-frac=30%").unwrap().mem_frac,
        Some(0.3)
    );
    assert_eq!(
        props("hashd-params:mem-frac=1").unwrap().mem_frac,
        Some(1.0)
    );
    for bad in ["0", "0%", "1.5", "150%"] {
        let e = props(&format!("hashd-params:mem-frac={}", bad)).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("above 0 and at most 1"), "{}: {}", bad, e);
    }
    assert!(props("hashd-params:mem-frac=lots").is_err());
    assert!(props("hashd-params:mem-frac=-0.1").is_err());
    // With rps_max given too, nothing is left to measure.
    let p = props("hashd-params:fake-cpu-load,mem-frac=0.3").unwrap();
    let k = hashd_sizing::given_knobs(&p.bench_cfg(1 << 30, true)).unwrap();
    assert_eq!((k.rps_max, k.mem_size, k.mem_frac), (167, 4 << 30, 0.3));
    let p = props("hashd-params:mem-frac=0.3").unwrap();
    assert!(hashd_sizing::given_knobs(&p.bench_cfg(1 << 30, true)).is_none());
}

#[test]
fn apply_and_commit_default_to_true() {
    let p = props("hashd-params").unwrap();
    assert_eq!(
        p,
        HashdParamsProps {
            apply: true,
            commit: true,
            fake_cpu_load: false,
            rps_max: None,
            mem_frac: None,
            hash_size: None,
            chunk_pages: None,
            log_bps: None,
            upstream: Default::default(),
        }
    );
    let p = props("hashd-params:commit=false").unwrap();
    assert_eq!((p.apply, p.commit), (true, false));
    let p = props("hashd-params:apply=false").unwrap();
    assert_eq!((p.apply, p.commit), (false, false));
    let p = props("hashd-params:apply=false,commit=false").unwrap();
    assert_eq!((p.apply, p.commit), (false, false));
    let p = props("hashd-params:apply,commit").unwrap();
    assert_eq!((p.apply, p.commit), (true, true));
    let e = props("hashd-params:apply=false,commit").unwrap_err();
    assert!(
        e.to_string().contains("committing implies applying"),
        "{}",
        e
    );
}

#[test]
fn overrides_parse_with_their_units() {
    let p =
        props("hashd-params:fake-cpu-load,rps-max=1000,hash-size=2M,chunk-pages=16,log-bps=512K")
            .unwrap();
    assert!(p.fake_cpu_load);
    assert_eq!(p.rps_max, Some(1000));
    assert_eq!(p.hash_size, Some(2 << 20));
    assert_eq!(p.chunk_pages, Some(16));
    assert_eq!(p.log_bps, Some(512 << 10));
    for bad in ["rps-max=0", "chunk-pages=0", "hash-size=0"] {
        let e = props(&format!("hashd-params:{}", bad)).unwrap_err();
        assert!(e.to_string().contains("can't be used"), "{}: {}", bad, e);
    }
}

#[test]
fn fake_cpu_load_gets_the_storage_rate_and_real_load_measures_it() {
    let g = 1u64 << 30;
    let fake = props("hashd-params:fake-cpu-load").unwrap();
    let cfg = fake.bench_cfg(12 * g, true);
    assert_eq!(cfg.rps_max, Some(2000));
    assert!(cfg.fake_cpu && cfg.quick);
    let real = props("hashd-params").unwrap();
    let cfg = real.bench_cfg(12 * g, false);
    assert_eq!(cfg.rps_max, None, "real CPU load measures rps_max");
    assert!(!cfg.fake_cpu);
    let given = props("hashd-params:rps-max=900").unwrap();
    assert_eq!(given.bench_cfg(12 * g, false).rps_max, Some(900));
    let given = props("hashd-params:fake-cpu-load,rps-max=900").unwrap();
    assert_eq!(given.bench_cfg(12 * g, false).rps_max, Some(900));
}

/// Upstream's real-CPU bench sized memory against 4 × the machine's RAM; ours uses the
/// profile's share in both modes, with upstream's preload and total memory.
#[test]
fn real_cpu_bench_sizes_memory_against_the_share() {
    let g = 1u64 << 30;
    let cfg = props("hashd-params").unwrap().bench_cfg(6 * g, false);
    assert_eq!(cfg.size, 24 * g);
    assert_eq!(cfg.preload, 3 * g);
    assert_eq!(cfg.total_memory, Some(6 * g));
    assert_eq!(
        (cfg.hash_size, cfg.chunk_pages, cfg.log_bps),
        (None, None, None)
    );
}

fn probe(phase: &str, mem_frac: f64) -> serde_json::Value {
    serde_json::json!({
        "phase": phase, "mem_frac": mem_frac, "rps": 1000.0, "lat": 0.075, "ratio": 0.97,
        "converged": true, "end": "converged", "secs": 60, "start": 1700000000,
        "mem_bytes": 1u64 << 30
    })
}

fn sizing() -> SizingResult {
    // A real sizing result shape, from the simulated target's JSON form.
    serde_json::from_value(serde_json::json!({
        "rps_max": 1029, "rps_max_measured": true, "mem_frac": 0.33625,
        "mem_size": 17330225971u64, "size": 51539607552u64, "fake_cpu_load": false,
        "quick": false, "measured_secs": 1187,
        "timing": serde_json::to_value(crate::workload::hashd::sizing::Timing::new(false)).unwrap(),
        "thresholds": serde_json::to_value(crate::workload::hashd::sizing::Thresholds::default()).unwrap(),
        "cpu_history": [probe("cpu-sat", 0.2), probe("cpu-sat", 0.2)],
        "mem_history": [probe("mem-up", 0.2), probe("mem-up", 0.4), probe("mem-bisect", 0.3)]
    }))
    .unwrap()
}

fn knobs() -> HashdKnobs {
    HashdKnobs {
        hash_size: 1258291,
        rps_max: 1029,
        mem_size: 51539607552,
        mem_frac: 0.33625,
        chunk_pages: 25,
        fake_cpu_load: false,
        upstream_requests: false,
        upstream_flow: false,
    }
}

fn entry(rec: &HashdParamsRecord) -> Entry {
    let raw = serde_json::value::to_raw_value(rec).unwrap();
    let result = HashdParams
        .study(&StudyCtx::new("/nonexistent".into(), rec.period), rec)
        .unwrap();
    Entry {
        spec: JobSpec::parse("hashd-params").unwrap(),
        period: rec.period,
        sysinfo: serde_json::value::to_raw_value(&serde_json::json!({})).unwrap(),
        record: Some(raw),
        result: Some(serde_json::value::to_raw_value(&result).unwrap()),
        incomplete: false,
        unknown: Default::default(),
    }
}

fn record() -> HashdParamsRecord {
    HashdParamsRecord {
        knobs: knobs(),
        period: (1700000000, 1700001200),
        mem: MemProfile {
            profile: 16,
            avail: 14 << 30,
            share: 12 << 30,
            target: 11 << 30,
        },
        sizing: Some(sizing()),
    }
}

/// Upstream 2.2.5's own hashd-params entry (from a run in the VM test host) keeps the knobs
/// in the record and stores `true` as the result; its summary prints this line.
#[test]
fn upstreams_result_of_true_reads_the_knobs_from_the_record() {
    let rec = r#"{"chunk_pages":25,"fake_cpu_load":false,"hash_size":1258291,
        "mem_frac":0.10260310283458857,"mem_size":16413163520,"rps_max":17}"#;
    let mut e = entry(&record());
    e.record = Some(serde_json::value::RawValue::from_string(rec.into()).unwrap());
    e.result = Some(serde_json::value::RawValue::from_string("true".into()).unwrap());
    assert_eq!(
        render(&e, false),
        "Result: hash_size=1.2M rps_max=17 mem_actual=1.6G chunk_pages=25\n\n"
    );
    e.record = None;
    let mut out = String::new();
    let err = crate::bench::contract::api::AnyBench::format(
        &HashdParams,
        &mut out,
        &e,
        &FormatOpts::default(),
    )
    .unwrap_err();
    assert!(
        format!("{:#}", err).contains("there is no record"),
        "{:#}",
        err
    );
}

#[test]
fn record_keeps_upstreams_knob_fields_and_the_result_is_the_knobs() {
    let rec = record();
    let v = serde_json::to_value(&rec).unwrap();
    for k in [
        "hash_size",
        "rps_max",
        "mem_size",
        "mem_frac",
        "chunk_pages",
        "fake_cpu_load",
    ] {
        assert!(v.get(k).is_some(), "record lacks {}: {}", k, v);
    }
    let e = entry(&rec);
    let res: serde_json::Value = serde_json::from_str(e.result.as_ref().unwrap().get()).unwrap();
    assert_eq!(res, serde_json::to_value(knobs()).unwrap());
}

fn render(e: &Entry, full: bool) -> String {
    let mut out = String::new();
    let opts = FormatOpts {
        full,
        ..FormatOpts::default()
    };
    crate::bench::contract::api::AnyBench::format(&HashdParams, &mut out, e, &opts).unwrap();
    out
}

#[test]
fn summary_is_upstreams_result_line() {
    let e = entry(&record());
    assert_eq!(
        render(&e, false),
        "Result: hash_size=1.2M rps_max=1029 mem_actual=16.1G chunk_pages=25\n\n"
    );
    let mut rec = record();
    rec.knobs.fake_cpu_load = true;
    assert!(render(&entry(&rec), false).contains("chunk_pages=25 fake_cpu_load\n"));
    rec.knobs.upstream_requests = true;
    assert!(
        render(&entry(&rec), false).contains("chunk_pages=25 fake_cpu_load upstream_requests\n")
    );
    rec.knobs.upstream_flow = true;
    assert!(render(&entry(&rec), false)
        .contains("chunk_pages=25 fake_cpu_load upstream_requests upstream_flow\n"));
}

#[test]
fn key_numbers_are_headline_fields() {
    let rows =
        crate::bench::contract::api::AnyBench::headline(&HashdParams, &entry(&record())).unwrap();
    let missing = crate::bench::contract::headline::missing_keys(
        <HashdParams as crate::bench::contract::api::Bench>::KEY_NUMBERS,
        &rows,
    );
    assert!(missing.is_empty(), "{:?}", missing);
}

#[test]
fn mem_actual_rounds_up() {
    let k = HashdKnobs {
        mem_size: 1000,
        mem_frac: 0.3333,
        ..Default::default()
    };
    assert_eq!(mem_actual(&k), 334.0);
}

#[test]
fn the_record_applies_and_commits_its_knobs_unless_told_not_to() {
    let raw = serde_json::value::to_raw_value(&record()).unwrap();
    let applies = |spec: &str| {
        crate::bench::contract::api::AnyBench::job(&HashdParams, &JobSpec::parse(spec).unwrap())
            .unwrap()
            .stored(&raw)
            .and_then(|r| r.applies())
    };
    assert_eq!(
        applies("hashd-params").unwrap(),
        Some(Apply::Hashd {
            knobs: knobs(),
            commit: true
        })
    );
    assert_eq!(
        applies("hashd-params:commit=false").unwrap(),
        Some(Apply::Hashd {
            knobs: knobs(),
            commit: false
        })
    );
    assert_eq!(applies("hashd-params:apply=false").unwrap(), None);
    // An upstream record is the knobs alone.
    let upstream = serde_json::value::to_raw_value(&knobs()).unwrap();
    let spec = JobSpec::parse("hashd-params").unwrap();
    let job = crate::bench::contract::api::AnyBench::job(&HashdParams, &spec).unwrap();
    assert!(job.stored(&upstream).unwrap().applies().unwrap().is_some());
    let empty = serde_json::value::to_raw_value(&serde_json::json!({})).unwrap();
    let e = job.stored(&empty).and_then(|r| r.applies()).unwrap_err();
    let e = format!("{:#}", e);
    assert!(e.contains("no hashd parameters"), "{}", e);
}

#[test]
fn format_snapshot() {
    insta::assert_snapshot!("hashd_params_format", render(&entry(&record()), true));
    insta::assert_snapshot!("hashd_params_summary", render(&entry(&record()), false));
}

#[test]
fn a_cpu_saturation_that_never_settled_is_said() {
    let mut rec = record();
    let sizing = rec.sizing.as_mut().unwrap();
    for r in &mut sizing.cpu_history {
        r.pass = Some(false);
    }
    let out = render(&entry(&rec), true);
    assert!(
        out.contains(
            "rps_max=measured (2 probes, none at the latency target: the last one's rate)"
        ),
        "{out}"
    );
    let last = rec.sizing.as_mut().and_then(|s| s.cpu_history.last_mut());
    last.unwrap().pass = Some(true);
    assert!(render(&entry(&rec), true).contains("rps_max=measured (2 probes) "));
}

/// An upstream entry holds only the knobs, as record and as result (as upstream 2.0–2.1 wrote
/// them; 2.2's result is `true`, below).
#[test]
fn upstream_entry_without_our_extras_formats() {
    let knobs = serde_json::value::to_raw_value(&knobs()).unwrap();
    let e = Entry {
        spec: JobSpec::parse("hashd-params").unwrap(),
        period: (1700000000, 1700001200),
        sysinfo: serde_json::value::to_raw_value(&serde_json::json!({})).unwrap(),
        record: Some(knobs.clone()),
        result: Some(knobs),
        incomplete: false,
        unknown: Default::default(),
    };
    assert_eq!(
        render(&e, true),
        "Result: hash_size=1.2M rps_max=1029 mem_actual=16.1G chunk_pages=25\n\n"
    );
    // With the header: `results::show`'s test of the same entry.
}
