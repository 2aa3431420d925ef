//! Job-spec grammar and option validation as a table: valid specs are checked for the exact
//! parsed structure through the library; invalid specs and option values are checked through the
//! binary for exit code 2 and a single-line message naming what was wrong.

use assert_cmd::Command;
use resctl_bench::spec::{JobSpec, PropSet};

type Groups = &'static [&'static [(&'static str, &'static str)]];

struct Valid {
    text: &'static str,
    kind: &'static str,
    id: Option<&'static str>,
    passive: Option<&'static str>,
    props: Groups,
}

const fn ok(
    text: &'static str,
    kind: &'static str,
    id: Option<&'static str>,
    passive: Option<&'static str>,
    props: Groups,
) -> Valid {
    Valid {
        text,
        kind,
        id,
        passive,
        props,
    }
}

const VALID: &[Valid] = &[
    ok("iocost-qos", "iocost-qos", None, None, &[&[]]),
    ok("iocost-qos:", "iocost-qos", None, None, &[&[]]),
    ok("iocost-qos::", "iocost-qos", None, None, &[&[], &[]]),
    ok(
        "storage:loops=2",
        "storage",
        None,
        None,
        &[&[("loops", "2")]],
    ),
    ok(
        "storage:apply,commit",
        "storage",
        None,
        None,
        &[&[("apply", ""), ("commit", "")]],
    ),
    ok(
        "storage:loops=1,loops=3",
        "storage",
        None,
        None,
        &[&[("loops", "3")]],
    ),
    ok(
        "storage:,,loops=2,,",
        "storage",
        None,
        None,
        &[&[("loops", "2")]],
    ),
    ok(
        "storage:id=ssd,loops=2",
        "storage",
        Some("ssd"),
        None,
        &[&[("loops", "2")]],
    ),
    ok("storage:passive=ALL", "storage", None, Some("ALL"), &[&[]]),
    ok(
        "storage:passive=io/mem",
        "storage",
        None,
        Some("io/mem"),
        &[&[]],
    ),
    ok("storage:passive", "storage", None, Some(""), &[&[]]),
    ok(
        "storage:id=a,passive=none",
        "storage",
        Some("a"),
        Some("none"),
        &[&[]],
    ),
    ok(
        "iocost-qos:vrate-max=80::min=50,max=50",
        "iocost-qos",
        None,
        None,
        &[&[("vrate-max", "80")], &[], &[("max", "50"), ("min", "50")]],
    ),
    ok(
        "iocost-qos:id=x::min=50,max=50",
        "iocost-qos",
        Some("x"),
        None,
        &[&[], &[], &[("max", "50"), ("min", "50")]],
    ),
    ok(
        "iocost-qos::vrate=60:rpct=95,rlat=5000:wpct=90,wlat=10000",
        "iocost-qos",
        None,
        None,
        &[
            &[],
            &[("vrate", "60")],
            &[("rlat", "5000"), ("rpct", "95")],
            &[("wlat", "10000"), ("wpct", "90")],
        ],
    ),
    ok(
        "iocost-qos:vrate-min=10,vrate-max=90,vrate-intvs=9,dither",
        "iocost-qos",
        None,
        None,
        &[&[
            ("dither", ""),
            ("vrate-intvs", "9"),
            ("vrate-max", "90"),
            ("vrate-min", "10"),
        ]],
    ),
    ok(
        "iocost-qos:dither=2.5",
        "iocost-qos",
        None,
        None,
        &[&[("dither", "2.5")]],
    ),
    ok(
        "iocost-qos:allow-fail",
        "iocost-qos",
        None,
        None,
        &[&[("allow-fail", "")]],
    ),
    ok(
        "iocost-qos:allow-fail=false",
        "iocost-qos",
        None,
        None,
        &[&[("allow-fail", "false")]],
    ),
    ok(
        "iocost-qos:isol-pct=01,isol-thr=95%",
        "iocost-qos",
        None,
        None,
        &[&[("isol-pct", "01"), ("isol-thr", "95%")]],
    ),
    ok(
        "iocost-qos:storage-rps-max=2000,storage-hash-size=1.5M,storage-commit",
        "iocost-qos",
        None,
        None,
        &[&[
            ("storage-commit", ""),
            ("storage-hash-size", "1.5M"),
            ("storage-rps-max", "2000"),
        ]],
    ),
    ok(
        "iocost-qos:storage-base-loops=2,storage-loops=1,retries=0",
        "iocost-qos",
        None,
        None,
        &[&[
            ("retries", "0"),
            ("storage-base-loops", "2"),
            ("storage-loops", "1"),
        ]],
    ),
    ok(
        "protection::scenario=mem-hog,load=0.8,loops=3,speed=2x",
        "protection",
        None,
        None,
        &[
            &[],
            &[
                ("load", "0.8"),
                ("loops", "3"),
                ("scenario", "mem-hog"),
                ("speed", "2x"),
            ],
        ],
    ),
    ok(
        "protection::scenario=mem-hog-tune,size-min=4G,size-max=1G+15G,intvs=5",
        "protection",
        None,
        None,
        &[
            &[],
            &[
                ("intvs", "5"),
                ("scenario", "mem-hog-tune"),
                ("size-max", "1G+15G"),
                ("size-min", "4G"),
            ],
        ],
    ),
    ok(
        "protection::scenario=mem-hog:scenario=mem-hog,load=50%",
        "protection",
        None,
        None,
        &[
            &[],
            &[("scenario", "mem-hog")],
            &[("load", "50%"), ("scenario", "mem-hog")],
        ],
    ),
    ok(
        "hashd-params:fake-cpu-load,rps-max=1000",
        "hashd-params",
        None,
        None,
        &[&[("fake-cpu-load", ""), ("rps-max", "1000")]],
    ),
    ok(
        "iocost-params:apply=false,commit=0",
        "iocost-params",
        None,
        None,
        &[&[("apply", "false"), ("commit", "0")]],
    ),
    ok("iocost-tune:id=t", "iocost-tune", Some("t"), None, &[&[]]),
    ok(
        "selftest:steps=3,step-time=1m30s",
        "selftest",
        None,
        None,
        &[&[("step-time", "1m30s"), ("steps", "3")]],
    ),
    ok(
        r"storage:id=a\:b\,c",
        "storage",
        Some("a:b,c"),
        None,
        &[&[]],
    ),
    ok(r"storage:id=x=y\=z", "storage", Some("x=y=z"), None, &[&[]]),
    ok(
        r"storage:id=back\\slash",
        "storage",
        Some(r"back\slash"),
        None,
        &[&[]],
    ),
];

