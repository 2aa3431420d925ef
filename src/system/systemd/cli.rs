//! [`Manager`] for the running systemd, through `systemctl` and `busctl` (transient units with
//! properties and processes, which `systemctl` has no command for).

use super::manager::{BusValue, Manager};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a transient unit may take to become active (guests under TCG are slow).
const START_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct Systemctl {
    /// Where `set-property --runtime` keeps its drop-ins (`/run/systemd/system.control`).
    control_dir: PathBuf,
}

impl Systemctl {
    /// The host's systemd; `root` is the host's file system root (for the drop-in files).
    pub fn new(root: &std::path::Path) -> Self {
        Self {
            control_dir: root.join("run/systemd/system.control"),
        }
    }

    fn dropin(&self, unit: &str, prop: &str) -> PathBuf {
        self.control_dir
            .join(format!("{}.d", unit))
            .join(format!("50-{}.conf", prop))
    }
}

/// Runs `prog args`, returning stdout; a failure carries stderr's first line.
fn run(prog: &str, args: &[String]) -> Result<String> {
    log::debug!("{} {}", prog, args.join(" "));
    let out = Command::new(prog)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running {}", prog))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{} {} failed ({}): {}",
            prog,
            args.join(" "),
            out.status,
            err.trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// busctl's arguments for one `(sv)` property.
fn bus_args(name: &str, v: &BusValue, out: &mut Vec<String>) {
    out.push(name.to_string());
    match v {
        BusValue::Str(s) => out.extend(["s".to_string(), s.clone()]),
        BusValue::U64(n) => out.extend(["t".to_string(), n.to_string()]),
        BusValue::Bool(b) => out.extend(["b".to_string(), b.to_string()]),
        BusValue::Pids(p) => {
            out.extend(["au".to_string(), p.len().to_string()]);
            out.extend(p.iter().map(u32::to_string));
        }
    }
}

impl Manager for Systemctl {
    fn show(&self, unit: &str, props: &[&str]) -> Result<BTreeMap<String, String>> {
        let text = run(
            "systemctl",
            &strings(&["show", "-p", &props.join(","), "--", unit]),
        )?;
        let mut m: BTreeMap<String, String> = props
            .iter()
            .map(|p| (p.to_string(), String::new()))
            .collect();
        for line in text.lines() {
            if let Some((k, v)) = line.split_once('=') {
                m.insert(k.to_string(), v.to_string());
            }
        }
        Ok(m)
    }

    fn set_runtime(&self, unit: &str, assignments: &[String]) -> Result<()> {
        let mut a = strings(&["set-property", "--runtime", "--", unit]);
        a.extend(assignments.iter().cloned());
        run("systemctl", &a).map(|_| ())
    }

    fn start_transient(&self, unit: &str, props: &[(&str, BusValue)]) -> Result<()> {
        let mut a = strings(&[
            "call",
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "StartTransientUnit",
            "ssa(sv)a(sa(sv))",
            unit,
            "fail",
        ]);
        a.push(props.len().to_string());
        for (n, v) in props {
            bus_args(n, v, &mut a);
        }
        a.push("0".into());
        run("busctl", &a)?;
        // The call only queues the start job; wait for it.
        let t = Instant::now();
        loop {
            let st = self.show(unit, &["ActiveState"])?;
            match st.get("ActiveState").map(String::as_str) {
                Some("active") => return Ok(()),
                Some("failed") => bail!("transient unit {} failed to start", unit),
                _ if t.elapsed() > START_TIMEOUT => {
                    bail!(
                        "transient unit {} did not start within {:?}",
                        unit,
                        START_TIMEOUT
                    )
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    fn stop(&self, unit: &str) -> Result<()> {
        match run("systemctl", &strings(&["stop", "--", unit])) {
            Ok(_) => Ok(()),
            // Gone already (a scope collected when its processes ended).
            Err(e) if format!("{:#}", e).contains("not loaded") => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn start(&self, unit: &str) -> Result<()> {
        run("systemctl", &strings(&["start", "--", unit])).map(|_| ())
    }

    fn has_runtime_dropin(&self, unit: &str, prop: &str) -> bool {
        self.dropin(unit, prop).exists()
    }

    fn remove_runtime_dropins(&self, unit: &str, props: &[&str]) -> Result<()> {
        let dir = self.control_dir.join(format!("{}.d", unit));
        let rm = |p: PathBuf| match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", p.display()))
            }
            _ => Ok(()),
        };
        if props.is_empty() {
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    rm(e.path())?;
                }
            }
        } else {
            for p in props {
                rm(self.dropin(unit, p))?;
            }
        }
        let _ = std::fs::remove_dir(&dir);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_arguments_follow_the_signature() {
        let mut a = Vec::new();
        bus_args("PIDs", &BusValue::Pids(vec![5, 6]), &mut a);
        bus_args("Slice", &BusValue::Str("workload.slice".into()), &mut a);
        bus_args("MemoryLow", &BusValue::U64(4096), &mut a);
        bus_args("IOAccounting", &BusValue::Bool(true), &mut a);
        assert_eq!(
            a.join(" "),
            "PIDs au 2 5 6 Slice s workload.slice MemoryLow t 4096 IOAccounting b true"
        );
    }

    #[test]
    fn dropins_are_where_set_property_writes_them() {
        let s = Systemctl::new(std::path::Path::new("/"));
        assert_eq!(
            s.dropin("workload.slice", "MemoryLow"),
            PathBuf::from("/run/systemd/system.control/workload.slice.d/50-MemoryLow.conf")
        );
    }
}
