use super::super::change_journal::{MemJournal, NoJournal};
use super::*;
use std::fs;

const DEV: DevNr = DevNr { maj: 259, min: 0 };

fn host() -> (tempfile::TempDir, HostPaths) {
    let tmp = tempfile::tempdir().unwrap();
    let paths = HostPaths::under(tmp.path());
    fs::create_dir_all(paths.cgroup()).unwrap();
    (tmp, paths)
}

fn put(paths: &HostPaths, name: &str, text: &str) {
    fs::write(paths.cgroup().join(name), text).unwrap();
}

fn get(paths: &HostPaths, name: &str) -> String {
    fs::read_to_string(paths.cgroup().join(name)).unwrap()
}

const MODEL: &str = "8:0 ctrl=auto model=linear rbps=488636629 rseqiops=8932 \
    rrandiops=8518 wbps=427891549 wseqiops=28755 wrandiops=21940\n\
    259:0 ctrl=user model=linear rbps=3235739592 rseqiops=343800 rrandiops=376893 \
    wbps=2219232034 wseqiops=239923 wrandiops=241421\n";
const QOS: &str = "8:0 enable=0 ctrl=auto rpct=0.00 rlat=25000 wpct=0.00 wlat=25000 \
    min=1.00 max=10000.00\n\
    259:0 enable=1 ctrl=user rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 min=7.94 max=7.94\n";

fn samsung_model() -> IoCostModel {
    IoCostModel {
        ctrl: "user".into(),
        model: "linear".into(),
        rbps: 3235739592,
        rseqiops: 343800,
        rrandiops: 376893,
        wbps: 2219232034,
        wseqiops: 239923,
        wrandiops: 241421,
    }
}

#[test]
fn parses_kernel_files() {
    let (_t, p) = host();
    put(&p, "io.cost.model", MODEL);
    put(&p, "io.cost.qos", QOS);
    put(
        &p,
        "io.stat",
        "259:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0 cost.vrate=7.94 cost.usage=1 \
         cost.wait=0 cost.indebt=0 cost.indelay=0\n8:0 rbytes=5 wbytes=6 rios=1 wios=1 dbytes=0 dios=0\n",
    );
    let s = read_state(&p, DEV).unwrap();
    assert_eq!(s.model, samsung_model());
    assert_eq!(
        s.qos,
        IoCostQos {
            enable: 1,
            ctrl: "user".into(),
            rpct: 95.0,
            rlat: 12042,
            wpct: 95.0,
            wlat: 13664,
            min: 7.94,
            max: 7.94
        }
    );
    assert_eq!(s.vrate, 7.94);
    // Same JSON layout as a result file's sysinfo.iocost.
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(
        json,
        r#"{"vrate":7.94,"model":{"ctrl":"user","model":"linear","rbps":3235739592,"rseqiops":343800,"rrandiops":376893,"wbps":2219232034,"wseqiops":239923,"wrandiops":241421},"qos":{"enable":1,"ctrl":"user","rpct":95.0,"rlat":12042,"wpct":95.0,"wlat":13664,"min":7.94,"max":7.94}}"#
    );
    let back: IoCostState = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);

    // A device without lines: all zero/empty; no cost.vrate: 0.
    let other = DevNr::new(8, 16);
    assert_eq!(read_model(&p, other).unwrap(), IoCostModel::default());
    assert_eq!(read_qos(&p, other).unwrap(), IoCostQos::default());
    assert_eq!(read_vrate(&p, DevNr::new(8, 0)).unwrap(), 0.0);
    assert_eq!(read_vrate(&p, other).unwrap(), 0.0);
    assert_eq!(read_qos(&p, DevNr::new(8, 0)).unwrap().max, 10000.0);
}

#[test]
fn malformed_kernel_files_are_errors() {
    let (_t, p) = host();
    let e = read_model(&p, DEV).unwrap_err().to_string();
    assert!(e.contains("io.cost.model"), "{}", e);
    put(&p, "io.cost.model", "259:0 ctrl=user model=linear rbps=1\n");
    let e = read_model(&p, DEV).unwrap_err().to_string();
    assert!(
        e.contains("io.cost.model") && e.contains("no rseqiops="),
        "{}",
        e
    );
    put(&p, "io.cost.qos", "259:0 enable=1 ctrl=user rpct=x\n");
    let e = read_qos(&p, DEV).unwrap_err().to_string();
    assert!(
        e.contains("io.cost.qos") && e.contains("rpct=\"x\""),
        "{}",
        e
    );
    put(&p, "io.cost.qos", "259:0 enable\n");
    assert!(read_qos(&p, DEV)
        .unwrap_err()
        .to_string()
        .contains("not k=v"));
    put(&p, "io.stat", "259:0 cost.vrate=fast\n");
    assert!(read_vrate(&p, DEV)
        .unwrap_err()
        .to_string()
        .contains("io.stat"));
}