fn groups(props: Groups) -> Vec<PropSet> {
    props
        .iter()
        .map(|g| {
            g.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn valid_specs_parse_to_exact_structure() {
    assert!(VALID.len() >= 20);
    for v in VALID {
        let spec = JobSpec::parse(v.text).unwrap_or_else(|e| panic!("{}: {}", v.text, e));
        let want = JobSpec {
            kind: v.kind.into(),
            id: v.id.map(String::from),
            passive: v.passive.map(String::from),
            props: groups(v.props),
        };
        assert_eq!(spec, want, "{}", v.text);
        resctl_bench::bench::validate_run(&spec)
            .unwrap_or_else(|e| panic!("{} should validate: {}", v.text, e));
        let again = JobSpec::parse(&spec.canonical()).unwrap();
        assert_eq!(again, spec, "{} -> {}", v.text, spec.canonical());
    }
}

#[test]
fn id_and_passive_only_come_from_the_first_group() {
    // Upstream took `id` from every group and kept the last one, so this lost its id.
    let spec = JobSpec::parse("iocost-qos:id=x::min=50,max=50").unwrap();
    assert_eq!(spec.id.as_deref(), Some("x"));
    let spec = JobSpec::parse("iocost-qos::id=y").unwrap();
    assert_eq!(spec.id, None);
    assert_eq!(spec.props[1]["id"], "y");
}

#[test]
fn serialized_layout_matches_upstream() {
    let spec = JobSpec::parse("iocost-qos:id=x,vrate-max=80::vrate=50").unwrap();
    assert_eq!(
        serde_json::to_string(&spec).unwrap(),
        r#"{"kind":"iocost-qos","id":"x","passive":null,"props":[{"vrate-max":"80"},{},{"vrate":"50"}]}"#
    );
}

/// (spec, fragment the one-line message must contain)
const INVALID: &[(&str, &str)] = &[
    ("iocost-qso", "unknown bench \"iocost-qso\"; known: iocost-params, hashd-params, storage, protection, iocost-qos, iocost-tune, io, curve, qos-study; did you mean iocost-qos?"),
    ("banana", "unknown bench \"banana\"; known: iocost-params, hashd-params, storage, protection, iocost-qos, iocost-tune, io, curve, qos-study\n"),
    ("iocost-qos:vrate-mn=5", "job spec \"iocost-qos:vrate-mn=5\": unknown property \"vrate-mn\" for iocost-qos; valid: vrate-min, vrate-max, "),
    ("iocost-qos:vrate-mn=5", "did you mean vrate-min?"),
    ("iocost-qos:vrate-max=abc", "vrate-max=\"abc\" is not a number (accepted: "),
    ("iocost-qos:vrate-max=", "vrate-max needs a value"),
    ("iocost-qos:vrate-min=-1", "vrate-min=-1 must not be negative"),
    ("iocost-qos:vrate-min=80,vrate-max=50", "vrate-min=80 must be less than vrate-max=50"),
    ("iocost-qos:vrate-min=150", "vrate-min=150 must be less than vrate-max (default 100)"),
    ("iocost-qos::foo=1", "group 2: unknown property \"foo\" for iocost-qos; valid in groups 2+: rpct, rlat, wpct, wlat, min, max, vrate"),
    ("iocost-qos::min=x", "group 2: min=\"x\" is not a number"),
    ("iocost-qos:::rlat=1.5", "group 3: rlat=\"1.5\" is not a non-negative integer"),
    ("iocost-qos::min=60,max=50", "group 2: min=60 must not be above max=50"),
    ("iocost-qos::vrate=50,min=40", "group 2: vrate sets both min and max"),
    ("iocost-qos::rpct=120", "group 2: rpct=120 must be between 0 and 100"),
    ("iocost-qos:id=a::id=b", "id and passive are only recognised in the first group"),
    ("iocost-qos:vrate=50", "vrate is a key of groups 2+ (one configuration each): write iocost-qos::vrate=50"),
    ("iocost-qos:allow-fail=maybe", "allow-fail=\"maybe\" is not a boolean (accepted: true/false, 1/0, or the bare key for true)"),
    ("iocost-qos:isol-pct=07", "isol-pct=\"07\" is not one of 00, 01, 05, 10, 25, 50, 75, 90, 95, 99, 100, mean, stdev"),
    ("iocost-qos:isol-thr=abc", "isol-thr=\"abc\" is not a fraction"),
    ("iocost-qos:vrate-intvs=-3", "vrate-intvs=\"-3\" is not a non-negative integer"),
    ("iocost-qos:storage-rps-mx=5", "did you mean storage-rps-max?"),
    ("iocost-qos:storage-hash-size=big", "storage-hash-size=\"big\" is not a size"),
    ("iocost-qos:dither=x", "dither=\"x\" is neither a boolean nor a number"),
    ("iocost-qos:storage-loops=0", "storage-loops=0: each configuration needs a storage loop"),
    ("iocost-qos:storage-rps-max=0", "storage-rps-max=0 can't be used; give a positive request rate"),
    ("iocost-qos:tune-hint=maybe", "tune-hint=\"maybe\""),
    ("storage:passive=cpuu", "passive=\"cpuu\" has unknown token \"cpuu\""),
    ("storage::loops=2", "storage takes one property group, got 2"),
    ("storage:loops=0", "loops=0 must not be zero"),
    ("storage:vrate-max=5", "unknown property \"vrate-max\" for storage"),
    ("protection:loops=2", "unknown property \"loops\" for protection; valid: id, passive; protection properties go in groups 2+"),
    ("protection::load=0.5", "group 2: missing scenario (accepted: scenario=mem-hog or scenario=mem-hog-tune)"),
    ("protection::scenario=mem-hogg", "group 2: scenario=\"mem-hogg\" is not one of mem-hog, mem-hog-tune"),
    ("protection::scenario=mem-hog-tune", "group 2: scenario=mem-hog-tune needs size-max"),
    ("protection::scenario=mem-hog-tune,size-min=8G,size-max=4G", "size-max=4G must not be smaller than size-min=8G"),
    ("protection::scenario=mem-hog,loops=0", "group 2: loops=0 must not be zero"),
    ("protection::scenario=mem-hog,size-max=4G", "size-max does not apply to scenario=mem-hog"),
    ("protection::scenario=mem-hog-tune,size-max=4G,intvs=0", "intvs=0 must not be zero"),
    ("protection::scenario=mem-hog,load=-1", "load=\"-1\" is negative"),
    ("protection::scenario=mem-hog:scenario=mem-hog,load=0", "group 3: load=0 must not be zero"),
    ("protection::scenario=mem-hog,speed=3x", "speed=\"3x\" is not one of 10%, 25%, 50%, 1x, 2x"),
    ("protection::scenario=mem-hog-tune,size-max=4G,search=binary", "search=\"binary\" is not one of linear, bisect"),
    ("", "empty job spec"),
    (":loops=2", "missing bench name"),
    ("storage:=5", "property \"=5\" has no key"),
    ("storage:id=", "id needs a value"),
    ("iocost-params:apply=yes", "apply=\"yes\" is not a boolean"),
    ("iocost-params::", "iocost-params takes one property group, got 2"),
    ("hashd-params:rps-max=1k", "rps-max=\"1k\" is not a non-negative integer"),
    ("hashd-params:log-bps=fast", "log-bps=\"fast\" is not a size"),
    ("iocost-tune:foo", "unknown property \"foo\" for iocost-tune; valid: scale-min, scale-max, id, passive and the keys `doc iocost-tune` lists"),
    ("selftest:step-time=5x", "step-time=\"5x\" is not a duration"),
];

/// Runs the binary and checks: exit code 2, exactly one line on stderr containing `fragment`
/// (a trailing `\n` in `fragment` means "the line ends here"), no panic or backtrace.
fn expect_usage_error(args: &[&str], fragment: &str) {
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("r.json");
    let mut cmd = Command::cargo_bin("resctl-bench").unwrap();
    cmd.arg("-r").arg(&result);
    // Only the subcommands that read --dir take it.
    if matches!(args.first(), Some(&"run") | Some(&"study")) {
        cmd.arg("-d").arg(dir.path());
    }
    let out = cmd
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{:?}: stderr: {}", args, stderr);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{:?}: {}",
        args,
        stderr
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{:?}: expected one line, got: {}",
        args,
        stderr
    );
    let (fragment, at_end) = match fragment.strip_suffix('\n') {
        Some(f) => (f, true),
        None => (fragment, false),
    };
    assert!(
        lines[0].contains(fragment),
        "{:?}: {:?} not in {:?}",
        args,
        fragment,
        lines[0]
    );
    if at_end {
        assert!(
            lines[0].ends_with(fragment),
            "{:?}: {:?} should end {:?}",
            args,
            lines[0],
            fragment
        );
    }
    assert!(
        !result.exists(),
        "{:?}: a rejected spec must not create the result file",
        args
    );
}

#[test]
fn invalid_specs_exit_2_with_one_line() {
    assert!(INVALID.len() >= 20);
    for (spec, fragment) in INVALID {
        expect_usage_error(&["run", spec], fragment);
    }
}

#[test]
fn invalid_specs_are_rejected_by_study_and_solve_too() {
    expect_usage_error(&["study", "iocost-qso"], "did you mean iocost-qos?");
    expect_usage_error(
        &["solve", "iocost-qos:vrate-mn=5"],
        "did you mean vrate-min?",
    );
}

#[test]
fn run_without_specs_is_a_usage_error() {
    expect_usage_error(&["run"], "no job spec given");
}

#[test]
fn bad_spec_files_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("broken.json", "{\"job_specs\": [", "not valid JSON"),
        ("nolist.json", "{\"dir\": \"/x\"}", "no \"job_specs\" list"),
        (
            "number.json",
            "{\"job_specs\": [3]}",
            "job_specs[0] is neither a spec string nor a spec object",
        ),
        (
            "object.json",
            "{\"job_specs\": [{\"kind\": 3}]}",
            "job_specs[0] is not a valid job spec",
        ),
        (
            "badspec.json",
            "{\"job_specs\": [\"storage:loopz=2\"]}",
            "unknown property \"loopz\" for storage",
        ),
    ];
    for (name, text, fragment) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let path = path.to_string_lossy().to_string();
        expect_usage_error(&["run", "-f", &path], fragment);
    }
    let missing = dir
        .path()
        .join("missing.json")
        .to_string_lossy()
        .to_string();
    expect_usage_error(&["run", "-f", &missing], "cannot read it");
}

