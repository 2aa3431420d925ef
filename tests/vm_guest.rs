//! End-to-end tests of `resctl-bench vm`: real QEMU guests (TCG when KVM doesn't work).
//! They run only with RESCTL_BENCH_VM_TESTS=1 (`.ci/run` sets it after `scripts/setup-vm`).
//! Everything is in one test so the CPU-hungry guests boot one after another, four in all,
//! plus two short ones stopped with SIGINT and one frozen with SIGSTOP; and one test of the
//! harness's retry, without guests.

mod common;

use common::{enabled, vm_command, vm_output, BIN};
use serde_json::Value;
use std::process::Output;
use std::time::Instant;

/// `resctl-bench vm` with small, fast guests, run in `cwd`.
fn vm(cwd: &std::path::Path, vm_opts: &[&str], args: &[&str]) -> Output {
    let t = Instant::now();
    let out = vm_output(|| {
        let mut c = vm_command(cwd, "1G", "3min");
        c.arg("-v").args(vm_opts).arg("--").args(args);
        c
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    let boot = stderr
        .lines()
        .find(|l| l.contains("boot to command"))
        .unwrap_or("(no boot-to-command line)");
    eprintln!(
        "vm {:?} -- {:?}: {:?} in {:.1}s; {}",
        vm_opts,
        args,
        out.status.code(),
        t.elapsed().as_secs_f64(),
        boot.trim()
    );
    out
}

fn boot_secs(out: &Output) -> f64 {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("boot to command"))
        .expect("no boot-to-command line");
    let after = line.split("boot to command ").nth(1).unwrap();
    after.split('s').next().unwrap().parse().unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({}):\n{}\nstderr:\n{}",
            e,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `vm -- run selftest` inside `script` (util-linux), whose pseudo-terminal is `vm`'s
/// stderr: the guest draws its progress as one line redrawn in place (`ESC[2K` clears it) with
/// the time left, and logs no plain progress lines.
fn redrawn_through_a_terminal(cwd: &std::path::Path) {
    let t = Instant::now();
    let cmdline = format!(
        "stty cols 120; exec {} vm --mem 1G --disk-size 4G --timeout 3min -- \
         -r tty.json run selftest:steps=4,step-time=2",
        BIN
    );
    let out = vm_output(|| {
        let mut c = std::process::Command::new("script");
        c.current_dir(cwd)
            .args(["-qefc", &cmdline, "/dev/null"])
            .stdin(std::process::Stdio::null());
        c
    });
    let shown = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "vm -- run selftest in a pseudo-terminal: {:?} in {:.1}s",
        out.status.code(),
        t.elapsed().as_secs_f64()
    );
    assert_eq!(out.status.code(), Some(0), "{}", shown);
    assert!(shown.contains("\x1b[2K"), "no redrawn line:\n{:?}", shown);
    assert!(
        shown.contains("selftest step 3/4 | ") && shown.contains(" left"),
        "no step with time left:\n{:?}",
        shown
    );
    assert!(
        !shown.contains("] selftest step"),
        "plain progress lines on a terminal:\n{:?}",
        shown
    );
}

/// Starts `resctl-bench vm` on a long guest command with a private TMPDIR, sends SIGINT once a
/// stderr line contains `when` (to the `vm` process, or to its whole process group as a
/// terminal's Ctrl-C does), and checks that it exits 130 with QEMU and its work directory gone.
fn interrupt(cwd: &std::path::Path, when: &str, group: bool) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let t = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(BIN)
        .current_dir(cwd)
        .env("TMPDIR", tmp.path())
        .args(["vm", "-v", "--mem", "1G", "--disk-size", "4G", "--"])
        .args(["-r", "int.json", "__probe", "--randread", "60"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut text = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        text += &line;
        if line.contains(when) {
            break;
        }
        line.clear();
    }
    assert!(text.contains(when), "no {:?} line:\n{}", when, text);
    let target = if group {
        // Ctrl-C in a terminal: the whole foreground group, a moment after QEMU started.
        std::thread::sleep(std::time::Duration::from_secs(1));
        -pid
    } else {
        pid
    };
    let sent = Instant::now();
    assert_eq!(unsafe { libc::kill(target, libc::SIGINT) }, 0);
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        rest
    });
    let st = child.wait().unwrap();
    let stopped = sent.elapsed().as_secs_f64();
    text += &drain.join().unwrap();
    eprintln!(
        "SIGINT to the {} after {:?}: {:?} {:.2}s later ({:.1}s in all)",
        if group { "process group" } else { "vm process" },
        when,
        st.code(),
        stopped,
        t.elapsed().as_secs_f64()
    );
    assert_eq!(st.code(), Some(130), "{}", text);
    assert!(text.contains("vm: stopped by signal 2"), "{}", text);
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {:?}", left);
    // No process (QEMU) still refers to the work directory.
    let needle = tmp.path().to_string_lossy().into_owned();
    for ent in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(ent.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            assert!(!cmd.contains(&needle), "still running: {}", cmd);
        }
    }
    assert!(cwd.join("int-report.d").is_dir());
    assert!(stopped < 10.0, "took {:.1}s to stop", stopped);
}

