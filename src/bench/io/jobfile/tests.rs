use super::super::props::read_props;
use super::*;

fn spec(text: &str) -> JobSpec {
    JobSpec::parse(text).unwrap()
}

#[test]
fn a_generated_file_reads_back_as_the_specs_jobs() {
    let specs = [
        spec("io:rw=randwrite,qd=32,bs=64K,dur=5s,fast=true,pcts=50/99"),
        spec("io:id=seqrd,rw=read,bs=1M,rate-iops=200.5,arrivals=poisson,target=/tmp/a b"),
        spec("io"),
    ];
    let text = generate(&specs);
    let jobs = parse(&text, &PropSet::new()).unwrap();
    assert_eq!(jobs.len(), 3);
    for (j, s) in jobs.iter().zip(&specs) {
        assert_eq!(j.props, read_props(s).unwrap(), "{}", text);
        assert!(!j.together);
    }
    assert_eq!(
        jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(),
        ["job1", "seqrd", "job3"]
    );
    // Every property is listed in [global], commented out.
    for p in file_props() {
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("# {} =", p.key))),
            "{} missing:\n{}",
            p.key,
            text
        );
    }
}

#[test]
fn every_default_the_file_lists_is_the_default() {
    let plain = parse("[[job]]\n", &PropSet::new()).unwrap();
    assert_eq!(plain[0].props, read_props(&spec("io")).unwrap());
    let mut listed = 0;
    for p in file_props() {
        if let Some(v) = default_value(p.key) {
            let text = format!("[global]\n{} = {}\n[[job]]\n", p.key, v);
            let jobs = parse(&text, &PropSet::new()).unwrap_or_else(|e| panic!("{}: {}", text, e));
            assert_eq!(jobs[0].props, plain[0].props, "{}", text);
            listed += 1;
        }
    }
    assert_eq!(listed, 20);
}

#[test]
fn the_command_line_overrides_the_job_which_overrides_global() {
    let text = "[global]\nqd = 4\nbs = \"8K\"\n[[job]]\nname = \"a\"\n[[job]]\nname = \"b\"\nqd = 16\ntogether = true\n";
    let jobs = parse(text, &PropSet::new()).unwrap();
    assert_eq!((jobs[0].props.job.qd, jobs[1].props.job.qd), (4, 16));
    assert_eq!(jobs[1].props.job.bs, 8192);
    assert!(!jobs[0].together && jobs[1].together);
    let cli: PropSet = [("qd".to_string(), "8".to_string())].into_iter().collect();
    let jobs = parse(text, &cli).unwrap();
    assert_eq!((jobs[0].props.job.qd, jobs[1].props.job.qd), (8, 8));
}

#[test]
fn a_wrong_file_is_refused_saying_where() {
    let err = |text: &str| parse(text, &PropSet::new()).unwrap_err();
    assert_eq!(
        err("[[job]]\nqdd = 4\n"),
        "[[job]] 1 (job1): unknown property \"qdd\"; did you mean qd? (the io properties of `doc io`, and a job's name and together)"
    );
    assert!(err("[global]\nqd = \"many\"\n[[job]]\n").starts_with("[global]: "));
    assert!(err("[[job]]\nqd = [1, 2]\n").contains("qd: expected a string, number or true/false"));
    assert!(err("[[job]]\ntogether = true\n").contains("the first has none"));
    assert!(
        err("[[job]]\nname = \"x\"\n[[job]]\nname = \"x\"\n").contains("another job has this name")
    );
    assert_eq!(
        err("[global]\nqd = 2\n"),
        "no [[job]] table: nothing to run"
    );
    assert!(err("qd = 2\n[[job]]\n").contains("\"qd\" at the top"));
    for bad in ["\"\"", "\" \"", "\"a\\nb\"", "\"a\\u001b[2Jb\"", "7"] {
        let e = err(&format!("[[job]]\nname = {}\n", bad));
        assert!(
            e.contains("name: expected 1 to 64 characters"),
            "{}: {}",
            bad,
            e
        );
    }
    let long = format!("[[job]]\nname = \"{}\"\n", "x".repeat(65));
    assert!(err(&long).contains("name: expected"));
    let ok = format!("[[job]]\nname = \"{}\"\n", "é".repeat(64));
    assert_eq!(parse(&ok, &PropSet::new()).unwrap()[0].name, "é".repeat(64));
    assert!(err("[[job]\n").starts_with("not a TOML job file"));
    // The bench's own rules, as for a spec.
    assert!(err("[[job]]\nrw = \"read\"\nrwmix = 30\n").contains("rwmix is for rw and randrw"));
    assert!(err("[[job]]\ndevtime = true\n[[job]]\ntogether = true\n").contains("devtime"));
    assert!(
        err("[[job]]\nfile-size = \"1G\"\n[[job]]\nfile-size = \"2G\"\ntogether = true\n")
            .contains("different file-size")
    );
}