#[test]
fn bad_global_options_exit_2_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--mem-profile", "3"],
            "--mem-profile \"3\" is not a power of two",
        ),
        (
            &["--mem-profile", "lots"],
            "--mem-profile \"lots\" is not a power of two",
        ),
        (
            &["--swappiness", "300"],
            "--swappiness \"300\" is not an integer from 0 to 200",
        ),
        (
            &["--iocost-qos", "rpct=abc"],
            "--iocost-qos \"rpct=abc\": rpct=\"abc\" is not a number",
        ),
        (
            &["--iocost-qos", "foo=1"],
            "--iocost-qos \"foo=1\": unknown QoS key \"foo\"",
        ),
        (
            &["--iocost-qos", "min=80,max=70"],
            "min=80 must not be above max=70",
        ),
        (
            &["--rep-retention", "a week"],
            "--rep-retention \"a week\" is not a duration",
        ),
        (&["--mem-avail", "4Q"], "--mem-avail \"4Q\" is not a size"),
        (
            &["--mem-margin", "x"],
            "--mem-margin \"x\" is not a fraction",
        ),
        (
            &["--hashd-size", "1K"],
            "--hashd-size \"1K\" is smaller than a page (accepted: a size of 4K or more",
        ),
        (
            &["--hashd-size", "big"],
            "--hashd-size \"big\" is not a size",
        ),
        (
            &["--hashd-cpu-load", "maybe"],
            "--hashd-cpu-load \"maybe\" is not a choice (accepted: keep, fake, real)",
        ),
    ];
    for (opts, fragment) in cases {
        let mut args: Vec<&str> = opts.to_vec();
        args.extend(["run", "storage"]);
        expect_usage_error(&args, fragment);
    }
}

/// The whole error line of every spec in the table, pinned: a change to any message shows in
/// `cargo insta review`.
#[test]
fn error_lines_snapshot() {
    let mut out = String::new();
    for (spec, _) in INVALID {
        let err = match JobSpec::parse(spec).and_then(|s| resctl_bench::bench::validate_run(&s)) {
            Ok(_) => panic!("{:?} should be rejected", spec),
            Err(e) => e.to_string(),
        };
        out += &format!("{:?}\n    {}\n", spec, err);
    }
    insta::assert_snapshot!("grammar_error_lines", out);
}