/// A guest whose kernel stops (seen under TCG: an rcu stall, timers no longer firing) used to
/// make `vm` wait forever without `--timeout`. Freezing QEMU with SIGSTOP while the command
/// runs stops the heartbeat the same way: `vm` must stop the VM after `--stall-timeout`, say so
/// and exit 124.
fn stall(cwd: &std::path::Path) {
    use std::io::BufRead;
    let t = Instant::now();
    let mut child = std::process::Command::new(BIN)
        .current_dir(cwd)
        .args(["vm", "-v", "--mem", "1G", "--disk-size", "4G"])
        .args(["--stall-timeout", "10s", "--timeout", "3min", "--"])
        .args(["__probe", "--randread", "120"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let vm_pid = child.id().to_string();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut text = String::new();
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        text += &line;
        if line.contains("boot to command") {
            break;
        }
        line.clear();
    }
    assert!(text.contains("boot to command"), "{}", text);
    // A heartbeat's time into the command, freeze the whole VM.
    std::thread::sleep(std::time::Duration::from_secs(6));
    let qemu = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .find(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let f: Vec<&str> = stat.split_whitespace().collect();
            f.len() > 3 && f[1].starts_with("(qemu-system") && f[3] == vm_pid
        })
        .map(|e| e.file_name().to_string_lossy().parse::<i32>().unwrap())
        .expect("no QEMU child of vm");
    let frozen = Instant::now();
    assert_eq!(unsafe { libc::kill(qemu, libc::SIGSTOP) }, 0);
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        rest
    });
    let st = child.wait().unwrap();
    let after = frozen.elapsed().as_secs_f64();
    text += &drain.join().unwrap();
    eprintln!(
        "QEMU frozen: vm exited {:?} {:.1}s later ({:.1}s in all)",
        st.code(),
        after,
        t.elapsed().as_secs_f64()
    );
    assert_eq!(st.code(), Some(124), "{}", text);
    assert!(
        text.contains("vm: the guest sent no heartbeat for"),
        "{}",
        text
    );
    // The last heartbeat came up to 5 s before the freeze.
    assert!(
        (4.0..40.0).contains(&after),
        "stopped {:.1}s after the freeze",
        after
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{}", qemu)).exists(),
        "QEMU left running"
    );
}

