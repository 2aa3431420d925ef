//! The fleet: `contrib/ansible`'s playbook against two `vm --init systemd --ssh-port` guests,
//! booted side by side, reachable only on the host's 127.0.0.1. The playbook installs the
//! Debian package built here (`scripts/build-deb` around the release binary), checks each
//! host, starts the jobs in a transient unit, is interrupted while they run (and one host's
//! run is SIGKILLed), then runs again to the end, fetches the result files and files them in a
//! database with `db import` and `db build`; a third run only collects. The role runs the
//! package's /usr/bin/resctl-bench (the guest's PATH has `vm`'s own copy first). The jobs: `io`, then
//! `iocost-tune` over a community result's iocost-qos (a different model per host), which is
//! what the database takes. Runs only with RESCTL_BENCH_VM_TESTS=1; needs ansible-playbook and
//! ansible-lint (`scripts/setup-fleet`, which `scripts/test` runs with the VM tests).

mod common;

use common::{build_deb, enabled, fixture_entries, keep_failed_try, ok_json, release_bin};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const HOSTS: [(&str, &str); 2] = [
    ("h1", "Samsung_SSD_970_PRO_512GB"),
    ("h2", "INTEL_SSDPEKKA256G7"),
];
const SPEC: &str = "io:dur=20s,file-size=64M iocost-tune";
/// The result file on each host (the role's default under its default --dir).
const RESULT: &str = "/var/lib/resctl-demo/result.json";

/// The guests: killed if the test ends before they were powered off.
struct Guests(Vec<Child>);

