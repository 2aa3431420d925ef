use super::*;
use crate::system::DFL_DIR;
use clap::Parser;
use std::path::PathBuf;

/// `vm`'s own options as the command line gives them (`rb [-d DIR] vm ...`).
#[derive(Parser)]
struct VmCmd {
    #[arg(short = 'd', long = "dir")]
    dir: Option<String>,
    #[command(flatten)]
    vm: VmArgs,
}

fn opts(argv: &[&str]) -> Result<Opts> {
    let argv: Vec<&str> = argv.iter().copied().filter(|a| *a != "vm").collect();
    let cmd = VmCmd::try_parse_from(argv).unwrap();
    Opts::new(cmd.dir.as_deref(), &cmd.vm, Path::new("/work/x"))
}

#[test]
fn defaults_and_dir_placement() {
    let o = opts(&["rb", "vm", "--", "run", "storage"]).unwrap();
    assert_eq!(o.mem, 4 << 30);
    assert_eq!(o.swap_size, 2 << 30);
    assert_eq!(o.disk_size, 16 << 30);
    assert_eq!(o.scratch_dir, PathBuf::from(DFL_DIR));
    assert_eq!(o.limits.name, "unthrottled");
    let o = opts(&["rb", "vm", "--", "-d", "scr", "run"]).unwrap();
    assert_eq!(o.scratch_dir, PathBuf::from("/work/x/scr"));
    let o = opts(&["rb", "vm", "--", "--dir=/srv/b", "run"]).unwrap();
    assert_eq!(o.scratch_dir, PathBuf::from("/srv/b"));
    let o = opts(&["rb", "-d", "/srv/c", "vm", "--", "run"]).unwrap();
    assert_eq!(o.scratch_dir, PathBuf::from("/srv/c"));
    assert_eq!(o.args, vec!["--dir", "/srv/c", "run"]);
    assert_eq!(o.reports_dir, None);
}

#[test]
fn reports_dir_follows_the_result_inside_the_shared_dir() {
    let rd = |argv: &[&str]| opts(argv).unwrap().reports_dir;
    let p = |s: &str| Some(PathBuf::from(s));
    assert_eq!(
        rd(&["rb", "vm", "--", "-r", "res.json.gz", "run"]),
        p("/work/x/res-report.d")
    );
    assert_eq!(
        rd(&["rb", "vm", "--", "--result=out/./a.json", "run"]),
        p("/work/x/out/a-report.d")
    );
    assert_eq!(
        rd(&["rb", "vm", "--", "-r/work/x/sub/../b", "run"]),
        p("/work/x/b-report.d")
    );
    // Outside the shared directory, or on the scratch disk: nothing to share.
    assert_eq!(rd(&["rb", "vm", "--", "-r", "../c.json", "run"]), None);
    assert_eq!(rd(&["rb", "vm", "--", "-r", "/tmp/c.json", "run"]), None);
    assert_eq!(
        rd(&["rb", "vm", "--", "-d", "scr", "-r", "scr/c.json", "run"]),
        None
    );
    assert_eq!(rd(&["rb", "vm", "--", "run", "--", "-r", "x"]), None);
}

#[test]
fn disk_latency_is_whole_ms_and_0_turns_it_off() {
    let lat = |argv: &[&str]| {
        let o = opts(argv).unwrap();
        (o.limits.name, o.limits.latency_ms)
    };
    assert_eq!(
        lat(&["rb", "vm", "--disk-profile", "hdd", "--", "x"]),
        ("hdd".into(), Some(6))
    );
    assert_eq!(
        lat(&[
            "rb",
            "vm",
            "--disk-profile",
            "hdd",
            "--disk-latency",
            "0",
            "--",
            "x"
        ]),
        ("custom".into(), None)
    );
    assert_eq!(
        lat(&["rb", "vm", "--disk-latency", "0.012", "--", "x"]),
        ("custom".into(), Some(12))
    );
    assert_eq!(
        lat(&["rb", "vm", "--disk-latency=1ms", "--", "x"]),
        ("custom".into(), Some(1))
    );
}

#[test]
fn bad_values_are_usage_errors() {
    for argv in [
        &["rb", "vm", "--mem", "lots", "--", "x"][..],
        &["rb", "vm", "--mem", "100M", "--", "x"],
        &["rb", "vm", "--disk-size", "1G", "--mem", "4G", "--", "x"],
        &["rb", "vm", "--cpus", "0", "--", "x"],
        &["rb", "vm", "--disk-profile", "tape", "--", "x"],
        &["rb", "vm", "--disk-iops=-5", "--", "x"],
        &["rb", "vm", "--disk-latency", "slow", "--", "x"],
        &["rb", "vm", "--disk-latency", "500us", "--", "x"],
        &["rb", "vm", "--disk-latency", "6.5ms", "--", "x"],
        &["rb", "vm", "--disk-latency", "11s", "--", "x"],
        &["rb", "vm", "--accel", "xen", "--", "x"],
        &["rb", "vm", "--timeout", "0", "--", "x"],
        &["rb", "vm", "--timeout", "500ms", "--", "x"],
        &["rb", "vm", "--boot-timeout", "3m", "--", "x"],
        &["rb", "vm", "--stall-timeout", "5s", "--", "x"],
        &["rb", "vm", "--stall-timeout", "soon", "--", "x"],
        &["rb", "vm", "--", "-d", "/", "x"],
    ] {
        let e = opts(argv).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2, "{:?}: {}", argv, e);
        assert!(!e.to_string().contains('\n'));
    }
}