#[test]
fn vm_guest_has_iocost_swap_shared_cwd_exit_status_and_disk_profiles() {
    if !enabled() {
        return;
    }
    let group = Instant::now();
    let cwd = tempfile::tempdir().unwrap();

    // Boot 1 (unthrottled): io.cost knobs, io.stat, swap, shared cwd, IOPS, exit status 0.
    let out = vm(
        cwd.path(),
        &[],
        &[
            "__probe",
            "--iocost-model",
            "ctrl=user model=linear rbps=2000000000 rseqiops=100000 rrandiops=100000 \
             wbps=1000000000 wseqiops=50000 wrandiops=50000",
            "--iocost-qos",
            "enable=1 ctrl=user rpct=95 rlat=5000 wpct=95 wlat=5000 min=50 max=150",
            "--io-stat",
            "--swaps",
            "--randread",
            "3",
            "--write-file",
            "written-in-guest.txt",
            "--content",
            "hello from the guest\n",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = json(&out);
    let dev = &j["device"];
    let majmin = dev["maj_min"].as_str().unwrap();
    assert_eq!(dev["serial"], "resctl-unthrottled");
    assert_eq!(dev["rotational"], false);
    let qos = j["iocost_qos"].as_str().unwrap();
    assert!(
        qos.starts_with(&format!("{} enable=1 ctrl=user", majmin)),
        "{}",
        qos
    );
    assert!(
        qos.contains("rlat=5000") && qos.contains("max=150.00"),
        "{}",
        qos
    );
    let model = j["iocost_model"].as_str().unwrap();
    assert!(
        model.contains("ctrl=user model=linear rbps=2000000000"),
        "{}",
        model
    );
    let io_stat = j["io_stat"].as_str().unwrap();
    assert!(
        io_stat
            .lines()
            .any(|l| l.starts_with(majmin) && l.contains("cost.vrate=")),
        "{}",
        io_stat
    );
    let swaps = j["swap_devices"].as_array().unwrap();
    assert!(
        swaps.iter().any(|s| s[1] == majmin),
        "no swap on the scratch disk {}: {}",
        majmin,
        j["swaps"]
    );
    for c in ["cpu", "io", "memory"] {
        assert!(j["cgroup_controllers"]
            .as_str()
            .unwrap()
            .split(' ')
            .any(|x| x == c));
    }
    assert_eq!(
        std::fs::read_to_string(cwd.path().join("written-in-guest.txt")).unwrap(),
        "hello from the guest\n"
    );
    let fast = j["randread"]["iops"].as_f64().unwrap();
    let boot = boot_secs(&out);

    // Boot 2 (hdd): a rotational device with a tenth of the IOPS or less.
    let out = vm(
        cwd.path(),
        &["--disk-profile", "hdd"],
        &["__probe", "--randread", "3"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = json(&out);
    assert_eq!(j["device"]["serial"], "resctl-hdd");
    assert_eq!(j["device"]["rotational"], true);
    let slow = j["randread"]["iops"].as_f64().unwrap();
    eprintln!(
        "4 KiB random-read IOPS: unthrottled {:.0}, hdd {:.0}",
        fast, slow
    );
    assert!(
        slow > 0.0 && slow * 10.0 <= fast,
        "hdd {} vs unthrottled {}",
        slow,
        fast
    );

    // Boot 3: a non-zero exit status and byte-exact stdout/stderr.
    let out = vm(
        cwd.path(),
        &[],
        &[
            "__probe",
            "--stdout",
            "out\r\nno newline at the end",
            "--stderr",
            "err\r\n",
            "--exit",
            "7",
        ],
    );
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(out.stdout, b"out\r\nno newline at the end");
    assert!(String::from_utf8_lossy(&out.stderr).contains("err\r\n"));

    // Boot 4: through a pseudo-terminal, the guest's progress display is the host's redrawn
    // line, with time left (off a terminal it is plain lines: vm_systemd checks those).
    redrawn_through_a_terminal(cwd.path());

    // Boots 5 and 6: Ctrl-C while QEMU boots (process group) and while the command runs.
    interrupt(cwd.path(), "qemu-system", true);
    interrupt(cwd.path(), "boot to command", false);
    // Boot 7: the guest freezes while the command runs.
    stall(cwd.path());

    eprintln!(
        "boot to command (first guest): {:.2}s; VM test group: {:.1}s",
        boot,
        group.elapsed().as_secs_f64()
    );
    assert!(boot < 30.0, "boot to command took {:.1}s", boot);
}

/// The harness's retry after a failed VM starts from the files the first try started from:
/// what that try wrote (here a finished result) is gone, what was there before is kept. It
/// runs without guests.
#[test]
fn vm_retry_starts_from_the_files_before_the_first_try() {
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("input.json"), "{}").unwrap();
    let mut tries = 0;
    let out = vm_output(|| {
        tries += 1;
        let script = if tries == 1 {
            "mkdir result-report.d && echo done > result.json && \
             echo \"error: vm: the VM ended without reporting the command's exit status\" >&2; exit 1"
        } else {
            "test -e input.json && test ! -e result.json && test ! -e result-report.d"
        };
        let mut c = std::process::Command::new("sh");
        c.current_dir(cwd.path()).args(["-c", script]);
        c
    });
    assert_eq!(tries, 2);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