#[test]
fn writers_format_and_journal() {
    let (_t, p) = host();
    put(&p, "io.cost.model", MODEL);
    put(&p, "io.cost.qos", QOS);
    let dev = DevNr::new(8, 0);
    let m = IoCostModel {
        rbps: 1,
        rseqiops: 2,
        rrandiops: 3,
        wbps: 4,
        wseqiops: 5,
        wrandiops: 6,
        ..Default::default()
    };
    let q = IoCostQos {
        rpct: 95.004,
        rlat: 5000,
        wpct: 90.0,
        wlat: 6000,
        min: 50.126,
        max: 100.0,
        ..Default::default()
    };
    let mut j = MemJournal::default();
    assert!(write_model(&p, dev, &m, &mut j).unwrap());
    assert_eq!(
        get(&p, "io.cost.model"),
        "8:0 model=linear rbps=1 rseqiops=2 rrandiops=3 wbps=4 wseqiops=5 wrandiops=6"
    );
    assert!(write_qos(&p, dev, &q, &mut j).unwrap());
    assert_eq!(
        get(&p, "io.cost.qos"),
        "8:0 rpct=95.00 rlat=5000 wpct=90.00 wlat=6000 min=50.13 max=100.00"
    );
    put(&p, "io.cost.qos", QOS);
    assert!(set_enable(&p, dev, true, &mut j).unwrap());
    assert_eq!(get(&p, "io.cost.qos"), "8:0 enable=1");
    let model_p = p.cgroup().join("io.cost.model");
    let qos_p = p.cgroup().join("io.cost.qos");
    assert_eq!(
        j.records,
        vec![
            (model_p.clone(), "8:0 ctrl=auto".to_string()),
            (qos_p.clone(), "8:0 enable=0 ctrl=auto".to_string()),
            (qos_p.clone(), "8:0 enable=0 ctrl=auto".to_string()),
        ]
    );

    // User-controlled device: the restore text carries the parameters.
    put(&p, "io.cost.model", MODEL);
    put(&p, "io.cost.qos", QOS);
    let mut j = MemJournal::default();
    write_model(&p, DEV, &m, &mut j).unwrap();
    write_qos(&p, DEV, &q, &mut j).unwrap();
    assert_eq!(
        j.records[0].1,
        "259:0 ctrl=user model=linear rbps=3235739592 rseqiops=343800 rrandiops=376893 \
         wbps=2219232034 wseqiops=239923 wrandiops=241421"
    );
    assert_eq!(
        j.records[1].1,
        "259:0 enable=1 ctrl=user rpct=95.00 rlat=12042 wpct=95.00 wlat=13664 min=7.94 max=7.94"
    );

    // Already as wanted: no write, no record.
    put(&p, "io.cost.model", MODEL);
    put(&p, "io.cost.qos", QOS);
    let mut j = MemJournal::default();
    assert!(!write_model(&p, DEV, &samsung_model(), &mut j).unwrap());
    let cur = read_qos(&p, DEV).unwrap();
    assert!(!write_qos(&p, DEV, &cur, &mut j).unwrap());
    assert!(!set_enable(&p, DEV, true, &mut j).unwrap());
    assert!(j.records.is_empty());
    assert_eq!(get(&p, "io.cost.model"), MODEL);

    // Missing file: an error naming it, nothing journaled.
    fs::remove_file(&qos_p).unwrap();
    let e = set_enable(&p, DEV, false, &mut NoJournal).unwrap_err();
    assert!(format!("{:#}", e).contains("io.cost.qos"));
}

#[test]
fn from_sys_needs_iocost_enabled() {
    let (_t, p) = host();
    put(&p, "io.cost.model", MODEL);
    put(&p, "io.cost.qos", QOS);
    let k = knobs_from_sys(&p, DEV).unwrap();
    assert_eq!(k.devnr, "259:0");
    assert_eq!(k.qos.min, 7.94);
    let e = knobs_from_sys(&p, DevNr::new(8, 0)).unwrap_err();
    assert_eq!(crate::error::exit_code(&e), crate::error::EXIT_USAGE);
    assert!(
        e.to_string().contains("not enabled for device 8:0"),
        "{}",
        e
    );
}