#[test]
fn a_timeout_in_milliseconds_names_the_lone_m() {
    let e = opts(&["rb", "vm", "--timeout", "28m", "--", "x"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("a lone `m` is milliseconds, `28min` is minutes"),
        "{}",
        e
    );
    let e = opts(&["rb", "vm", "--timeout", "0.5s", "--", "x"]).unwrap_err();
    assert!(e.to_string().contains("accepted: 1s or more"), "{}", e);
    assert!(!e.to_string().contains("lone"), "{}", e);
    let o = opts(&[
        "rb",
        "vm",
        "--timeout",
        "1s",
        "--boot-timeout",
        "28min",
        "--",
        "x",
    ])
    .unwrap();
    assert_eq!(o.timeout, Some(std::time::Duration::from_secs(1)));
    assert_eq!(o.boot_timeout, std::time::Duration::from_secs(28 * 60));
}

#[test]
fn a_scsi_disk_is_what_scsi_inquiry_can_carry() {
    assert_eq!(
        super::opts::scsi_disk("RB Test HDD:2.5+").unwrap(),
        ("RB Test HDD".to_string(), "2.5+".to_string())
    );
    assert_eq!(super::opts::scsi_disk("X").unwrap().1, "1.0");
    for bad in [
        "",
        "A:",
        "A,B:1",
        "SEVENTEEN-CHARSXX:1",
        "A:12345",
        "A\tB:1",
    ] {
        let e = super::opts::scsi_disk(bad).unwrap_err();
        assert!(e.contains("accepted: MODEL[:REV]"), "{:?}: {}", bad, e);
    }
}

/// A public key file and a port free on 127.0.0.1 (the kernel's pick, free once let go).
fn ssh_fixture() -> (tempfile::TempDir, String, String, u16) {
    let d = tempfile::tempdir().unwrap();
    let key = d.path().join("k.pub");
    std::fs::write(&key, "# made for a test\nssh-ed25519 AAAAC3Nza test@host\n").unwrap();
    let k = key.to_str().unwrap().to_string();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let free = l.local_addr().unwrap().port();
    (d, k, free.to_string(), free)
}

#[test]
fn ssh_port_takes_a_key_and_needs_no_command() {
    let (_d, k, port, free) = ssh_fixture();
    let ssh = ["--init", "systemd", "--ssh-port", &port, "--ssh-key", &k];
    let o = opts(&[&["rb", "vm"][..], &ssh].concat()).unwrap();
    let keys = "ssh-ed25519 AAAAC3Nza test@host\n".to_string();
    assert_eq!(o.ssh, Some((free, keys)));
    assert!(o.args.is_empty());
    // vm's own --dir places the scratch disk without making up a command.
    let o = opts(&[&["rb", "-d", "/srv/c", "vm"][..], &ssh].concat()).unwrap();
    assert!(o.args.is_empty());
    assert_eq!(o.scratch_dir, PathBuf::from("/srv/c"));
}

#[test]
fn ssh_port_refuses_what_it_cant_use_in_one_line() {
    let (d, k, port, _) = ssh_fixture();
    let err = |argv: &[String]| {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let e = opts(&argv).unwrap_err();
        assert!(e.downcast_ref::<crate::error::UsageError>().is_some());
        format!("{:#}", e)
    };
    let with = |more: &[&str]| -> Vec<String> {
        ["rb", "vm", "--init", "systemd"]
            .iter()
            .chain(more)
            .map(|s| s.to_string())
            .collect()
    };
    assert!(err(&with(&["--ssh-port", &port])).contains("needs --ssh-key"));
    assert!(err(&with(&["--ssh-key", &k])).contains("needs --ssh-port"));
    let builtin = ["rb", "vm", "--ssh-port", &port, "--ssh-key", &k].map(String::from);
    assert!(err(&builtin).contains("needs --init systemd"));
    for bad in ["0", "65536", "ssh"] {
        let e = err(&with(&["--ssh-port", bad, "--ssh-key", &k]));
        assert!(e.contains("is not a port (accepted: 1 to 65535)"), "{}", e);
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p = taken.local_addr().unwrap().port().to_string();
    let e = err(&with(&["--ssh-port", &p, "--ssh-key", &k]));
    assert!(e.contains("can't be used"), "{}", e);
    std::fs::write(
        d.path().join("k.pub"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    )
    .unwrap();
    let e = err(&with(&["--ssh-port", &port, "--ssh-key", &k]));
    assert!(e.contains("not a public key file"), "{}", e);
    let e = err(&with(&["--ssh-port", &port, "--ssh-key", "/no/such.pub"]));
    assert!(e.contains("--ssh-key /no/such.pub"), "{}", e);
}