impl Drop for Guests {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn ssh(dir: &Path, port: u16, cmd: &str) -> Output {
    Command::new("ssh")
        .args(["-i"])
        .arg(dir.join("key"))
        .args([
            "-p",
            &port.to_string(),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            "-o",
            "ConnectTimeout=5",
            "root@127.0.0.1",
            cmd,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Waits until `check` holds, checking every 2 s; panics with `what` after `limit`.
fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let t = Instant::now();
    while !check() {
        assert!(t.elapsed() < limit, "{} within {:?}", what, limit);
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!("{} after {:.0}s", what, t.elapsed().as_secs_f64());
}

/// The last lines of a guest's `vm` log: what a failed boot leaves behind.
fn vm_log_tail(dir: &Path, port: u16) -> String {
    let log = std::fs::read_to_string(dir.join(format!("vm-{}.log", port))).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Waits for the guest on `port` to take SSH logins: Err with its log's tail if its `vm` exits
/// first or 240 s pass.
fn wait_for_ssh(dir: &Path, guest: &mut Child, port: u16) -> Result<(), String> {
    let t = Instant::now();
    let limit = Duration::from_secs(240);
    while !ssh(dir, port, "true").status.success() {
        if let Some(st) = guest.try_wait().unwrap() {
            return Err(format!(
                "the guest for port {} exited ({}) before SSH came up; its vm log:\n{}",
                port,
                st,
                vm_log_tail(dir, port)
            ));
        }
        if t.elapsed() > limit {
            return Err(format!(
                "no SSH on port {} within {:?}; the guest's vm log:\n{}",
                port,
                limit,
                vm_log_tail(dir, port)
            ));
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    eprintln!(
        "SSH on port {} after {:.0}s",
        port,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Brings every guest to SSH. A guest that doesn't get there (under TCG a guest kernel stalls
/// at boot once in a few hundred boots) is killed and booted once more on a fresh port, as
/// `common::vm_output` retries the other VM tests' guests; the failed try's log is kept in
/// target/vm-failed-tries.log. A guest failing twice fails the test.
fn reach_all(dir: &Path, guests: &mut Guests, ports: &mut [u16]) {
    for (i, (guest, port)) in guests.0.iter_mut().zip(ports.iter_mut()).enumerate() {
        let Err(why) = wait_for_ssh(dir, guest, *port) else {
            continue;
        };
        eprintln!("warning: booting the guest once more: {}", why);
        keep_failed_try(&format!("vm_fleet guest {}", i), &why);
        let _ = guest.kill();
        let _ = guest.wait();
        *port = free_port();
        *guest = boot_one(dir, *port);
        if let Err(why) = wait_for_ssh(dir, guest, *port) {
            panic!("a guest failed twice; the second time: {}", why);
        }
    }
}

fn boot_one(dir: &Path, port: u16) -> Child {
    Command::new(release_bin())
        .current_dir(dir)
        .args(["vm", "--init", "systemd", "--mem", "1G", "--cpus", "1"])
        .args(["--disk-size", "4G", "--timeout", "10min", "--ssh-port"])
        .arg(port.to_string())
        .args(["--ssh-key", "key.pub"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("vm-{}.log", port))).unwrap())
        .spawn()
        .unwrap()
}

/// A community result without its iocost-tune: what `iocost-tune` then solves on the host.
fn seed(dir: &Path, fixture: &str) -> PathBuf {
    let entries: Vec<Value> = fixture_entries(fixture)
        .into_iter()
        .filter(|e| e["spec"]["kind"] != "iocost-tune")
        .collect();
    let p = dir.join(format!("seed-{}.json", fixture));
    std::fs::write(&p, serde_json::to_vec(&entries).unwrap()).unwrap();
    p
}

fn inventory(dir: &Path, ports: &[u16], deb: &str) {
    let mut s = String::from("[resctl_bench]\n");
    for ((name, _), p) in HOSTS.iter().zip(ports) {
        s += &format!("{} ansible_host=127.0.0.1 ansible_port={}\n", name, p);
    }
    s += &format!(
        "\n[resctl_bench:vars]\nansible_user=root\nansible_ssh_private_key_file={key}\n\
         ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n\
         ansible_python_interpreter=/usr/bin/python3\nresctl_bench_become=false\n\
         resctl_bench_deb={deb}\nresctl_bench_bin=/usr/bin/resctl-bench\nresctl_bench_spec=\"{SPEC}\"\nresctl_bench_poll_delay=2\n\
         resctl_bench_local_bin={bin}\nresctl_bench_fetch_dir={d}/results\n\
         resctl_bench_db={d}/db\nresctl_bench_db_out={d}/db-out\n",
        key = dir.join("key").display(),
        bin = release_bin().display(),
        d = dir.display(),
    );
    std::fs::write(dir.join("inventory.ini"), s).unwrap();
}

fn playbook(dir: &Path) -> Command {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/ansible/playbook.yml");
    let mut c = Command::new("ansible-playbook");
    // The test interrupts it with SIGINT. `exec` keeps an ignored signal ignored, and a job a
    // non-interactive shell starts in the background ignores SIGINT: run so, the playbook never
    // saw the interrupt, ran to its end, and h1's run was gone before the kill.
    unsafe {
        c.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    c.current_dir(dir)
        .env("ANSIBLE_HOST_KEY_CHECKING", "False")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_FORKS", "4")
        .args(["-i", "inventory.ini"])
        .arg(book);
    c
}

/// The PLAY RECAP line of `host`.
fn recap<'a>(log: &'a str, host: &str) -> &'a str {
    log.lines()
        .rev()
        .find(|l| l.starts_with(host) && l.contains("ok="))
        .unwrap_or_else(|| panic!("no recap of {} in:\n{}", host, log))
}

fn records_complete(bin: &Path, result: &Path) -> Vec<String> {
    let out = Command::new(bin)
        .arg("-r")
        .arg(result)
        .args(["summary", "-o", "json"])
        .output()
        .unwrap();
    let v = ok_json(&out);
    let recs = v["records"].as_array().unwrap();
    assert!(recs.iter().all(|r| r["complete"] == true), "{}", v);
    let mut kinds: Vec<String> = recs
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect();
    kinds.dedup();
    kinds
}

#[test]
fn vm_fleet_playbook_runs_resumes_and_collects_into_the_database() {
    if !enabled() {
        return;
    }
    let group = Instant::now();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lint = Command::new("ansible-lint")
        .args(["--offline", "--nocolor"])
        .current_dir(root.join("contrib/ansible"))
        .output()
        .expect("ansible-lint is missing: run scripts/setup-fleet");
    assert!(
        lint.status.success(),
        "ansible-lint:\n{}{}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let st = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "resctl-bench-fleet-test",
            "-f",
        ])
        .arg(dir.join("key"))
        .status()
        .unwrap();
    assert!(st.success());
    let mut ports: Vec<u16> = HOSTS.iter().map(|_| free_port()).collect();
    let mut guests = Guests(ports.iter().map(|p| boot_one(dir, *p)).collect());

    let deb = build_deb(&release_bin(), &dir.join("deb"));
    reach_all(dir, &mut guests, &mut ports);
    inventory(dir, &ports, &deb);
    for ((_, fixture), p) in HOSTS.iter().zip(&ports) {
        let seed = std::fs::File::open(seed(dir, fixture)).unwrap();
        let st = Command::new("ssh")
            .arg("-i")
            .arg(dir.join("key"))
            .args(["-p", &p.to_string(), "-o", "StrictHostKeyChecking=no"])
            .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"])
            .arg("root@127.0.0.1")
            .arg(format!("cat > {}", RESULT))
            .stdin(seed)
            .status()
            .unwrap();
        assert!(st.success());
    }

    // First run: interrupted once both hosts' runs are going, one of them SIGKILLed too.
    let mut first = playbook(dir)
        .stdout(std::fs::File::create(dir.join("play-1.log")).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("both runs going", Duration::from_secs(300), || {
        if let Some(st) = first.try_wait().unwrap() {
            panic!(
                "the first playbook run ended ({}) before both runs were seen going",
                st
            );
        }
        ports.iter().all(|p| {
            let o = ssh(dir, *p, "systemctl is-active resctl-bench");
            String::from_utf8_lossy(&o.stdout).trim() == "active"
        })
    });
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let _ = first.wait();
    let log1 = std::fs::read_to_string(dir.join("play-1.log")).unwrap();
    assert!(!log1.contains("PLAY RECAP"), "not interrupted:\n{}", log1);
    let killed = ssh(dir, ports[0], "systemctl kill --signal=KILL resctl-bench");
    assert!(
        killed.status.success(),
        "SIGKILL to h1's run: {}",
        String::from_utf8_lossy(&killed.stderr)
    );

    eprintln!(
        "first run interrupted at {:.0}s",
        group.elapsed().as_secs_f64()
    );
    // Second run: goes on where each host is (h1 starts its run again, which resumes the
    // result file; h2's is still running), then fetches and files both.
    let second = playbook(dir).output().unwrap();
    let log2 = String::from_utf8_lossy(&second.stdout).into_owned();
    std::fs::write(dir.join("play-2.log"), &log2).unwrap();
    assert!(second.status.success(), "{}", log2);
    for (h, _) in HOSTS {
        assert!(recap(&log2, h).contains("failed=0"), "{}", log2);
    }
    for p in &ports {
        let o = ssh(
            dir,
            *p,
            "dpkg-query -W -f='${Status}' resctl-bench && dpkg -V resctl-bench",
        );
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && text == "install ok installed",
            "{}",
            text
        );
    }
    let bin = release_bin();
    for (h, _) in HOSTS {
        let r = dir.join(format!("results/{}.json", h));
        assert_eq!(records_complete(&bin, &r)[..2], ["io", "iocost-tune"]);
    }
    // Each host's result filed once, under its model; the build made the hwdb file.
    let mut filed: Vec<String> = walk(&dir.join("db"))
        .into_iter()
        .filter(|p| p.ends_with(".json.gz"))
        .collect();
    filed.sort();
    assert_eq!(filed.len(), 2, "{:?}", filed);
    for (_, fixture) in HOSTS {
        assert_eq!(
            filed.iter().filter(|f| f.contains(fixture)).count(),
            1,
            "{:?}",
            filed
        );
    }
    let hwdb = std::fs::read_to_string(dir.join("db-out/90-iocost-tune.hwdb")).unwrap();
    assert!(hwdb.contains("IOCOST_MODEL"), "{}", hwdb);

    eprintln!("second run done at {:.0}s", group.elapsed().as_secs_f64());
    // Third run: nothing to do but collect.
    let third = playbook(dir).output().unwrap();
    let log3 = String::from_utf8_lossy(&third.stdout).into_owned();
    assert!(third.status.success(), "{}", log3);
    for (h, _) in HOSTS {
        assert!(recap(&log3, h).contains("changed=0"), "{}", log3);
    }
    assert!(!log3.lines().any(|l| l.starts_with("changed:")), "{}", log3);
    let start = log3
        .split("TASK [resctl_bench : Start the run in a transient unit")
        .nth(1)
        .expect("the start task listed");
    let start = start.split("TASK [").next().unwrap();
    assert!(
        start
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .all(|l| l.starts_with("skipping:")),
        "{}",
        start
    );
    std::fs::write(dir.join("play-3.log"), &log3).unwrap();
    eprintln!(
        "third run's recap:\n{}",
        log3.lines().rev().take(4).collect::<Vec<_>>().join("\n")
    );

    eprintln!("third run done at {:.0}s", group.elapsed().as_secs_f64());
    // Nothing left running: each guest powered off from inside, its vm exits 0.
    for p in &ports {
        let _ = ssh(dir, *p, "systemctl poweroff");
    }
    let t = Instant::now();
    for g in &mut guests.0 {
        loop {
            if let Some(st) = g.try_wait().unwrap() {
                assert!(st.success(), "vm exited with {:?}", st);
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "a guest didn't power off"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    eprintln!("fleet test: {:.0}s", group.elapsed().as_secs_f64());
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}