#[test]
fn knobs_use_the_parameter_layout() {
    let k = IoCostKnobs {
        devnr: "259:0".into(),
        model: samsung_model(),
        qos: IoCostQos {
            enable: 1,
            ctrl: "user".into(),
            rpct: 95.0,
            rlat: 12042,
            wpct: 95.0,
            wlat: 13664,
            min: 60.004,
            max: 100.0,
        },
        upstream_jobs: false,
        fio_engine: false,
    };
    let json = serde_json::to_string(&k).unwrap();
    assert_eq!(
        json,
        r#"{"devnr":"259:0","model":{"rbps":3235739592,"rseqiops":343800,"rrandiops":376893,"wbps":2219232034,"wseqiops":239923,"wrandiops":241421},"qos":{"rpct":95.0,"rlat":12042,"wpct":95.0,"wlat":13664,"min":60.0,"max":100.0}}"#
    );
    let back: IoCostKnobs = serde_json::from_str(&json.replace("60.0", "60.004999")).unwrap();
    assert_eq!(back.qos.min, 60.0);
    assert_eq!(back.model.rbps, 3235739592);
    assert!(back.model.ctrl.is_empty() && back.qos.ctrl.is_empty());
    assert!(!back.upstream_jobs);
    // Measured with upstream's job shapes: one key more, read back.
    let up = IoCostKnobs {
        upstream_jobs: true,
        ..k.clone()
    };
    let text = serde_json::to_string(&up).unwrap();
    assert!(text.ends_with(r#","upstream_jobs":true}"#), "{text}");
    assert!(
        serde_json::from_str::<IoCostKnobs>(&text)
            .unwrap()
            .upstream_jobs
    );
    // And on fio's engine: one more again.
    let fio = IoCostKnobs {
        fio_engine: true,
        ..up
    };
    let text = serde_json::to_string(&fio).unwrap();
    assert!(
        text.ends_with(r#","upstream_jobs":true,"fio_engine":true}"#),
        "{text}"
    );
    let back = serde_json::from_str::<IoCostKnobs>(&text).unwrap();
    assert!(back.upstream_jobs && back.fio_engine);
}

#[test]
fn abs_min_vrate_per_spec() {
    let m = IoCostModel {
        rbps: 3_000_000_000,
        rseqiops: 300_000,
        rrandiops: 300_000,
        wbps: 600_000_000,
        wseqiops: 200_000,
        wrandiops: 200_000,
        ..Default::default()
    };
    assert_eq!(abs_min_vrate(&m), 21.85);
    let slow = IoCostModel {
        rrandiops: 140,
        ..m.clone()
    };
    assert_eq!(abs_min_vrate(&slow), 200.0);
    assert_eq!(abs_min_vrate(&IoCostModel::default()), 0.0);
}

#[test]
fn qos_override_parse_and_apply() {
    let o = QosOverride::parse("rpct=95.123,rlat=5000,vrate=60").unwrap();
    assert_eq!(
        (o.rpct, o.rlat, o.min, o.max, o.off),
        (Some(95.12), Some(5000), Some(60.0), Some(60.0), false)
    );
    for (bad, want) in [
        ("", "empty QoS override"),
        ("rpct", "not KEY=VALUE"),
        ("foo=1", "unknown QoS key \"foo\""),
        ("off=1", "unknown QoS key \"off\""),
        ("rpct=abc", "rpct=\"abc\" is not a number"),
        ("rlat=1.5", "rlat"),
        ("min=50,max=40", "must not be above"),
        ("vrate=50,min=40", "don't combine"),
        ("wpct=101", "between 0 and 100"),
        (
            "max=-1",
            "max=-1 is outside io.cost's vrate range, 1 to 10000 (%)",
        ),
        ("vrate=0", "vrate=0 is outside"),
        ("max=0", "max=0 is outside"),
        ("vrate=1e9", "vrate=1e9 is outside"),
        ("min=0.5", "min=0.5 is outside"),
    ] {
        let e = QosOverride::parse(bad).unwrap_err();
        assert!(e.contains(want), "{:?}: {}", bad, e);
    }

    let base = IoCostQos {
        enable: 0,
        ctrl: "user".into(),
        rpct: 95.0,
        rlat: 12042,
        wpct: 95.0,
        wlat: 13664,
        min: 60.0,
        max: 100.0,
    };
    let q = o.apply(&base);
    assert_eq!(
        (q.enable, q.rpct, q.rlat, q.wpct, q.wlat, q.min, q.max),
        (1, 95.12, 5000, 95.0, 13664, 60.0, 60.0)
    );
    assert_eq!(QosOverride::default().apply(&base).max, 100.0);
    let off = QosOverride::off().apply(&IoCostQos {
        enable: 1,
        ..base.clone()
    });
    assert_eq!((off.enable, off.rlat), (0, 12042));
    assert_eq!(QosOverride::off().describe(&base), "iocost=off");
}

#[test]
fn qos_override_record_layout() {
    // The iocost-qos record layout: every field present, nulls for unset ones.
    let rec = r#"{"max": 122.94, "min": 122.94, "off": false, "rlat": null, "rpct": null, "wlat": null, "wpct": null}"#;
    let o: QosOverride = serde_json::from_str(rec).unwrap();
    assert_eq!(
        (o.min, o.max, o.off, o.rlat),
        (Some(122.94), Some(122.94), false, None)
    );
    let v = serde_json::to_value(o).unwrap();
    assert_eq!(v, serde_json::from_str::<serde_json::Value>(rec).unwrap());
    // Records without `off` (and partial ones) still load.
    let o: QosOverride = serde_json::from_str(r#"{"rpct": 90.0}"#).unwrap();
    assert_eq!((o.off, o.rpct, o.max), (false, Some(90.0), None));
    let o: QosOverride = serde_json::from_str(r#"{"off": true}"#).unwrap();
    assert_eq!(o, QosOverride::off());
}
